"""Chapter 1, section 1: timing done wrong and right. A cold first call, a host timer without
synchronization and ``gc.bench`` (warm-up, then the median), on NumPy, on the copy kernel
(the GPU, or the emulator) and on a simulated asynchronous device."""
from __future__ import annotations

import time

import numpy as np

from ... import bench, check, device
from ...check.timing import SimulatedAsyncDevice
from ...errors import CourseError, whole_number
from ...kernels import copy as copy_home
from ...precision import U32
from .common import MiB, big_random, copy_kernels, cupy_or_none, launch_copy


def _numpy_cold_vs_warm(n: int, seed: int, min_time_s: float) -> list[dict]:
    """First call into a fresh output buffer against the warm median of the same call."""
    a, b = big_random(n, seed), big_random(n, seed + 1)
    out = np.empty_like(a)  # never touched: the first call pays the page faults
    t0 = time.perf_counter()
    np.multiply(a, b, out=out)
    cold = time.perf_counter() - t0
    # One rounding of an exact product: at most 2^-24 of |a*b| (the float64 product is exact).
    check.assert_close(out, a.astype(np.float64) * b, rtol=U32, atol=0, name="a * b")
    warm = bench.benchmark(np.multiply, a, b, out=out, label="a * b", bytes=12 * n, size=n,
                           min_time_s=min_time_s, backend="cpu")
    what = f"NumPy a * b, {n * 4 / MiB:.0f} MiB per array"
    return [
        {"group": what, "method": "one cold call (fresh output buffer)", "seconds": cold,
         "kind": "measured"},
        {"group": what, "method": "gc.bench: warm-up, median", "seconds": warm.median_s,
         "p20": warm.p20_s, "p80": warm.p80_s, "kind": "measured"},
    ]


def _kernel_first_launch(n: int = 1 << 16, min_time_s: float = 0.05) -> list[dict]:
    """First launch of a CUDA C kernel in this process (it is built, or loaded from the disk
    cache, on first use) against the warm median; on the CPU the kernel runs on the emulator."""
    t0 = time.perf_counter()
    ks = copy_kernels()
    x_host = check.random_array(n, np.float32, seed=3)
    x, y = device.asarray(x_host), device.empty(n, np.float32)
    launch_copy(ks, x, y, n, None)
    device.synchronize()
    cold = time.perf_counter() - t0
    check.assert_close(device.to_host(y), copy_home.reference(x_host), *copy_home.TOLERANCE,
                       name="copy kernel")
    warm = bench.benchmark(launch_copy, ks, x, y, n, None, label="copy kernel",
                           bytes=copy_home.bytes_moved(n), min_time_s=min_time_s, warmup_s=0.01)
    where = "GPU" if cupy_or_none() is not None else "CPU emulator"
    group = f"copy kernel on the {where}, {n * 4 // 1024} KiB"
    return [
        {"group": group, "method": "first launch (builds or loads the kernel)", "seconds": cold,
         "kind": "measured"},
        {"group": group, "method": "gc.bench: warm-up, median", "seconds": warm.median_s,
         "p20": warm.p20_s, "p80": warm.p80_s, "kind": "measured"},
    ]


def simulated_async(work_s: float = 0.002, cold_calls: int = 5, cold_extra_s: float = 0.02,
                    min_time_s: float = 0.1) -> list[dict]:
    """The three ways to time an asynchronous launch, on ``SimulatedAsyncDevice`` (a simulation).

    The simulated launch returns at once and its first ``cold_calls`` calls cost
    ``cold_extra_s`` more, as a GPU's first launches do.
    """
    dev = SimulatedAsyncDevice(work_s=work_s, cold_calls=cold_calls, cold_extra_s=cold_extra_s)
    group = f"simulated asynchronous device (work {work_s * 1e3:g} ms per call)"
    t0 = time.perf_counter()
    dev.launch()
    dev.synchronize()
    cold = time.perf_counter() - t0
    for _ in range(cold_calls):  # leave the cold phase, then time a launch without sync
        dev.launch()
    dev.synchronize()
    t0 = time.perf_counter()
    dev.launch()
    no_sync = time.perf_counter() - t0
    dev.synchronize()

    def launch_and_wait():
        dev.launch()
        dev.synchronize()

    warm = bench.benchmark(launch_and_wait, label="launch + synchronize", min_time_s=min_time_s,
                           warmup_s=0.02, backend="cpu")
    return [
        {"group": group, "method": "host timer, no synchronize", "seconds": no_sync,
         "kind": "simulation"},
        {"group": group, "method": "one cold call + synchronize", "seconds": cold,
         "kind": "simulation"},
        {"group": group, "method": "warm-up, synchronize, median", "seconds": warm.median_s,
         "p20": warm.p20_s, "p80": warm.p80_s, "kind": "simulation"},
        {"group": group, "method": "true time per call", "seconds": work_s, "kind": "truth"},
    ]


