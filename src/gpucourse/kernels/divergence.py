"""The divergence kernels (``divergence.cu``) and the lab's branch functions: what both know
about them in Python."""
from __future__ import annotations

from ..emulator.launch import ceil_div

#: (a, b) of the two branches: each step is v <- a*v + b (branch A for even elements, B for odd).
COEFS = ((0.75, 0.25), (-0.5, 1.0))


def divergence_grid(n: int, block: int) -> int:
    """Blocks of a divergence launch: enough threads for n rounded up to a multiple of 64 (a
    version that maps two warps' elements onto each pair of warps needs whole pairs)."""
    return max(1, ceil_div(ceil_div(n, 64) * 64, block))
