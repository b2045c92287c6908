"""Chapter 1 (architecture and bottlenecks): timing done wrong and right, coalesced against
strided access, host transfer against on-device compute, and the roofline.

Every experiment checks its result against NumPy on fresh random data before it times
anything. On a CUDA GPU the kernels run through CuPy and buffers are many times the L2
size; on the CPU the NumPy/PyTorch versions are measured for real, the CUDA C kernels run
on the emulator for correctness, and GPU behaviour comes from ``gpucourse.models`` (labelled
as a model) or from reference measurements.
"""
from __future__ import annotations

import math
import numbers
import time

import numpy as np

from .. import bench, check, device, models, precision, specs
from ..check.timing import SimulatedAsyncDevice
from ..errors import CourseError, DeviceError, LaunchError, PrecisionError, whole_number
from .cpu import dot_on_every_core, exact_sum_data

STRIDES = (1, 2, 4, 8, 16, 32)
BLOCK = 256
# Element sizes of the precisions the bandwidth widget offers.
ELEM_BYTES = {p: precision.BYTES[p] for p in precision.STORAGE}  # moved: precision
CPU_LINE_BYTES = 64
# Used by the model views when the active device is not a GPU of the spec table.
FALLBACK_GPU = specs.DEFAULT_GPU
MiB = 2**20


def _progress(progress, fraction):
    if progress:
        progress(fraction)


def default_gpu() -> str:
    """The spec-table name of the GPU the models describe (``specs.model_gpu``), or
    FALLBACK_GPU where the active GPU is not in the table."""
    spec = specs.model_gpu()
    return FALLBACK_GPU if spec.estimated else spec.key


def _spec(gpu) -> specs.GPUSpec:
    return specs.lookup(gpu if gpu is not None else default_gpu())


def _cupy():
    """CuPy when the active backend is a GPU that CuPy can use, else None."""
    if device.on_gpu():
        import cupy

        return cupy
    return None


def _torch_cuda() -> bool:
    return device.is_cuda() and device.torch_cuda_works()


_sync = device.synchronize  # moved: device

def _big_random(n: int, seed: int) -> np.ndarray:
    """Large float32 input, random and non-uniform in [-0.5, 1.5) (cheaper than random_array)."""
    return np.random.default_rng(seed).random(n, dtype=np.float32) * np.float32(2) - np.float32(0.5)


# =========================================================================== 1. timing

def _numpy_cold_vs_warm(n: int, seed: int, min_time_s: float) -> list[dict]:
    """First call into a fresh output buffer against the warm median of the same call."""
    a, b = _big_random(n, seed), _big_random(n, seed + 1)
    out = np.empty_like(a)  # never touched: the first call pays the page faults
    t0 = time.perf_counter()
    np.multiply(a, b, out=out)
    cold = time.perf_counter() - t0
    # One rounding of an exact product: at most 2^-24 of |a*b| (the float64 product is exact).
    check.assert_close(out, a.astype(np.float64) * b, rtol=models.U32, atol=0, name="a * b")
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
    _sync()
    cold = time.perf_counter() - t0
    check.assert_close(device.to_host(y), x_host, rtol=0, atol=0, name="copy kernel")  # bits: exact
    warm = bench.benchmark(launch_copy, ks, x, y, n, None, label="copy kernel", bytes=8 * n,
                           min_time_s=min_time_s, warmup_s=0.01)
    where = "GPU" if _cupy() is not None else "CPU emulator"
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
    import cupy as cp

    n = nbytes // 4
    x = cp.random.random(n, dtype=cp.float32) * 2 - 0.5
    y = cp.empty(n, dtype=cp.float32)
    _sync()
    t0 = time.perf_counter()
    kernel = copy_kernels()["coalesced"]  # first use: NVRTC compiles it (or loads it from the cache)
    grid, block = (math.ceil(n / BLOCK),), (BLOCK,)
    args = (x, y, np.int32(n))
    kernel(grid, block, args)
    _sync()
    cold = time.perf_counter() - t0
    if not bool(cp.array_equal(x, y)):
        raise AssertionError("the copy kernel gave a wrong result on the GPU")
    for _ in range(3):
        kernel(grid, block, args)
    _sync()
    t0 = time.perf_counter()
    kernel(grid, block, args)
    no_sync = time.perf_counter() - t0
    _sync()
    t0 = time.perf_counter()
    kernel(grid, block, args)
    _sync()
    one_warm = time.perf_counter() - t0
    warm = bench.benchmark(kernel, grid, block, args, label="copy kernel", bytes=2 * nbytes,
                           min_time_s=min_time_s)
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
    if _cupy() is not None:
        rows += _gpu_timing(gpu_bytes or device.bandwidth_buffer_bytes(cap=1 << 30), min_time_s)
    else:
        try:
            rows += _kernel_first_launch(min_time_s=min_time_s)
        except CourseError as exc:  # no C++ compiler: the other groups still teach the point
            rows.append({"group": "copy kernel on the CPU emulator", "method": f"skipped: {exc}",
                         "seconds": float("nan"), "kind": "skipped"})
    rows += simulated_async(min_time_s=min_time_s)
    return {"device": device.describe().short_name, "backend": device.backend(), "rows": rows}


