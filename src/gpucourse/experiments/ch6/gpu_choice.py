"""Section 6, choosing a precision for a GPU: the training precision the spec table recommends for each GPU
(``models.training_precision``, the rule exercise 6.3 checks), and the memory of a training
step by precision (``models.training_memory``)."""
from __future__ import annotations

from ... import models, specs
from ...display import Table


def training_precision(gpu) -> tuple[str, bool]:
    """(precision, needs loss scaling) for mixed-precision training on ``gpu``, from the spec table.

    BF16 where the part has it; FP16 with loss scaling where FP16 is faster than FP32; else
    FP32 (``models.training_precision``, which exercise 6.3's checker uses too).
    """
    return models.training_precision(specs.lookup(gpu))


def precision_choices() -> Table:
    """The recommended training precision for every GPU in the table, with the peak ratio it buys."""
    rows = []
    for g in specs.all_gpus():
        p, scaling = training_precision(g.key)
        rows.append({"GPU": g.key, "cc": g.cc, "train in": p,
                     "loss scaling": "yes" if scaling else "no",
                     "peak vs fp32 (x)": g.peak_flops(p) / g.peak_flops("fp32"),
                     "int8 peak TOP/s": g.peak_tflops.get("int8")})
    return Table(rows, caption="Training precision by GPU, from the spec table "
                               "(dense datasheet peaks)")


def memory_by_precision(params: int = 1_000_000_000, activations: int = 2_000_000_000,
                        optimizer: str = "adam") -> Table:
    """Bytes of a training step by precision (model), by kind."""
    rows = []
    for dt in ("fp32", "bf16", "fp16"):
        m = models.training_memory(params, activations, dtype=dt, optimizer=optimizer)
        rows.append({"dtype": dt + (" + fp32 master" if m.master_weights else ""),
                     "weights GB": m.weights / 1e9, "gradients GB": m.gradients / 1e9,
                     "master GB": m.master_copy / 1e9, "optimizer GB": m.optimizer_state / 1e9,
                     "activations GB": m.activations / 1e9, "total GB": m.total / 1e9})
    return Table(rows, caption=f"model: training memory of {params:,} parameters and "
                               f"{activations:,} saved activation values, {optimizer}")
