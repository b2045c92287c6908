"""Chapter 1, section 4: the roofline. The CPU's ceilings and a vector add, a sum and a
matmul under them, measured with NumPy; the same operations on a GPU's datasheet roofline (a
model); and on a GPU, vector_add.cu, reduce.cu and cuBLAS measured under the measured copy
ceiling."""
from __future__ import annotations

import numpy as np

from ... import bench, check, device, kernels, models, specs
from ...errors import DeviceError, PrecisionError
from ...kernels import copy as copy_home
from ...kernels import reduce as reduce_home
from ...kernels import vector_add as vector_add_home
from ...precision import BYTES, matmul_error_bound, sum_error_bound
from ..cpu import dot_on_every_core, exact_sum_data
from .common import MiB, big_random, copy_ceiling_gpu, cupy_or_none, minimum_work, model_spec
from .transfer import transfer_sweep


def cpu_ceilings(copy_bytes: int = 64 * MiB, matmul_sizes=(512, 1024), seed: int = 0,
                 min_time_s: float = 0.1) -> dict:
    """The CPU's two roofline ceilings, measured now with NumPy.

    Bandwidth: the faster of a large copy (read + write) and a large dot product on every
    core (read only), both far larger than the last-level cache. Compute: the best float32 matmul rate
    over ``matmul_sizes``.
    """
    n = copy_bytes // 4
    a, b = big_random(n, seed), big_random(n, seed + 1)
    out = np.empty_like(a)
    np.copyto(out, a)
    check.assert_close(out, copy_home.reference(a), *copy_home.TOLERANCE, name="copy")
    copy = bench.benchmark(np.copyto, out, a, label="copy", bytes=copy_home.bytes_moved(n),
                           min_time_s=min_time_s, warmup_s=0.01, backend="cpu")
    del out
    dot = dot_on_every_core(a, b, min_time_s=min_time_s, warmup_s=0.01)
    del a, b
    mm = {}
    for m in matmul_sizes:
        x = check.random_array((m, m), np.float32, seed=seed + m, kind="uniform")
        y = check.random_array((m, m), np.float32, seed=seed + m + 1, kind="uniform")
        z = np.empty_like(x)
        np.matmul(x, y, out=z)
        # Dots of m terms in any order (any BLAS kernel or thread split): gamma_m * max(|x| @ |y|).
        check.assert_close(z, x.astype(np.float64) @ y, rtol=0,
                           atol=matmul_error_bound(x, y), name=f"matmul {m}")
        t = bench.benchmark(np.matmul, x, y, out=z, label=f"matmul {m}", flops=2 * m**3,
                            min_time_s=min_time_s, warmup_s=0.05, backend="cpu")
        mm[str(m)] = t.gflops
    return {"device": device.describe().short_name, "bandwidth_Bps": max(copy.gbps, dot.gbps) * 1e9,
            "peak_flops": max(mm.values()) * 1e9, "copy_gbps": copy.gbps, "dot_gbps": dot.gbps,
            "matmul_gflops": mm, "copy_bytes": copy_bytes}


def _point(name: str, t: bench.Timing, flops: float, nbytes: float, size) -> dict:
    return {"name": name, "flops": flops, "bytes": nbytes, "intensity": flops / nbytes,
            "seconds": t.median_s, "rate": flops / t.median_s, "size": size}


