"""Chapter 5, section 4: an elementwise chain of five operations, unfused (five passes over
memory) against fused (torch.compile; a CuPy ElementwiseKernel on a GPU), with the bytes each
moves and a copy as the floor."""
from __future__ import annotations

import time

import numpy as np

from ... import bench, check, device, precision
from ...display import Table
from ...errors import whole_number
from .common import load_torch, threads_for


FUSION_N_CPU = 1 << 24   # 64 MB of float32: twice a large CPU's L3
CHAIN_TEXT = "y = relu(x·1.5 + 0.25)² − 1: multiply, add, ReLU, square, subtract"


def chain_numpy(x: np.ndarray) -> np.ndarray:
    """The reference: the five operations in float64."""
    y = x.astype(np.float64) * 1.5 + 0.25
    y = np.maximum(y, 0.0)
    return y * y - 1.0


def chain_eager(x):
    """Five separate PyTorch calls as usually written: five kernels and five new tensors."""
    torch = load_torch()
    y = x * 1.5
    y = y + 0.25
    y = torch.relu(y)
    y = y * y
    return y - 1.0


def chain_into(x, out):
    """The same five passes over memory, written into one preallocated buffer ``out``."""
    torch = load_torch()
    torch.mul(x, 1.5, out=out)
    out.add_(0.25)
    out.relu_()
    out.mul_(out)
    return out.sub_(1.0)


def chain_fused_into(x, out):
    """What torch.compile turns into ONE loop (one kernel) that reads x once and writes out once."""
    out.copy_(chain_eager(x))
    return out


CUPY_CHAIN = "float t = x * 1.5f + 0.25f; t = t > 0.0f ? t : 0.0f; y = t * t - 1.0f;"


def fusion_bytes(n: int, itemsize: int = 4) -> dict:
    """Bytes each version moves through memory (a count, not a measurement): five passes
    that each read and write n values, against one that reads x and writes y once."""
    return {"unfused": 5 * 2 * n * itemsize, "fused": 2 * n * itemsize}


_COMPILED = {}


def compiled_chain():
    """torch.compile of chain_fused_into (one C++/OpenMP loop on the CPU, one Triton kernel on a GPU)."""
    key = ("chain", load_torch().get_num_threads())  # the CPU code is generated for a thread count
    if key not in _COMPILED:
        _COMPILED[key] = load_torch().compile(chain_fused_into, dynamic=False)
    return _COMPILED[key]


def fusion(n: int | None = None, use_compile: bool = True, min_time_s: float = 0.1,
           seed: int = 0) -> dict:
    """Unfused (eager; five passes into one buffer) against fused (torch.compile; CuPy
    ElementwiseKernel on a GPU), with the bytes each moves and a copy as the floor.

    Every version is checked against float64 NumPy on data of both signs first. The first
    torch.compile call compiles; its time is reported separately (``compile_s``).
    """
    with threads_for("cuda" if device.torch_device() == "cuda" else "cpu"):
        return _fusion(n, use_compile, min_time_s, seed)


