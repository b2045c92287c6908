"""Chapter 4 (threads and scheduling): block size and occupancy, warp divergence, streams,
atomics and privatization, and the reduction ladder.

Every experiment checks its kernels before it times them. On a CUDA GPU the kernels run
through CuPy and are timed with CUDA events at sizes that fill the device; on the CPU they
run on the course's emulator for correctness only, and GPU behaviour comes from the
analytic models in ``gpucourse.models`` (labelled as models) and from reference
measurements taken on real GPUs (``gpucourse.reference``, key ``"ch4"``).
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import bench, check, device, models, reference, specs
from ..display import Table
from ..errors import LaunchError, SpecError, positive_number, whole_number
from ..kernels import BLOCK_SIZES  # moved: kernels
from ..kernels.divergence import COEFS as _BRANCH_COEFS
from ..kernels.divergence import divergence_grid  # the launch the lab's checker uses too
from ..models import ceil_div
from .cpu import dot_on_every_core, exact_sum_data

# The GPU the models describe when no GPU is present (any name from specs.names()).
DEFAULT_GPU = specs.DEFAULT_GPU
# saxpy compiles to well under 32 registers per thread on every nvcc we know of; at <= 32
# registers, registers never limit occupancy, so the exact count does not change the model.
# On a GPU the count is read from the compiled kernel instead.
SAXPY_REGS_ASSUMED = 16
NBINS = 256
WARP = 32


# --------------------------------------------------------------------------- helpers

on_gpu = device.on_gpu  # moved: device


def model_gpu(gpu=None) -> specs.GPUSpec:
    """The GPU the models describe (``specs.model_gpu``): ``gpu`` when given, else the active
    GPU on a CUDA machine, else DEFAULT_GPU."""
    return specs.model_gpu(gpu, fallback=DEFAULT_GPU)


def _references(key: str, *required: str) -> list[dict]:
    """ch4/``key`` of every reference file that has ``required``, with its label and GPU."""
    return [{"label": ref.label, "gpu": ref.gpu, **val} for ref, val in reference.find("ch4", key)
            if isinstance(val, dict) and all(k in val for k in required)]


def _load(name: str):
    from .. import kernels

    return kernels.load(name)


def _xp():
    if on_gpu():
        import cupy as cp

        return cp
    return np


# --------------------------------------------------------------------------- 1. block size

def lane_efficiency(block_size: int) -> float:
    """Share of a block's warp lanes that hold a thread: a block of 100 threads fills 4 warps (128 lanes)."""
    return block_size / (WARP * ceil_div(block_size, WARP))


def recommend_block_size(gpu=None, regs_per_thread: int = SAXPY_REGS_ASSUMED,
                         smem_per_block: int = 0, candidates=range(128, 1025, 32),
                         prefer: int = 256) -> int:
    """The course's rule of thumb: among multiples of 32 from 128 up that reach the best occupancy the model allows, the one nearest ``prefer`` threads.

    Why not the smallest: every block costs the scheduler a launch, so a kernel with one
    element per thread and tiny blocks is limited by how fast blocks start, not by memory;
    and a block much larger than needed leaves big holes when the last blocks of a wave finish.
    """
    spec = model_gpu(gpu)
    candidates = list(candidates)
    occ = models.occupancy_by_block(spec.cc, candidates, regs_per_thread, smem_per_block)
    if not occ:
        if candidates:  # none can launch: the model's own sentence says which limit
            models.occupancy(spec.cc, candidates[-1], regs_per_thread, smem_per_block)
        raise LaunchError("give at least one candidate block size, e.g. range(128, 1025, 32).")
    best = max(occ.values())
    return min((b for b, o in occ.items() if o >= best - 1e-12), key=lambda b: (abs(b - prefer), b))


def check_saxpy(block_sizes=BLOCK_SIZES, sizes=(1, 33, 1000 + 7), seed: int = 4) -> int:
    """Run both saxpy versions at every block size on awkward sizes and compare with NumPy; returns the number of launches checked."""
    k = _load("saxpy")
    a = np.float32(1.75)
    launches = 0
    for n in sizes:
        x = check.random_array(n, np.float32, seed=seed + n)
        y0 = check.random_array(n, np.float32, seed=seed + 2 * n + 1)
        want = (np.float64(a) * x.astype(np.float64) + y0.astype(np.float64)).astype(np.float32)
        # At most two roundings (a*x, then + y; one with a fused multiply-add) and want's own:
        # gamma_3 * (|a*x| + |y|), whatever the compiler contracts.
        tol = models.sum_error_bound(3, float(np.max(np.abs(np.float64(a) * x) + np.abs(y0))))
        for bs in block_sizes:
            for name, grid in (("saxpy_v1_one_per_thread", ceil_div(n, bs)),
                               ("saxpy_v2_grid_stride", max(1, min(3, ceil_div(n, bs))))):
                dx, dy = device.asarray(x), device.asarray(y0.copy())  # asarray may not copy
                getattr(k, name)((grid,), (bs,), (a, dx, dy, np.int32(n)))
                check.assert_close(device.to_host(dy), want, rtol=0, atol=tol,
                                   name=f"{name} with n={n}, block {bs}")
                launches += 1
    return launches


def cannot_launch(gpu, block_size: int, regs_per_thread: int, smem_per_block: int = 0) -> str:
    """Why a block of ``block_size`` threads cannot launch at ``regs_per_thread`` registers
    per thread ('' when it can); a block size outside the GPU's range is a SpecError."""
    spec = gpu if isinstance(gpu, specs.GPUSpec) else model_gpu(gpu)
    try:
        models.occupancy(spec.cc, block_size, regs_per_thread, smem_per_block)
    except SpecError as exc:
        # Anything but the registers of the whole block is the caller's mistake: the model's
        # own sentence for a block size out of range or too many registers for one thread.
        models.occupancy(spec.cc, block_size, 0, smem_per_block)
        models.occupancy(spec.cc, 1, regs_per_thread)
        first = str(exc).split(";")[0]  # the model's reason, without its advice
        return f"too many registers per block ({first[0].lower()}{first[1:]})"
    return ""


