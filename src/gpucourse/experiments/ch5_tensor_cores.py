"""Chapter 5's tensor cores by hand: a WMMA matmul (kernels/wmma_matmul.cu), checked on the
emulator or the GPU, and on a GPU timed against the FP32 SIMT ladder and cuBLAS (the ladder
and cuBLAS FP32 through ``ch5.sgemm_ladder``, as the chapter times them; cuBLAS FP16 through
``cupy.matmul`` on half arrays)."""
from __future__ import annotations

import numpy as np

from .. import bench, check, device, models
from ..display import Note, Table
from ..models import ceil_div

WMMA_VERSIONS = ("wmma_matmul_v1_warp_tile", "wmma_matmul_v2_shared")
# (M, N, K), multiples of 16: one tile, tiles off a 64×64 block, a long K, a thin C.
CHECK_SHAPES = ((16, 16, 16), (48, 80, 32), (112, 16, 144), (16, 208, 48), (80, 64, 16))


def module(backend: str | None = None):
    """The kernels of wmma_matmul.cu for the active backend (or ``backend``)."""
    from .. import kernels

    return kernels.load("wmma_matmul", backend=backend)


def launch_config(version: str, M: int, N: int):
    """(grid, block) of a wmma_matmul.cu version for an M×N output (multiples of 16)."""
    if version == WMMA_VERSIONS[0]:
        return ceil_div((M // 16) * (N // 16), 4), 128  # 4 warps, one 16×16 tile each
    if version == WMMA_VERSIONS[1]:
        return (ceil_div(N, 64), ceil_div(M, 64)), 128
    raise ValueError(f"unknown WMMA version {version!r}; use one of {', '.join(WMMA_VERSIONS)}.")


def run_wmma(version: str, A, B, out=None, mod=None, race_check: bool = False):
    """C = A·B (float32) with one WMMA version; A and B are float16 arrays of the module's
    backend whose sizes are multiples of 16."""
    mod = mod or module()
    M, K = A.shape
    N = B.shape[1]
    if M % 16 or N % 16 or K % 16 or B.shape[0] != K:
        raise ValueError(f"WMMA takes 16×16×16 steps: M, N and K must be multiples of 16 and agree, "
                         f"not A {M}×{K} and B {B.shape[0]}×{N} (pad them with zeros).")
    if out is None:
        out = device.empty((M, N), np.float32) if mod.backend == "cuda" else \
            np.full((M, N), np.nan, np.float32)
    grid, block = launch_config(version, M, N)
    getattr(mod, version)(grid, block, (A, B, out, np.int32(M), np.int32(N), np.int32(K)),
                          race_check=race_check)
    return out


def error_bound(A: np.ndarray, B: np.ndarray) -> float:
    """|computed - exact| of a WMMA product of half matrices: each product of two halfs is exact
    in float32, and the K of a dot product are added in float32 (models.matmul_error_bound);
    NumPy or CuPy arrays."""
    return models.matmul_error_bound(A.astype(np.float32), B.astype(np.float32))


def check_wmma(shapes=CHECK_SHAPES, seed: int = 0, backend: str | None = None,
               race_check: bool = False) -> Table:
    """Every WMMA version at every shape against float64 (of the same half inputs); raises
    AssertionError at the first wrong result, returns the relative errors."""
    mod = module(backend)
    rows = []
    for s, (M, N, K) in enumerate(shapes):
        A = check.random_array((M, K), seed=seed + 2 * s).astype(np.float16)
        B = check.random_array((K, N), seed=seed + 2 * s + 1).astype(np.float16)
        ref = A.astype(np.float64) @ B.astype(np.float64)
        errs = []
        for v in WMMA_VERSIONS:
            dA, dB = (A, B) if mod.backend == "cpu" else (device.asarray(A), device.asarray(B))
            got = device.to_host(run_wmma(v, dA, dB, mod=mod, race_check=race_check))
            check.assert_close(got, ref, rtol=0.0, atol=error_bound(A, B),
                               name=f"{v} at M={M}, N={N}, K={K}")
            errs.append(float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300)))
        rows.append([f"{M}×{N}×{K}"] + [f"{e:.1e}" for e in errs])
    where = "the CPU emulator" if mod.backend == "cpu" else "the GPU"
    return Table.from_lists(["M×N×K"] + [v.replace("wmma_matmul_", "") for v in WMMA_VERSIONS],
                            rows, caption=f"WMMA (half inputs, float accumulation) against float64, "
                                          f"relative error, on {where}: all pass")


