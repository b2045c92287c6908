"""vector_add.cu in Python: out = a + b for n floats.

Its versions in order, how to launch each (no version takes shared memory), the reference,
the FLOPs and bytes a vector add moves and the tolerance of a result; chapter 1's experiments
and checker, ``tools/gpu_check.py`` and the tests ask here.
"""
from __future__ import annotations

import numpy as np

from .. import precision
from ..emulator.launch import ceil_div
from .copy import BLOCK, grid_stride_blocks
from .shape import Launch, known_version

#: The versions of vector_add.cu, in order.
VERSIONS = ("vector_add_v1_naive", "vector_add_v2_grid_stride", "vector_add_v3_float4")
#: (rtol, atol) of a result against ``reference``: a version and NumPy round each element's
#: one float32 addition alike, so the bits agree.
TOLERANCE = (0.0, 0.0)
#: (rtol, atol) of a float32 a + b against the exact (float64) sum: one rounding, at most
#: 2^-24 of |a + b|.
EXACT_TOLERANCE = (precision.U32, 0.0)


def launch(version: str, n: int, block: int = BLOCK, sm_count: int | None = None) -> Launch:
    """The launch of one version adding ``n`` floats.

    v1 runs one thread per element; v2 and v3 loop with the grid's stride, so a few waves of
    blocks cover any n (``copy.grid_stride_blocks``; ``sm_count`` defaults to the device's).
    """
    known_version(version, VERSIONS, "vector_add")
    if version == "vector_add_v1_naive":
        return Launch(ceil_div(n, block), block)
    return Launch(grid_stride_blocks(n, block, sm_count), block)


def run(kernel, a, b, out, n: int, block: int = BLOCK, sm_count: int | None = None) -> None:
    """out = a + b for ``n`` floats with ``kernel``, a version loaded with
    ``kernels.load("vector_add")`` (by the caller, once: a timed loop only launches)."""
    launch(kernel.name, n, block, sm_count).run(kernel, (a, b, out, np.int32(n)))


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """What every version writes: a + b in the inputs' precision."""
    return np.add(a, b)


def flops(n: int) -> float:
    """FLOPs of a vector add of ``n`` elements: one addition each."""
    return float(n)


def bytes_moved(n: int, itemsize: int = 4) -> float:
    """Bytes a vector add of ``n`` elements moves: a and b read once, out written once."""
    return 3.0 * itemsize * n
