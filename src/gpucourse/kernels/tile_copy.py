"""tile_copy.cu in Python: out = in for a rows x cols row-major float matrix, moved in the
tiles of a transpose; the ceiling a transpose can reach.

Its version, its launch (a transpose's: ``transpose.launch_config``), the reference, the
bytes it moves and the tolerance; chapter 2's transpose ladder and the tests ask here.
"""
from __future__ import annotations

import numpy as np

from . import load as _load
from .transpose import BLOCK_ROWS, TILE, args, bytes_moved, defines, launch_config

__all__ = ["VERSIONS", "TOLERANCE", "load", "launch_config", "args", "run", "reference",
           "bytes_moved"]

#: The versions of tile_copy.cu, in order.
VERSIONS = ("tile_copy_v1_rows",)
#: (rtol, atol) of a result against ``reference``: a copy moves bits, so it is exact.
TOLERANCE = (0.0, 0.0)


def load(tile: int = TILE, block_rows: int = BLOCK_ROWS, backend: str | None = None):
    """The kernels of tile_copy.cu built for ``tile`` and ``block_rows`` (the active backend,
    or ``backend``)."""
    return _load("tile_copy", defines=defines(tile, block_rows), backend=backend)


def run(kernel, a, out, tile: int = TILE, block_rows: int = BLOCK_ROWS, **launch) -> None:
    """out = a (both rows x cols) with ``kernel``, built for ``tile`` and ``block_rows``,
    launched as a transpose of ``a`` is. ``launch`` goes to the kernel call."""
    rows, cols = a.shape
    grid, block = launch_config(rows, cols, tile, block_rows)
    kernel(grid, block, args(a, out, rows, cols), **launch)


def reference(a: np.ndarray) -> np.ndarray:
    """What the kernel writes: ``a``, element for element."""
    return np.array(a, copy=True)