def _gpu_timing(nbytes: int, min_time_s: float) -> list[dict]:
    """A real asynchronous copy on the GPU: no sync, one cold call, and CUDA events."""
    cp = cupy_or_none()
    n = nbytes // 4
    x = cp.random.random(n, dtype=cp.float32) * 2 - 0.5
    y = cp.empty(n, dtype=cp.float32)
    device.synchronize()
    t0 = time.perf_counter()
    kernel = copy_kernels()["coalesced"]  # first use: NVRTC compiles it (or loads it from the cache)
    shape = copy_home.launch(kernel.name, n)
    grid, block, args = (shape.grid,), (shape.block,), copy_home.args(kernel.name, x, y, n)
    kernel(grid, block, args)
    device.synchronize()
    cold = time.perf_counter() - t0
    if not bool(cp.array_equal(x, y)):
        raise AssertionError("the copy kernel gave a wrong result on the GPU")
    for _ in range(3):
        kernel(grid, block, args)
    device.synchronize()
    t0 = time.perf_counter()
    kernel(grid, block, args)
    no_sync = time.perf_counter() - t0
    device.synchronize()
    t0 = time.perf_counter()
    kernel(grid, block, args)
    device.synchronize()
    one_warm = time.perf_counter() - t0
    warm = bench.benchmark(kernel, grid, block, args, label="copy kernel",
                           bytes=copy_home.bytes_moved(n), min_time_s=min_time_s)
    group = f"copy kernel on the GPU, {nbytes / MiB:.0f} MiB"
    return [
        {"group": group, "method": "host timer, no synchronize", "seconds": no_sync,
         "kind": "measured"},
        {"group": group, "method": "one cold call + synchronize", "seconds": cold,
         "kind": "measured"},
        {"group": group, "method": "one warm call + synchronize (host timer)",
         "seconds": one_warm, "kind": "measured"},
        {"group": group, "method": "gc.bench: warm-up, CUDA events, median",
         "seconds": warm.median_s, "p20": warm.p20_s, "p80": warm.p80_s, "kind": "measured"},
    ]


def timing_wrong_vs_right(n: int = 1 << 22, seed: int = 0, min_time_s: float = 0.1,
                          gpu_bytes: int | None = None) -> dict:
    """Timing done wrong and right: cold single calls, missing synchronization, gc.bench.

    On the CPU: a NumPy op measured for real (cold call vs warm median) and an asynchronous
    launch on a simulated device. On a GPU, the copy kernel itself, measured for real.
    """
    whole_number(n, "n", "1 << 22")
    rows = _numpy_cold_vs_warm(n, seed, min_time_s)
    if cupy_or_none() is not None:
        rows += _gpu_timing(gpu_bytes or device.bandwidth_buffer_bytes(cap=1 << 30), min_time_s)
    else:
        try:
            rows += _kernel_first_launch(min_time_s=min_time_s)
        except CourseError as exc:  # no C++ compiler: the other groups still teach the point
            rows.append({"group": "copy kernel on the CPU emulator", "method": f"skipped: {exc}",
                         "seconds": float("nan"), "kind": "skipped"})
    rows += simulated_async(min_time_s=min_time_s)
    return {"device": device.describe().short_name, "backend": device.backend(), "rows": rows}

