"""Chapter 5, section 5: tensor cores. A matmul in FP32, TF32, FP16 and BF16, each checked
against float64 within its rounding bound, then timed; the datasheet peaks and a roofline
model per precision for the GPU the models describe."""
from __future__ import annotations

import contextlib
import functools

import numpy as np

from ... import bench, check, device, models, specs
from ...display import Table
from ...errors import whole_number
from ...kernels import matmul
from ...precision import BYTES, MATMUL, UNIT_ROUNDOFF, availability, gamma, require, torch_dtype
from .common import load_torch, threads_for, torch_on_gpu

#: Each of the chapter's precisions (``precision.MATMUL``) mapped to None (it runs here) or
#: the reason it does not: ``precision.availability`` for the chapter's offer.
precision_availability = functools.partial(availability, precisions=MATMUL)


def peak_table(gpu=None) -> Table:
    """A GPU's datasheet peaks per precision and the speed-up over FP32 each implies."""
    spec = specs.model_gpu(gpu)
    fp32 = spec.peak_tflops.get("fp32")
    rows = []
    for p in MATMUL:
        v = spec.peak_tflops.get(p)
        unit = "CUDA cores" if p == "fp32" else "tensor cores"
        rows.append([p, f"{v:g}" if v else "none", unit if v else "–",
                     f"{v / fp32:.1f}×" if v and fp32 else "–"])
    return Table.from_lists(["precision", "peak TFLOP/s (dense)", "units", "vs FP32"], rows,
                            caption=f"{spec.name}, datasheet ({spec.source})")


def precision_error_bound(precision: str, A: np.ndarray, B: np.ndarray) -> float:
    """Largest ‖C − C_ref‖/‖C_ref‖ of ``A @ B`` in ``precision`` against float64.

    Inputs rounded to the format (u each, so a product is off by at most 2u + u²), products
    summed in float32 (tensor cores and PyTorch's CPU kernels accumulate in FP32): gamma_K of
    |A| @ |B|, whose norm is R times the result's; the FP16/BF16 result rounds once more.
    """
    u = UNIT_ROUNDOFF[precision]
    u_in = 0.0 if precision == "fp32" else u
    g = gamma(A.shape[1])
    ref = A.astype(np.float64) @ B.astype(np.float64)
    R = float(np.linalg.norm(np.abs(A).astype(np.float64) @ np.abs(B)) / np.linalg.norm(ref))
    e = ((2 * u_in + u_in ** 2) * (1 + g) + g) * R
    return e + (u * (1 + e) if precision in ("fp16", "bf16") else 0.0)


@contextlib.contextmanager
def _fp32_reductions():
    """cuBLAS may otherwise add split-K partial sums of FP16/BF16 products in the 16-bit format
    (PyTorch allows it by default), outside the FP32-accumulation bound."""
    torch = load_torch()
    m = torch.backends.cuda.matmul
    names = [a for a in ("allow_fp16_reduced_precision_reduction",
                         "allow_bf16_reduced_precision_reduction") if hasattr(m, a)]
    old = [getattr(m, a) for a in names]
    try:
        for a in names:
            setattr(m, a, False)
        yield
    finally:
        for a, v in zip(names, old):
            setattr(m, a, v)


def check_precision_matmul(precision: str, k: int = 256, seed: int = 0) -> float:
    """One matmul in ``precision`` against float64; returns the relative error (raises if too big)."""
    require(precision, MATMUL)
    torch = load_torch()
    dev = device.torch_device()
    A = check.random_array((67, k), seed=seed, kind="uniform")
    B = check.random_array((k, 45), seed=seed + 1, kind="uniform")
    ref = A.astype(np.float64) @ B.astype(np.float64)
    dt = torch_dtype(precision)
    with device.tf32(precision == "tf32"), _fp32_reductions():
        C = (torch.from_numpy(A).to(dev, dt) @ torch.from_numpy(B).to(dev, dt)).float().cpu().numpy()
    err = float(np.linalg.norm(C - ref) / np.linalg.norm(ref))
    allowed = precision_error_bound(precision, A, B)
    if not err <= allowed:
        raise AssertionError(f"{precision} matmul is off by {err:.2e} (its rounding allows "
                             f"{allowed:.1e}) against float64")
    return err


