"""Chapter 5, section 1: the SGEMM ladder of ``matmul.cu`` (naive → coalesced → shared tiles →
register blocking → float4), checked on the emulator or the GPU, timed against cuBLAS on a
GPU, with a counting model of each version's memory traffic."""
from __future__ import annotations

import numpy as np

from ... import bench, check, device, kernels, specs
from ...display import Note, Table
from ...kernels import matmul
from .common import no_reference_note, reference_for

# (M, N, K): 1×1×1, primes, sizes just off the tiles, and one that takes v6's float4 path
# (N and K multiples of 4) with a ragged last k-tile and two column blocks.
CHECK_SHAPES = ((1, 1, 1), (3, 5, 7), (31, 33, 17), (97, 61, 33), (4, 8, 12), (64, 132, 36),
                (130, 129, 131))


def kernel_source(name: str, file: str = "matmul"):
    """The source of one ``__global__`` function of a course kernel file."""
    return kernels.source_of(file, name)


def check_matmul(versions=matmul.VERSIONS, shapes=CHECK_SHAPES, seed: int = 0,
                 backend: str | None = None, race_check: bool = False) -> Table:
    """Run every version at awkward shapes on the emulator (or the GPU) against float64.

    Raises AssertionError at the first wrong result; returns a table of the relative errors.
    """
    module = matmul.load(backend=backend)
    rows = []
    for s, (M, N, K) in enumerate(shapes):
        A = check.random_array((M, K), seed=seed + 3 * s)
        B = check.random_array((K, N), seed=seed + 3 * s + 1)
        ref = matmul.reference(A, B)
        rtol, atol = matmul.tolerance(A, B)
        errs = []
        for v in versions:
            dA, dB = (A, B) if module.backend == "cpu" else (device.asarray(A), device.asarray(B))
            got = device.to_host(matmul.run(v, dA, dB, module=module, race_check=race_check))
            check.assert_close(got, ref, rtol=rtol, atol=atol, name=f"{v} at M={M}, N={N}, K={K}")
            errs.append(float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300)))
        rows.append([f"{M}×{N}×{K}"] + [f"{e:.1e}" for e in errs])
    where = "the CPU emulator" if module.backend == "cpu" else "the GPU"
    return Table.from_lists(["M×N×K"] + [v.replace("matmul_", "") for v in versions], rows,
                            caption=f"Relative error ‖C − C_ref‖/‖C_ref‖ against float64, on "
                                    f"{where}: all pass")


def default_sgemm_n() -> int:
    return 4096 if device.on_gpu() else 256


def _cublas_matmul(A, B):
    import cupy as cp  # optional: present only where a GPU is

    return cp.matmul(A, B)


