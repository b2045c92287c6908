"""The WMMA matmul kernels (``wmma_matmul.cu``): C = A·B with A, B half and C float32, in
16×16×16 tensor-core steps (one warp per 16×16 tile of C).

The one place that knows the versions in order, how to launch each, how to run one on arrays
of the module's backend, and the error a correct product may have. Chapter 5's tensor-core
section, its lab checker (Exercise 5.5) and the tests ask here.
"""
from __future__ import annotations

import numpy as np

from .. import device, precision
from ..emulator.launch import ceil_div
from ..errors import InputError
from . import load as _load
from .shape import known_version

#: The versions, slowest first, as ``wmma_matmul.cu`` names them.
VERSIONS = ("wmma_matmul_v1_warp_tile", "wmma_matmul_v2_shared")
TILE = 16  # WMMA's m16n16k16 step
WARPS_PER_BLOCK = 4


def module(backend: str | None = None):
    """The kernels of wmma_matmul.cu for the active backend (or ``backend``)."""
    return _load("wmma_matmul", backend=backend)


def launch_config(version: str, M: int, N: int):
    """(grid, block) of one version for an M×N output (multiples of 16)."""
    known_version(version, VERSIONS, "wmma_matmul")
    if version == VERSIONS[0]:  # 4 warps, one 16×16 tile each
        return ceil_div((M // TILE) * (N // TILE), WARPS_PER_BLOCK), 32 * WARPS_PER_BLOCK
    return (ceil_div(N, 64), ceil_div(M, 64)), 32 * WARPS_PER_BLOCK  # 64×64 of C per block


def run(version: str, A, B, out=None, mod=None, race_check: bool = False):
    """C = A·B (float32) with one version; A and B are float16 arrays of the module's backend
    whose sizes are multiples of 16."""
    mod = mod or module()
    M, K = A.shape
    N = B.shape[1]
    if M % TILE or N % TILE or K % TILE or B.shape[0] != K:
        raise InputError(f"WMMA takes 16×16×16 steps: M, N and K must be multiples of 16 and "
                         f"agree, not A {M}×{K} and B {B.shape[0]}×{N} (pad them with zeros).")
    if out is None:
        out = device.empty((M, N), np.float32) if mod.backend == "cuda" else \
            np.full((M, N), np.nan, np.float32)
    grid, block = launch_config(version, M, N)
    getattr(mod, version)(grid, block, (A, B, out, np.int32(M), np.int32(N), np.int32(K)),
                          race_check=race_check)
    return out


def error_bound(A, B) -> float:
    """|computed - exact| of a WMMA product of half matrices: each product of two halfs is exact
    in float32, and the K of a dot product are added in float32 (precision.matmul_error_bound);
    NumPy or CuPy arrays."""
    return precision.matmul_error_bound(A.astype(np.float32), B.astype(np.float32))