def occupancy_curve(gpu=None, block_sizes=BLOCK_SIZES, regs_per_thread: int = SAXPY_REGS_ASSUMED,
                    smem_per_block: int = 0) -> dict:
    """The occupancy model at each block size, with the limit that binds and the lanes used.

    Block sizes that cannot launch at ``regs_per_thread`` are left out of the curve and listed
    in ``skipped`` with the reason."""
    spec = model_gpu(gpu)
    requested = [int(b) for b in block_sizes]
    why = {b: cannot_launch(spec, b, regs_per_thread, smem_per_block) for b in requested}
    out = {"gpu": spec.name, "cc": spec.cc, "sm_count": spec.sm_count,
           "regs_per_thread": int(regs_per_thread), "smem_per_block": int(smem_per_block),
           "requested_block_sizes": requested,
           "block_sizes": [b for b in requested if not why[b]],
           "skipped": [{"block_size": b, "reason": why[b]} for b in requested if why[b]],
           "occupancy": [], "limited_by": [], "blocks_per_sm": [], "active_warps": [],
           "lane_efficiency": []}
    for b in out["block_sizes"]:
        occ = models.occupancy(spec.cc, b, regs_per_thread, smem_per_block)
        out["occupancy"].append(occ.occupancy)
        out["limited_by"].append(occ.limited_by)
        out["blocks_per_sm"].append(occ.active_blocks)
        out["active_warps"].append(occ.active_warps)
        out["lane_efficiency"].append(lane_efficiency(b))
    out["max_warps"] = models.occupancy(spec.cc, 32).max_warps
    return out


def default_sweep_n() -> int:
    """Elements of the saxpy sweep: on a GPU, x and y each the course's bandwidth buffer
    (16 x the L2, at most 1 GiB), 12 bytes moved per element."""
    if not on_gpu():
        return 1 << 26
    return device.bandwidth_buffer_bytes(cap=1 << 30) // 4


def _saxpy_regs_on_gpu() -> int | None:
    """Registers per thread of the compiled saxpy, from the GPU's compiler (None if unknown)."""
    return _load("saxpy").saxpy_v1_one_per_thread.num_regs


def measure_saxpy(block_size: int, n: int, arrays=None, min_time_s: float = 0.1) -> bench.Timing:
    """Time saxpy_v1 at one block size on the GPU (12 bytes per element)."""
    k = _load("saxpy").saxpy_v1_one_per_thread
    if arrays is None:
        x, y = _saxpy_arrays(n)
    else:
        x, y = arrays
    grid = ceil_div(n, block_size)
    a = np.float32(0.5)  # |a| < 1 keeps y bounded however often the kernel runs
    return bench.benchmark(lambda: k((grid,), (block_size,), (a, x, y, np.int32(n))),
                           label=f"block {block_size}", bytes=12 * n, size=n,
                           min_time_s=min_time_s)


def _saxpy_arrays(n: int):
    cp = _xp()
    g = cp.random.default_rng(0) if cp is not np else np.random.default_rng(0)
    x = g.random(n, dtype=np.float32) - 0.5
    y = g.random(n, dtype=np.float32)
    return x, y


def _saxpy_regs_without_gpu() -> tuple[int, str]:
    """saxpy's registers per thread as a reference run's compiler reported them, else assumed."""
    for ref, sweep in reference.find("ch4", "block_sweep"):
        # only a count the GPU's compiler reported (files from before regs_source had only that)
        if (isinstance(sweep, dict) and sweep.get("regs_per_thread")
                and sweep.get("regs_source", "compiled kernel") == "compiled kernel"):
            return int(sweep["regs_per_thread"]), f"compiled on {ref.gpu}, reference run of {ref.date}"
    return SAXPY_REGS_ASSUMED, "assumed; at most 32, so registers never limit occupancy here"


def block_size_sweep(block_sizes=BLOCK_SIZES, gpu=None, n: int | None = None,
                     min_time_s: float = 0.1, progress=None) -> dict:
    """Check saxpy at every block size that can launch, then time it on a GPU; on the CPU, the occupancy and waves models plus reference data.

    Block sizes that cannot launch at saxpy's register count are skipped (``skipped`` says
    why), in the check, the timings and the models alike.
    """
    spec = model_gpu(gpu)
    n = int(n or default_sweep_n())
    regs, regs_source = _saxpy_regs_without_gpu()
    if on_gpu():
        got = _saxpy_regs_on_gpu()
        if got:
            regs, regs_source = got, "compiled kernel"
    curve = occupancy_curve(spec, block_sizes, regs)
    sizes = curve["block_sizes"]
    check_saxpy(sizes)
    measured = None
    if on_gpu() and sizes:
        x, y = _saxpy_arrays(n)
        times = []
        for i, b in enumerate(sizes):
            times.append(measure_saxpy(b, n, (x, y), min_time_s=min_time_s))
            if progress:
                progress((i + 1) / len(sizes))
        measured = {"median_s": [t.median_s for t in times], "p20_s": [t.p20_s for t in times],
                    "p80_s": [t.p80_s for t in times], "gbps": [t.gbps for t in times],
                    "method": times[0].method,
                    "copy_gbps": copy_ceiling(x, min_time_s=min_time_s).gbps}
        del x, y
    curve = _with_waves(curve, spec, n)
    out = {"device": device.describe().short_name, "backend": device.backend(),
           "n": n, "bytes_per_call": 12 * n, "regs_source": regs_source,
           "ceiling_gbps": spec.memory_bandwidth_GBps,
           "ceiling_label": f"{spec.name} datasheet bandwidth",
           "recommended": recommend_block_size(spec, regs), "measured": measured,
           "reference": _references("block_sweep", "block_sizes", "gbps"),
           "checked": "saxpy v1 and v2 match NumPy at n = 1, 33, 1007 for every block size"
                      + (" that can launch" if curve["skipped"] else ""),
           **curve}
    if progress and not measured:
        progress(1.0)
    return out


def _with_waves(curve: dict, spec, n: int) -> dict:
    """``curve`` (an occupancy curve) plus the waves of an n-element grid at each block size."""
    ws = [models.waves(ceil_div(n, b), per_sm, spec.sm_count)
          for b, per_sm in zip(curve["block_sizes"], curve["blocks_per_sm"])]
    return {**curve, "waves": [w.waves for w in ws], "wave_utilization": [w.utilization for w in ws]}


def gpu_choices() -> list[str]:
    """GPUs the models can describe here: the active GPU on a CUDA machine, the spec table elsewhere."""
    if device.is_cuda():
        return [model_gpu().key]
    return specs.names()


def block_size_point(block_size: int, sweep: dict, gpu=None, min_time_s: float = 0.05) -> dict:
    """One slider position: re-check saxpy at this block size (and re-measure it on a GPU), with the occupancy and waves models for it.

    ``gpu`` (CPU only) switches the models to another GPU of the spec table.
    """
    b = int(block_size)
    if b < 1:
        raise LaunchError(f"block size {b} must be at least 1 (a multiple of 32, such as 256, "
                          "wastes no lanes).")
    if gpu is not None and not device.is_cuda() and specs.lookup(gpu).name != sweep["gpu"]:
        spec = specs.lookup(gpu)
        requested = sweep.get("requested_block_sizes", sweep["block_sizes"])
        curve = _with_waves(occupancy_curve(spec, requested, sweep["regs_per_thread"]),
                            spec, sweep["n"])
        sweep = {**sweep, **curve, "ceiling_gbps": spec.memory_bandwidth_GBps,
                 "ceiling_label": f"{spec.name} datasheet bandwidth",
                 "recommended": recommend_block_size(spec, sweep["regs_per_thread"])}
    point = sweep_point(sweep, b)
    if point.get("skipped"):  # nothing to check or time: this block cannot launch
        return {**sweep, "point": point}
    check_saxpy(block_sizes=(b,), sizes=(b + 3, 517))
    if on_gpu():
        t = measure_saxpy(b, sweep["n"], min_time_s=min_time_s)
        point["measured"] = {"median_s": t.median_s, "gbps": t.gbps}
    return {**sweep, "point": point}


