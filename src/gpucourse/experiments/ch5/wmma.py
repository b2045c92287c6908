"""Chapter 5's tensor cores by hand: a WMMA matmul (kernels/wmma_matmul.cu), checked on the
emulator or the GPU, and on a GPU timed against the FP32 SIMT ladder and cuBLAS (the ladder
and cuBLAS FP32 through ``sgemm.sgemm_ladder``, as the chapter times them; cuBLAS FP16 through
``cupy.matmul`` on half arrays)."""
from __future__ import annotations

import numpy as np

from ... import bench, check, device
from ...display import Note, Table
from ...kernels import wmma_matmul as wmma_cu
from . import sgemm as sgemm_section

WMMA_VERSIONS = wmma_cu.VERSIONS
# (M, N, K), multiples of 16: one tile, tiles off a 64×64 block, a long K, a thin C.
CHECK_SHAPES = ((16, 16, 16), (48, 80, 32), (112, 16, 144), (16, 208, 48), (80, 64, 16))


def check_wmma(shapes=CHECK_SHAPES, seed: int = 0, backend: str | None = None,
               race_check: bool = False) -> Table:
    """Every WMMA version at every shape against float64 (of the same half inputs); raises
    AssertionError at the first wrong result, returns the relative errors."""
    mod = wmma_cu.module(backend)
    rows = []
    for s, (M, N, K) in enumerate(shapes):
        A = check.random_array((M, K), seed=seed + 2 * s).astype(np.float16)
        B = check.random_array((K, N), seed=seed + 2 * s + 1).astype(np.float16)
        ref = A.astype(np.float64) @ B.astype(np.float64)
        errs = []
        for v in WMMA_VERSIONS:
            dA, dB = (A, B) if mod.backend == "cpu" else (device.asarray(A), device.asarray(B))
            got = device.to_host(wmma_cu.run(v, dA, dB, mod=mod, race_check=race_check))
            check.assert_close(got, ref, rtol=0.0, atol=wmma_cu.error_bound(A, B),
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
    the FP32 SIMT ladder and cuBLAS FP32 of ``sgemm.sgemm_ladder`` (``sgemm``: its result, when
    already measured). Each WMMA version is checked against float64 of its inputs at a small
    size and against cuBLAS FP16 at n first. Without a GPU: {"source": "none", "note": ...}."""
    if not device.on_gpu():
        return {"source": "none", "note": "Timing tensor cores needs a CUDA GPU: here the WMMA "
                                          "kernels are checked on the emulator only."}
    check_wmma(backend="cuda")
    sgemm = sgemm or sgemm_section.sgemm_ladder(n=n, min_time_s=min_time_s, seed=seed)
    n = sgemm["n"]
    A = device.asarray(check.random_array((n, n), seed=seed, kind="uniform").astype(np.float16))
    B = device.asarray(check.random_array((n, n), seed=seed + 1, kind="uniform").astype(np.float16))
    flops = 2.0 * n ** 3
    ref = _cublas_half(A, B).astype(np.float32)
    mod = wmma_cu.module()
    # cuBLAS rounds its result to half: within half an ulp of half, plus both sums' rounding.
    allowed = 2 * wmma_cu.error_bound(A, B) + float(np.max(abs(ref))) * 2.0 ** -11
    timings = []
    for v in WMMA_VERSIONS:
        C = wmma_cu.run(v, A, B, mod=mod)
        worst = float(np.max(abs(C - ref)))
        if not worst <= allowed:
            raise AssertionError(f"{v} differs from cuBLAS FP16 at n={n} by {worst:.3g} "
                                 f"(rounding allows {allowed:.3g})")
        timings.append(bench.benchmark(wmma_cu.run, v, A, B, C, mod, label=v, flops=flops, size=n,
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


__all__ = ["CHECK_SHAPES", "WMMA_VERSIONS", "check_wmma", "gpu_record", "tensor_core_ladder",
           "tensor_core_summary"]
