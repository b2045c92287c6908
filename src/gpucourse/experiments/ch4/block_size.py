"""Section 1 of chapter 4, block size and occupancy: saxpy at every block size, checked, then
timed on a GPU; elsewhere the occupancy and waves models plus reference data."""
from __future__ import annotations

import numpy as np

from ... import bench, check, device, kernels, models, reference, specs
from ...display import Table
from ...emulator.launch import ceil_div
from ...errors import LaunchError, SpecError
from ...kernels import BLOCK_SIZES
from ...kernels import saxpy as saxpy_cu
from ...models import WARP_SIZE
from ...specs import model_gpu
from .common import copy_ceiling, references, xp

# saxpy compiles to well under 32 registers per thread on every nvcc we know of; at <= 32
# registers, registers never limit occupancy, so the exact count does not change the model.
# On a GPU the count is read from the compiled kernel instead.
SAXPY_REGS_ASSUMED = 16
#: The version the sweep times: one element per thread, so the block size sets the grid.
TIMED = "saxpy_v1_one_per_thread"


def lane_efficiency(block_size: int) -> float:
    """Share of a block's warp lanes that hold a thread: a block of 100 threads fills 4 warps (128 lanes)."""
    return block_size / (WARP_SIZE * ceil_div(block_size, WARP_SIZE))


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
    k = kernels.load("saxpy")
    a = np.float32(1.75)
    launches = 0
    for n in sizes:
        x = check.random_array(n, np.float32, seed=seed + n)
        y0 = check.random_array(n, np.float32, seed=seed + 2 * n + 1)
        want, tol = saxpy_cu.reference(a, x, y0), saxpy_cu.tolerance(a, x, y0)
        for bs in block_sizes:
            for name in saxpy_cu.VERSIONS:
                # three blocks: v2's threads loop over the array (v1 takes one per element)
                shape = saxpy_cu.launch(name, n, bs, blocks=3)
                dx, dy = device.asarray(x), device.asarray(y0.copy())  # asarray may not copy
                shape.run(getattr(k, name), saxpy_cu.args(a, dx, dy, n))
                check.assert_close(device.to_host(dy), want, rtol=0, atol=tol,
                                   name=f"{name} with n={n}, block {bs}")
                launches += 1
    return launches


def cannot_launch(gpu, block_size: int, regs_per_thread: int, smem_per_block: int = 0) -> str:
    """Why a block of ``block_size`` threads cannot launch at ``regs_per_thread`` registers
    per thread ('' when it can); a block size outside the GPU's range is a SpecError."""
    spec = model_gpu(gpu)
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
    if not device.on_gpu():
        return 1 << 26
    return device.bandwidth_buffer_bytes(cap=1 << 30) // 4


def _saxpy_regs_on_gpu() -> int | None:
    """Registers per thread of the compiled saxpy, from the GPU's compiler (None if unknown)."""
    return getattr(kernels.load("saxpy"), TIMED).num_regs


def measure_saxpy(block_size: int, n: int, arrays=None, min_time_s: float = 0.1) -> bench.Timing:
    """Time saxpy_v1 at one block size on the GPU (12 bytes per element)."""
    k = getattr(kernels.load("saxpy"), TIMED)
    x, y = _saxpy_arrays(n) if arrays is None else arrays
    shape = saxpy_cu.launch(TIMED, n, block_size)
    args = saxpy_cu.args(0.5, x, y, n)  # |a| < 1 keeps y bounded however often the kernel runs
    return bench.benchmark(lambda: shape.run(k, args), label=f"block {block_size}",
                           bytes=saxpy_cu.bytes_moved(n), size=n, min_time_s=min_time_s)


def _saxpy_arrays(n: int):
    lib = xp()
    g = lib.random.default_rng(0)
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
    if device.on_gpu():
        got = _saxpy_regs_on_gpu()
        if got:
            regs, regs_source = got, "compiled kernel"
    curve = occupancy_curve(spec, block_sizes, regs)
    sizes = curve["block_sizes"]
    check_saxpy(sizes)
    measured = None
    if device.on_gpu() and sizes:
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
           "n": n, "bytes_per_call": saxpy_cu.bytes_moved(n), "regs_source": regs_source,
           "ceiling_gbps": spec.memory_bandwidth_GBps,
           "ceiling_label": f"{spec.name} datasheet bandwidth",
           "recommended": recommend_block_size(spec, regs), "measured": measured,
           "reference": references("block_sweep", "block_sizes", "gbps"),
           "checked": "saxpy v1 and v2 match NumPy at n = 1, 33, 1007 for every block size"
                      + (" that can launch" if curve["skipped"] else ""),
           **curve}
    if progress and not measured:
        progress(1.0)
    return out


def _with_waves(curve: dict, spec, n: int) -> dict:
    """``curve`` (an occupancy curve) plus the waves of an n-element grid at each block size."""
    ws = [models.waves(saxpy_cu.launch(TIMED, n, b).grid, per_sm, spec.sm_count)
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
    if device.on_gpu():
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
            "waves_text": str(models.waves(saxpy_cu.launch(TIMED, sweep["n"], b).grid,
                                           occ.active_blocks, spec.sm_count)),
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


def tail_effect(gpu, block_size: int, blocks_per_sm: int | None = None, max_waves: float = 4.0) -> dict:
    """The waves model's slot utilization for grids from 1 block to ``max_waves`` full waves."""
    spec = model_gpu(gpu)
    if blocks_per_sm is None:
        blocks_per_sm = models.occupancy(spec.cc, block_size).active_blocks
    per_wave = blocks_per_sm * spec.sm_count
    grids = np.unique(np.linspace(1, max_waves * per_wave, 400).astype(int))
    util = [models.waves(int(g), blocks_per_sm, spec.sm_count).utilization for g in grids]
    return {"grid_blocks": [int(g) for g in grids], "utilization": util,
            "blocks_per_wave": per_wave}