def sweep_point(sweep: dict, block_size: int) -> dict:
    """The models at one block size of a sweep: occupancy, lanes, waves and the tail effect
    (only ``skipped``, the reason, for a block size that cannot launch)."""
    b = int(block_size)
    spec = model_gpu(sweep["gpu"])
    why = cannot_launch(spec, b, sweep["regs_per_thread"])
    if why:
        return {"block_size": b, "skipped": why, "lane_efficiency": lane_efficiency(b)}
    occ = models.occupancy(spec.cc, b, sweep["regs_per_thread"])
    return {"block_size": b, "occupancy": occ.occupancy, "limited_by": occ.limited_by,
            "blocks_per_sm": occ.active_blocks, "active_warps": occ.active_warps,
            "lane_efficiency": lane_efficiency(b), "occupancy_text": str(occ),
            "waves_text": str(models.waves(ceil_div(sweep["n"], b), occ.active_blocks,
                                           spec.sm_count)),
            # Slot utilization against grid size shows the tail effect of partial waves.
            "tail": tail_effect(spec, b, occ.active_blocks)}


def sweep_table(sweep: dict) -> Table:
    """The sweep as a table: occupancy (model), lanes used, waves, and GB/s where measured."""
    rows = []
    meas = sweep.get("measured")
    for i, b in enumerate(sweep["block_sizes"]):
        text = (f"occupancy {100 * sweep['occupancy'][i]:.0f} % ({sweep['blocks_per_sm'][i]} "
                f"blocks/SM, limited by {sweep['limited_by'][i]}), lanes used "
                f"{100 * sweep['lane_efficiency'][i]:.0f} %, {sweep['waves'][i]:,} waves")
        if meas:
            text += f", measured {meas['gbps'][i]:,.0f} GB/s"
        rows.append((f"block {b}", text))
    for skip in sweep.get("skipped", []):
        rows.append((f"block {skip['block_size']}", f"skipped: cannot launch, {skip['reason']}"))
    return Table.pairs(rows, caption=f"saxpy on {sweep['n']:,} elements; models for {sweep['gpu']} "
                                     f"at {sweep['regs_per_thread']} registers/thread "
                                     f"({sweep['regs_source']})")


def kernel_source(file: str, name: str):
    """The source of one ``__global__`` function of a course kernel file."""
    from .. import kernels

    return kernels.source_of(file, name)


def tail_effect(gpu, block_size: int, blocks_per_sm: int | None = None, max_waves: float = 4.0) -> dict:
    """The waves model's slot utilization for grids from 1 block to ``max_waves`` full waves."""
    spec = model_gpu(gpu) if not isinstance(gpu, specs.GPUSpec) else gpu
    if blocks_per_sm is None:
        blocks_per_sm = models.occupancy(spec.cc, block_size).active_blocks
    per_wave = blocks_per_sm * spec.sm_count
    grids = np.unique(np.linspace(1, max_waves * per_wave, 400).astype(int))
    util = [models.waves(int(g), blocks_per_sm, spec.sm_count).utilization for g in grids]
    return {"grid_blocks": [int(g) for g in grids], "utilization": util,
            "blocks_per_wave": per_wave}


# --------------------------------------------------------------------------- 2. divergence

DIVERGENCE_VERSIONS = ("divergence_v1_odd_even_lanes", "divergence_v2_per_warp",
                       "divergence_v3_branch_free")
_COEF = dict(enumerate(_BRANCH_COEFS))  # moved: kernels.divergence


def divergence_reference(x: np.ndarray, k: int) -> np.ndarray:
    """k steps of y <- a*y + b with (a, b) chosen by the parity of the element index (float64)."""
    y = x.astype(np.float64).copy()
    a = np.where(np.arange(x.size) % 2 == 0, _COEF[0][0], _COEF[1][0])
    b = np.where(np.arange(x.size) % 2 == 0, _COEF[0][1], _COEF[1][1])
    for _ in range(k):
        y = a * y + b
    return y


def divergence_error_bound(x: np.ndarray, k: int) -> float:
    """Largest float32 error of the divergence kernels against ``divergence_reference``.

    Each step y <- a*y + b rounds at most twice (once with a fused multiply-add): at most
    gamma_2 * (|a|*Y + |b|), Y bounding |y| (max(|x|, |b| / (1 - |a|)) as |a| < 1); an earlier
    step's error shrinks by |a| per step, so k steps add up to 1 + |a| + ... + |a|^(k-1) of it.
    First order in 2^-24.
    """
    top = float(np.max(np.abs(x))) if np.size(x) else 0.0
    worst = 0.0
    for a, b in _COEF.values():
        y = max(top, abs(b) / (1 - abs(a)))
        worst = max(worst, (abs(a) * y + abs(b)) * sum(abs(a) ** j for j in range(k)))
    return models.sum_error_bound(2, worst, terms=2 * max(1, k))


