"""reduce.cu in Python: the reduction ladder, *out += the sum of n floats.

Its versions in order, how to launch each, the NumPy reference, the bytes and FLOPs it moves
and the tolerance of a check; chapter 4's ladder, chapter 1's roofline, the lab's checker,
tools and tests ask here.
"""
from __future__ import annotations

import numpy as np

from .. import device, kernels
from ..emulator.launch import ceil_div
from ..precision import sum_error_bound
from .shape import Launch, known_version

#: The versions of reduce.cu, in the order of the ladder.
VERSIONS = ("reduce_v1_atomic", "reduce_v2_shared_tree", "reduce_v3_warp_shuffle",
            "reduce_v4_grid_stride", "reduce_v5_float4_unrolled")
#: Threads per block of the ladder.
BLOCK = 256
#: Blocks per SM of the grid-stride versions: 8 x 256 threads fill an SM's 2,048 thread slots.
BLOCKS_PER_SM = 8
#: SMs assumed when the caller does not say how many the GPU has (any grid covers any n).
DEFAULT_SM_COUNT = 16
#: Elements one thread of v5 loads per trip of its loop: four float4 loads.
V5_ELEMENTS_PER_TRIP = 16


def launch(version: str, n: int, sm_count: int | None = None, block: int = BLOCK) -> Launch:
    """The launch of one version on ``n`` floats on a GPU of ``sm_count`` SMs.

    v1 to v3 run one thread per element (ceil(n / block) blocks); v2 also needs ``block``
    floats of dynamic shared memory for its partial sums. v4 and v5 loop over the array with
    a grid stride: just enough blocks to fill every SM (BLOCKS_PER_SM each), fewer when n
    needs fewer (v5: sixteen elements per thread per trip).
    """
    known_version(version, VERSIONS, "reduce")
    resident = BLOCKS_PER_SM * (sm_count or DEFAULT_SM_COUNT)
    if version == "reduce_v5_float4_unrolled":
        return Launch(max(1, min(ceil_div(n, V5_ELEMENTS_PER_TRIP * block), resident)), block)
    if version == "reduce_v4_grid_stride":
        return Launch(max(1, min(ceil_div(n, block), resident)), block)
    shared = 4 * block if version == "reduce_v2_shared_tree" else 0
    return Launch(ceil_div(n, block), block, shared)


def run(version: str, x, n: int, out=None, sm_count: int | None = None):
    """Launch one version on ``x`` (n float32 on the active device) into ``out`` (one float,
    zeroed first; a new one when None); returns ``out``, which then holds the sum."""
    if out is None:
        out = device.asarray(np.zeros(1, np.float32))
    else:
        out.fill(0)
    kernel = getattr(kernels.load("reduce"), version)
    launch(version, n, sm_count).run(kernel, (x, out, np.int32(n)))
    return out


def reference(x) -> float:
    """The sum of ``x`` (a host array) in float64."""
    return float(np.sum(np.asarray(x, dtype=np.float64)))


def depth(version: str, shape: Launch, n: int) -> int:
    """The longest chain of float32 roundings one term goes through in this launch: its
    thread's elements, the block's partial sums, the blocks' atomics (v1: n atomics)."""
    if version == "reduce_v1_atomic":
        return n
    return ceil_div(n, shape.grid * shape.block) + shape.block + shape.grid


def tolerance(x, version: str | None = None, shape: Launch | None = None) -> float:
    """How far a correct float32 sum of ``x`` (a host array) may lie from ``reference(x)``.

    Integers whose magnitudes sum to less than 2^24 (the +-1 data) have integer partial sums
    that float32 holds exactly, in any order: 0. Otherwise gamma_depth * sum|x|
    (precision.sum_error_bound), where depth is n (any order) or, for a version and its
    launch ``shape``, ``depth(version, shape, n)``.
    """
    x64 = np.asarray(x, dtype=np.float64)
    scale = float(np.sum(np.abs(x64)))
    if np.all(x64 == np.round(x64)) and scale < 2.0 ** 24:
        return 0.0
    n = max(1, x64.size)
    chain = depth(version, shape, n) if version is not None and shape is not None else n
    return sum_error_bound(chain, scale)


def bytes_moved(n: int) -> int:
    """Bytes one launch reads: every float once (the few atomics' traffic is left out)."""
    return 4 * n


def flops(n: int) -> int:
    """One addition per element."""
    return n
