"""Chapter 2, section 1: host-to-device transfers. Pageable against pinned copies by size,
measured on a GPU (PyTorch and CuPy) and modelled for any GPU of the table, one size at a time
for the widget, and the zero-copy model."""
from __future__ import annotations

import ctypes

import numpy as np

from ... import bench, check, device, models, specs
from ...display import Table
from ...errors import DeviceError
from .common import MiB, cupy_or_none, target_gpu, torch_module


MODEL_SIZES = tuple(2**k for k in range(10, 31, 2))      # 1 KiB .. 1 GiB
GPU_SIZES = tuple(2**k for k in range(12, 29, 2))       # 4 KiB .. 256 MiB
QUICK_GPU_SIZES = tuple(2**k for k in range(12, 27, 2))  # 4 KiB .. 64 MiB


def link_peak_gbps(gpu=None) -> float:
    """The host link's theoretical rate per direction in GB/s (PCIe after encoding)."""
    spec = target_gpu(gpu)
    bw = spec.pcie_bandwidth_Bps
    if bw is None:
        raise DeviceError(f"The host link of the {spec.name} is not in the course's GPU table, so "
                          "there is no peak to compare with; pass gpu= one of "
                          f"{', '.join(specs.names())}.")
    return bw / 1e9


def transfer_model(sizes=MODEL_SIZES, gpu=None) -> dict:
    """Model of host-to-device bandwidth (GB/s) against size, pageable and pinned."""
    spec = target_gpu(gpu)
    out = {"pageable": [], "pinned": []}
    for n in sizes:
        for kind in out:
            t = models.transfer_time(n, spec, pinned=(kind == "pinned"))
            out[kind].append(t.effective_bandwidth / 1e9)
    return out