def element_of_thread(version: str, g: np.ndarray) -> np.ndarray:
    """The element index global thread ``g`` handles in each divergence kernel (mirrors the .cu)."""
    if version == "divergence_v2_per_warp":
        return 64 * (g // 64) + 2 * (g % 32) + (g // 32) % 2
    return g


def branch_lanes(version: str, n: int, block: int = 256) -> list[list[int]]:
    """Per warp, the number of active lanes on each branch path (v3 has one path)."""
    grid = divergence_grid(n, block)
    g = np.arange(grid * block)
    i = element_of_thread(version, g)
    active = i < n
    out = []
    for w in range(ceil_div(g.size, WARP)):
        sl = slice(w * WARP, (w + 1) * WARP)
        act, idx = active[sl], i[sl]
        if not act.any():
            continue
        if version == "divergence_v3_branch_free":
            out.append([int(act.sum())])
        else:
            odd = (idx % 2 == 1) & act
            even = (idx % 2 == 0) & act
            out.append([int(even.sum()), int(odd.sum())])
    return out


def divergence_model(n: int = 1 << 16, block: int = 256) -> dict:
    """Warp efficiency (models.warp_efficiency) averaged over all warps, and the modelled passes per warp."""
    out = {}
    for v in DIVERGENCE_VERSIONS:
        effs = [models.warp_efficiency(lanes) for lanes in branch_lanes(v, n, block)]
        out[v] = {"efficiency": float(np.mean([e.efficiency for e in effs])),
                  "passes": float(np.mean([e.passes for e in effs])),
                  "example": str(effs[0])}
    return out


def check_divergence(sizes=(1, 63, 1000 + 3), blocks=(64, 256), k: int = 6, seed: int = 7) -> int:
    """All three divergence kernels against the float64 reference at awkward sizes."""
    mod = _load("divergence")
    launches = 0
    for n in sizes:
        x = check.random_array(n, np.float32, seed=seed + n, kind="uniform")
        want = divergence_reference(x, k)
        for bs in blocks:
            grid = divergence_grid(n, bs)
            for v in DIVERGENCE_VERSIONS:
                y = device.empty(n, np.float32)
                getattr(mod, v)((grid,), (bs,), (device.asarray(x), y, np.int32(n), np.int32(k)))
                check.assert_close(device.to_host(y), want, rtol=0, atol=divergence_error_bound(x, k),
                                   name=f"{v} with n={n}, block {bs}")
                launches += 1
    return launches


def divergence(n: int | None = None, k: int | None = None, block: int = 256,
               min_time_s: float = 0.1) -> dict:
    """Check the three kernels; time them on a GPU; the warp-efficiency model everywhere."""
    check_divergence()
    n = int(n or ((1 << 24) if on_gpu() else 1 << 16))
    k = int(k or 256)
    out = {"device": device.describe().short_name, "backend": device.backend(), "n": n, "k": k,
           "block": block, "versions": list(DIVERGENCE_VERSIONS),
           "model": divergence_model(min(n, 1 << 16), block), "measured": None,
           "reference": _references("divergence", "median_s")}
    if on_gpu():
        mod = _load("divergence")
        cp = _xp()
        x = cp.random.default_rng(1).random(n, dtype=np.float32)
        y = cp.empty(n, dtype=cp.float32)
        grid = divergence_grid(n, block)
        times = [bench.benchmark(lambda f=getattr(mod, v): f((grid,), (block,),
                                                            (x, y, np.int32(n), np.int32(k))),
                                 label=v, flops=2 * n * k, size=n, min_time_s=min_time_s)
                 for v in DIVERGENCE_VERSIONS]
        out["measured"] = {"median_s": [t.median_s for t in times],
                           "p20_s": [t.p20_s for t in times], "p80_s": [t.p80_s for t in times],
                           "gflops": [t.gflops for t in times], "method": times[0].method}
    return out


# --------------------------------------------------------------------------- 3. streams

def _ops_to_rows(ops) -> list[list]:
    return [[op.engine, op.op.split()[0], op.start, op.end, op.stream] for op in ops]


def stream_model(n_streams: int = 4, chunks: int | None = None, nbytes: int = 256 * 2**20,
                 compute_ratio: float = 1.0, gpu=None) -> dict:
    """Serial, chunked-with-a-sync-per-chunk and multi-stream schedules from models.stream_timeline."""
    spec = model_gpu(gpu)
    chunks = int(chunks or max(4 * n_streams, 8))
    h2d = models.transfer_time(nbytes, spec, pinned=True).time
    d2h = h2d
    compute = compute_ratio * h2d
    serial = models.stream_timeline(1, h2d, compute, d2h, chunks=1)
    synced = models.stream_timeline(1, h2d, compute, d2h, chunks=chunks)
    multi = models.stream_timeline(n_streams, h2d, compute, d2h, chunks=chunks)
    return {"kind": "model", "gpu": spec.name, "n_streams": int(n_streams), "chunks": chunks,
            "bytes": int(nbytes), "h2d_s": h2d, "compute_s": compute, "d2h_s": d2h,
            # The model's link is full duplex: copies in and out together take as long as one.
            "copy_engines": 2, "duplex_s": None, "copy_s": max(h2d, d2h),
            "bound_s": max(h2d, compute, d2h), "bound_isolated_s": max(h2d, compute, d2h),
            "serial": {"total_s": serial.total, "ops": _ops_to_rows(serial.ops)},
            "synced": {"total_s": synced.total, "ops": _ops_to_rows(synced.ops)},
            "multi": {"total_s": multi.total, "ops": _ops_to_rows(multi.ops)}}


def _stream_compute_kernel():
    return _load("divergence").divergence_v3_branch_free


def check_streams_kernel(n: int = 1000 + 1, k: int = 5, seed: int = 11) -> None:
    """The compute step of the streams experiment (divergence_v3) against NumPy."""
    x = check.random_array(n, np.float32, seed=seed, kind="uniform")
    y = device.empty(n, np.float32)
    _stream_compute_kernel()((ceil_div(n, 128),), (128,), (device.asarray(x), y, np.int32(n),
                                                             np.int32(k)))
    check.assert_close(device.to_host(y), divergence_reference(x, k), rtol=0,
                       atol=divergence_error_bound(x, k), name="streams compute kernel")


def _measure_streams(n_streams: int, chunks: int, nbytes: int, compute_ratio: float,
                     repeats: int = 5) -> dict:
    """Copy in, compute, copy out on a GPU: serial, chunked with a sync per chunk, and over streams."""
    import cupy as cp
    import cupyx

    n = nbytes // 4
    n -= n % chunks
    host_in = cupyx.empty_pinned(n, dtype=np.float32)
    host_in[:] = np.random.default_rng(3).random(n, dtype=np.float32)
    host_out = cupyx.empty_pinned(n, dtype=np.float32)
    d_in = cp.empty(n, dtype=cp.float32)
    d_out = cp.empty(n, dtype=cp.float32)
    kern = _stream_compute_kernel()
    block = 256
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(n_streams)]
    main = cp.cuda.Stream(non_blocking=True)

    def ev(stream):
        e = cp.cuda.Event()
        e.record(stream)
        return e

    def timed(k, nchunks, nstreams, sync_each):
        """Run once; return (total seconds, [(engine, op, end event, stream)])."""
        size = n // nchunks
        with main:
            start = ev(main)
        for s in streams[:nstreams]:
            s.wait_event(start)
        marks = []
        for c in range(nchunks):
            s = streams[c % nstreams]
            lo, hi = c * size, (c + 1) * size
            d_in[lo:hi].set(host_in[lo:hi], stream=s)
            marks.append(("copy H2D", "H2D", ev(s), c % nstreams))
            with s:
                kern((ceil_div(size, block),), (block,),
                     (d_in[lo:hi], d_out[lo:hi], np.int32(size), np.int32(k)))
            marks.append(("compute", "kernel", ev(s), c % nstreams))
            _get_async(d_out[lo:hi], s, host_out[lo:hi])
            marks.append(("copy D2H", "D2H", ev(s), c % nstreams))
            if sync_each:
                s.synchronize()
        for s in streams[:nstreams]:
            main.wait_event(ev(s))
        end = ev(main)
        end.synchronize()
        total = cp.cuda.get_elapsed_time(start, end) * 1e-3
        rows = [(eng, op, cp.cuda.get_elapsed_time(start, e) * 1e-3, sid)
                for eng, op, e, sid in marks]
        return total, rows

    def best_of(*args):
        runs = [timed(*args) for _ in range(repeats)]
        return min(runs, key=lambda r: r[0])

    # Each piece alone, on the whole array, to size the compute step and the bound.
    k_probe = 64
    t_parts = best_of(k_probe, 1, 1, False)
    ends = [r[2] for r in t_parts[1]]
    h2d, comp_probe, d2h = ends[0], ends[1] - ends[0], ends[2] - ends[1]
    # Make the kernel take compute_ratio x the copy-in time: the case overlap helps most.
    k = max(1, int(round(k_probe * compute_ratio * h2d / max(comp_probe, 1e-9))))
    serial_total, serial_rows = best_of(k, 1, 1, False)
    ends = [r[2] for r in serial_rows]
    h2d, compute, d2h = ends[0], ends[1] - ends[0], ends[2] - ends[1]
    synced_total, synced_rows = best_of(k, chunks, 1, True)
    up, down = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)

    def duplex():
        """The whole copy in and copy out at once, on two streams, as the pipeline runs them."""
        with main:
            start = ev(main)
        up.wait_event(start)
        down.wait_event(start)
        d_in.set(host_in, stream=up)
        _get_async(d_out, down, host_out)
        main.wait_event(ev(up))
        main.wait_event(ev(down))
        end = ev(main)
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end) * 1e-3

    engines = int(cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id).get("asyncEngineCount", 1))
    # With one copy engine the copies in and out cannot overlap: nothing to measure together.
    duplex_s = min(duplex() for _ in range(repeats)) if engines >= 2 else None
    multi_total, multi_rows = best_of(k, chunks, n_streams, False)
    # The result must still be right after all the chunking.
    check.assert_close(host_out[: min(n, 4096)], divergence_reference(host_in[: min(n, 4096)], k),
                       rtol=0, atol=divergence_error_bound(host_in[: min(n, 4096)], k),
                       name="streams output")
    # With two copy engines the copies in and out overlap each other, but a link and host memory
    # rarely give full speed both ways at once: the copy time is both directions measured together.
    copy_s = duplex_s if engines >= 2 else h2d + d2h
    isolated = max(h2d, compute, d2h) if engines >= 2 else max(h2d + d2h, compute)
    del d_in, d_out, host_in, host_out
    return {"kind": "measured", "n_streams": int(n_streams), "chunks": int(chunks),
            "bytes": int(n * 4), "h2d_s": h2d, "compute_s": compute, "d2h_s": d2h, "k": k,
            "copy_engines": engines, "duplex_s": duplex_s, "copy_s": copy_s,
            "bound_s": max(copy_s, compute), "bound_isolated_s": isolated,
            "serial": {"total_s": serial_total, "ops": _infer_starts(serial_rows)},
            "synced": {"total_s": synced_total, "ops": _infer_starts(synced_rows)},
            "multi": {"total_s": multi_total, "ops": _infer_starts(multi_rows)}}


