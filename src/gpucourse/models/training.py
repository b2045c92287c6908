"""Training choices: the precision to train in on a GPU, and the memory a training step keeps."""
from __future__ import annotations

from dataclasses import dataclass

from .. import precision, specs
from .base import ModelInputError, _int, _ModelResult, _bytes


# --------------------------------------------------------------------------- training precision

def training_precision(gpu: specs.GPUSpec) -> tuple[str, bool]:
    """(precision, needs loss scaling) for mixed-precision training on ``gpu``, from its peaks:
    BF16 where the part has it, else FP16 with loss scaling where FP16 beats FP32, else FP32."""
    if "bf16" in gpu.precisions:
        return "bf16", False
    if "fp16" in gpu.precisions and gpu.peak_flops("fp16") > gpu.peak_flops("fp32"):
        return "fp16", True
    return "fp32", False


# --------------------------------------------------------------------------- training memory

DTYPE_BYTES = {p: precision.BYTES[p] for p in ("fp32", "fp16", "bf16", "fp8", "int8")}
OPTIMIZER_STATES = {"sgd": 0, "momentum": 1, "adam": 2, "adamw": 2}


@dataclass(frozen=True)
class TrainingMemory(_ModelResult):
    """Bytes a training step keeps on the device, by kind."""

    params: int
    activations_count: int
    dtype: str
    optimizer: str
    master_weights: bool
    weights: int
    gradients: int
    master_copy: int
    optimizer_state: int
    activations: int

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.master_copy + self.optimizer_state + self.activations

    def _headline(self) -> str:
        mixed = " with fp32 master weights" if self.master_weights else ""
        return (f"{self.params:,} parameters in {self.dtype}{mixed}, {self.optimizer}: "
                f"{_bytes(self.total)} in total")

    def _rows(self):
        rows = [("weights", _bytes(self.weights)), ("gradients", _bytes(self.gradients))]
        if self.master_copy:
            rows.append(("fp32 master weights", _bytes(self.master_copy)))
        rows += [("optimizer state", _bytes(self.optimizer_state)),
                 ("activations", _bytes(self.activations)), ("total", _bytes(self.total))]
        return rows


def training_memory(params: int, activations: int, dtype: str = "fp32", optimizer: str = "adam",
                    master_weights: bool | None = None) -> TrainingMemory:
    """Weights + gradients (in ``dtype``) + optimizer state (sgd 0, momentum 1, adam 2 values per parameter) + activations (``activations`` values kept for backward, in ``dtype``); 16-bit dtypes keep fp32 master weights and fp32 optimizer state unless ``master_weights=False``. Ignores workspace, fragmentation and the CUDA context.
    """
    n = _int(params, "params")
    a = _int(activations, "activations")
    dt = str(dtype).lower()
    if dt not in DTYPE_BYTES:
        raise ModelInputError(f"dtype {dtype!r} is not one of {', '.join(DTYPE_BYTES)}.")
    opt = str(optimizer).lower()
    if opt not in OPTIMIZER_STATES:
        raise ModelInputError(f"optimizer {optimizer!r} is not one of {', '.join(OPTIMIZER_STATES)}.")
    size = DTYPE_BYTES[dt]
    master = (size < 4) if master_weights is None else bool(master_weights)
    state_bytes = 4 if (master or size >= 4) else size
    return TrainingMemory(params=n, activations_count=a, dtype=dt, optimizer=opt,
                          master_weights=master and size < 4, weights=n * size, gradients=n * size,
                          master_copy=n * 4 if (master and size < 4) else 0,
                          optimizer_state=n * OPTIMIZER_STATES[opt] * state_bytes,
                          activations=a * size)
