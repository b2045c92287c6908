"""divergence.cu in Python: k steps of y <- a*y + b, the branch chosen by the element's parity.

Its versions in order, how to launch each, which element each thread handles, the NumPy
reference, the FLOPs and bytes it moves and the tolerance of a check; chapter 4's
experiments, the lab's checker (whose branch functions use the same coefficients), tools and
tests ask here.
"""
from __future__ import annotations

import numpy as np

from ..emulator.launch import ceil_div
from ..precision import affine_steps_error_bound
from .shape import Launch, known_version

#: The versions of divergence.cu, in the order the course shows them.
VERSIONS = ("divergence_v1_odd_even_lanes", "divergence_v2_per_warp", "divergence_v3_branch_free")
#: (a, b) of the two branches: each step is v <- a*v + b (branch A for even elements, B for odd).
COEFS = ((0.75, 0.25), (-0.5, 1.0))
#: Threads per block of the chapter's runs.
BLOCK = 256


def divergence_grid(n: int, block: int) -> int:
    """Blocks of a divergence launch: enough threads for n rounded up to a multiple of 64 (a
    version that maps two warps' elements onto each pair of warps needs whole pairs)."""
    return max(1, ceil_div(ceil_div(n, 64) * 64, block))


def launch(version: str, n: int, block: int = BLOCK) -> Launch:
    """The launch of one version on ``n`` elements: the same grid for all three
    (``divergence_grid``), so that they run on the same threads and differ only in which
    element each thread handles; whole pairs of warps need ``block`` a multiple of 64."""
    known_version(version, VERSIONS, "divergence")
    return Launch(divergence_grid(n, block), block)


def args(x, y, n: int, k: int) -> tuple:
    """The kernel's arguments in the types its signature wants (int n, int k)."""
    return (x, y, np.int32(n), np.int32(k))


def element_of_thread(version: str, g: np.ndarray) -> np.ndarray:
    """The element index global thread ``g`` handles in each version (mirrors the .cu)."""
    if version == "divergence_v2_per_warp":
        return 64 * (g // 64) + 2 * (g % 32) + (g // 32) % 2
    return g


def reference(x: np.ndarray, k: int) -> np.ndarray:
    """k steps of y <- a*y + b with (a, b) chosen by the parity of the element index (float64)."""
    y = np.asarray(x).astype(np.float64)
    even = np.arange(y.size) % 2 == 0
    (a0, b0), (a1, b1) = COEFS
    a, b = np.where(even, a0, a1), np.where(even, b0, b1)
    for _ in range(k):
        y = a * y + b
    return y


def tolerance(x: np.ndarray, k: int) -> float:
    """Largest float32 error of k steps of either branch from the values ``x``, in any compiled
    form (fmaf, or a multiply and an add): precision.affine_steps_error_bound of the worse branch."""
    top = float(np.max(np.abs(x), initial=0.0))
    return max(affine_steps_error_bound(top, a, b, k) for a, b in COEFS)


def flops(n: int, k: int) -> int:
    """A fused multiply-add (two FLOPs) per step and element."""
    return 2 * n * k


def bytes_moved(n: int) -> int:
    """x read and y written once: 8 bytes per element."""
    return 8 * n