def sgemm_ladder(n: int | None = None, versions=matmul.VERSIONS, tune: bool = False,
                 min_time_s: float = 0.1, seed: int = 0) -> dict:
    """Time every matmul.cu version and cuBLAS (cupy.matmul, FP32) at n×n×n on a GPU.

    Each version is checked against cuBLAS at this size first. ``tune`` also tries the
    tile shapes of ``matmul.V6_TUNING`` for v6 and keeps the fastest. On the CPU this returns
    the reference measurements instead (``source`` says which).
    """
    if not device.on_gpu():
        refs = reference_for("sgemm")
        return {"source": "reference" if refs else "none", "reference": refs,
                "note": "" if refs else no_reference_note("the SGEMM ladder")}
    import cupy as cp  # optional: present only where a GPU is

    n = n or default_sgemm_n()
    A = device.asarray(check.random_array((n, n), seed=seed, kind="uniform"))
    B = device.asarray(check.random_array((n, n), seed=seed + 1, kind="uniform"))
    flops = matmul.flops(n, n, n)
    with device.tf32(False):
        ref = _cublas_matmul(A, B)
        cublas = bench.benchmark(_cublas_matmul, A, B, label="ref (cuBLAS, cupy.matmul)",
                                 flops=flops, size=n, min_time_s=min_time_s)
    norm = float(cp.linalg.norm(ref))
    # Both are float32 dots of n terms, each within gamma_n * max(|A| @ |B|) of the exact product.
    allowed = 2 * matmul.tolerance(A, B)[1]
    timings, configs = [], {}
    module = matmul.load()
    for v in versions:
        candidates = [None] + (list(matmul.V6_TUNING[1:]) if tune and v == matmul.VERSIONS[-1] else [])
        best = None
        for d in candidates:
            mod = module if d is None else matmul.load(d)
            C = matmul.run(v, A, B, module=mod, defines=d)
            err = float(cp.linalg.norm(C - ref)) / norm
            worst = float(np.max(cp.abs(C - ref)))  # NumPy hands a CuPy array to CuPy
            if not worst <= allowed:
                raise AssertionError(f"{v} {d or ''} differs from cuBLAS at n={n} by {worst:.3g} "
                                     f"(float32 rounding allows {allowed:.3g}; relative error {err:.2e})")
            slow = matmul.version_number(v) <= 2
            t = bench.benchmark(matmul.run, v, A, B, C, mod, d, label=v, flops=flops, size=n,
                                min_time_s=min_time_s / (4 if slow else 1), min_samples=3,
                                warmup_s=0.0 if slow else None)
            t.meta.update({"defines": matmul.tiles(d), "rel_err": err})
            if best is None or t.median_s < best.median_s:
                best = t
        timings.append(best)
        configs[v] = best.meta["defines"]
    peak = None
    try:
        peak = specs.model_gpu().peak_flops("fp32")
    except Exception:
        pass
    best = max(timings, key=lambda t: t.gflops)
    return {"source": "measured", "n": n, "device": device.describe().short_name,
            "timings": bench.Timings(timings + [cublas]), "cublas_gflops": cublas.gflops,
            "peak_gflops": peak / 1e9 if peak else None, "best": best.label,
            "best_pct_of_cublas": 100.0 * best.gflops / cublas.gflops, "configs": configs}


def sgemm_summary(result: dict) -> "Table | Note":
    """GFLOP/s and % of cuBLAS per version (measured), or the reference data's."""
    if result["source"] == "measured":
        ts = result["timings"]
        rows = [[t.label, f"{t.gflops:,.0f}", f"{100 * t.gflops / result['cublas_gflops']:.1f}%"]
                for t in ts]
        return Table.from_lists(["version", "GFLOP/s", "% of cuBLAS"], rows,
                                caption=f"SGEMM at {result['n']}³ on {result['device']} (measured now)")
    if not result.get("reference"):
        return Note(result.get("note") or no_reference_note("the SGEMM ladder"))
    rows = []
    for r in result.get("reference", []):
        v = r["value"]
        for label, g in zip(v["labels"], v["gflops"]):
            rows.append([r["gpu"], label, f"{g:,.0f}", f"{100 * g / v['cublas_gflops']:.1f}%"])
    return Table.from_lists(["GPU", "version", "GFLOP/s", "% of cuBLAS"], rows,
                            caption="SGEMM reference measurements" if rows else result.get("note", ""))


def reuse_model(tile: int = 32) -> dict:
    """Memory traffic per multiply-add (FMA) of each matmul version: a counting model
    (``matmul.traffic_per_fma``), with v3's tile ``tile`` and the other versions' defaults.

    ``global_bytes_per_fma``: bytes a warp's loads fetch from device memory in whole 32-byte
    sectors, with no cache, per FMA; ``shared_loads_per_fma``: shared-memory load
    instructions per FMA. Coalescing cuts the first by using whole sectors, tiling by reusing
    each loaded value many times; register blocking and float4 loads cut the second.
    """
    counts = [matmul.traffic_per_fma(v, {"TILE": tile}) for v in matmul.VERSIONS]
    return {"versions": list(matmul.VERSIONS), "global_bytes_per_fma": [c[0] for c in counts],
            "shared_loads_per_fma": [c[1] for c in counts], "is_model": True,
            "note": "counted from the code: whole 32-byte sectors, no caches"}
