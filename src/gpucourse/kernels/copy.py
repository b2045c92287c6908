"""copy.cu in Python: out = in for n floats, in access patterns that move the same bytes.

Its versions in order, how to launch each (no version takes shared memory), the reference,
the bytes a copy moves and the tolerance of a result; chapter 1's experiments,
``tools/gpu_check.py`` and the tests ask here.
"""
from __future__ import annotations

import numpy as np

from .. import device
from ..emulator.launch import ceil_div
from ..errors import LaunchError
from .shape import Launch, known_version

#: The versions of copy.cu, in order. Versions after v2 take (in, out, n) and loop with the
#: grid's stride.
VERSIONS = ("copy_v1_coalesced", "copy_v2_strided", "copy_v3_float4")
#: Threads per block of the course's launches.
BLOCK = 256
#: Blocks per SM of a grid-stride launch: a few waves of blocks cover any n.
BLOCKS_PER_SM = 32
#: SMs assumed where the device reports no count (the CPU emulator).
DEFAULT_SM_COUNT = 80
#: (rtol, atol) of a result against ``reference``: a copy moves bits, so it is exact.
TOLERANCE = (0.0, 0.0)


def grid_stride_blocks(n: int, block: int = BLOCK, sm_count: int | None = None) -> int:
    """Blocks of a grid-stride launch on ``n`` elements: one per ``block`` elements, at most
    BLOCKS_PER_SM per SM (``sm_count``, by default the active device's), where one thread per
    element would leave most of them idle."""
    sms = sm_count or device.describe().sm_count or DEFAULT_SM_COUNT
    return min(ceil_div(n, block), BLOCKS_PER_SM * sms)


def launch(version: str, n: int, stride: int | None = None, block: int = BLOCK,
           sm_count: int | None = None) -> Launch:
    """The launch of one version copying ``n`` floats.

    v1 runs one thread per element; v2 one per element of the array seen as rows of
    ``stride`` elements (ceil(n / stride) * stride threads); later versions a grid-stride loop
    (``grid_stride_blocks``).
    """
    known_version(version, VERSIONS, "copy")
    if version == "copy_v1_coalesced":
        return Launch(ceil_div(n, block), block)
    if version == "copy_v2_strided":
        if stride is None:
            raise LaunchError("copy_v2_strided needs a stride: pass stride=1 for the coalesced "
                              "pattern, up to 32 for the worst case.")
        return Launch(ceil_div(ceil_div(n, stride) * stride, block), block)
    return Launch(grid_stride_blocks(n, block, sm_count), block)


def args(version: str, x, y, n: int, stride: int | None = None) -> tuple:
    """The kernel's arguments for one copy of ``x`` into ``y``: (in, out, n), and v2's stride."""
    if version == "copy_v2_strided":
        return x, y, np.int32(n), np.int32(stride)
    return x, y, np.int32(n)


def run(kernel, x, y, n: int, stride: int | None = None, block: int = BLOCK,
        sm_count: int | None = None) -> None:
    """Copy ``n`` floats of ``x`` into ``y`` with ``kernel``, a version loaded with
    ``kernels.load("copy")`` (by the caller, once: a timed loop only launches)."""
    launch(kernel.name, n, stride, block, sm_count).run(kernel, args(kernel.name, x, y, n, stride))


def reference(x: np.ndarray) -> np.ndarray:
    """What every version writes, whatever the stride: the input, element for element."""
    return np.array(x, copy=True)


def bytes_moved(n: int, itemsize: int = 4) -> float:
    """Bytes a copy of ``n`` elements moves in any access order: each read once and written
    once (a copy does no arithmetic: 0 FLOPs)."""
    return 2.0 * itemsize * n
