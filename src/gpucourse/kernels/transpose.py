"""transpose.cu in Python: out = in.T for a rows x cols row-major float matrix.

Its versions in order, how to launch them (every version, and the lab's exercise kernel,
alike: a block of TILE x BLOCK_ROWS threads per TILE x TILE tile; v2 and v3 declare their
tile as static shared memory), the reference, the bytes a transpose moves and the tolerance
of a result; chapter 2's experiments and checker, ``tools/gpu_check.py`` and the tests ask
here.
"""
from __future__ import annotations

import numpy as np

from ..emulator.launch import ceil_div
from . import load as _load
from .shape import known_version

#: The versions of transpose.cu, in order.
VERSIONS = ("transpose_v1_naive", "transpose_v2_shared", "transpose_v3_padded")
#: The tile's side and the rows of threads that move it, unless a define changes them.
TILE = 32
BLOCK_ROWS = 8
FLOAT_BYTES = 4
#: (rtol, atol) of a result against ``reference``: a transpose moves bits, so it is exact.
TOLERANCE = (0.0, 0.0)


def defines(tile: int = TILE, block_rows: int = BLOCK_ROWS) -> dict:
    """The defines of a build: ``tile`` x ``tile`` tiles, moved by ``block_rows`` rows of threads."""
    return {"TILE": tile, "BLOCK_ROWS": block_rows}


def load(tile: int = TILE, block_rows: int = BLOCK_ROWS, backend: str | None = None):
    """The kernels of transpose.cu built for ``tile`` and ``block_rows`` (the active backend,
    or ``backend``)."""
    return _load("transpose", defines=defines(tile, block_rows), backend=backend)


def launch_config(rows: int, cols: int, tile: int = TILE,
                  block_rows: int = BLOCK_ROWS) -> tuple[tuple[int, int], tuple[int, int]]:
    """(grid, block) of every version on a ``rows`` x ``cols`` input: one block of ``tile`` x
    ``block_rows`` threads per tile; the grid's x runs over the columns of ``in``, y the rows."""
    return (ceil_div(cols, tile), ceil_div(rows, tile)), (tile, block_rows)


def static_shared_bytes(version: str, tile: int = TILE) -> int:
    """Shared memory one block of a version declares: none, a tile, or a tile with a column
    of padding."""
    known_version(version, VERSIONS, "transpose")
    pitch = {"transpose_v1_naive": 0, "transpose_v2_shared": tile,
             "transpose_v3_padded": tile + 1}[version]
    return FLOAT_BYTES * tile * pitch


def args(a, out, rows: int, cols: int) -> tuple:
    """The kernel's arguments: (in, out, rows, cols)."""
    return a, out, np.int32(rows), np.int32(cols)


def run(kernel, a, out, tile: int = TILE, block_rows: int = BLOCK_ROWS, **launch) -> None:
    """out = a.T with ``kernel``, a version (or a kernel with the same signature) built for
    ``tile`` and ``block_rows``; ``a`` is rows x cols, ``out`` cols x rows. ``launch`` goes to
    the kernel call (``race_check=True`` on the emulator)."""
    rows, cols = a.shape
    grid, block = launch_config(rows, cols, tile, block_rows)
    kernel(grid, block, args(a, out, rows, cols), **launch)


def reference(a: np.ndarray) -> np.ndarray:
    """What every version writes: the transpose of ``a``, row-major."""
    return np.ascontiguousarray(np.asarray(a).T)


def bytes_moved(rows: int, cols: int, itemsize: int = FLOAT_BYTES) -> float:
    """Bytes a transpose of a ``rows`` x ``cols`` matrix moves: each element read once and
    written once (no arithmetic: 0 FLOPs)."""
    return 2.0 * itemsize * rows * cols
