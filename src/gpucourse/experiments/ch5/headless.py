"""Chapter 5 without a notebook: every experiment as JSON-ready results (``run_all``, for the
headless runner) and the figures its issue names, measured on a GPU with each threshold's
pass or fail (``gpu_check``, for ``make gpu-check``).

The sections are called through their modules (``sgemm.sgemm_ladder``), so that a test may
shrink a problem size where it is defined.
"""
from __future__ import annotations

import time

from ... import check, device
from ...precision import MATMUL
from . import conv, cpu_matmul, kernel_fusion, sgemm, sparse, tensor_cores, wmma
from .common import torch_on_gpu


def run_all(quick: bool = True, progress=None) -> dict:
    """Every experiment of the chapter, as JSON-ready results (for the headless runner)."""
    t = 0.05 if quick else 0.2
    steps = 6

    def tick(i):
        if progress:
            progress(i / steps)

    out = {"device": device.describe().short_name}
    out["matmul_check"] = str(sgemm.check_matmul())
    tick(1)
    out["cpu_ladder"] = [x.to_dict() for x in cpu_matmul.cpu_ladder(min_time_s=t)]
    sg = sgemm.sgemm_ladder(min_time_s=t, tune=not quick)
    if sg["source"] == "measured":
        sg = {**sg, "timings": [x.to_dict() for x in sg["timings"]]}
    out["sgemm"] = sg
    out["reuse_model"] = sgemm.reuse_model()
    tick(2)
    cv = conv.conv_ladder(min_time_s=t)
    out["conv"] = {**cv, "timings": [x.to_dict() for x in cv["timings"]]}
    tick(3)
    out["sparse"] = sparse.sparse_sweep(min_time_s=t)
    tick(4)
    fu = kernel_fusion.fusion(min_time_s=t)
    out["fusion"] = {**fu, "timings": [x.to_dict() for x in fu["timings"]],
                     "copy": fu["copy"].to_dict()}
    tick(5)
    pr = tensor_cores.precision_sweep(min_time_s=t, precisions=MATMUL if torch_on_gpu() else ("fp32",))
    out["precision"] = {**pr, "timings": [x.to_dict() for x in pr["timings"]]}
    out["precision_model"] = tensor_cores.precision_model()
    tick(6)
    return out


def gpu_check() -> dict:
    """The figures chapter 5's issue names, measured on this GPU, with each threshold's pass/fail.

    Best hand-written SGEMM as % of cuBLAS FP32 at 4096³ (>= 50 %, stretch 75 %); fused vs
    unfused elementwise chain (>= 2x); the measured sparse crossover density; matmul TFLOP/s
    per precision; the WMMA kernels beside them (``wmma``).
    """
    device.require_cuda("chapter 5's GPU check", needs="cupy")
    t0 = time.perf_counter()
    torch_gpu = torch_on_gpu()
    notes = [] if torch_gpu else [
        "PyTorch has no CUDA here: the sparse sweep, the precision sweep and cuDNN were not "
        "measured, and the fusion's torch rows ran on the CPU (only its CuPy rows are this GPU's)"]
    sgemm.check_matmul(backend="cuda")
    sg = sgemm.sgemm_ladder(n=4096, tune=True, min_time_s=0.1)
    tc = wmma.tensor_core_ladder(min_time_s=0.1, sgemm=sg)  # WMMA beside it, at the ladder's n
    fu = kernel_fusion.fusion(min_time_s=0.1, use_compile=torch_gpu)
    # Without torch on the GPU these would time the CPU and be saved as this GPU's figures.
    sp = sparse.sparse_sweep(min_time_s=0.03) if torch_gpu else None
    pr = tensor_cores.precision_sweep(min_time_s=0.1) if torch_gpu else None
    cu = conv.cudnn_benchmark_mode(min_time_s=0.03) if torch_gpu else None
    pct = sg["best_pct_of_cublas"]
    cupy_speedup = fu["cupy_speedup"]
    compile_speedup = fu["speedup"].get("fused: torch.compile")
    checks = {
        "sgemm_vs_cublas": check.at_least(pct, 50.0, f"best hand-written SGEMM ({sg['best']}) as % "
                                                     "of cuBLAS FP32 at 4096³"),
        "sgemm_vs_cublas_stretch": check.at_least(pct, 75.0, "stretch goal: 75 % of cuBLAS"),
        "fusion_speedup": check.at_least(cupy_speedup, 2.0,
                                         "CuPy ElementwiseKernel vs 5 separate CuPy ops (x)"),
    }
    if sp is not None:
        checks["sparse_crossover"] = check.threshold(
            sp["crossover"], None, sp["crossover"] is not None,
            "density where torch CSR × dense meets dense × dense (found in range)")
    if compile_speedup is not None:
        checks["fusion_speedup_torch_compile"] = check.at_least(
            compile_speedup, 2.0, "torch.compile (one kernel) vs the 5 ops into one buffer (x)")
    sgt = sg["timings"]
    out = {
        "checks": checks,
        "passed": all(c["passed"] for name, c in checks.items() if name != "sgemm_vs_cublas_stretch"),
        "sgemm": {"n": sg["n"], "labels": [t.label for t in sgt], "gflops": [t.gflops for t in sgt],
                  "median_s": [t.median_s for t in sgt], "cublas_gflops": sg["cublas_gflops"],
                  "peak_gflops": sg["peak_gflops"], "best": sg["best"],
                  "best_pct_of_cublas": pct, "configs": sg["configs"]},
        "fusion": {"n": fu["n"], "labels": [t.label for t in fu["timings"]],
                   "median_s": [t.median_s for t in fu["timings"]], "bytes": fu["bytes"],
                   "copy_s": fu["copy"].median_s, "speedup": fu["speedup"],
                   "cupy_speedup": cupy_speedup, "compile_s": fu["compile_s"],
                   "compile_error": fu["compile_error"]},
        "notes": notes,
        "tensor_cores": wmma.gpu_record(tc),
    }
    if sp is not None:
        keys = ("n", "k", "densities", "sparse_s", "dense_s", "crossover", "nnz", "library")
        if "cupyx_s" in sp:  # cupyx.scipy.sparse was timed too
            keys += ("cupyx_s", "cupyx_crossover")
        out["sparse"] = {k: sp[k] for k in keys}
    if pr is not None:
        out.update(precision_tflops={t.label: t.gflops / 1e3 for t in pr["timings"]},
                   precision_peak_tflops=pr["peak_tflops"], precision_n=pr["n"],
                   precision_skipped=pr["skipped"])
    out["cudnn_benchmark"] = cu["rows"] if cu else None
    out["seconds"] = time.perf_counter() - t0
    return out
