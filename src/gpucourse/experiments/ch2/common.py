"""What several sections of chapter 2 share: sizes, the GPU the models describe, where the
reference data comes from, and the optional libraries."""
from __future__ import annotations

from ... import device, reference, specs

MiB = 2**20
GiB = 2**30
SECTION = "ch2"
# The GPU the models describe where no GPU is active and no reference data names one.
DEFAULT_MODEL_GPU = "H100-PCIe"


def target_gpu(gpu=None) -> specs.GPUSpec:
    """The GPU whose figures the models use (``specs.model_gpu``): the given one, the active
    GPU, or else the GPU of the chapter's reference data (a PCIe H100 without any)."""
    return specs.model_gpu(gpu, fallback=_reference_gpu())


def _reference_gpu() -> str:
    """The table's name of the GPU of the chapter's transfer measurements, or DEFAULT_MODEL_GPU."""
    refs = reference.find(SECTION, "transfers")
    if refs:
        try:
            return specs.lookup(refs[0][0].gpu).key
        except Exception:  # a reference GPU the table lacks: fall back to the default
            pass
    return DEFAULT_MODEL_GPU


def reference_note() -> str:
    """Where the GPU reference data in the chapter's figures comes from: GPU, date and the
    command that measured it (the figures name only GPU and date), or that there is none."""
    found = reference.find(SECTION)
    if not found:
        return ("No reference measurements of chapter 2 from a real GPU are in this copy of the "
                "course yet (`make gpu-check` on a GPU writes them), so its GPU figures are models.")
    return "\n".join(f"Reference data in this chapter's figures: {ref.provenance}"
                     f"{ref.kernel_caveat('transpose.cu', 'tile_copy.cu', 'copy.cu')}."
                     for ref, _ in found)


def torch_module():
    """PyTorch, imported on first use."""
    import torch  # heavy: loaded when a section first needs it

    return torch


def cupy_or_none():
    """CuPy where it works (a CUDA GPU), else None."""
    if not device.cupy_works():
        return None
    import cupy  # optional: only a GPU machine has it

    return cupy