def cpu_roofline(ceilings: dict | None = None, n: int = 1 << 24, matmul_n: int = 384, seed: int = 0,
                 min_time_s: float = 0.1) -> dict:
    """Vector add, a sum and a matmul, each checked then measured with NumPy, under the CPU's measured roof.

    Bytes are the minimum each operation must move (inputs read once, output written once).
    Each ceiling is the best rate measured now for its resource, points included: a
    roof is what the machine was seen to do, so no point can sit above it.
    """
    ceilings = dict(ceilings or cpu_ceilings(seed=seed, min_time_s=min_time_s))
    a, b = big_random(n, seed), big_random(n, seed + 1)
    out = np.empty_like(a)
    np.add(a, b, out=out)
    # One rounding of an exact float64 sum: at most 2^-24 of |a + b|.
    check.assert_close(out, a.astype(np.float64) + b, *vector_add_home.EXACT_TOLERANCE,
                       name="vector add")
    t_add = bench.benchmark(np.add, a, b, out=out, label="vector add", min_time_s=min_time_s,
                            warmup_s=0.01, backend="cpu")
    del out, b, a
    # A float32 sum of n = 2^24 terms has no useful worst-case bound (n * 2^-24 = 1), and NumPy's
    # order is its own: sum random +-1 values instead, whose float32 sum is exact in any order
    # (exact_sum_data), so the check demands equality. The values do not change the speed.
    s = exact_sum_data(n, seed)
    check.assert_close(np.float64(np.sum(s)), np.float64(np.sum(s, dtype=np.float64)), rtol=0,
                       atol=0, name="sum")
    t_sum = bench.benchmark(np.sum, s, label="sum", min_time_s=min_time_s, warmup_s=0.01,
                            backend="cpu")
    del s
    m = matmul_n
    x = check.random_array((m, m), np.float32, seed=seed + 2, kind="uniform")
    y = check.random_array((m, m), np.float32, seed=seed + 3, kind="uniform")
    z = np.empty_like(x)
    np.matmul(x, y, out=z)
    # Dots of m terms in any order: gamma_m * max(|x| @ |y|).
    check.assert_close(z, x.astype(np.float64) @ y, rtol=0, atol=matmul_error_bound(x, y),
                       name="matmul")
    t_mm = bench.benchmark(np.matmul, x, y, out=z, label="matmul", min_time_s=min_time_s,
                           warmup_s=0.02, backend="cpu")
    w = minimum_work(n, m)
    points = [_point("vector add", t_add, *w["vector add"], n),
              _point("sum (reduction)", t_sum, *w["sum"], n),
              _point(f"matmul {m}x{m}", t_mm, *w["matmul"], m)]
    best_bw = max(p["bytes"] / p["seconds"] for p in points[:2])
    if best_bw > ceilings["bandwidth_Bps"]:
        ceilings["bandwidth_Bps"], ceilings["bandwidth_from"] = best_bw, "a roofline point"
    if points[2]["rate"] > ceilings["peak_flops"]:
        ceilings["peak_flops"], ceilings["peak_from"] = points[2]["rate"], "a roofline point"
    return {"device": device.describe().short_name, "ceilings": ceilings, "points": points,
            "kind": "measured"}


GPU_MODEL_SIZES = {"vector add": 1 << 28, "sum (reduction)": 1 << 28, "matmul": 8192}


def gpu_roofline_model(gpu: str | None = None, precision: str = "fp32") -> dict:
    """Model: the same three operations at GPU sizes on ``gpu``'s datasheet roofline."""
    spec = model_spec(gpu)
    # "FP16" means fp16 here too (the roofline's peak_flops already reads it so), not a
    # 4-byte type the element-size table does not know
    precision = str(precision).lower()
    e = BYTES.get(precision, 4)
    n, m = GPU_MODEL_SIZES["vector add"], GPU_MODEL_SIZES["matmul"]
    w = minimum_work(n, m, e)
    work = [("vector add", *w["vector add"]), ("sum (reduction)", *w["sum"]),
            (f"matmul {m}x{m}", *w["matmul"])]
    points = []
    for name, flops, nbytes in work:
        r = models.roofline(flops, nbytes, spec, precision)
        points.append({"name": name, "flops": flops, "bytes": nbytes, "intensity": r.intensity,
                       "seconds": r.time, "rate": r.attainable_flops, "bound": r.bound})
    return {"gpu": spec.key, "gpu_name": spec.name, "precision": precision,
            "ceilings": {"bandwidth_Bps": spec.bandwidth_Bps, "peak_flops": spec.peak_flops(precision)},
            "points": points, "kind": "model", "source": spec.source}