def _get_async(src, stream, out) -> None:
    """Device-to-host copy queued on ``stream`` without making the host wait for it."""
    try:
        src.get(stream=stream, out=out, blocking=False)  # CuPy >= 13 blocks by default
    except TypeError:  # older CuPy: get() with a stream is already asynchronous
        src.get(stream=stream, out=out)


def _infer_starts(rows) -> list[list]:
    """Bars from end events: an op starts when both its stream and its engine are free (issue order)."""
    stream_free, engine_free, out = {}, {}, []
    for eng, op, end, sid in rows:
        start = min(end, max(stream_free.get(sid, 0.0), engine_free.get(eng, 0.0)))
        out.append([eng, op, start, end, sid])
        stream_free[sid] = engine_free[eng] = end
    return out


#: Streams beyond this share the GPU's hardware work queues (32 since Kepler's Hyper-Q).
MAX_STREAMS = 32


def streams(n_streams: int = 4, chunks: int | None = None, nbytes: int | None = None,
            compute_ratio: float = 1.0, gpu=None) -> dict:
    """Copy→compute→copy serially, chunked with a sync per chunk, and over ``n_streams`` streams.

    Measured with CUDA events on a GPU (pinned host memory); ``models.stream_timeline`` elsewhere.
    """
    if not (isinstance(n_streams, numbers.Integral) and 1 <= n_streams <= MAX_STREAMS):
        raise LaunchError(f"n_streams={n_streams!r}: use 1 to {MAX_STREAMS} streams (a GPU feeds "
                          f"its engines through {MAX_STREAMS} hardware queues; more streams share "
                          "them).")
    if chunks is not None:
        whole_number(chunks, "chunks", "4 per stream, or None for that")
    nbytes = 256 * 2**20 if nbytes is None else whole_number(nbytes, "nbytes", "256 * 2**20")
    positive_number(compute_ratio, "compute_ratio", "1.0: the compute takes as long as one copy")
    check_streams_kernel()
    chunks = int(chunks or max(4 * n_streams, 8))
    if on_gpu():
        res = _measure_streams(n_streams, chunks, nbytes, compute_ratio)
        res["gpu"] = device.describe().name
    else:
        res = stream_model(n_streams, chunks, nbytes, compute_ratio, gpu)
    res["device"] = device.describe().short_name
    res["overlap_vs_bound"] = res["multi"]["total_s"] / res["bound_s"]
    res["overlap_vs_isolated_bound"] = res["multi"]["total_s"] / res["bound_isolated_s"]
    return res


# --------------------------------------------------------------------------- 4. histogram

def histogram_data(n: int, skew: float = 1.0, seed: int = 0) -> np.ndarray:
    """int32 values in [0, 256): a share ``skew`` from the course's skewed generator (half in bin 0, a quarter in bin 1, ...), the rest uniform."""
    if not (isinstance(skew, (int, float)) and 0.0 <= skew <= 1.0):
        raise LaunchError(f"skew is a fraction from 0 (uniform) to 1 (all skewed), e.g. 0.5 for "
                          f"50 %; got {skew!r}.")
    skewed = check.random_array(n, np.int32, seed=seed, kind="skewed")
    uniform = check.rng(seed + 1).integers(0, NBINS, n).astype(np.int32)
    pick = check.rng(seed + 2).random(n) < skew
    return np.where(pick, skewed, uniform).astype(np.int32)


