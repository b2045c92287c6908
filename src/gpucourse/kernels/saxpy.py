"""saxpy.cu in Python: y <- a*x + y, the elementwise kernel of chapter 4's block-size sweep.

Its versions in order, how to launch each, the NumPy reference, the bytes and FLOPs it moves
and the tolerance of a check; experiments, checkers, tools and tests ask here.
"""
from __future__ import annotations

import numpy as np

from ..emulator.launch import ceil_div
from ..precision import sum_error_bound
from .shape import Launch, known_version

#: The versions of saxpy.cu, in the order the course shows them.
VERSIONS = ("saxpy_v1_one_per_thread", "saxpy_v2_grid_stride")
#: Threads per block when a caller has no reason to pick another (the sweep picks many).
BLOCK = 256
#: x and y read, y written: 12 bytes of float32 traffic per element, none of it reused.
BYTES_PER_ELEMENT = 12


def launch(version: str, n: int, block: int = BLOCK, blocks: int | None = None) -> Launch:
    """The launch of one version on ``n`` elements with ``block`` threads per block.

    v1 runs one thread per element: ceil(n / block) blocks. v2's threads stride over the
    array, so any grid covers any n: ``blocks`` blocks (a few make each thread loop), by
    default as many as v1.
    """
    known_version(version, VERSIONS, "saxpy")
    grid = ceil_div(n, block)
    if version == "saxpy_v2_grid_stride" and blocks is not None:
        grid = blocks
    return Launch(max(1, grid), block)


def args(a, x, y, n: int) -> tuple:
    """The kernel's arguments in the types its signature wants (float a, int n)."""
    return (np.float32(a), x, y, np.int32(n))


def reference(a, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """a*x + y computed in float64 and rounded once to float32."""
    return (np.float64(a) * np.asarray(x, np.float64) + np.asarray(y, np.float64)).astype(np.float32)


def tolerance(a, x: np.ndarray, y: np.ndarray) -> float:
    """Largest |kernel - reference| of a correct saxpy: at most two roundings (a*x, then + y;
    one with a fused multiply-add) and the reference's own, gamma_3 * max(|a*x| + |y|),
    whatever the compiler contracts."""
    return sum_error_bound(3, float(np.max(np.abs(np.float64(a) * x) + np.abs(y))))


def bytes_moved(n: int) -> int:
    """Bytes one launch reads and writes on ``n`` elements."""
    return BYTES_PER_ELEMENT * n


def flops(n: int) -> int:
    """A multiply and an add per element."""
    return 2 * n
