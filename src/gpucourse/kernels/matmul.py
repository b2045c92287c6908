"""The matmul kernels (``matmul.cu``): C = A·B for row-major float32 matrices, A M×K, B K×N.

The one place that knows, for each version in order, how to launch it (``launch_config``,
``static_shared_bytes``; no version takes dynamic shared memory), the float64 reference, the
FLOPs and bytes a product moves, the traffic each version's loads cost per multiply-add, and
the tolerance of a float32 result. Chapter 5's ladder, its checker and the tests ask here.
"""
from __future__ import annotations

import numpy as np

from .. import precision
from ..emulator.launch import ceil_div
from ..errors import InputError
from . import load as _load

#: The versions, slowest first, as ``matmul.cu`` names them.
VERSIONS = ("matmul_v1_naive", "matmul_v2_coalesced", "matmul_v3_shared",
            "matmul_v4_1d_blocking", "matmul_v5_2d_blocking", "matmul_v6_vectorized")
#: The tile sizes ``matmul.cu`` uses unless a define changes them: TILE (v3), BM, BN, BK
#: (v5, v6), TM, TN (v5; v6 always gives a thread 8×8 outputs).
DEFAULTS = {"TILE": 32, "BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}
#: v6 tile shapes worth trying on a GPU (the fastest counts); all valid for 8×8 per thread.
V6_TUNING = ({"BM": 128, "BN": 128, "BK": 8}, {"BM": 128, "BN": 64, "BK": 16},
             {"BM": 64, "BN": 128, "BK": 8})
# v4's tile is fixed in the source (V4_BM, V4_BN, V4_BK, V4_TM), as is v6's padding (V6_PAD).
V4_BM, V4_BN, V4_BK, V4_TM = 64, 64, 8, 8
V6_PAD = 4
FLOAT_BYTES = 4
SECTOR_BYTES = 32


def version_number(name: str) -> int:
    """1 for ``matmul_v1_naive`` (or ``"v1"``), ..., 6 for ``matmul_v6_vectorized``."""
    for i, v in enumerate(VERSIONS, 1):
        if name == v or name == f"v{i}":
            return i
    raise InputError(f"unknown matmul version {name!r}; use one of {', '.join(VERSIONS)}.")


def tiles(defines: dict | None = None) -> dict:
    """The tile sizes a build with ``defines`` uses."""
    return {**DEFAULTS, **(defines or {})}


def launch_config(version: str, M: int, N: int, defines: dict | None = None):
    """(grid, block) of one version for an M×N output, built with ``defines``."""
    d = tiles(defines)
    v = version_number(version)
    if v == 1:
        return (ceil_div(M, 32), ceil_div(N, 32)), (32, 32)  # x walks rows: uncoalesced on purpose
    if v == 2:
        return (ceil_div(N, 32), ceil_div(M, 32)), (32, 32)
    if v == 3:
        t = d["TILE"]
        return (ceil_div(N, t), ceil_div(M, t)), (t, t)
    if v == 4:
        return (ceil_div(N, V4_BN), ceil_div(M, V4_BM)), (V4_BM // V4_TM) * V4_BN
    if v == 5:
        return (ceil_div(N, d["BN"]), ceil_div(M, d["BM"])), (d["BM"] // d["TM"]) * (d["BN"] // d["TN"])
    return (ceil_div(N, d["BN"]), ceil_div(M, d["BM"])), (d["BM"] // 8) * (d["BN"] // 8)


def static_shared_bytes(version: str, defines: dict | None = None) -> int:
    """Shared memory one block of a version declares (its ``__shared__`` tiles of A and B)."""
    d = tiles(defines)
    v = version_number(version)
    floats = {1: 0, 2: 0, 3: 2 * d["TILE"] * d["TILE"], 4: V4_BM * V4_BK + V4_BK * V4_BN,
              5: d["BK"] * d["BM"] + d["BK"] * d["BN"],
              6: d["BK"] * (d["BM"] + V6_PAD) + d["BK"] * d["BN"]}[v]
    return FLOAT_BYTES * floats


def load(defines: dict | None = None, backend: str | None = None):
    """The kernels of matmul.cu built with ``defines`` for the active backend (or ``backend``)."""
    return _load("matmul", defines=defines or None, backend=backend)


def run(version: str, A, B, out=None, module=None, defines: dict | None = None,
        race_check: bool = False):
    """C = A·B with one version; A and B are float32 arrays of the module's backend.

    ``out`` defaults to an M×N array of NaN, so that an output no thread wrote shows.
    """
    module = module or load(defines)
    M, K = A.shape
    K2, N = B.shape
    if K != K2:
        raise InputError(f"inner dimensions differ: A is {M}×{K}, B is {K2}×{N}.")
    if out is None:
        if module.backend == "cuda":
            import cupy as cp  # optional: present only where a GPU is

            out = cp.full((M, N), np.nan, dtype=np.float32)
        else:
            out = np.full((M, N), np.nan, dtype=np.float32)
    grid, block = launch_config(version, M, N, defines)
    getattr(module, version)(grid, block, (A, B, out, np.int32(M), np.int32(N), np.int32(K)),
                             race_check=race_check)
    return out


def reference(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """The product in float64, the reference every version is compared with."""
    return np.asarray(A).astype(np.float64) @ np.asarray(B).astype(np.float64)


def tolerance(A, B) -> tuple[float, float]:
    """(rtol, atol) of a float32 product against ``reference``: every element is a dot of K
    terms, in whatever order a version adds them: gamma_K * max(|A| @ |B|), no rtol."""
    return 0.0, precision.matmul_error_bound(A, B)


def flops(M: int, N: int, K: int) -> float:
    """FLOPs of an M×K by K×N product: one multiply and one add per term of each dot."""
    return 2.0 * M * N * K


def bytes_moved(M: int, N: int, K: int, itemsize: int = FLOAT_BYTES) -> float:
    """Bytes a product must move at least: A and B read once, C written once."""
    return float(itemsize) * (M * K + K * N + M * N)


def traffic_per_fma(version: str, defines: dict | None = None) -> tuple[float, float]:
    """(global bytes, shared-memory load instructions) per multiply-add of one version: a
    count from the code, not a measurement.

    Global bytes are what a warp's loads fetch from device memory in whole 32-byte sectors,
    with no cache. Coalescing cuts them by using whole sectors, tiling by reusing each loaded
    value many times; register blocking and float4 loads cut the shared loads.
    """
    d = tiles(defines)
    sector = SECTOR_BYTES

    def tiled(rows, cols, depth):  # a rows×cols×depth block tile, loads coalesced
        return (rows + cols) * depth * FLOAT_BYTES / (rows * cols * depth)

    v = version_number(version)
    if v == 1:  # a warp's 32 lanes are 32 rows: 32 sectors of A for one float each; B broadcast
        return (32 * sector + sector) / 32, 0.0
    if v == 2:  # A broadcast (one sector), B 32 consecutive floats (4 sectors), for 32 FMAs
        return (sector + 4 * sector) / 32, 0.0
    if v == 3:  # each tile element loaded once, used TILE times; one A and one B shared load per FMA
        return tiled(d["TILE"], d["TILE"], d["TILE"]), 2.0
    if v == 4:  # 64×64×8 tiles; 1 B + 8 A shared loads per 8 FMAs
        return tiled(V4_BM, V4_BN, V4_BK), (1 + V4_TM) / V4_TM
    if v == 5:  # TM×TN outputs per thread from TM + TN shared loads
        return tiled(d["BM"], d["BN"], d["BK"]), (d["TM"] + d["TN"]) / (d["TM"] * d["TN"])
    # the same bytes, moved 4 floats per instruction: 4 float4 shared loads per 64 FMAs
    return tiled(d["BM"], d["BN"], d["BK"]), 4 / 64