def _fusion(n, use_compile, min_time_s, seed) -> dict:
    torch = load_torch()
    dev = device.torch_device()
    backend = dev
    # On a GPU (PyTorch's, or CuPy's alone): 16 x its L2 (device.bandwidth_buffer_bytes), so
    # the chain streams from memory; the CuPy rows are that GPU's figures either way.
    gpu = dev == "cuda" or device.on_gpu()
    n = whole_number(n, "n", FUSION_N_CPU) if n is not None else (
        device.bandwidth_buffer_bytes(cap=1 << 30) // 4 if gpu else FUSION_N_CPU)
    x_np = check.random_array(n, seed=seed, kind="normal")  # both signs: ReLU matters
    x = torch.from_numpy(x_np).to(dev)
    out_t = torch.empty_like(x)
    sub = slice(None, None, max(1, n // 4099))  # about 4099 values spread over the array
    ref = chain_numpy(x_np[sub])
    small_np = check.random_array(1000 + 3, seed=seed + 1)
    small_ref = chain_numpy(small_np)
    small = torch.from_numpy(small_np).to(dev)
    # (label, function, its argument tuple at size n, at the awkward small size or None, fused?)
    versions = [("eager: 5 ops, 5 new tensors", chain_eager, (x,), (small,), False),
                ("5 ops into one buffer", chain_into, (x, out_t), (small, torch.empty_like(small)),
                 False)]
    out = {"n": n, "bytes": fusion_bytes(n), "chain": CHAIN_TEXT, "compile_s": None,
           "compile_error": None}
    if use_compile:
        t0 = time.perf_counter()
        try:
            f = compiled_chain()
            f(x, out_t)
            device.synchronize()
            out["compile_s"] = time.perf_counter() - t0
            # a second shape would compile again, so the compiled loop is checked at size n only
            versions.append(("fused: torch.compile", f, (x, out_t), None, True))
        except Exception as exc:  # no C++ compiler, no Triton: say so and go on
            out["compile_error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
    if device.on_gpu():
        import cupy as cp  # optional: present only where a GPU is

        ek = cp.ElementwiseKernel("float32 x", "float32 y", CUPY_CHAIN, "gpucourse_chain5")
        cx, cy, cs = cp.asarray(x), cp.empty(n, dtype=cp.float32), cp.asarray(small)

        def cupy_unfused(a):
            y = a * np.float32(1.5)
            y = y + np.float32(0.25)
            y = cp.maximum(y, np.float32(0.0))
            y = y * y
            return y - np.float32(1.0)

        versions += [("CuPy: 5 ops", cupy_unfused, (cx,), (cs,), False),
                     ("fused: CuPy ElementwiseKernel", ek, (cx, cy), (cs, cp.empty_like(cs)), True)]
    timings = bench.Timings()
    # t = x*1.5 + 0.25 is off by at most gamma_2*M (M = 1.5|x| + 0.25), t*t then by about
    # (2*gamma_2 + u)*M^2, and -1 adds u*|y|: first order, |error| <= gamma_6 * (|y| + 2),
    # fused (one multiply-add) or not.
    rtol, atol = precision.gamma(6), 2 * precision.gamma(6)
    for label, fn, args, small_args, fused in versions:
        if small_args is not None:
            check.assert_close(device.to_host(fn(*small_args)), small_ref, rtol=rtol, atol=atol,
                               name=f"{label} on 1003 values")
        check.assert_close(device.to_host(fn(*args))[sub], ref, rtol=rtol, atol=atol,
                           name=f"{label} on {n} values")
        on = "cuda" if label.startswith(("CuPy", "fused: CuPy")) else backend
        timings.append(bench.benchmark(fn, *args, label=label, size=n, backend=on,
                                       bytes=out["bytes"]["fused" if fused else "unfused"],
                                       min_time_s=min_time_s, min_samples=3))
    # The floor for any version: one read and one write of n values.
    copy = bench.benchmark(out_t.copy_, x, label="copy x into a buffer (one read + one write)",
                           backend=backend, bytes=2 * 4 * n, size=n, min_time_s=min_time_s,
                           min_samples=3)
    out.update(timings=timings, copy=copy, device=copy.device)
    by = timings.by_label()
    base = by["5 ops into one buffer"]
    out["speedup"] = {t.label: base.median_s / t.median_s for t in timings
                      if t.label.startswith("fused: torch")}
    if device.on_gpu():
        out["cupy_speedup"] = by["CuPy: 5 ops"].median_s / by["fused: CuPy ElementwiseKernel"].median_s
    return out


def fusion_table(result: dict) -> Table:
    b = result["bytes"]
    base = result["timings"].by_label()["5 ops into one buffer"]
    rows = []
    for t in result["timings"]:
        fused = t.label.startswith("fused")
        rows.append([t.label, f"{(b['fused'] if fused else b['unfused']) / 1e6:,.0f}",
                     f"{t.median_s * 1e3:.3g}", f"{t.gbps:.3g}",
                     f"{base.median_s / t.median_s:.2f}×"])
    c = result["copy"]
    rows.append([c.label, f"{c.bytes / 1e6:,.0f}", f"{c.median_s * 1e3:.3g}", f"{c.gbps:.3g}",
                 f"{base.median_s / c.median_s:.2f}×"])
    cap = f"{result['chain']} on {result['n']:,} float32 values, {result['device']}"
    if result.get("compile_s") is not None:
        cap += f"; torch.compile's first call took {result['compile_s']:.1f} s"
    return Table.from_lists(["version", "MB moved (counted)", "ms (median)", "GB/s (counted MB / time)",
                             "speed-up vs 5 ops into one buffer"], rows,
                            caption=cap)