def matmul_throughput(precision: str = "fp32", n: int | None = None,
                      min_time_s: float = 0.1, seed: int = 0) -> bench.Timing:
    """TFLOP/s of an n×n×n torch.matmul in ``precision`` on the active device, checked first."""
    torch = load_torch()
    err = check_precision_matmul(precision, seed=seed)
    dev = device.torch_device()
    n = whole_number(n, "n", 512) if n is not None else (8192 if dev == "cuda" else 512)
    dt = torch_dtype(precision)
    g = torch.Generator(device=dev).manual_seed(seed)
    A = torch.rand(n, n, device=dev, generator=g).to(dt) - 0.5
    B = torch.rand(n, n, device=dev, generator=g).to(dt) - 0.5
    with device.tf32(precision == "tf32"), threads_for(dev):
        t = bench.benchmark(torch.matmul, A, B, label=precision, flops=matmul.flops(n, n, n),
                            size=n, backend=dev, min_time_s=min_time_s, min_samples=3)
    t.meta["rel_err"] = err
    return t


def precision_model(gpu=None, sizes=tuple(2 ** k for k in range(7, 15))) -> dict:
    """Roofline model of an n×n×n matmul per precision: one launch's fixed cost + max(compute
    time, memory time).

    Inputs and output are read and written once (3·n²·bytes); peaks are the datasheet's; the
    launch cost (``models.LAUNCH_OVERHEAD_S``) keeps small sizes from reaching the peak in
    nanoseconds.
    """
    spec = specs.model_gpu(gpu)
    out = {"gpu": spec.name, "sizes": list(sizes), "tflops": {}, "peak_tflops": {},
           "bandwidth_GBps": spec.memory_bandwidth_GBps, "is_model": True}
    for p in MATMUL:
        if p not in spec.peak_tflops:
            continue
        out["peak_tflops"][p] = spec.peak_tflops[p]
        out["tflops"][p] = [models.roofline(matmul.flops(n, n, n),
                                            matmul.bytes_moved(n, n, n, BYTES[p]), gpu=spec,
                                            precision=p, launch=models.LAUNCH_OVERHEAD_S
                                            ).attainable_flops / 1e12 for n in sizes]
    return out


def precision_sweep(n: int | None = None, precisions=MATMUL, min_time_s: float = 0.1) -> dict:
    """Measured TFLOP/s per precision on the active device next to the datasheet peaks.

    Precisions that cannot run here are listed with the reason instead of a number.
    """
    avail = precision_availability()
    timings, skipped = bench.Timings(), {}
    for p in precisions:
        if avail.get(p):
            skipped[p] = avail[p]
            continue
        timings.append(matmul_throughput(p, n=n, min_time_s=min_time_s))
    peaks = {}
    if torch_on_gpu():
        spec = specs.for_active_device()
        peaks = {p: spec.peak_tflops.get(p) for p in precisions}
    return {"timings": timings, "skipped": skipped, "peak_tflops": peaks,
            "device": timings[0].device if timings else device.describe().short_name,
            "n": timings[0].size if timings else n, "on_gpu": torch_on_gpu()}


def precision_point(precision: str, n: int, min_time_s: float = 0.05) -> dict:
    """The precision widget's experiment: one measured matmul and the model for the target GPU."""
    t = matmul_throughput(precision, n=n, min_time_s=min_time_s)
    model = precision_model(sizes=(n,))
    return {"timing": t, "model_tflops": model["tflops"].get(precision, [None])[0],
            "model_gpu": model["gpu"], "peak_tflops": model["peak_tflops"].get(precision)}


def percent_of_peak(flops: float, seconds: float, gpu, precision: str) -> float:
    """Achieved FLOP/s as a percentage of the datasheet's dense peak for ``precision``."""
    return 100.0 * flops / seconds / specs.lookup(gpu).peak_flops(precision)


def precision_table(result: dict) -> Table:
    rows = []
    for t in result["timings"]:
        peak = result["peak_tflops"].get(t.label) if result["peak_tflops"] else None
        rows.append([t.label, f"{t.gflops / 1e3:.3g}", f"{peak:g}" if peak else "–",
                     f"{100 * t.gflops / 1e3 / peak:.0f}%" if peak else "–",
                     f"{t.meta.get('rel_err', float('nan')):.1e}"])
    for p, why in result["skipped"].items():
        rows.append([p, "not run", "–", "–", why])
    return Table.from_lists(["precision", "TFLOP/s", "peak (datasheet)", "% of peak", "rel. error"], rows,
                            caption=f"{result['n']}³ matmul on {result['device']} (measured now)")