def _torch_h2d(nbytes: int, pinned: bool, min_time_s: float, seed: int) -> bench.Timing:
    torch = torch_module()
    n = max(1, nbytes // 4)
    host = torch.from_numpy(check.random_array(n, np.float32, seed=seed))
    if pinned:
        host = host.pin_memory()
    dev = torch.empty(n, dtype=torch.float32, device="cuda")
    dev.copy_(host)
    # A copy moves bits: exact.
    check.assert_close(dev[:: max(1, n // 4096)].cpu(), host[:: max(1, n // 4096)], rtol=0,
                       atol=0, name=f"{'pinned' if pinned else 'pageable'} copy of {nbytes} B")
    kind = "pinned (torch)" if pinned else "pageable (torch)"
    return bench.benchmark(lambda: dev.copy_(host, non_blocking=pinned), label=kind, bytes=n * 4,
                           size=n * 4, min_time_s=min_time_s, min_samples=3)


def _cupy_h2d(nbytes: int, pinned: bool, min_time_s: float, seed: int) -> bench.Timing:
    cp = cupy_or_none()
    import cupyx  # optional: only a GPU machine has it (with CuPy)

    n = max(1, nbytes // 4)
    data = check.random_array(n, np.float32, seed=seed)
    if pinned:
        host = cupyx.empty_pinned((n,), dtype=np.float32)
        host[...] = data
    else:
        host = data
    dev = cp.empty(n, dtype=cp.float32)
    stream = cp.cuda.get_current_stream()

    src = ctypes.c_void_p(host.ctypes.data)

    def copy_in():
        dev.data.copy_from_host_async(src, n * 4, stream)

    copy_in()
    check.assert_close(dev[:: max(1, n // 4096)].get(), data[:: max(1, n // 4096)], rtol=0,
                       atol=0, name=f"CuPy copy of {nbytes} B")  # a copy moves bits: exact
    kind = "pinned (CuPy)" if pinned else "pageable (CuPy)"
    return bench.benchmark(copy_in, label=kind, bytes=n * 4, size=n * 4, min_time_s=min_time_s,
                           min_samples=3)


def transfer_sweep(sizes=None, gpu=None, min_time_s: float = 0.1, progress=None,
                   cupy_too: bool = True) -> dict:
    """Host-to-device GB/s against size: measured on a GPU (torch pageable and pinned, CuPy
    pinned), the model everywhere, and the link's theoretical peak."""
    spec = target_gpu(gpu)
    measured = device.is_cuda() and device.torch_cuda_works() and gpu is None
    if sizes is None:
        sizes = GPU_SIZES if measured else MODEL_SIZES
    sizes = [int(s) for s in sizes]
    out = {"kind": "measured" if measured else "model", "device": device.describe().short_name,
           "gpu": spec.name, "sizes": sizes, "link_peak_gbps": link_peak_gbps(spec),
           "model": transfer_model(sizes, spec), "series": {}}
    if measured:
        series = {"pageable (torch)": [], "pinned (torch)": []}
        if cupy_too and cupy_or_none() is not None:
            series["pinned (CuPy)"] = []
        for i, n in enumerate(sizes):
            series["pageable (torch)"].append(_torch_h2d(n, False, min_time_s, i).gbps)
            series["pinned (torch)"].append(_torch_h2d(n, True, min_time_s, i).gbps)
            if "pinned (CuPy)" in series:
                series["pinned (CuPy)"].append(_cupy_h2d(n, True, min_time_s, i).gbps)
            if progress:
                progress((i + 1) / len(sizes))
        out["series"] = series
    return out


def transfer_table(sweep: dict, sizes=(4 * 2**10, 256 * 2**10, 4 * MiB, 64 * MiB)) -> Table:
    """Pageable and pinned GB/s and their ratio at a few sizes: measured if the sweep was
    measured, else the model."""
    measured = bool(sweep["series"])
    src = ({"pageable": sweep["series"]["pageable (torch)"], "pinned": sweep["series"]["pinned (torch)"]}
           if measured else sweep["model"])
    rows = Table([], caption=("measured on " + sweep["device"]) if measured
                 else f"model of the {sweep['gpu']}")
    for n in sizes:
        if n not in sweep["sizes"]:
            continue
        i = sweep["sizes"].index(n)
        p, q = src["pinned"][i], src["pageable"][i]
        rows.append({"size": bench.format_bytes(n), "pageable (GB/s)": q, "pinned (GB/s)": p,
                     "pinned / pageable": p / q})
    return rows


def pinned_over_pageable(sweep: dict, at_least: int = 64 * MiB) -> dict[int, float]:
    """Pinned / pageable bandwidth at every measured size >= ``at_least`` bytes."""
    s = sweep["series"]
    if not s:
        return {}
    return {n: p / q for n, p, q in zip(sweep["sizes"], s["pinned (torch)"], s["pageable (torch)"])
            if n >= at_least}


def transfer_at(nbytes: int, gpu=None, min_time_s: float = 0.05) -> dict:
    """One transfer size: model times (latency + streaming) for pageable and pinned, and the
    measured times on a GPU."""
    spec = target_gpu(gpu)
    nbytes = int(nbytes)
    out = {"bytes": nbytes, "gpu": spec.name, "device": device.describe().short_name,
           "link_peak_gbps": link_peak_gbps(spec), "model": {}, "measured": {}}
    for kind in ("pageable", "pinned"):
        t = models.transfer_time(nbytes, spec, pinned=kind == "pinned")
        out["model"][kind] = {"time_s": t.time, "latency_s": t.latency,
                              "gbps": t.effective_bandwidth / 1e9}
    if device.is_cuda() and device.torch_cuda_works() and gpu is None:
        for pinned in (False, True):
            t = _torch_h2d(nbytes, pinned, min_time_s, 0)
            out["measured"]["pinned" if pinned else "pageable"] = {"time_s": t.median_s,
                                                                   "gbps": t.gbps}
    return out


def zero_copy_model(nbytes: int = 256 * MiB, reads=(1, 2, 4, 16), gpu=None) -> Table:
    """Model: a kernel reads ``nbytes`` ``k`` times, either straight from pinned host memory
    over the link (zero-copy) or after one copy into device memory.

    zero-copy = k x bytes / pinned link rate; copy first = bytes / pinned link rate +
    k x bytes / device-memory bandwidth. Latency and caching are ignored.
    """
    spec = target_gpu(gpu)
    link = spec.link_bandwidth_Bps(pinned=True)
    hbm = spec.bandwidth_Bps
    rows = Table([], caption=f"model, {spec.name}: a kernel reads {nbytes / MiB:g} MiB k times")
    for k in reads:
        zero = k * nbytes / link
        copied = nbytes / link + k * nbytes / hbm
        rows.append({"reads": k, "zero-copy (ms)": zero * 1e3, "copy, then read (ms)": copied * 1e3,
                     "better": "zero-copy" if zero < copied else "copy first"})
    return rows