def _cublas_half(A, B):
    import cupy as cp

    return cp.matmul(A, B)


def tensor_core_ladder(n: int = 4096, min_time_s: float = 0.1, seed: int = 0,
                       sgemm: dict | None = None) -> dict:
    """On a GPU: the WMMA versions and cuBLAS FP16 (cupy.matmul on half arrays) at n×n×n, beside
    the FP32 SIMT ladder and cuBLAS FP32 of ``ch5.sgemm_ladder`` (``sgemm``: its result, when
    already measured). Each WMMA version is checked against float64 of its inputs at a small
    size and against cuBLAS FP16 at n first. Without a GPU: {"source": "none", "note": ...}."""
    from . import ch5

    if not ch5.on_gpu():
        return {"source": "none", "note": "Timing tensor cores needs a CUDA GPU: here the WMMA "
                                          "kernels are checked on the emulator only."}
    check_wmma(backend="cuda")
    sgemm = sgemm or ch5.sgemm_ladder(n=n, min_time_s=min_time_s, seed=seed)
    n = sgemm["n"]
    A = device.asarray(check.random_array((n, n), seed=seed, kind="uniform").astype(np.float16))
    B = device.asarray(check.random_array((n, n), seed=seed + 1, kind="uniform").astype(np.float16))
    flops = 2.0 * n ** 3
    ref = _cublas_half(A, B).astype(np.float32)
    mod = module()
    # cuBLAS rounds its result to half: within half an ulp of half, plus both sums' rounding.
    allowed = 2 * error_bound(A, B) + float(np.max(abs(ref))) * 2.0 ** -11
    timings = []
    for v in WMMA_VERSIONS:
        C = run_wmma(v, A, B, mod=mod)
        worst = float(np.max(abs(C - ref)))
        if not worst <= allowed:
            raise AssertionError(f"{v} differs from cuBLAS FP16 at n={n} by {worst:.3g} "
                                 f"(rounding allows {allowed:.3g})")
        timings.append(bench.benchmark(run_wmma, v, A, B, C, mod, label=v, flops=flops, size=n,
                                       min_time_s=min_time_s))
    half = bench.benchmark(_cublas_half, A, B, label="ref (cuBLAS FP16, cupy.matmul)", flops=flops,
                           size=n, min_time_s=min_time_s)
    fp32 = list(sgemm["timings"])
    best_fp32 = max((t for t in fp32 if not t.label.startswith("ref")), key=lambda t: t.gflops)
    best_wmma = max(timings, key=lambda t: t.gflops)
    return {"source": "measured", "n": n, "device": device.describe().short_name,
            "timings": bench.Timings(fp32 + timings + [half]),
            "best_wmma": best_wmma.label, "best_simt": best_fp32.label,
            "wmma_vs_best_simt": best_wmma.gflops / best_fp32.gflops,
            "wmma_pct_of_cublas_fp16": 100.0 * best_wmma.gflops / half.gflops,
            "cublas_fp16_gflops": half.gflops, "cublas_fp32_gflops": sgemm["cublas_gflops"]}


def tensor_core_summary(result: dict) -> "Table | Note":
    """The ladder of :func:`tensor_core_ladder` as a table (GFLOP/s, × the best SIMT kernel)."""
    if result.get("source") != "measured":
        return Note(result.get("note", "not measured"))
    simt = max(t.gflops for t in result["timings"] if t.label == result["best_simt"])
    rows = [[t.label, f"{t.gflops:,.0f}", f"{t.gflops / simt:.2f}×"] for t in result["timings"]]
    return Table.from_lists(["kernel", "GFLOP/s", "× best FP32 SIMT"], rows,
                            caption=f"{result['n']}³ matmul on {result['device']}: FP32 SIMT "
                                    f"ladder, WMMA (half in, float accumulate) and cuBLAS, "
                                    f"measured with gc.bench")


def gpu_record(result: dict) -> dict:
    """What chapter 5's gpu_check records of :func:`tensor_core_ladder`."""
    if result.get("source") != "measured":
        return {"note": result.get("note", "")}
    t = result["timings"]
    return {"n": result["n"], "labels": [x.label for x in t], "gflops": [x.gflops for x in t],
            "median_s": [x.median_s for x in t], "best_wmma": result["best_wmma"],
            "wmma_vs_best_simt": result["wmma_vs_best_simt"],
            "wmma_pct_of_cublas_fp16": result["wmma_pct_of_cublas_fp16"]}


__all__ = [n for n in dir() if not n.startswith("_")]
