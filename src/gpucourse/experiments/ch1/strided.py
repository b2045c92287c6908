"""Chapter 1, section 2: strided against coalesced access. The strided copy's access order
with NumPy on the CPU and the cache-line model; one warp's sectors and the sector model of a
GPU; copy.cu's kernels checked on the emulator or timed on a GPU against the library copy; and
the element size of each precision against bandwidth."""
from __future__ import annotations

import numpy as np

from ... import bench, check, device, models, specs
from ...errors import DeviceError, LaunchError, PrecisionError, whole_number
from ...kernels import copy as copy_home
from ...precision import BYTES, STORAGE
from .common import (BLOCK, CPU_LINE_BYTES, FALLBACK_GPU, STRIDES, MiB, big_random,
                     check_block_and_stride, copy_ceiling_gpu, copy_kernels, cupy_or_none,
                     default_gpu, launch_copy, model_spec, progress_to)


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
    src = big_random(n, seed)
    dst = np.empty_like(src)
    gbps, times = [], []
    for i, s in enumerate(strides):
        dst.fill(np.nan)
        strided_copy_numpy(src, dst, s)
        if not np.array_equal(dst, src):
            raise AssertionError(f"strided copy at stride {s} gave wrong elements")
        t = bench.benchmark(strided_copy_numpy, src, dst, s, label=f"stride {s}",
                            bytes=copy_home.bytes_moved(n), size=n, min_time_s=min_time_s, min_samples=3, warmup_s=0.0,
                            backend="cpu")
        gbps.append(t.gbps)
        times.append(t.median_s)
        progress_to(progress, (i + 1) / len(strides))
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
    spec = model_spec(gpu)
    effs = [models.sectors(models.strided_addresses(s, elem_bytes), elem_bytes).efficiency
            for s in strides]
    bw = spec.memory_bandwidth_GBps
    return {"gpu": spec.key, "gpu_name": spec.name, "strides": list(strides),
            "elem_bytes": elem_bytes, "load_efficiency": effs, "efficiency": effs,
            "peak_gbps": bw, "model_gbps": [bw * e for e in effs], "source": spec.source}


# ---- the copy kernels (copy.cu), on the GPU or the emulator

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
            check.assert_close(device.to_host(y), copy_home.reference(x_host), *copy_home.TOLERANCE,
                               name=f"{what}, n={n}, block={block}")
            cases += 1
    return {"cases": cases, "sizes": list(sizes), "strides": [s or 0 for s in strides],
            "block": block, "where": "GPU" if cupy_or_none() is not None else "CPU emulator"}


def gpu_stride_sweep(strides=STRIDES, nbytes: int | None = None, block: int = BLOCK,
                     min_time_s: float = 0.1, progress=None) -> dict:
    """On a GPU: effective GB/s of copy.cu at each stride against the measured copy ceiling.

    Every stride copies the same ``nbytes`` buffer (many times the L2 size) once; the
    coalesced kernel copy_v1_coalesced is timed too.
    """
    cp = cupy_or_none()
    if cp is None:
        raise DeviceError("The kernel stride sweep needs CuPy on a CUDA GPU; on the CPU use "
                          "cpu_stride_sweep and sector_model, or install CuPy (pip install -e .[gpu]).")
    nbytes = nbytes or device.bandwidth_buffer_bytes(cap=2 << 30)
    n = nbytes // 4
    ks = copy_kernels()
    check_copy_kernels(block=block)
    ceiling = copy_ceiling_gpu(nbytes, min_time_s)
    x = cp.random.random(n, dtype=cp.float32)
    y = cp.empty(n, dtype=cp.float32)
    probe = slice(None, None, 997)

    def checked(stride):
        y.fill(-1)
        launch_copy(ks, x, y, n, stride, block)
        device.synchronize()
        if not bool((y[probe] == x[probe]).all()) or not bool((y[-5:] == x[-5:]).all()):
            raise AssertionError(f"the copy kernel at stride {stride} gave wrong elements")

    checked(None)
    coalesced = bench.benchmark(launch_copy, ks, x, y, n, None, block, label="copy_v1_coalesced",
                                bytes=copy_home.bytes_moved(n), size=n, min_time_s=min_time_s)
    versions = {"copy_v1_coalesced": coalesced.gbps}
    for name, k in ks["others"].items():
        y.fill(-1)
        copy_home.run(k, x, y, n, block=block)
        device.synchronize()
        if not bool(cp.array_equal(x, y)):
            raise AssertionError(f"{name} gave a wrong copy on the GPU")
        versions[name] = bench.benchmark(copy_home.run, k, x, y, n, block=block, label=name,
                                         bytes=copy_home.bytes_moved(n), size=n,
                                         min_time_s=min_time_s).gbps
    best = max(versions, key=versions.get)
    gbps, times = [], []
    for i, s in enumerate(strides):
        checked(s)
        t = bench.benchmark(launch_copy, ks, x, y, n, s, block, label=f"stride {s}",
                            bytes=copy_home.bytes_moved(n), size=n, min_time_s=min_time_s)
        gbps.append(t.gbps)
        times.append(t.median_s)
        progress_to(progress, (i + 1) / len(strides))
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
    check_block_and_stride(block_size, stride)
    ks = copy_kernels()
    small = 3 * int(block_size) + 5
    x_host = check.random_array(small, np.float32, seed=int(stride))
    x, y = device.asarray(x_host), device.empty(small, np.float32)
    launch_copy(ks, x, y, small, int(stride), int(block_size))
    check.assert_close(device.to_host(y), copy_home.reference(x_host), *copy_home.TOLERANCE,
                       name=f"strided copy, stride {stride}, block {block_size}")
    cp = cupy_or_none()
    out = {"stride": int(stride), "block_size": int(block_size), "checked_n": small,
           "where": "GPU" if cp is not None else "CPU emulator", "gbps": None}
    if cp is not None:
        n = (nbytes or device.bandwidth_buffer_bytes(cap=1 << 30)) // 4
        xb, yb = cp.random.random(n, dtype=cp.float32), cp.empty(n, dtype=cp.float32)
        t = bench.benchmark(launch_copy, ks, xb, yb, n, int(stride), int(block_size),
                            bytes=copy_home.bytes_moved(n), min_time_s=min_time_s,
                            label=f"stride {stride}, block {block_size}")
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
    if precision not in STORAGE:
        raise PrecisionError(f"precision {precision!r} is not offered here; "
                             f"choose one of {', '.join(STORAGE)}.")
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
    cp = cupy_or_none()
    xp = cp if cp is not None else np
    if cp is not None:
        footprint_bytes = device.bandwidth_buffer_bytes(cap=1 << 30)
    base = big_random(footprint_bytes // 4, seed)
    rows, model = [], {}
    for prec in dict.fromkeys(("fp32", precision)):
        e = BYTES[prec]
        src = xp.asarray(_precision_array(base, prec))
        for s in sorted({1, stride}):
            view = src[::s]
            dst = xp.empty(view.shape[0], dtype=src.dtype)
            xp.copyto(dst, view)
            if not bool((dst == view).all()):
                raise AssertionError(f"{prec} copy at stride {s} gave wrong elements")
            t = bench.benchmark(xp.copyto, dst, view, label=f"{prec} stride {s}",
                                bytes=copy_home.bytes_moved(view.shape[0], e), size=view.shape[0],
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