def contention(data: np.ndarray) -> dict:
    """Properties of the data that set atomic contention: the hottest bin's share, and per warp of 32 consecutive elements the most lanes that hit one bin."""
    data = np.asarray(data)
    counts = np.bincount(data, minlength=NBINS)
    m = data.size // WARP * WARP
    if m:
        warps = np.sort(data[:m].reshape(-1, WARP), axis=1)
        # Longest run of equal values in each sorted row = the most lanes on one address.
        change = np.diff(warps, axis=1) != 0
        runs = []
        for row in change:
            idx = np.flatnonzero(np.concatenate(([True], row, [True])))
            runs.append(np.diff(idx).max())
        per_warp = float(np.mean(runs))
    else:
        per_warp = float("nan")
    return {"hottest_bin_share": float(counts.max() / max(1, data.size)),
            "bins_used": int((counts > 0).sum()), "lanes_on_one_bin_per_warp": per_warp,
            "counts": counts.tolist()}


def check_histogram(sizes=(1, 33, 4099, 100_003), blocks=(64, 100, 256), seed: int = 5) -> int:
    """Both histogram kernels exact against np.bincount, on uniform and skewed data."""
    mod = _load("histogram")
    launches = 0
    for n in sizes:
        for skew in (0.0, 1.0):
            data = histogram_data(n, skew, seed=seed + n)
            want = np.bincount(data, minlength=NBINS).astype(np.uint32)
            d = device.asarray(data)
            for bs in blocks:
                for v, grid in (("histogram_v1_global_atomics", ceil_div(n, bs)),
                                ("histogram_v2_shared_privatized", min(3, ceil_div(n, bs)))):
                    bins = device.asarray(np.zeros(NBINS, np.uint32))
                    getattr(mod, v)((grid,), (bs,), (d, bins, np.int32(n)))
                    got = device.to_host(bins)
                    if not np.array_equal(got, want):
                        bad = np.flatnonzero(got != want)
                        raise AssertionError(
                            f"{v} with n={n}, block {bs}, skew {skew}: {bad.size} bins differ, "
                            f"first bin {bad[0]}: got {got[bad[0]]}, expected {want[bad[0]]}.")
                    launches += 1
    return launches