# =========================================================================== 2. strided access

def cache_line_model(strides, elem_bytes: int = 4, line_bytes: int = CPU_LINE_BYTES) -> list[float]:
    """Model: useful fraction of the traffic of the column-by-column strided copy on a CPU.

    Each of the ``stride`` passes touches every cache line that holds one of its elements:
    all lines while stride x element < line, every few lines beyond. With a buffer far
    larger than the cache nothing survives between passes, so the traffic grows by
    min(stride, line / element).
    """
    return [1.0 / min(s, max(1, line_bytes // elem_bytes)) for s in strides]


def strided_copy_numpy(src: np.ndarray, dst: np.ndarray, stride: int) -> None:
    """The access order of copy.cu's copy_v2_strided, on the CPU: column c of rows of ``stride``
    elements, for c = 0, 1, ...; neighbouring accesses are ``stride`` elements apart."""
    for c in range(stride):
        np.copyto(dst[c::stride], src[c::stride])


def check_strided_copy(strides=STRIDES, seed: int = 0) -> None:
    """The NumPy strided copy copies every element exactly once, at awkward sizes."""
    for size in (1, 7, 33, 4099):
        src = check.random_array(size, np.float32, seed=seed + size)
        for s in strides:
            dst = np.full(size, np.nan, np.float32)  # an element never written stays NaN
            strided_copy_numpy(src, dst, s)
            check.assert_close(dst, src, rtol=0, atol=0,  # a copy moves bits: exact
                               name=f"strided copy, stride {s}, n={size}")


def cpu_stride_sweep(strides=STRIDES, footprint_bytes: int = 64 * MiB, seed: int = 0,
                     min_time_s: float = 0.05, progress=None) -> dict:
    """The strided copy of a float32 buffer several times the last-level cache, with NumPy, measured here.

    Every stride copies the whole buffer once (the same useful bytes); only the order of
    the accesses changes. A 64-byte cache line plays the role of the GPU's 32-byte sector.
    """
    for s in strides:
        whole_number(s, "stride", "1 for a coalesced copy, 32 for the worst case")
    n = whole_number(footprint_bytes, "footprint_bytes", "64 * MiB", minimum=4) // 4
    check_strided_copy(strides=strides, seed=seed)
    src = _big_random(n, seed)
    dst = np.empty_like(src)
    gbps, times = [], []
    for i, s in enumerate(strides):
        dst.fill(np.nan)
        strided_copy_numpy(src, dst, s)
        if not np.array_equal(dst, src):
            raise AssertionError(f"strided copy at stride {s} gave wrong elements")
        t = bench.benchmark(strided_copy_numpy, src, dst, s, label=f"stride {s}", bytes=8 * n,
                            size=n, min_time_s=min_time_s, min_samples=3, warmup_s=0.0,
                            backend="cpu")
        gbps.append(t.gbps)
        times.append(t.median_s)
        _progress(progress, (i + 1) / len(strides))
    ceiling = gbps[list(strides).index(1)] if 1 in strides else max(gbps)
    model = [ceiling * e for e in cache_line_model(strides)]
    return {"device": device.describe().short_name, "strides": list(strides), "gbps": gbps,
            "seconds": times, "ceiling_gbps": ceiling, "model_gbps": model,
            "footprint_bytes": footprint_bytes, "line_bytes": CPU_LINE_BYTES, "elem_bytes": 4}


def warp_sectors(stride: int, elem_bytes: int = 4, lanes: int = models.WARP_SIZE) -> dict:
    """The model's view of one warp of the strided copy: addresses, sectors, efficiency."""
    addrs = models.strided_addresses(stride, elem_bytes, lanes=lanes)
    sec = models.sectors(addrs, elem_bytes)
    return {"stride": stride, "elem_bytes": elem_bytes, "addresses": addrs,
            "sector_ids": sorted({a // models.SECTOR_BYTES for a in addrs}),
            "sectors": sec.sectors, "lines": sec.lines, "efficiency": sec.efficiency,
            "requested_bytes": sec.requested_bytes, "moved_bytes": sec.transferred_bytes}


def sector_model(gpu=None, strides=STRIDES, elem_bytes: int = 4) -> dict:
    """Model: effective bandwidth of copy.cu's strided copy on ``gpu`` from 32-byte sectors.

    A warp's load and its store both touch the sectors ``models.sectors`` counts; the
    effective rate is the datasheet bandwidth x useful bytes / moved bytes. Caches, DRAM
    pages and latency are ignored, so from stride 8 (4-byte elements) on the model stays flat.
    """
    for s in strides:
        whole_number(s, "stride", "1 for a coalesced copy, 32 for the worst case")
    spec = _spec(gpu)
    effs = [models.sectors(models.strided_addresses(s, elem_bytes), elem_bytes).efficiency
            for s in strides]
    bw = spec.memory_bandwidth_GBps
    return {"gpu": spec.key, "gpu_name": spec.name, "strides": list(strides),
            "elem_bytes": elem_bytes, "load_efficiency": effs, "efficiency": effs,
            "peak_gbps": bw, "model_gbps": [bw * e for e in effs], "source": spec.source}


# ---- the copy kernels (copy.cu), on the GPU or the emulator

def copy_kernels() -> dict:
    """{"coalesced": copy_v1_coalesced, "strided": copy_v2_strided, "others": {name: kernel}}.

    "others" holds any later version of copy.cu with the coalesced signature (in, out, n),
    e.g. one with wider loads; the GPU sweep times them too.
    """
    from .. import kernels

    mod = kernels.load("copy")
    known = ("copy_v1_coalesced", "copy_v2_strided")
    others = {name: getattr(mod, name) for name in mod.names
              if name not in known and len(getattr(mod, name).params) == 3}
    return {"coalesced": mod.copy_v1_coalesced, "strided": mod.copy_v2_strided, "others": others}


def grid_stride_blocks(n: int, block: int = BLOCK) -> int:
    """Blocks for a grid-stride kernel (copy.cu's versions after v2): a few waves of blocks
    cover any n, where one thread per element would leave most of them idle."""
    return min(math.ceil(n / block), 32 * (device.describe().sm_count or 80))


def launch_copy_version(kernel, x, y, n: int, block: int = BLOCK) -> None:
    """One copy of ``n`` floats by a grid-stride version of copy.cu (v3 on), as the chapter
    launches it: ``grid_stride_blocks`` blocks of ``block`` threads."""
    kernel((grid_stride_blocks(n, block),), (block,), (x, y, np.int32(n)))


def _check_block_and_stride(block: int, stride: int | None) -> None:
    whole = all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                for v in (block, 1 if stride is None else stride))
    if not whole or block < 1 or (stride is not None and stride < 1):
        raise LaunchError(f"block size {block!r} and stride {stride!r} must both be whole numbers "
                          "of at least 1 (e.g. block 256, stride 1 for a coalesced copy).")


def launch_copy(ks: dict, x, y, n: int, stride: int | None, block: int = BLOCK) -> None:
    """One copy of ``n`` floats: the coalesced kernel when ``stride`` is None, else the strided one."""
    _check_block_and_stride(block, stride)
    if stride is None:
        ks["coalesced"]((math.ceil(n / block),), (block,), (x, y, np.int32(n)))
        return
    rows = math.ceil(n / stride)
    ks["strided"]((math.ceil(rows * stride / block),), (block,), (x, y, np.int32(n), np.int32(stride)))


def check_copy_kernels(sizes=(1, 31, 33, 255, 257, 1029, 4099), strides=(None, 1, 2, 3, 32),
                       block: int = BLOCK, seed: int = 0) -> dict:
    """Run both copy kernels at awkward sizes and strides and compare with the input; raise if wrong.

    The output starts poisoned (NaN on the emulator), so an element never written fails.
    On the CPU the kernels run on the emulator.
    """
    ks = copy_kernels()
    cases = 0
    for n in sizes:
        for s in strides:
            x_host = check.random_array(n, np.float32, seed=seed + n * 7 + (s or 0))
            x, y = device.asarray(x_host), device.empty(n, np.float32)
            launch_copy(ks, x, y, n, s, block)
            what = "coalesced copy" if s is None else f"strided copy, stride {s}"
            check.assert_close(device.to_host(y), x_host, rtol=0, atol=0,  # a copy: exact
                               name=f"{what}, n={n}, block={block}")
            cases += 1
    return {"cases": cases, "sizes": list(sizes), "strides": [s or 0 for s in strides],
            "block": block, "where": "GPU" if _cupy() is not None else "CPU emulator"}


def _copy_ceiling_gpu(nbytes: int, min_time_s: float) -> bench.Timing:
    """A large device-to-device copy by the library (CuPy or PyTorch): the measured ceiling."""
    cp = _cupy()
    n = nbytes // 4
    if cp is not None:
        a = cp.random.random(n, dtype=cp.float32)
        b = cp.empty_like(a)
        fn = lambda: cp.copyto(b, a)  # noqa: E731
    else:
        import torch

        a = torch.rand(n, device="cuda")
        b = torch.empty_like(a)
        fn = lambda: b.copy_(a)  # noqa: E731
    fn()
    _sync()
    if not bool((b == a).all()):
        raise AssertionError("the library's device copy gave a wrong result")
    return bench.benchmark(fn, label="library device copy", bytes=2 * nbytes, size=n,
                           min_time_s=min_time_s)


def gpu_stride_sweep(strides=STRIDES, nbytes: int | None = None, block: int = BLOCK,
                     min_time_s: float = 0.1, progress=None) -> dict:
    """On a GPU: effective GB/s of copy.cu at each stride against the measured copy ceiling.

    Every stride copies the same ``nbytes`` buffer (many times the L2 size) once; the
    coalesced kernel copy_v1_coalesced is timed too.
    """
    cp = _cupy()
    if cp is None:
        raise DeviceError("The kernel stride sweep needs CuPy on a CUDA GPU; on the CPU use "
                          "cpu_stride_sweep and sector_model, or install CuPy (pip install -e .[gpu]).")
    nbytes = nbytes or device.bandwidth_buffer_bytes(cap=2 << 30)
    n = nbytes // 4
    ks = copy_kernels()
    check_copy_kernels(block=block)
    ceiling = _copy_ceiling_gpu(nbytes, min_time_s)
    x = cp.random.random(n, dtype=cp.float32)
    y = cp.empty(n, dtype=cp.float32)
    probe = slice(None, None, 997)

    def checked(stride):
        y.fill(-1)
        launch_copy(ks, x, y, n, stride, block)
        _sync()
        if not bool((y[probe] == x[probe]).all()) or not bool((y[-5:] == x[-5:]).all()):
            raise AssertionError(f"the copy kernel at stride {stride} gave wrong elements")

    checked(None)
    coalesced = bench.benchmark(launch_copy, ks, x, y, n, None, block, label="copy_v1_coalesced",
                                bytes=8 * n, size=n, min_time_s=min_time_s)
    versions = {"copy_v1_coalesced": coalesced.gbps}
    for name, k in ks["others"].items():
        y.fill(-1)
        launch_copy_version(k, x, y, n, block)
        _sync()
        if not bool(cp.array_equal(x, y)):
            raise AssertionError(f"{name} gave a wrong copy on the GPU")
        versions[name] = bench.benchmark(launch_copy_version, k, x, y, n, block, label=name,
                                         bytes=8 * n, size=n, min_time_s=min_time_s).gbps
    best = max(versions, key=versions.get)
    gbps, times = [], []
    for i, s in enumerate(strides):
        checked(s)
        t = bench.benchmark(launch_copy, ks, x, y, n, s, block, label=f"stride {s}",
                            bytes=8 * n, size=n, min_time_s=min_time_s)
        gbps.append(t.gbps)
        times.append(t.median_s)
        _progress(progress, (i + 1) / len(strides))
    info = device.describe()
    try:
        spec = specs.for_active_device()
        peak, peak_src = spec.memory_bandwidth_GBps, spec.source
    except Exception:
        peak, peak_src = (info.peak_bandwidth_Bps or 0) / 1e9 or None, "memory clock x bus width"
    # Sector efficiencies depend on the access pattern only, not on the GPU.
    eff = sector_model(FALLBACK_GPU, strides)["efficiency"]
    return {"device": info.short_name, "strides": list(strides), "gbps": gbps, "seconds": times,
            "coalesced_gbps": versions[best], "coalesced_kernel": best,
            "coalesced_versions": versions, "ceiling_gbps": ceiling.gbps, "peak_gbps": peak,
            "peak_source": peak_src, "model_gbps": [peak * e for e in eff] if peak else None,
            "nbytes": nbytes, "block": block, "l2_bytes": info.l2_bytes}


def copy_at_block_size(stride: int = 1, block_size: int = BLOCK, nbytes: int | None = None,
                       min_time_s: float = 0.05) -> dict:
    """Check the strided copy at one block size and stride; on a GPU also time it.

    A block size the device cannot launch raises a LaunchError that says what to change.
    """
    _check_block_and_stride(block_size, stride)
    ks = copy_kernels()
    small = 3 * int(block_size) + 5
    x_host = check.random_array(small, np.float32, seed=int(stride))
    x, y = device.asarray(x_host), device.empty(small, np.float32)
    launch_copy(ks, x, y, small, int(stride), int(block_size))
    check.assert_close(device.to_host(y), x_host, rtol=0, atol=0,  # a copy: exact
                       name=f"strided copy, stride {stride}, block {block_size}")
    out = {"stride": int(stride), "block_size": int(block_size), "checked_n": small,
           "where": "GPU" if _cupy() is not None else "CPU emulator", "gbps": None}
    if _cupy() is not None:
        import cupy as cp

        n = (nbytes or device.bandwidth_buffer_bytes(cap=1 << 30)) // 4
        xb, yb = cp.random.random(n, dtype=cp.float32), cp.empty(n, dtype=cp.float32)
        t = bench.benchmark(launch_copy, ks, xb, yb, n, int(stride), int(block_size), bytes=8 * n,
                            min_time_s=min_time_s, label=f"stride {stride}, block {block_size}")
        out["gbps"] = t.gbps
    return out


def copy_explorer(stride: int = 1, block_size: int = BLOCK, gpu: str | None = None) -> dict:
    """Widget back end: one warp's sectors, the model sweep for ``gpu`` and a checked launch."""
    gpu = gpu or default_gpu()
    return {"warp": warp_sectors(stride), "model": sector_model(gpu),
            "model_at_stride": sector_model(gpu, strides=[stride])["model_gbps"][0],
            "launch": copy_at_block_size(stride, block_size), "gpu": gpu}


# ---- precision: element size and bandwidth

def _precision_array(base: np.ndarray, precision: str) -> np.ndarray:
    """``base`` (float32) as ``precision``, with as many bytes: twice the elements for 2-byte types.

    A copy moves bits, not numbers, so bf16 (which NumPy lacks) is held as its 16-bit
    patterns (the top half of each float32) in a uint16 array.
    """
    if precision not in ELEM_BYTES:
        raise PrecisionError(f"precision {precision!r} is not offered here; "
                             f"choose one of {', '.join(ELEM_BYTES)}.")
    if precision == "fp32":
        return base
    doubled = np.concatenate([base, base[::-1]])
    if precision == "fp16":
        return doubled.astype(np.float16)
    return (doubled.view(np.uint32) >> 16).astype(np.uint16)


def precision_bandwidth(precision: str = "fp16", stride: int = 8, footprint_bytes: int = 64 * MiB,
                        gpu: str | None = None, seed: int = 0, min_time_s: float = 0.03) -> dict:
    """Contiguous and strided copies of the same bytes in fp32 and in ``precision``, on this device.

    A byte is a byte: contiguous copies run at about the same GB/s in every precision, so
    a 2-byte type moves twice the elements per second. In the sector model, small elements
    at a large stride waste more of every 32-byte sector.
    """
    stride = int(stride)
    if stride < 1:
        raise LaunchError(f"stride {stride} is not a stride: use a whole number of elements >= 1.")
    _precision_array(np.ones(1, np.float32), precision)  # rejects an unknown precision early
    cp = _cupy()
    xp = cp if cp is not None else np
    if cp is not None:
        footprint_bytes = device.bandwidth_buffer_bytes(cap=1 << 30)
    base = _big_random(footprint_bytes // 4, seed)
    rows, model = [], {}
    for prec in dict.fromkeys(("fp32", precision)):
        e = ELEM_BYTES[prec]
        src = xp.asarray(_precision_array(base, prec))
        for s in sorted({1, stride}):
            view = src[::s]
            dst = xp.empty(view.shape[0], dtype=src.dtype)
            xp.copyto(dst, view)
            if not bool((dst == view).all()):
                raise AssertionError(f"{prec} copy at stride {s} gave wrong elements")
            t = bench.benchmark(xp.copyto, dst, view, label=f"{prec} stride {s}",
                                bytes=2 * e * view.shape[0], size=view.shape[0],
                                min_time_s=min_time_s, warmup_s=0.01,
                                backend="cuda" if cp is not None else "cpu")
            rows.append({"precision": prec, "elem_bytes": e, "stride": s, "gbps": t.gbps,
                         "gelems": view.shape[0] / t.median_s / 1e9})
            del dst
        del src
        model[prec] = sector_model(gpu, strides=sorted({1, stride}), elem_bytes=e)
    return {"precision": precision, "stride": stride,
            "device": device.describe().short_name if cp is not None else
            device.describe("cpu").short_name, "rows": rows, "model": model}


# =========================================================================== 3. transfer vs compute

def minimum_work(n: int, m: int, elem_bytes: int = 4) -> dict[str, tuple[float, float]]:
    """(FLOPs, bytes) each of the chapter's operations must do at least: a vector add of ``n``
    elements (reads two, writes one), a sum of ``n`` (reads them once) and an ``m`` x ``m``
    matmul (reads A and B once, writes C once; caches and tiling decide how close a kernel
    gets to that)."""
    return {"vector add": (float(n), 3.0 * elem_bytes * n),
            "sum": (float(n), 1.0 * elem_bytes * n),
            "matmul": (2.0 * m**3, 3.0 * elem_bytes * m * m)}


def _work(op: str, nbytes: int, matmul_n: int, elem_bytes: int = 4) -> dict:
    """FLOPs, device bytes, bytes sent to the device and brought back, for one operation.

    Vector add: two inputs of ``nbytes`` each and one output. Matmul: two square
    ``matmul_n`` x ``matmul_n`` matrices and their product.
    """
    if op not in ("vector add", "matmul"):
        raise ValueError(f"op {op!r} is not modelled here; use 'vector add' or 'matmul'.")
    n, m = nbytes // elem_bytes, int(matmul_n)
    flops, dev_bytes = minimum_work(n, m, elem_bytes)[op]
    b, size = (nbytes, n) if op == "vector add" else (m * m * elem_bytes, m)
    return {"flops": flops, "dev_bytes": dev_bytes, "input_bytes": b, "up": 2 * b, "down": b,
            "size": size}


def _host_inputs(op: str, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    if op == "vector add":
        return _big_random(size, seed), _big_random(size, seed + 1)
    return (check.random_array((size, size), np.float32, seed=seed, kind="uniform"),
            check.random_array((size, size), np.float32, seed=seed + 1, kind="uniform"))


def _check_result(op: str, a: np.ndarray, b: np.ndarray, out: np.ndarray, where: str) -> None:
    if op == "vector add":  # one rounding of an exact float64 sum: at most 2^-24 of |a + b|
        check.assert_close(out, a.astype(np.float64) + b, rtol=models.U32, atol=0,
                           name=f"a + b on the {where}")
    else:  # the first rows against float64: enough to catch a wrong product, cheap at any size
        rows = min(64, a.shape[0])
        # Dots of K terms in any order: gamma_K * max(|a| @ |b|) (models.matmul_error_bound).
        check.assert_close(out[:rows], a[:rows].astype(np.float64) @ b, rtol=0,
                           atol=models.matmul_error_bound(a[:rows], b), name=f"a @ b on the {where}")


def _cpu_compute(op: str, w: dict, seed: int, min_time_s: float) -> bench.Timing:
    a, b = _host_inputs(op, w["size"], seed)
    out = np.empty_like(a)
    fn = np.add if op == "vector add" else np.matmul
    fn(a, b, out=out)
    _check_result(op, a, b, out, "CPU")
    return bench.benchmark(fn, a, b, out=out, label=f"{op} on the CPU", flops=w["flops"],
                           min_time_s=min_time_s, warmup_s=0.01, backend="cpu")


def _gpu_transfer_and_compute(op: str, w: dict, seed: int, min_time_s: float) -> dict:
    """Measured on the GPU with PyTorch: pinned and pageable H2D, compute, pinned D2H."""
    import torch

    a, b = _host_inputs(op, w["size"], seed)
    host = [torch.from_numpy(a), torch.from_numpy(b)]
    pinned = [h.pin_memory() for h in host]
    dev = [torch.empty_like(h, device="cuda") for h in host]
    out = torch.empty_like(dev[0])
    out_host = torch.empty_like(host[0]).pin_memory()

    def h2d(src):
        for d, h in zip(dev, src):
            d.copy_(h, non_blocking=True)

    if op == "vector add":
        fn = lambda: torch.add(dev[0], dev[1], out=out)  # noqa: E731
    else:
        fn = lambda: torch.mm(dev[0], dev[1], out=out)  # noqa: E731
    h2d(pinned)
    fn()
    out_host.copy_(out)
    _check_result(op, a, b, out_host.numpy(), "GPU")
    t_pin = bench.benchmark(h2d, pinned, label="H2D pinned", bytes=w["up"], min_time_s=min_time_s)
    t_page = bench.benchmark(h2d, host, label="H2D pageable", bytes=w["up"], min_time_s=min_time_s)
    t_comp = bench.benchmark(fn, label=f"{op} on the GPU", flops=w["flops"], bytes=w["dev_bytes"],
                             min_time_s=min_time_s)
    t_d2h = bench.benchmark(lambda: out_host.copy_(out, non_blocking=True), label="D2H pinned",
                            bytes=w["down"], min_time_s=min_time_s)
    return {"h2d_pinned_s": t_pin.median_s, "h2d_pageable_s": t_page.median_s,
            "compute_s": t_comp.median_s, "d2h_s": t_d2h.median_s,
            "h2d_pinned_gbps": t_pin.gbps, "h2d_pageable_gbps": t_page.gbps}


def transfer_vs_compute(gpu: str | None = None, nbytes: int = 16 * MiB, matmul_n: int = 1024,
                        ops=("vector add", "matmul"), seed: int = 0, min_time_s: float = 0.05) -> dict:
    """Send the inputs over the host link, compute, bring the result back, against computing on the CPU.

    The CPU time is measured here. On a GPU (with PyTorch's CUDA) the transfers and the
    device compute are measured too; the ``models.transfer_time`` and ``models.roofline``
    figures for ``gpu`` come alongside, labelled as a model.
    """
    whole_number(nbytes, "nbytes", "16 * MiB", minimum=4)  # at least one float32 element
    whole_number(matmul_n, "matmul_n", 1024)
    spec = _spec(gpu)
    rows = []
    for op in ops:
        w = _work(op, nbytes, matmul_n)
        cpu = _cpu_compute(op, w, seed, min_time_s)
        row = {"op": op, "nbytes": w["input_bytes"], "size": w["size"], "flops": w["flops"],
               "cpu_s": cpu.median_s, "gpu": spec.key, "model": {
                   "h2d_pinned_s": 2 * models.transfer_time(w["input_bytes"], spec, pinned=True).time,
                   "h2d_pageable_s": 2 * models.transfer_time(w["input_bytes"], spec, pinned=False).time,
                   "compute_s": models.roofline(w["flops"], w["dev_bytes"], spec,
                                                launch=models.LAUNCH_OVERHEAD_S).time,
                   "d2h_s": models.transfer_time(w["down"], spec, pinned=True).time}}
        if _torch_cuda():
            row["measured"] = _gpu_transfer_and_compute(op, w, seed, min_time_s)
        rows.append(row)
    return {"device": device.describe().short_name, "gpu": spec.key, "gpu_name": spec.name,
            "link": f"PCIe gen {spec.pcie_gen} x{spec.pcie_lanes}", "rows": rows}


def transfer_sweep(gpu: str | None = None, sizes=None) -> dict:
    """Model over sizes: moving a vector add's inputs over PCIe against adding them in device
    memory (one launch: its fixed cost + the roofline time)."""
    spec = _spec(gpu)
    sizes = list(sizes or [2**k for k in range(12, 31, 2)])
    h2d, comp = [], []
    for s in sizes:
        w = _work("vector add", s, 0)
        h2d.append(2 * models.transfer_time(s, spec, pinned=True).time)
        comp.append(models.roofline(w["flops"], w["dev_bytes"], spec,
                                    launch=models.LAUNCH_OVERHEAD_S).time)
    return {"gpu": spec.key, "gpu_name": spec.name, "sizes": sizes, "h2d_s": h2d, "compute_s": comp,
            "ratio": [a / b for a, b in zip(h2d, comp)]}


# =========================================================================== 4. roofline

def cpu_ceilings(copy_bytes: int = 64 * MiB, matmul_sizes=(512, 1024), seed: int = 0,
                 min_time_s: float = 0.1) -> dict:
    """The CPU's two roofline ceilings, measured now with NumPy.

    Bandwidth: the faster of a large copy (read + write) and a large dot product on every
    core (read only), both far larger than the last-level cache. Compute: the best float32 matmul rate
    over ``matmul_sizes``.
    """
    n = copy_bytes // 4
    a, b = _big_random(n, seed), _big_random(n, seed + 1)
    out = np.empty_like(a)
    np.copyto(out, a)
    check.assert_close(out, a, rtol=0, atol=0, name="copy")  # a copy moves bits: exact
    copy = bench.benchmark(np.copyto, out, a, label="copy", bytes=2 * copy_bytes,
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
                           atol=models.matmul_error_bound(x, y), name=f"matmul {m}")
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
    a, b = _big_random(n, seed), _big_random(n, seed + 1)
    out = np.empty_like(a)
    np.add(a, b, out=out)
    # One rounding of an exact float64 sum: at most 2^-24 of |a + b|.
    check.assert_close(out, a.astype(np.float64) + b, rtol=models.U32, atol=0, name="vector add")
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
    check.assert_close(z, x.astype(np.float64) @ y, rtol=0, atol=models.matmul_error_bound(x, y),
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
    spec = _spec(gpu)
    # "FP16" means fp16 here too (the roofline's peak_flops already reads it so), not a
    # 4-byte type the element-size table does not know
    precision = str(precision).lower()
    e = models.DTYPE_BYTES.get(precision, 4) if precision != "tf32" else 4
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
    cp = _cupy()
    if cp is None:
        raise DeviceError("The measured GPU roofline needs CuPy on a CUDA GPU; on the CPU use "
                          "cpu_roofline and gpu_roofline_model.")
    from .. import kernels

    n = n or device.bandwidth_buffer_bytes(cap=1 << 30) // 4
    ceiling = _copy_ceiling_gpu(n * 4, min_time_s)
    x = cp.random.random(n, dtype=cp.float32) * 2 - 0.5
    y = cp.random.random(n, dtype=cp.float32) + 0.5
    z = cp.empty(n, dtype=cp.float32)
    vadd = kernels.load("vector_add")
    vname = "vector_add_v1_naive"
    vk = getattr(vadd, vname)
    grid = (math.ceil(n / BLOCK),)
    vk(grid, (BLOCK,), (x, y, z, np.int32(n)))
    if not bool(cp.array_equal(z, x + y)):
        raise AssertionError("vector_add gave a wrong result on the GPU")
    t_add = bench.benchmark(vk, grid, (BLOCK,), (x, y, z, np.int32(n)), label="vector add",
                            min_time_s=min_time_s)
    # The fastest rung of chapter 4's reduction ladder, launched as chapter 4 launches it.
    from . import ch4

    rname = ch4.reduce_versions()[-1]
    total = cp.zeros(1, dtype=cp.float32)
    sms = device.describe().sm_count

    def reduce_once():
        ch4.run_reduce(rname, x, n, total, sms)

    reduce_once()
    want = float(cp.sum(x, dtype=cp.float64))
    # Each term passes through at most three float32 chains, in any order: its thread's
    # elements, the block's partial sums, the blocks' atomics: gamma_depth * sum|x|.
    rgrid, rblock, _ = ch4._reduce_launch(rname, n, sms)
    depth = math.ceil(n / (rgrid * rblock)) + rblock + rgrid
    check.assert_close(np.float64(float(total[0])), np.float64(want), rtol=0,
                       atol=models.sum_error_bound(depth, float(cp.abs(x).sum(dtype=cp.float64))),
                       name="reduction on the GPU")
    t_sum = bench.benchmark(reduce_once, label="reduction", min_time_s=min_time_s)
    del y, z
    m = matmul_n
    a = cp.random.random((m, m), dtype=cp.float32) - 0.5
    b = cp.random.random((m, m), dtype=cp.float32) - 0.5
    c = cp.matmul(a, b)
    probe = cp.asnumpy(a[:64].astype(cp.float64) @ b.astype(cp.float64))
    # Dots of m terms in any order (cuBLAS, FP32 without TF32): gamma_m * max(|a| @ |b|).
    check.assert_close(cp.asnumpy(c[:64]), probe, rtol=0, atol=models.matmul_error_bound(a[:64], b),
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
    spec = _spec(gpu)
    if precision not in spec.precisions:
        raise PrecisionError(f"the {spec.name} has no {precision} peak in the table; "
                             f"choose one of {', '.join(spec.precisions)}.")
    return {"roofline": gpu_roofline_model(spec.key, precision), "transfer": transfer_sweep(spec.key)}


# =========================================================================== headless

def stride_sweep(progress=None) -> dict:
    """The stride sweep of the active device: copy.cu on a GPU, NumPy on the CPU."""
    if _cupy() is not None:
        return gpu_stride_sweep(progress=progress)
    return cpu_stride_sweep(progress=progress)


def roofline(progress=None) -> dict:
    """The measured roofline of the active device: kernels and cuBLAS on a GPU, NumPy on the CPU."""
    if _cupy() is not None:
        return gpu_roofline()
    ceilings = cpu_ceilings()
    _progress(progress, 0.5)
    return cpu_roofline(ceilings)


def reference_summary() -> str:
    """One sentence per GPU whose reference file has chapter-1 data, or a note that none does."""
    from .. import reference

    refs = [r for r, _ in reference.find("ch1")]  # each with chapter 1's own date and command
    if not refs:
        return ("No reference measurements of chapter 1 from a real GPU are in this copy of the "
                "course yet (`make gpu-check` on a GPU writes them), so GPU numbers below are models.")
    lines = []
    for r in refs:
        figures = []
        for key, v in r.get("ch1", "checks", default={}).items():
            if not (isinstance(v, dict) and v.get("value") is not None):
                continue
            # "passed" since check.threshold; files measured before it say "pass".
            met = "met" if v.get("passed", v.get("pass")) else "not met"
            target = f"; the course's target is {check.limit_text(v)}: {met}" \
                if v.get("threshold") is not None else f": {met}"
            figures.append(f"  {key} = {v['value']:.3g} ({v.get('what', key)}{target})")
        lines.append(r.provenance + r.kernel_caveat("copy.cu", "vector_add.cu", "reduce.cu")
                     + (":" if figures else ""))
        lines += figures
    return "\n".join(lines)


# Problem sizes of the headless run on the CPU (quick, full); tests make them smaller.
RUN_SIZES = {"timing_n": (1 << 22, 1 << 24), "stride_bytes": (64 * MiB, 256 * MiB),
             "transfer_bytes": (4 * MiB, 64 * MiB), "transfer_matmul_n": (1024, 2048),
             "copy_bytes": (64 * MiB, 256 * MiB),
             "roofline_n": (1 << 24, 1 << 25), "matmul_sizes": ((512, 1024), (1024, 2048))}


def run_all(quick: bool = True, progress=None) -> dict:
    """Every experiment of the chapter, as JSON-ready results (for the headless runner)."""
    q = 0 if quick else 1
    size = {k: v[q] for k, v in RUN_SIZES.items()}
    mt = 0.05 if quick else 0.2
    out = {"device": device.describe().short_name, "backend": device.backend(),
           "target_gpu": default_gpu()}
    out["timing"] = timing_wrong_vs_right(n=size["timing_n"], min_time_s=mt)
    _progress(progress, 0.2)
    if _cupy() is not None:
        out["stride_sweep"] = gpu_stride_sweep(min_time_s=mt)
    else:
        out["stride_sweep"] = cpu_stride_sweep(footprint_bytes=size["stride_bytes"], min_time_s=mt)
    out["sector_model"] = sector_model()
    try:
        out["kernel_check"] = check_copy_kernels()
    except CourseError as exc:  # no C++ compiler: the chapter's other results stay useful
        out["kernel_check"] = {"error": str(exc)}
    _progress(progress, 0.5)
    out["transfer"] = transfer_vs_compute(nbytes=size["transfer_bytes"],
                                          matmul_n=size["transfer_matmul_n"], min_time_s=mt)
    out["transfer_sweep"] = transfer_sweep()
    _progress(progress, 0.7)
    if _cupy() is not None:
        out["roofline"] = gpu_roofline(min_time_s=mt)
    else:
        ceil = cpu_ceilings(copy_bytes=size["copy_bytes"], matmul_sizes=size["matmul_sizes"],
                            min_time_s=mt)
        out["roofline"] = cpu_roofline(ceil, n=size["roofline_n"], min_time_s=mt)
    out["roofline_model"] = gpu_roofline_model()
    _progress(progress, 1.0)
    return out


def gpu_check() -> dict:
    """On a CUDA GPU (about 30 s): the chapter's GPU figures and the issue's two thresholds.

    The coalesced copy must reach 80 % of the measured device copy bandwidth (a large
    library copy), and the stride-32 copy must be at least 5x slower than stride 1.
    """
    device.require_cuda("chapter 1's gpu_check", needs="cupy")  # copy.cu runs through CuPy
    out = {"device": device.describe().short_name}
    # First, while the copy kernel has not been built in this process: its cold first call.
    out["timing"] = timing_wrong_vs_right(n=1 << 22, min_time_s=0.05)
    sweep = gpu_stride_sweep(min_time_s=0.2)
    i1, i32 = sweep["strides"].index(1), sweep["strides"].index(32)
    pct = 100 * sweep["coalesced_gbps"] / sweep["ceiling_gbps"]
    slow = sweep["gbps"][i1] / sweep["gbps"][i32]
    out["stride_sweep"] = sweep
    out["checks"] = {
        "coalesced_pct_of_copy": check.at_least(
            pct, 80.0, f"{sweep['coalesced_kernel']} (the fastest coalesced version of copy.cu) "
                       "as % of the library's device copy"),
        "stride32_slowdown": check.at_least(
            slow, 5.0, "copy_v2_strided: time at stride 32 / time at stride 1")}
    if _torch_cuda():
        out["transfer"] = transfer_vs_compute(gpu=default_gpu(), nbytes=256 * MiB, matmul_n=2048,
                                              min_time_s=0.1)
    out["roofline"] = gpu_roofline(min_time_s=0.1)
    out["passed"] = all(c["passed"] for c in out["checks"].values())
    return out