def gpu_roofline(n: int | None = None, matmul_n: int = 8192, min_time_s: float = 0.1) -> dict:
    """On a GPU: vector add (vector_add.cu), the reduction (reduce.cu) and cuBLAS matmul, measured.

    Ceilings: the measured device copy bandwidth and the datasheet FP32 peak.
    """
    cp = cupy_or_none()
    if cp is None:
        raise DeviceError("The measured GPU roofline needs CuPy on a CUDA GPU; on the CPU use "
                          "cpu_roofline and gpu_roofline_model.")
    n = n or device.bandwidth_buffer_bytes(cap=1 << 30) // 4
    ceiling = copy_ceiling_gpu(n * 4, min_time_s)
    x = cp.random.random(n, dtype=cp.float32) * 2 - 0.5
    y = cp.random.random(n, dtype=cp.float32) + 0.5
    z = cp.empty(n, dtype=cp.float32)
    vname = vector_add_home.VERSIONS[0]
    vk = kernels.load("vector_add")[vname]
    vshape, vargs = vector_add_home.launch(vname, n), (x, y, z, np.int32(n))
    vshape.run(vk, vargs)
    if not bool(cp.array_equal(z, vector_add_home.reference(x, y))):  # the same rounding: bits
        raise AssertionError("vector_add gave a wrong result on the GPU")
    t_add = bench.benchmark(vshape.run, vk, vargs, label="vector add", min_time_s=min_time_s)
    # The fastest rung of chapter 4's reduction ladder, launched as its home says.
    rname = reduce_home.VERSIONS[-1]
    total = cp.zeros(1, dtype=cp.float32)
    sms = device.describe().sm_count

    def reduce_once():
        reduce_home.run(rname, x, n, total, sms)

    reduce_once()
    want = float(cp.sum(x, dtype=cp.float64))
    # Each term passes through at most three float32 chains, in any order: its thread's
    # elements, the block's partial sums, the blocks' atomics: gamma_depth * sum|x|.
    depth = reduce_home.depth(rname, reduce_home.launch(rname, n, sms), n)
    check.assert_close(np.float64(float(total[0])), np.float64(want), rtol=0,
                       atol=sum_error_bound(depth, float(cp.abs(x).sum(dtype=cp.float64))),
                       name="reduction on the GPU")
    t_sum = bench.benchmark(reduce_once, label="reduction", min_time_s=min_time_s)
    del y, z
    m = matmul_n
    a = cp.random.random((m, m), dtype=cp.float32) - 0.5
    b = cp.random.random((m, m), dtype=cp.float32) - 0.5
    c = cp.matmul(a, b)
    probe = cp.asnumpy(a[:64].astype(cp.float64) @ b.astype(cp.float64))
    # Dots of m terms in any order (cuBLAS, FP32 without TF32): gamma_m * max(|a| @ |b|).
    check.assert_close(cp.asnumpy(c[:64]), probe, rtol=0, atol=matmul_error_bound(a[:64], b),
                       name="matmul on the GPU")
    t_mm = bench.benchmark(cp.matmul, a, b, out=c, label="matmul", min_time_s=min_time_s)
    try:
        spec = specs.for_active_device()
        peak, src = spec.peak_flops("fp32"), spec.source
    except Exception:
        peak, src = None, ""
    w = minimum_work(n, m)
    points = [_point(f"vector add ({vname})", t_add, *w["vector add"], n),
              _point(f"reduction ({rname})", t_sum, *w["sum"], n),
              _point(f"matmul {m}x{m} (cuBLAS)", t_mm, *w["matmul"], m)]
    ceilings = {"bandwidth_Bps": ceiling.gbps * 1e9, "copy_gbps": ceiling.gbps,
                "peak_flops": peak or points[2]["rate"], "peak_source": src or "best measured"}
    best_bw = max(p["bytes"] / p["seconds"] for p in points[:2])
    if best_bw > ceilings["bandwidth_Bps"]:  # a roof is the best rate seen
        ceilings["bandwidth_Bps"], ceilings["bandwidth_from"] = best_bw, "a roofline point"
    return {"device": device.describe().short_name, "points": points, "kind": "measured",
            "ceilings": ceilings}


def model_views(gpu: str | None = None, precision: str = "fp32") -> dict:
    """Widget back end: the roofline and transfer models of one GPU from the spec table."""
    spec = model_spec(gpu)
    if precision not in spec.precisions:
        raise PrecisionError(f"the {spec.name} has no {precision} peak in the table; "
                             f"choose one of {', '.join(spec.precisions)}.")
    return {"roofline": gpu_roofline_model(spec.key, precision), "transfer": transfer_sweep(spec.key)}