def atomic_chains(data: np.ndarray, grid: int, block: int = 256) -> dict:
    """Longest run of atomic updates to one address, counted from the data and the launch shape.

    v1 sends every element to a global bin, so the hottest bin's count is one chain served by
    one L2 slice. v2's block ``b`` takes elements ``i`` with ``(i // block) % grid == b``
    (the grid-stride loop) and counts them in its own shared copy; its global chain is the
    number of blocks that add to the hottest global bin.
    """
    data = np.asarray(data)
    n = data.size
    blk = (np.arange(n) // block) % grid
    per = np.bincount(blk * NBINS + data, minlength=grid * NBINS).reshape(grid, NBINS)
    return {"grid_v2": int(grid), "block": int(block),
            "v1_longest_chain": int(per.sum(axis=0).max()), "v1_global_atomics": int(n),
            "v2_longest_shared_chain": int(per.max()),
            "v2_longest_global_chain": int((per > 0).sum(axis=0).max()),
            "v2_global_atomics": int((per > 0).sum())}


def privatized_grid(gpu=None, block: int = 256) -> int:
    """v2's grid: as many blocks as fit on the GPU at once (SMs x resident blocks per SM)."""
    spec = model_gpu(gpu)
    return spec.sm_count * models.occupancy(spec.cc, block).active_blocks


def _measure_histogram(datasets, n: int, block: int, min_time_s: float) -> dict:
    import cupy as cp

    mod = _load("histogram")
    grid2 = privatized_grid(block=block)
    bins = cp.zeros(NBINS, dtype=cp.uint32)
    meas = {"v1_s": [], "v2_s": [], "speedup": [], "grid_v2": grid2, "method": "CUDA events"}
    for data in datasets:
        d = cp.asarray(data)

        def v1():
            bins.fill(0)
            mod.histogram_v1_global_atomics((ceil_div(n, block),), (block,),
                                            (d, bins, np.int32(n)))

        def v2():
            bins.fill(0)
            mod.histogram_v2_shared_privatized((grid2,), (block,), (d, bins, np.int32(n)))

        want = np.bincount(data, minlength=NBINS)
        for f in (v1, v2):
            f()
            if not np.array_equal(bins.get(), want):
                raise AssertionError(f"{f.__name__} histogram is wrong at full size on the GPU.")
        t1 = bench.benchmark(v1, label="v1 global atomics", bytes=4 * n, min_time_s=min_time_s)
        t2 = bench.benchmark(v2, label="v2 shared privatized", bytes=4 * n,
                             min_time_s=min_time_s)
        meas["v1_s"].append(t1.median_s)
        meas["v2_s"].append(t2.median_s)
        meas["speedup"].append(t1.median_s / t2.median_s)
        del d
    return meas


def histogram(n: int | None = None, skews=(0.0, 1.0), block: int = 256, gpu=None,
              min_time_s: float = 0.1, check_first: bool = True) -> dict:
    """Check both kernels; time them on uniform and skewed data on a GPU; count contention everywhere."""
    if check_first:
        check_histogram()
    n = int(n or ((1 << 25) if on_gpu() else 1 << 22))
    spec = model_gpu(gpu)
    grid2 = privatized_grid(spec, block)
    chains_n = min(n, 1 << 22)  # counting is exact but costs host time: a prefix is enough
    out = {"device": device.describe().short_name, "backend": device.backend(), "n": n,
           "block": block, "skews": [float(s) for s in skews], "gpu": spec.name,
           "chains_n": chains_n,
           "contention": [], "chains": [], "measured": None,
           "reference": _references("histogram", "speedup")}
    datasets = [histogram_data(n, s, seed=17) for s in skews]
    for data in datasets:
        out["contention"].append(contention(data[: 1 << 16]))
        out["chains"].append(atomic_chains(data[:chains_n], grid2, block))
    if on_gpu():
        out["measured"] = _measure_histogram(datasets, n, block, min_time_s)
    return out


def histogram_point(skew: float, n: int | None = None, gpu=None, min_time_s: float = 0.05) -> dict:
    """One position of the skew slider: an exact emulator check on data of this skew, then as ``histogram``."""
    mod = _load("histogram")
    data = histogram_data(2000 + 3, skew, seed=23)
    want = np.bincount(data, minlength=NBINS)
    for v, grid in (("histogram_v1_global_atomics", 16), ("histogram_v2_shared_privatized", 2)):
        bins = device.asarray(np.zeros(NBINS, np.uint32))
        getattr(mod, v)((grid,), (128,), (device.asarray(data), bins, np.int32(data.size)))
        if not np.array_equal(device.to_host(bins), want):
            raise AssertionError(f"{v} is wrong at skew {skew} on n={data.size}.")
    return histogram(n=n or ((1 << 24) if on_gpu() else 1 << 20), skews=(float(skew),),
                     gpu=gpu, min_time_s=min_time_s, check_first=False)


# --------------------------------------------------------------------------- 5. reduction

def reduce_versions() -> list[str]:
    """The reduction ladder: reduce.cu's versions in order (v1, v2, ...)."""
    names = [n for n in _load("reduce").names if n.startswith("reduce_v")]
    return sorted(names, key=lambda s: int(s[len("reduce_v"):].split("_")[0]))


REDUCE_BLOCK = 256


def _reduce_launch(name: str, n: int, sm_count: int | None = None):
    """(grid, block, dynamic shared bytes) for one reduce.cu version."""
    block = REDUCE_BLOCK
    if name.startswith("reduce_v5"):
        # Sixteen elements per thread per loop trip, and no more blocks than fit on the GPU.
        return max(1, min(ceil_div(n, 16 * block), 8 * (sm_count or 16))), block, 0
    if name.startswith("reduce_v4"):
        # Many elements per thread: just enough blocks to fill every SM (8 x 256 threads each).
        return max(1, min(ceil_div(n, block), 8 * (sm_count or 16))), block, 0
    smem = 4 * block if name.startswith("reduce_v2") else 0  # v2's partial sums
    return ceil_div(n, block), block, smem


def run_reduce(name: str, x, n: int, out=None, sm_count: int | None = None):
    """Launch one version on ``x`` (device array); returns the device array holding the sum."""
    if out is None:
        out = device.asarray(np.zeros(1, np.float32))
    else:
        out.fill(0)
    grid, block, smem = _reduce_launch(name, n, sm_count)
    getattr(_load("reduce"), name)((grid,), (block,), (x, out, np.int32(n)), shared_mem=smem)
    return out


def check_reduce(sizes=(1, 31, 33, 1000 + 1, 65_537), seed: int = 9) -> int:
    """Every reduce.cu version against a float64 sum at awkward sizes."""
    launches = 0
    for n in sizes:
        # Random +-1: every order of a float32 sum of them is exact (exact_sum_data), so each
        # version must give exactly the float64 sum, and one element lost or added shows.
        x = exact_sum_data(n, seed=seed + n)
        want = np.float64(np.sum(x.astype(np.float64)))
        dx = device.asarray(x)
        for v in reduce_versions():
            got = float(device.to_host(run_reduce(v, dx, n, sm_count=4))[0])
            if got != want:
                raise AssertionError(f"{v} with n={n}: got {got!r}, expected exactly {want!r} "
                                     "(a sum of +-1 values is exact in float32).")
            launches += 1
    return launches


def reduction_references() -> list[dict]:
    """The ladder on real GPUs: each reference file's ch4/reduction, else the reduce.cu rows of its
    kernel sweep (labelled with that sweep's date and command) against the same file's library
    device-to-device copy (chapter 1's check), or the sweep's best copy.cu where it has none."""
    out = _references("reduction", "gbps")
    if out:
        return out
    for ref, rows in reference.find("kernels", "rows"):
        if not isinstance(rows, list):
            continue
        red = [r for r in rows if isinstance(r, dict) and r.get("file") == "reduce" and r.get("gbps")]
        copies = [r for r in rows if isinstance(r, dict) and r.get("file") == "copy" and r.get("gbps")]
        if not red or not copies:
            continue
        # The ceiling the chapter names is a library copy: a copy kernel of our own can fall well
        # short of it (copy_v1_coalesced reached 59 % of it on an H200), flattering the ladder.
        library = ref.results.get("ch1", {}).get("stride_sweep", {})
        library_gbps = library.get("ceiling_gbps") if isinstance(library, dict) else None
        if library_gbps:
            copy_gbps, copy_label = library_gbps, "library device-to-device copy (chapter 1's check)"
        else:
            best = max(copies, key=lambda r: r["gbps"])
            copy_gbps, copy_label = best["gbps"], f"{best['kernel']}, same sweep"
        out.append({"label": f"{ref.label}, kernel sweep", "gpu": ref.gpu, "command": ref.command,
                    "source": "kernel sweep", "labels": [r["kernel"] for r in red],
                    "gbps": [r["gbps"] for r in red], "median_s": [r["median_s"] for r in red],
                    "n": red[0].get("size"), "copy_gbps": copy_gbps, "copy_label": copy_label})
    return out


def reduction(n: int | None = None, min_time_s: float = 0.1) -> dict:
    """Check every version; on a GPU time them, the library sums and a device copy (the ceiling);
    on the CPU time the library sums against the faster of a copy and a read-only dot product
    on every core."""
    check_reduce()
    versions = reduce_versions()
    out = {"device": device.describe().short_name, "backend": device.backend(),
           "versions": versions, "measured": None,
           "reference": reduction_references()}
    if on_gpu():
        import cupy as cp

        n = int(n or (1 << 28))
        # Random +-1: v1's chain of n atomics has no useful float32 bound on other data (n*u =
        # 16 at 2^28), but on these every order gives the exact sum (exact_sum_data).
        x = exact_sum_data(n, seed=2, xp=cp)
        sms = device.describe().sm_count
        res = cp.zeros(1, dtype=cp.float32)
        want = float(cp.sum(x, dtype=cp.float64))

        def checked(label, got):
            if float(got) != want:
                raise AssertionError(f"{label} at n={n} on the GPU: got {got}, expected exactly "
                                     f"{want} (a sum of +-1 values is exact in float32).")

        timings = []
        for v in versions:
            checked(v, run_reduce(v, x, n, res, sms).get()[0])
            # v1 queues n atomics on one address: a few samples are enough, and slow.
            few = {"min_samples": 3, "warmup_s": 0.0} if v.startswith("reduce_v1") else {}
            timings.append(bench.benchmark(lambda v=v: run_reduce(v, x, n, res, sms), label=v,
                                           bytes=4 * n, size=n, min_time_s=min_time_s, **few))
        libraries = [("ref: cupy.sum", x, cp.sum)]
        if device.torch_cuda_works():  # CuPy alone is enough for the kernels
            import torch

            libraries.append(("ref: torch.sum", torch.as_tensor(x, device="cuda"), torch.sum))
        for label, data, fn in libraries:
            checked(label, fn(data))
            timings.append(bench.benchmark(fn, data, label=label, bytes=4 * n, size=n,
                                           min_time_s=min_time_s))
        copy = copy_ceiling(x)
        out["measured"] = [t.to_dict() for t in timings]
        out["copy"] = copy.to_dict()
        out["n"] = n
        del x, libraries
    else:
        import torch

        n = int(n or (1 << 24))
        # Random +-1: a float32 sum of 2^24 terms has no useful worst-case bound (n * 2^-24 = 1)
        # and each library picks its own order and thread split; on these values every order
        # is exact (exact_sum_data), so the check demands equality. Values do not change speed.
        x = exact_sum_data(n, seed=3)
        tx = torch.from_numpy(x)
        want = float(np.sum(x, dtype=np.float64))
        for got in (float(np.sum(x)), float(torch.sum(tx))):
            check.assert_close(np.float64(got), np.float64(want), rtol=0, atol=0,
                               name="library sum on the CPU")
        timings = [bench.benchmark(np.sum, x, label="numpy.sum", bytes=4 * n, size=n,
                                   min_time_s=min_time_s, backend="cpu"),
                   bench.benchmark(torch.sum, tx, label="torch.sum", bytes=4 * n, size=n,
                                   min_time_s=min_time_s, backend="cpu")]
        out["cpu_measured"] = [t.to_dict() for t in timings]
        out["copy"] = max(copy_ceiling(x), dot_on_every_core(x, min_time_s=min_time_s),
                          key=lambda t: t.gbps).to_dict()
        out["n"] = n
    return out


def copy_ceiling(x, min_time_s: float = 0.1) -> bench.Timing:
    """A large copy of ``x`` on its device: bytes read plus bytes written per second."""
    xp = _xp() if not isinstance(x, np.ndarray) else np
    dst = xp.empty_like(x)
    if xp is np:
        fn = lambda: np.copyto(dst, x)  # noqa: E731
    else:  # cudaMemcpy device to device: the copy engine's best
        fn = lambda: dst.data.copy_from_device_async(x.data, x.nbytes)  # noqa: E731
    t = bench.benchmark(fn, label="copy (read + write)", bytes=2 * x.nbytes, size=x.size,
                        min_time_s=min_time_s, backend="cpu" if xp is np else None)
    return t


def reduce_counts(n: int, gpu=None) -> Table:
    """Per launch of each rung at ``n`` elements: blocks, global atomics, barriers per block (counted from the launch shape, not timed)."""
    whole_number(n, "n", "1 << 28")
    spec = model_gpu(gpu)
    rows = []
    for v in reduce_versions():
        grid, block, _ = _reduce_launch(v, n, spec.sm_count)
        atomics = n if v.startswith("reduce_v1") else grid
        barriers = {"reduce_v1": 0, "reduce_v2": int(math.log2(block)) + 1}.get(v[:9], 1)
        rows.append((v, f"{grid:,} blocks of {block}, {ceil_div(n, grid * block)} element(s) "
                        f"per thread, {atomics:,} global atomics, {barriers} barrier(s) per block"))
    return Table.pairs(rows, caption=f"Launch shape of each rung for n = {n:,} on {spec.name} (counted)")


# --------------------------------------------------------------------------- headless + GPU check

def run_all(quick: bool = True, progress=None) -> dict:
    """Every experiment of the chapter, as JSON-ready results (for the headless runner)."""
    t = 0.05 if quick else 0.2
    steps = []

    def step(name, fn):
        steps.append(name)
        r = fn()
        if progress:
            progress(len(steps) / 5)
        return r

    out = {"block_size_sweep": step("sweep", lambda: block_size_sweep(min_time_s=t))}
    out["divergence"] = step("divergence", lambda: divergence(min_time_s=t))
    out["streams"] = step("streams", lambda: streams())
    out["histogram"] = step("histogram", lambda: histogram(min_time_s=t))
    out["reduction"] = step("reduction", lambda: reduction(min_time_s=t))
    return out


def gpu_check() -> dict:
    """The figures chapter 4's issue names, measured on this GPU, with each threshold's pass/fail."""
    device.require_cuda("chapter 4's GPU check", needs="cupy")
    sweep = block_size_sweep(min_time_s=0.05)
    times = sweep["measured"]["median_s"]
    best = min(times)
    rec = sweep["recommended"]
    if rec in sweep["block_sizes"]:
        rec_time = times[sweep["block_sizes"].index(rec)]
    else:
        rec_time = measure_saxpy(rec, sweep["n"], min_time_s=0.05).median_s
        best = min(best, rec_time)
    hist = histogram(skews=(0.0, 1.0), min_time_s=0.05)
    st = streams(n_streams=4, chunks=32)
    red = reduction(min_time_s=0.05)
    best_red = max((t for t in red["measured"] if t["label"].startswith("reduce_v")),
                   key=lambda t: t["gbps"])
    copy_gbps = red["copy"]["gbps"]
    div = divergence(min_time_s=0.05)
    checks = {
        "block_size": check.at_most(rec_time / best, 1.10,
                                    f"time at the recommended block {rec} / best time of the sweep"),
        "histogram_skewed_speedup": check.at_least(hist["measured"]["speedup"][-1], 3.0,
                                                   "privatized vs global atomics on skewed data (x)"),
        "streams_overlap": check.at_most(st["overlap_vs_bound"], 1.20,
                                         "multi-stream total / max(copy, compute), copy = " +
                                         ("in and out measured together" if st["copy_engines"] >= 2
                                          else "in, then out (one copy engine)")),
        "reduction_vs_copy": check.at_least(best_red["gbps"] / copy_gbps, 0.80,
                                            f"best reduction ({best_red['label']}) GB/s / copy GB/s"),
    }
    return {
        "checks": checks,
        "passed": all(c["passed"] for c in checks.values()),
        "block_sweep": {"block_sizes": sweep["block_sizes"], "gbps": sweep["measured"]["gbps"],
                        "median_s": times, "n": sweep["n"], "recommended": rec,
                        "regs_per_thread": sweep["regs_per_thread"],
                        "regs_source": sweep["regs_source"]},
        "divergence": {"versions": div["versions"], "median_s": div["measured"]["median_s"],
                       "n": div["n"], "k": div["k"]},
        "histogram": {"skews": hist["skews"], "v1_s": hist["measured"]["v1_s"],
                      "v2_s": hist["measured"]["v2_s"], "speedup": hist["measured"]["speedup"],
                      "n": hist["n"]},
        "streams": {k: st[k] for k in ("n_streams", "chunks", "bytes", "h2d_s", "compute_s",
                                        "d2h_s", "duplex_s", "copy_s", "bound_s", "bound_isolated_s",
                                        "copy_engines", "overlap_vs_bound",
                                        "overlap_vs_isolated_bound")}
        | {"serial_s": st["serial"]["total_s"], "synced_s": st["synced"]["total_s"],
           "multi_s": st["multi"]["total_s"], "multi_ops": st["multi"]["ops"]},
        "reduction": {"labels": [t["label"] for t in red["measured"]],
                      "gbps": [t["gbps"] for t in red["measured"]],
                      "median_s": [t["median_s"] for t in red["measured"]],
                      "copy_gbps": copy_gbps, "n": red["n"]},
    }


__all__ = [n for n in dir() if not n.startswith("_")]
