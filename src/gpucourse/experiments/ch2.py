"""Chapter 2 (memory management): transfers, resident data, the transpose ladder, allocation
in a hot loop, and memory footprint by precision. Every experiment checks before it times.

On a CUDA GPU the transfers, the training loops, the kernels and the memory pools are
measured; on the CPU the kernels run on the emulator for correctness, transfers and overlap
come from labelled models (``models.transfer_time``, ``models.stream_timeline``), and the
allocation and footprint experiments are measured for real.
"""
from __future__ import annotations

import contextlib
import ctypes
import math
import time
import tracemalloc

import numpy as np

from .. import bench, check, device, models, precision, reference, specs
from ..display import Table
from ..check import ch2 as _probes
from ..errors import DeviceError, LaunchError, PrecisionError, whole_number

MiB = 2**20
GiB = 2**30
SECTION = "ch2"


# --------------------------------------------------------------------------- common


DEFAULT_MODEL_GPU = "H100-PCIe"


def target_gpu(gpu=None) -> specs.GPUSpec:
    """The GPU whose figures the models use (``specs.model_gpu``): the given one, the active
    GPU, or else the GPU of the chapter's reference data (a PCIe H100 without any)."""
    return specs.model_gpu(gpu, fallback=_reference_gpu())


def _reference_gpu() -> str:
    """The table's name of the GPU of the chapter's transfer measurements, or DEFAULT_MODEL_GPU."""
    refs = reference.find(SECTION, "transfers")
    if refs:
        try:
            return specs.lookup(refs[0][0].gpu).key
        except Exception:  # a reference GPU the table lacks: fall back to the default
            pass
    return DEFAULT_MODEL_GPU


def reference_note() -> str:
    """Where the GPU reference data in the chapter's figures comes from: GPU, date and the
    command that measured it (the figures name only GPU and date), or that there is none."""
    found = reference.find(SECTION)
    if not found:
        return ("No reference measurements of chapter 2 from a real GPU are in this copy of the "
                "course yet (`make gpu-check` on a GPU writes them), so its GPU figures are models.")
    return "\n".join(f"Reference data in this chapter's figures: {ref.provenance}"
                     f"{ref.kernel_caveat('transpose.cu', 'tile_copy.cu', 'copy.cu')}."
                     for ref, _ in found)


def _torch():
    import torch

    return torch


def _cupy():
    if not device.cupy_works():
        return None
    import cupy

    return cupy


def _gbps(nbytes: float, seconds: float) -> float:
    return nbytes / seconds / 1e9


# --------------------------------------------------------------------------- 1. transfers

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
    torch = _torch()
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
    cp = _cupy()
    import cupyx

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
        if cupy_too and _cupy() is not None:
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


# --------------------------------------------------------------------------- 2. training loops

LOOP_CONFIG = {"batches": 6, "batch": 64, "features": 96, "hidden": 128, "classes": 10}
GPU_LOOP_CONFIG = {"batches": 16, "batch": 8192, "features": 1024, "hidden": 1024, "classes": 16}


def make_data(batches: int, batch: int, features: int, classes: int, seed: int = 0):
    """Host tensors X (float32, non-uniform) and labels Y from a random linear teacher."""
    torch = _torch()
    n = batches * batch
    x = check.random_array((n, features), np.float32, seed=seed, kind="uniform")
    x *= check.rng(seed + 1).uniform(0.2, 3.0, size=(1, features)).astype(np.float32)
    teacher = check.rng(seed + 2).standard_normal((features, classes)).astype(np.float32)
    y = np.argmax(x @ teacher, axis=1).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def make_model(features: int, hidden: int, classes: int, seed: int = 0, dtype=None, device_=None):
    """A two-layer MLP with seeded weights."""
    torch = _torch()
    g = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, classes))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (1.0 / math.sqrt(p.shape[-1])))
    return model.to(device=device_, dtype=dtype)


def _train_step(model, opt, xb, yb):
    torch = _torch()
    opt.zero_grad(set_to_none=False)
    loss = torch.nn.functional.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()
    return loss


def loop_copy_every_step(model, opt, X, Y, batch: int, dev):
    """Naive: every step copies its batch from pageable host memory, synchronously."""
    loss = None
    for i in range(0, len(X), batch):
        xb = X[i:i + batch].to(dev)
        yb = Y[i:i + batch].to(dev)
        loss = _train_step(model, opt, xb, yb)
    return loss


def loop_pinned_prefetch(model, opt, X, Y, batch: int, dev, pinned=None):
    """Pinned host memory, non-blocking copies on a side stream, the next batch copied while
    the current one computes. ``pinned`` is (X, Y) already page-locked (pinning is a one-off
    cost: do it once, outside the loop)."""
    torch = _torch()
    dev = torch.device(dev)
    if dev.type != "cuda":  # nothing to overlap with: the same loop, minus the streams
        return loop_copy_every_step(model, opt, X, Y, batch, dev)
    Xp, Yp = pinned if pinned is not None else (X.pin_memory(), Y.pin_memory())
    side = torch.cuda.Stream()
    main = torch.cuda.current_stream()

    def fetch(i):
        side.wait_stream(main)  # the buffers we overwrite must be free
        with torch.cuda.stream(side):
            return (Xp[i:i + batch].to(dev, non_blocking=True),
                    Yp[i:i + batch].to(dev, non_blocking=True))

    loss = None
    nxt = fetch(0)
    for i in range(0, len(X), batch):
        main.wait_stream(side)
        xb, yb = nxt
        # Tensors made on the side stream are used on the main one: tell the allocator.
        xb.record_stream(main)
        yb.record_stream(main)
        if i + batch < len(X):
            nxt = fetch(i + batch)
        loss = _train_step(model, opt, xb, yb)
    return loss


def loop_resident(model, opt, X, Y, batch: int, dev, resident=None):
    """The whole data set copied to the device once (``resident``), batches are views."""
    Xd, Yd = resident if resident is not None else (X.to(dev), Y.to(dev))
    loss = None
    for i in range(0, len(Xd), batch):
        loss = _train_step(model, opt, Xd[i:i + batch], Yd[i:i + batch])
    return loss


LOOPS = {"copy every step (pageable)": loop_copy_every_step,
         "pinned + non_blocking + prefetch": loop_pinned_prefetch,
         "resident on the device": loop_resident}


def _fresh(config: dict, dev, seed: int = 0):
    torch = _torch()
    model = make_model(config["features"], config["hidden"], config["classes"], seed=seed,
                       device_=dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return model, opt


def check_loops(config: dict | None = None, seed: int = 0) -> None:
    """The three loops train to the same weights (same data, same order, same steps)."""
    config = dict(config or LOOP_CONFIG)
    dev = device.torch_device()
    X, Y = make_data(config["batches"], config["batch"], config["features"], config["classes"],
                     seed=seed)
    weights = {}
    for name, loop in LOOPS.items():
        model, opt = _fresh(config, dev, seed)
        loop(model, opt, X, Y, config["batch"], dev)
        weights[name] = [p.detach().cpu() for p in model.parameters()]
    first, *others = LOOPS
    start, _ = _fresh(config, "cpu", seed)
    moved = sum(float((a - b.detach()).abs().sum()) for a, b in zip(weights[first], start.parameters()))
    if moved == 0:
        raise AssertionError("training did not change the weights: the loops were not exercised")
    # The loops differ only in where the batches come from: the same kernels on the same values
    # in the same order give the same bits, so any difference is a wrong batch or step.
    for name in others:
        for a, b in zip(weights[name], weights[first]):
            check.assert_close(a, b, rtol=0, atol=0, name=f"weights after {name!r}")


def step_model(config: dict | None = None, gpu=None) -> dict:
    """Per-step times from the models: H2D copy (pageable and pinned) and compute (roofline)."""
    c = dict(config or GPU_LOOP_CONFIG)
    spec = target_gpu(gpu)
    b, f, h, k = c["batch"], c["features"], c["hidden"], c["classes"]
    batch_bytes = b * f * 4 + b * 8
    weights = f * h + h + h * k + k
    flops = 6.0 * b * (f * h + h * k)  # forward 2 x MACs, backward 4 x MACs
    # Memory traffic of one step: activations written and read back, weights, grads, momentum.
    traffic = 4.0 * (3 * b * (f + 2 * h + k) + 6 * weights)
    compute = models.roofline(flops, traffic, spec, "fp32").time
    return {"gpu": spec.name, "batch_bytes": batch_bytes, "compute_s": compute,
            "h2d_pageable_s": models.transfer_time(batch_bytes, spec, pinned=False).time,
            "h2d_pinned_s": models.transfer_time(batch_bytes, spec, pinned=True).time,
            "steps": c["batches"]}


def loop_timelines(config: dict | None = None, gpu=None) -> dict:
    """Stream-timeline model of the three loops: ops (lane, op, start ms, end ms) and totals."""
    m = step_model(config, gpu)
    steps = m["steps"]
    plans = {"copy every step (pageable)": models.stream_timeline(
                 1, steps * m["h2d_pageable_s"], steps * m["compute_s"], 0.0, chunks=steps),
             "pinned + non_blocking + prefetch": models.stream_timeline(
                 2, steps * m["h2d_pinned_s"], steps * m["compute_s"], 0.0, chunks=steps),
             "resident on the device": models.stream_timeline(
                 1, 0.0, steps * m["compute_s"], 0.0, chunks=steps)}
    out = {"gpu": m["gpu"], "step": m, "versions": {}}
    for name, tl in plans.items():
        ops = [(op.engine, op.op.split()[0], op.start * 1e3, op.end * 1e3) for op in tl.ops
               if op.end > op.start]
        out["versions"][name] = {"total_ms": tl.total * 1e3, "per_step_ms": tl.total * 1e3 / steps,
                                 "ops": ops}
    return out


def time_loops(config: dict | None = None, min_time_s: float = 0.3, seed: int = 0) -> bench.Timings:
    """Measured time per epoch of the three loops on a GPU (checked first at a small size)."""
    device.require_cuda("Timing the training loops", needs="torch")
    check_loops(seed=seed)
    c = dict(config or GPU_LOOP_CONFIG)
    X, Y = make_data(c["batches"], c["batch"], c["features"], c["classes"], seed=seed)
    pinned = (X.pin_memory(), Y.pin_memory())
    resident = (X.to("cuda"), Y.to("cuda"))
    extra = {"pinned + non_blocking + prefetch": {"pinned": pinned},
             "resident on the device": {"resident": resident}}
    out = bench.Timings()
    for name, loop in LOOPS.items():
        model, opt = _fresh(c, "cuda", seed)
        kw = extra.get(name, {})
        out.append(bench.benchmark(loop, model, opt, X, Y, c["batch"], "cuda", label=name,
                                   bytes=X.nbytes + Y.nbytes, size=c["batches"],
                                   min_time_s=min_time_s, min_samples=3, **kw))
    return out


# --------------------------------------------------------------------------- 3. transpose

TRANSPOSE_VERSIONS = {"naive": "transpose_v1_naive", "shared tile": "transpose_v2_shared",
                      "padded tile": "transpose_v3_padded"}


def tile_access_conflicts(tile: int = 32, padded: bool = False, elem_bytes: int = 4) -> dict:
    """Bank-conflict model of the two shared-memory accesses of a tiled transpose.

    The tile is ``float t[tile][tile + pad]``; a warp of 32 lanes writes along a row
    (``t[ty][tx]``) and reads down a column (``t[tx][ty]``).
    """
    pitch = tile + (1 if padded else 0)
    lanes = min(32, tile)
    rows_per_warp = max(1, 32 // tile)  # a 16-wide tile puts two rows in one warp
    write, read = [], []
    for lane in range(32):
        tx, ty = lane % tile, lane // tile
        if ty >= tile:
            break
        write.append((ty * pitch + tx) * elem_bytes)
        read.append((tx * pitch + ty) * elem_bytes)
    w = models.bank_conflicts(write, word_bytes=elem_bytes)
    r = models.bank_conflicts(read, word_bytes=elem_bytes)
    return {"tile": tile, "padded": padded, "pitch": pitch, "lanes": lanes,
            "rows_per_warp": rows_per_warp, "write_ways": w.ways, "read_ways": r.ways,
            "read_addresses": read, "write_addresses": write,
            "read_banks": [models.bank_of(a) for a in read],
            "write_banks": [models.bank_of(a) for a in write],
            "read_words_per_bank": list(r.words_per_bank), "smem_bytes": tile * pitch * elem_bytes}


TRANSPOSE_SHAPES = _probes.TRANSPOSE_SHAPES  # the lab checker's awkward shapes
BLOCK_ROWS = 8


def transpose_module(tile: int = 32, backend: str | None = None):
    """transpose.cu built for ``tile`` (16 or 32) with BLOCK_ROWS = 8."""
    from .. import kernels

    if tile not in (8, 16, 32):
        raise LaunchError(f"tile={tile} is not supported: use 16 or 32 (a tile of TILE x TILE "
                          "floats, moved by a block of TILE x 8 threads).")
    return kernels.load("transpose", defines={"TILE": tile, "BLOCK_ROWS": BLOCK_ROWS},
                        backend=backend)


def run_transpose(version: str, a, tile: int = 32, module=None):
    """Transpose the 2-D array ``a`` with one version of transpose.cu on the active backend."""
    mod = module or transpose_module(tile)
    rows, cols = a.shape
    out = device.empty((cols, rows), dtype=np.float32)
    grid, block = _probes.transpose_launch(rows, cols, tile, BLOCK_ROWS)
    getattr(mod, TRANSPOSE_VERSIONS[version])(grid, block, (a, out, np.int32(rows), np.int32(cols)))
    return out


def check_transpose(tile: int = 32, shapes=TRANSPOSE_SHAPES, seed: int = 0) -> None:
    """Every version equals NumPy's transpose at awkward shapes; the shared versions are also
    race-checked on the emulator (a missing barrier shows as a race)."""
    mod = transpose_module(tile)
    for rows, cols in shapes:
        host = check.random_array((rows, cols), np.float32, seed=seed + rows * 1000 + cols)
        a = device.asarray(host)
        for version in TRANSPOSE_VERSIONS:
            # A transpose moves bits: exact.
            check.assert_close(run_transpose(version, a, tile, mod), host.T, rtol=0, atol=0,
                               name=f"{version} transpose of {rows} x {cols} (tile {tile})")
    if emulator_problem():
        return  # a GPU machine without a C++ compiler: the race check needs the emulator
    emu = transpose_module(tile, backend="cpu")
    rows, cols = 67, 45
    host = check.random_array((rows, cols), np.float32, seed=seed)
    grid, block = _probes.transpose_launch(rows, cols, tile, BLOCK_ROWS)
    for version in ("shared tile", "padded tile"):
        out = np.full((cols, rows), np.nan, np.float32)
        getattr(emu, TRANSPOSE_VERSIONS[version])(grid, block, (host, out, np.int32(rows),
                                                                np.int32(cols)), race_check=True)


def emulator_problem() -> str:
    """'' when the CPU emulator can build kernels here, else why not (one sentence)."""
    from .. import emulator
    from ..errors import CourseError

    try:
        emulator.compiler()
    except CourseError as exc:
        return str(exc)
    return ""


def transpose_conflicts(tile: int = 32) -> dict:
    """Bank conflicts of each version's shared-memory accesses, from the addresses the
    kernel itself computes (traced on the emulator, one block) and ``models.bank_conflicts``."""
    from ..kernels import KERNEL_DIR

    if emulator_problem():  # no tracing without the emulator: the analytic pattern instead
        model = {p: tile_access_conflicts(tile, p) for p in (False, True)}
        return {"naive": {"accesses_per_thread": 0, "worst_ways": 0, "mean_ways": 0.0},
                **{v: {"accesses_per_thread": 2 * tile // BLOCK_ROWS,
                       "worst_ways": max(m["read_ways"], m["write_ways"]),
                       "mean_ways": (m["read_ways"] + m["write_ways"]) / 2}
                   for v, m in (("shared tile", model[False]), ("padded tile", model[True]))}}
    source = (KERNEL_DIR / "transpose.cu").read_text()
    side = 2 * tile
    a = check.random_array((side, side), np.float32, seed=1)
    out = {}
    for version, name in TRANSPOSE_VERSIONS.items():
        res = np.full((side, side), np.nan, np.float32)
        trace = _probes.trace_shared_accesses(source, name, (2, 2), (tile, BLOCK_ROWS),
                                              (a, res, np.int32(side), np.int32(side)),
                                              defines={"TILE": tile, "BLOCK_ROWS": BLOCK_ROWS})
        ways = [acc["ways"] for acc in trace["accesses"]]
        out[version] = {"accesses_per_thread": len({acc["access"] for acc in trace["accesses"]}),
                        "worst_ways": max(ways, default=0),
                        "mean_ways": float(np.mean(ways)) if ways else 0.0}
    return out


def transpose_side(gpu_l2_bytes: int | None = None) -> int:
    """Side of a square float32 matrix at least ten times the L2 cache (a multiple of 1024)."""
    l2 = gpu_l2_bytes or device.describe().l2_bytes or 50 * MiB
    side = math.sqrt(10 * l2 / 4)
    return int(max(4096, math.ceil(side / 1024) * 1024))


CEILINGS = ("copy (copy.cu)", "tile copy (tile_copy.cu)")


def transpose_ladder(quick: bool = True, side: int | None = None, tile: int = 32,
                     min_time_s: float = 0.2, seed: int = 0) -> dict:
    """Check every version, then (on a GPU) time naive, shared and padded transposes of a
    side x side matrix against two copy kernels (the ceiling is the faster) and the library's
    device-to-device copy (``ref``); bank conflicts of each version from the trace."""
    check_transpose(tile, seed=seed)
    out = {"tile": tile, "device": device.describe().short_name,
           "conflicts": transpose_conflicts(tile), "kind": "model", "timings": []}
    if not device.is_cuda():
        return out
    if not device.cupy_works():
        out["note"] = "the kernels need CuPy on a GPU (pip install -e .[gpu]); not measured"
        return out
    from .. import kernels

    side = side or transpose_side()
    host = check.random_array((side, side), np.float32, seed=seed, kind="uniform")
    a = device.asarray(host)
    n = side * side
    nbytes = 2 * n * 4
    kw = dict(bytes=nbytes, size=side, min_time_s=min_time_s, min_samples=5)
    grid, block = _probes.transpose_launch(side, side, tile, BLOCK_ROWS)
    dst = device.empty((side, side), dtype=np.float32)
    flat, flat_dst = a.reshape(-1), dst.reshape(-1)
    copy_k = kernels.load("copy").copy_v1_coalesced
    tile_k = kernels.load("tile_copy", defines={"TILE": tile, "BLOCK_ROWS": BLOCK_ROWS}).tile_copy_v1_rows
    copies = {CEILINGS[0]: (copy_k, (n + 255) // 256, 256, (flat, flat_dst, np.int32(n))),
              CEILINGS[1]: (tile_k, grid, block, (a, dst, np.int32(side), np.int32(side)))}
    timings = bench.Timings()
    for label, (k, g, b, args) in copies.items():
        dst.fill(np.nan)
        k(g, b, args)
        check.assert_close(device.to_host(dst[:: 257, :: 263]), host[:: 257, :: 263], rtol=0,
                           atol=0, name=f"{label} at {side} x {side}")  # a copy: exact
        timings.append(bench.benchmark(k, g, b, args, label=label, **kw))
    mod = transpose_module(tile)
    for version, name in TRANSPOSE_VERSIONS.items():
        k = getattr(mod, name)
        dst.fill(np.nan)
        k(grid, block, (a, dst, np.int32(side), np.int32(side)))
        check.assert_close(device.to_host(dst[:: 257, :: 263]), host.T[:: 257, :: 263], rtol=0,
                           atol=0, name=f"{version} at {side} x {side}")  # a transpose: exact
        timings.append(bench.benchmark(k, grid, block, (a, dst, np.int32(side), np.int32(side)),
                                       label=version, **kw))
    cp = _cupy()
    timings.append(bench.benchmark(cp.copyto, dst, a, label="ref (library device-to-device copy)",
                                   **kw))
    ceiling = max(t.gbps for t in timings if t.label in CEILINGS)
    out.update(kind="measured", side=side, timings=[t.to_dict() for t in timings],
               copy_gbps=ceiling, spec_gbps=target_gpu().bandwidth_Bps / 1e9)
    return out


def transpose_summary(ladder: dict) -> dict:
    """Padded as % of the faster copy kernel and padded over naive, from a measured ladder."""
    t = {d["label"]: bench.Timing.from_dict(d) for d in ladder["timings"]}
    if not t:
        return {}
    ceiling = max((t[c] for c in CEILINGS), key=lambda x: x.gbps)
    return {"ceiling": ceiling.label,
            "padded_pct_of_copy": 100 * t["padded tile"].gbps / ceiling.gbps,
            "padded_pct_of_each_copy": {c: 100 * t["padded tile"].gbps / t[c].gbps for c in CEILINGS},
            "padded_over_naive": t["padded tile"].speedup_over(t["naive"]),
            "shared_over_naive": t["shared tile"].speedup_over(t["naive"]),
            "gbps": {k: v.gbps for k, v in t.items()}}


def transpose_config(tile: int = 32, padded: bool = True, min_time_s: float = 0.1) -> dict:
    """One configuration for the widget: its bank-conflict model, its correctness on the
    active backend, and (on a GPU) its bandwidth against the copy kernel."""
    version = "padded tile" if padded else "shared tile"
    measure = device.is_cuda() and _cupy() is not None
    if not measure:  # the ladder checks every version itself before it times them
        check_transpose(tile, shapes=((67, 45), (tile, tile)))
    model = tile_access_conflicts(tile, padded)
    out = {"tile": tile, "padded": padded, "version": version, "model": model,
           "device": device.describe().short_name, "gbps": None, "copy_gbps": None}
    if measure:
        lad = transpose_ladder(tile=tile, min_time_s=min_time_s)
        s = {d["label"]: d["gbps"] for d in lad["timings"]}
        out.update(gbps=s[version], copy_gbps=lad["copy_gbps"])
    return out


# --------------------------------------------------------------------------- 4. allocation

ALLOC_N_CPU = 1 << 23
ALLOC_N_GPU = 1 << 22


def _numpy_versions(n: int, seed: int):
    a, b, c = (check.random_array(n, np.float32, seed=seed + i) for i in range(3))
    buf = np.empty_like(a)

    def fresh():
        return a * b + c  # two new arrays per call: a*b, then the sum

    def reuse():
        np.multiply(a, b, out=buf)
        np.add(buf, c, out=buf)
        return buf

    return {"NumPy: new arrays each call": fresh, "NumPy: out= buffer": reuse}, a.nbytes


def _torch_versions(n: int, seed: int, dev: str):
    torch = _torch()
    a, b, c = (torch.from_numpy(check.random_array(n, np.float32, seed=seed + i)).to(dev)
               for i in range(3))
    buf = torch.empty_like(a)

    def fresh():
        return a * b + c

    def reuse():
        torch.mul(a, b, out=buf)
        buf.add_(c)
        return buf

    return {"torch: new tensors each call": fresh, "torch: out= buffer": reuse}


def _cupy_versions(n: int, seed: int):
    cp = _cupy()
    a, b, c = (cp.asarray(check.random_array(n, np.float32, seed=seed + i)) for i in range(3))
    buf = cp.empty_like(a)
    pool = cp.get_default_memory_pool()

    def fresh():
        return a * b + c

    def reuse():
        cp.multiply(a, b, out=buf)
        cp.add(buf, c, out=buf)
        return buf

    @contextlib.contextmanager
    def no_pool():
        cp.cuda.set_allocator(None)  # every allocation is a cudaMalloc, every free a cudaFree
        try:
            yield
        finally:
            cp.cuda.set_allocator(pool.malloc)

    return fresh, reuse, no_pool


def count_allocations(fn, calls: int = 3) -> dict:
    """New buffers per call of ``fn`` after a first call: torch storages counted with a
    TorchFunctionMode, NumPy bytes with tracemalloc (peak / array size)."""
    fn()
    torch_count = _probes.TorchAllocationCounter()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        with torch_count:
            for _ in range(calls):
                fn()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return {"torch_storages_per_call": torch_count.count / calls,
            "numpy_peak_bytes": max(0, peak)}


def check_allocation_versions(n: int = (1 << 18) + 3, seed: int = 0) -> None:
    """Fresh and reused-buffer versions agree; the reused ones allocate nothing per call.

    tracemalloc also sees what a Jupyter kernel's other threads allocate meanwhile (tens of
    KB from widget and message traffic), so the arrays are 1 MiB: far above that noise.
    """
    ref = None
    versions, nbytes = _numpy_versions(n, seed)
    versions.update(_torch_versions(n, seed, "cpu"))
    for name, fn in versions.items():
        got = device.to_host(fn()).copy()
        ref = got if ref is None else ref
        # Every version rounds a*b, then a*b + c: two IEEE operations, so the same bits.
        check.assert_close(got, ref, rtol=0, atol=0, name=name)
        counts = count_allocations(fn)
        if "out=" in name:
            assert counts["torch_storages_per_call"] == 0, f"{name} allocates new tensors"
            assert counts["numpy_peak_bytes"] < nbytes / 2, f"{name} allocates new arrays"
        elif name.startswith("torch"):
            assert counts["torch_storages_per_call"] == 2, f"{name}: {counts}"
        else:
            assert counts["numpy_peak_bytes"] >= nbytes, f"{name}: {counts}"


def allocation_experiment(n: int | None = None, min_time_s: float = 0.2, seed: int = 0) -> dict:
    """Time y = a*b + c with a new result per call against writing into a reused buffer.

    CPU: NumPy and torch, measured. GPU: CuPy with its memory pool off and on, CuPy and torch
    with out= buffers, torch's caching allocator.
    """
    check_allocation_versions(seed=seed)
    cuda = device.is_cuda()
    n = n or (ALLOC_N_GPU if cuda else ALLOC_N_CPU)
    timings = bench.Timings()
    kw = dict(bytes=4 * n * 4, size=n, min_time_s=min_time_s, min_samples=3)
    counts = {}
    if not cuda:
        versions, _ = _numpy_versions(n, seed)
        versions.update(_torch_versions(n, seed, "cpu"))
        for name, fn in versions.items():
            timings.append(bench.benchmark(fn, label=name, backend="cpu", **kw))
            counts[name] = count_allocations(fn, calls=1)
    else:
        cp = _cupy()
        if cp is not None:
            fresh, reuse, no_pool = _cupy_versions(n, seed)
            want = device.to_host(fresh())
            with no_pool():  # the same two IEEE operations (a*b, then + c): the same bits
                check.assert_close(device.to_host(fresh()), want, rtol=0, atol=0,
                                   name="CuPy without a pool")
                timings.append(bench.benchmark(fresh, label="CuPy: new arrays, pool OFF", **kw))
            check.assert_close(device.to_host(reuse()), want, rtol=0, atol=0, name="CuPy with out=")
            timings.append(bench.benchmark(fresh, label="CuPy: new arrays, pool on", **kw))
            timings.append(bench.benchmark(reuse, label="CuPy: out= buffer", **kw))
        if device.torch_cuda_works():
            versions = _torch_versions(n, seed, "cuda")
            want = None
            for name, fn in versions.items():
                got = device.to_host(fn()).copy()
                want = got if want is None else want
                check.assert_close(got, want, rtol=0, atol=0, name=name)  # same two operations
                timings.append(bench.benchmark(fn, label=name + " (caching allocator)", **kw))
    return {"n": n, "device": device.describe().short_name, "timings": [t.to_dict() for t in timings],
            "allocations": counts}


def pool_demo(mib: int = 256) -> dict:
    """What a caching allocator keeps after ``del``: bytes in use and bytes held by the pool,
    relative to the start, for torch and CuPy (GPU only)."""
    device.require_cuda("Reading the memory pools")
    out = {"mib": mib, "stages": []}
    n = mib * MiB // 4

    def recorder(library, in_use, held):
        base = (in_use(), held())

        def stage(label):
            out["stages"].append({"library": library, "stage": label,
                                  "in use (MiB)": (in_use() - base[0]) / MiB,
                                  "held by the pool (MiB)": (held() - base[1]) / MiB})
        return stage

    if device.torch_cuda_works():
        torch = _torch()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        stage = recorder("torch", torch.cuda.memory_allocated, torch.cuda.memory_reserved)
        stage("start")
        x = torch.empty(n, device="cuda")
        stage(f"after torch.empty ({mib} MiB)")
        del x
        stage("after del")
        torch.cuda.empty_cache()
        stage("after torch.cuda.empty_cache()")
    cp = _cupy()
    if cp is not None:
        pool = cp.get_default_memory_pool()
        pool.free_all_blocks()
        stage = recorder("CuPy", pool.used_bytes, pool.total_bytes)
        stage("start")
        y = cp.empty(n, dtype=cp.float32)
        stage(f"after cp.empty ({mib} MiB)")
        del y
        stage("after del")
        pool.free_all_blocks()
        stage("after free_all_blocks()")
    return out


class ToyCachingAllocator:
    """A caching allocator in a few lines, to watch it work on any machine (a teaching model).

    Requests are rounded up to a block size; a freed block goes to a free list and is handed
    out again for the next request of the same size, so the expensive ``device_malloc`` is
    called only when no cached block fits. ``reserved`` is what ``nvidia-smi`` would show.
    """

    def __init__(self, round_to: int = 512):
        self.round_to = round_to
        self.free: dict[int, int] = {}
        self.in_use = 0
        self.reserved = 0
        self.device_mallocs = 0

    def malloc(self, nbytes: int) -> int:
        size = -(-nbytes // self.round_to) * self.round_to
        if self.free.get(size):
            self.free[size] -= 1
        else:
            self.device_mallocs += 1  # cudaMalloc: slow, and it may synchronize the device
            self.reserved += size
        self.in_use += size
        return size

    def release(self, size: int) -> None:
        self.in_use -= size
        self.free[size] = self.free.get(size, 0) + 1  # kept, not returned to the driver

    def empty_cache(self) -> None:
        self.reserved -= sum(s * k for s, k in self.free.items())
        self.free.clear()


def allocation_table(result: dict) -> Table:
    """Allocations per call of each CPU version: torch tensors with new storage (counted with a
    TorchFunctionMode), NumPy bytes at peak (tracemalloc) in arrays of the input's size."""
    n_bytes = 4 * result["n"]
    rows = Table([], caption="measured: new buffers per call")
    for name, c in result["allocations"].items():
        if name.startswith("torch"):
            rows.append({"version": name, "new buffers per call": c["torch_storages_per_call"],
                         "counted by": "tensors whose storage is new"})
        else:
            rows.append({"version": name, "new buffers per call": round(c["numpy_peak_bytes"] / n_bytes, 2),
                         "counted by": "tracemalloc peak / array size"})
    return rows


def toy_pool_run(iterations: int = 100, sizes=(4 * MiB, 4 * MiB, 1 * MiB)) -> dict:
    """A loop that allocates and frees the same buffers each iteration, with and without a pool."""
    pool = ToyCachingAllocator()
    for _ in range(iterations):
        blocks = [pool.malloc(s) for s in sizes]
        for b in blocks:
            pool.release(b)
    held = pool.reserved
    pool.empty_cache()
    return {"iterations": iterations, "requests": iterations * len(sizes),
            "device_mallocs_without_pool": iterations * len(sizes),
            "device_mallocs_with_pool": pool.device_mallocs,
            "in_use_after_loop": pool.in_use, "reserved_after_loop": held,
            "reserved_after_empty_cache": pool.reserved}


# --------------------------------------------------------------------------- 5. footprint

FOOTPRINT_WIDTHS = (256, 512, 512, 10)
FOOTPRINT_BATCH = 512
DTYPES = {p: precision.TORCH_NAMES[p] for p in precision.STORAGE}  # moved: precision


def _torch_dtype(name: str):
    torch = _torch()
    if name not in DTYPES:
        raise PrecisionError(f"dtype {name!r} is not one of {', '.join(DTYPES)}; pick one of those.")
    return getattr(torch, DTYPES[name])


def mlp(widths=FOOTPRINT_WIDTHS, dtype: str = "fp32", seed: int = 0, device_=None):
    """Linear/ReLU stack with the given layer widths, seeded, in ``dtype``."""
    torch = _torch()
    torch.manual_seed(seed)
    layers = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        layers.append(torch.nn.Linear(a, b))
        if i < len(widths) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).to(device=device_, dtype=_torch_dtype(dtype))


def mlp_counts(widths=FOOTPRINT_WIDTHS, batch: int = FOOTPRINT_BATCH) -> dict:
    """Parameters and saved activations of the MLP, by formula.

    A Linear keeps its input for backward and a ReLU its output, which is also the next
    Linear's input (one tensor): batch x (input width + every hidden width).
    """
    params = sum(a * b + b for a, b in zip(widths[:-1], widths[1:]))
    activations = batch * (widths[0] + sum(widths[1:-1]))
    return {"params": params, "activations": activations}


def _saved_activation_bytes(model, x) -> tuple[int, int, object]:
    """(bytes, elements) of the tensors autograd keeps for backward, parameters excluded."""
    torch = _torch()
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (saved.append(t), t)[1], lambda t: t):
        out = model(x)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = {}
    for t in saved:
        ptr = t.untyped_storage().data_ptr()
        if ptr in params:
            continue
        seen[(ptr, t.storage_offset(), tuple(t.shape), t.dtype)] = t
    return (sum(t.nbytes for t in seen.values()), sum(t.numel() for t in seen.values()), out)


def footprint(dtype: str = "fp32", master_weights: bool | None = None, widths=FOOTPRINT_WIDTHS,
              batch: int = FOOTPRINT_BATCH, seed: int = 0, device_=None) -> dict:
    """Bytes of weights, gradients, master copy, Adam state and activations: the model
    (``models.training_memory``) next to the real tensors' ``nbytes`` after one step."""
    torch = _torch()
    batch = whole_number(batch, "batch", FOOTPRINT_BATCH)
    counts = mlp_counts(widths, batch)
    model_mem = models.training_memory(counts["params"], counts["activations"], dtype=dtype,
                                       optimizer="adam", master_weights=master_weights)
    net = mlp(widths, dtype, seed, device_)
    x = torch.from_numpy(check.random_array((batch, widths[0]), np.float32, seed=seed)).to(
        device=device_, dtype=_torch_dtype(dtype))
    y = torch.from_numpy(check.rng(seed).integers(0, widths[-1], batch)).to(device_)
    act_bytes, act_elems, out = _saved_activation_bytes(net, x)
    loss = torch.nn.functional.cross_entropy(out.float(), y)
    loss.backward()
    params = list(net.parameters())
    if model_mem.master_weights:
        # Mixed precision by hand: fp32 master weights own the optimizer; the 16-bit copy runs.
        master = [p.detach().float().requires_grad_() for p in params]
        for m, p in zip(master, params):
            m.grad = p.grad.float()
        opt = torch.optim.Adam(master, lr=1e-3)
        opt.step()
        for m in master:
            m.grad = None  # the fp32 gradient only lives for the optimizer step
        master_bytes = sum(m.nbytes for m in master)
    else:
        opt = torch.optim.Adam(params, lr=1e-3)
        opt.step()
        master_bytes = 0
    state = sum(v.nbytes for s in opt.state.values() for k, v in s.items()
                if k in ("exp_avg", "exp_avg_sq"))
    measured = {"weights": sum(p.nbytes for p in params),
                "gradients": sum(p.grad.nbytes for p in params),
                "master_copy": master_bytes, "optimizer_state": state, "activations": act_bytes}
    modelled = {k: getattr(model_mem, k) for k in measured}
    measured["total"] = sum(measured.values())
    modelled["total"] = model_mem.total
    return {"dtype": dtype, "master_weights": model_mem.master_weights, "widths": list(widths),
            "batch": batch, "params": counts["params"], "activations": counts["activations"],
            "saved_elements": act_elems, "model": modelled, "measured": measured,
            "match": modelled == measured}


def check_footprint(dtypes=("fp32", "fp16", "bf16")) -> None:
    """The model's byte counts equal the real tensors', for every dtype."""
    for dt in dtypes:
        for master in ((None, False) if dt != "fp32" else (None,)):
            f = footprint(dt, master, widths=(33, 65, 17), batch=7)
            if f["saved_elements"] != f["activations"]:
                raise AssertionError(f"{dt}: autograd kept {f['saved_elements']} activation values "
                                     f"but the formula says {f['activations']}")
            if not f["match"]:
                raise AssertionError(f"{dt} (master={master}): model {f['model']} but tensors "
                                     f"{f['measured']}")


def footprints(dtypes=("fp32", "fp16", "bf16"), widths=FOOTPRINT_WIDTHS,
               batch: int = FOOTPRINT_BATCH) -> list[dict]:
    """Checked footprints for several dtypes (16-bit ones with fp32 master weights)."""
    check_footprint()
    return [footprint(dt, None, widths, batch) for dt in dtypes]


def largest_batch(budget_bytes: int, dtype: str, widths=FOOTPRINT_WIDTHS,
                  master_weights: bool | None = None) -> int:
    """Largest batch whose model footprint (weights, grads, state, activations) fits the budget."""
    per_sample = mlp_counts(widths, 1)["activations"]
    fixed = models.training_memory(mlp_counts(widths, 1)["params"], 0, dtype, "adam",
                                   master_weights).total
    per = models.training_memory(0, per_sample, dtype, "adam", master_weights).total
    return max(0, (int(budget_bytes) - fixed) // per)


def footprint_pair(dtype: str = "bf16", master_weights: bool = True, batch: int = FOOTPRINT_BATCH,
                   widths=FOOTPRINT_WIDTHS) -> list[dict]:
    """fp32 and one other precision at the same batch, for the widget."""
    rows = [footprint("fp32", None, widths, batch)]
    if dtype != "fp32":
        rows.append(footprint(dtype, master_weights, widths, batch))
    return rows


def largest_batches(budget_bytes: int = 64 * MiB, widths=FOOTPRINT_WIDTHS) -> Table:
    """Largest batch whose training footprint fits ``budget_bytes``, by precision (model)."""
    rows = Table([], caption=f"model: largest batch of the MLP {'-'.join(map(str, widths))} with "
                             f"Adam in {budget_bytes / MiB:g} MiB")
    for dt, master, label in (("fp32", None, "fp32"), ("bf16", True, "bf16 + fp32 master"),
                              ("bf16", False, "bf16 only")):
        b = largest_batch(budget_bytes, dt, widths, master)
        rows.append({"precision": label, "largest batch": b,
                     "vs fp32": f"{b / rows[0]['largest batch']:.2f}x" if rows else "1.00x"})
    return rows


def peak_memory(dtype: str = "fp32", widths=(1024, 4096, 4096, 1000), batch: int = 65536,
                seed: int = 0) -> dict:
    """Peak allocated GPU memory over two training steps, against the model's total (GPU only).

    The default MLP and batch make activations most of the memory (about 2.4 GB in fp32 against
    0.4 GB for weights, gradients and Adam state), as in most large-batch training.
    """
    device.require_cuda("Measuring peak GPU memory", needs="torch")
    torch = _torch()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    net = mlp(widths, dtype, seed, "cuda")
    params = list(net.parameters())
    master = None
    if dtype != "fp32":
        master = [p.detach().float().requires_grad_() for p in params]
    opt = torch.optim.Adam(master or params, lr=1e-4)
    x = torch.randn(batch, widths[0], device="cuda", dtype=_torch_dtype(dtype))
    y = torch.randint(0, widths[-1], (batch,), device="cuda")
    for _ in range(2):  # the second step has the optimizer state in place
        loss = torch.nn.functional.cross_entropy(net(x).float(), y)
        loss.backward()
        if master is not None:
            for m, p in zip(master, params):
                m.grad = p.grad.float()
        opt.step()
        if master is not None:
            with torch.no_grad():
                for m, p in zip(master, params):
                    p.copy_(m)
                    m.grad = None  # the fp32 gradient lives only for the update, as in footprint()
            for p in params:
                p.grad.zero_()
        else:
            opt.zero_grad(set_to_none=False)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    counts = mlp_counts(widths, batch)
    model_total = models.training_memory(counts["params"], counts["activations"], dtype).total
    del net, params, master, opt, x, y, loss
    torch.cuda.empty_cache()
    return {"dtype": dtype, "widths": list(widths), "batch": batch, "peak_bytes": int(peak),
            "model_bytes": int(model_total), "peak_over_model": peak / model_total}


# --------------------------------------------------------------------------- headless

THRESHOLDS = {"padded_pct_of_copy": 80.0, "padded_over_naive": 2.0, "pinned_over_pageable": 1.0,
              "pinned_from_bytes": 64 * MiB}


def gpu_check() -> dict:
    """The chapter's GPU figures, measured, with the pass/fail of each threshold of the issue:
    padded transpose >= 80 % of the copy kernel and >= 2x the naive one; pinned beats
    pageable host-to-device copies at 64 MiB and above. About 30-40 s on a GPU."""
    device.require_cuda("The chapter-2 GPU check", needs="cupy")  # transpose.cu through CuPy
    t0 = time.perf_counter()
    out: dict = {"device": device.describe().short_name, "notes": []}
    problem = emulator_problem()
    if problem:
        out["notes"].append(f"emulator race check and shared-memory trace skipped: {problem}")
    lad = transpose_ladder(min_time_s=0.3)
    summ = transpose_summary(lad)
    out["transpose"] = {"side": lad["side"], "tile": lad["tile"], "gbps": summ["gbps"],
                        "ceiling": summ["ceiling"], "padded_pct_of_copy": summ["padded_pct_of_copy"],
                        "padded_pct_of_each_copy": summ["padded_pct_of_each_copy"],
                        "padded_over_naive": summ["padded_over_naive"],
                        "shared_over_naive": summ["shared_over_naive"],
                        "spec_gbps": lad["spec_gbps"], "conflicts": lad["conflicts"]}
    pct, over = summ["padded_pct_of_copy"], summ["padded_over_naive"]
    checks = {"padded_pct_of_copy": check.at_least(
                  pct, THRESHOLDS["padded_pct_of_copy"],
                  "padded transpose GB/s as % of the tile-shaped copy kernel"),
              "padded_over_naive": check.at_least(
                  over, THRESHOLDS["padded_over_naive"], "padded transpose GB/s / naive transpose GB/s")}
    if device.torch_cuda_works():
        sweep = transfer_sweep(sizes=GPU_SIZES, min_time_s=0.1)
        ratios = pinned_over_pageable(sweep, THRESHOLDS["pinned_from_bytes"])
        out["transfers"] = {k: sweep[k] for k in ("gpu", "sizes", "series", "link_peak_gbps", "model")}
        out["transfers"]["pinned_over_pageable"] = {str(k): v for k, v in ratios.items()}
        worst = min(ratios.values()) if ratios else None
        checks["pinned_over_pageable"] = check.threshold(
            worst, THRESHOLDS["pinned_over_pageable"],
            worst is not None and worst > THRESHOLDS["pinned_over_pageable"],
            rule="more than", what=f"pinned / pageable host-to-device GB/s, smallest ratio at >= "
            f"{THRESHOLDS['pinned_from_bytes'] // MiB} MiB")
        loops = time_loops(min_time_s=0.2)
        out["loops"] = {t.label: {"per_step_ms": t.median_s / t.size * 1e3, "epoch_ms": t.median_s * 1e3}
                        for t in loops}
        out["loops"]["config"] = dict(GPU_LOOP_CONFIG)
        out["peak_memory"] = [peak_memory(dt) for dt in ("fp32", "bf16")]
    else:
        out["notes"].append("transfers, training loops and peak memory skipped: PyTorch has no CUDA here")
    alloc = allocation_experiment(min_time_s=0.1)
    out["allocation"] = {"n": alloc["n"], "median_ms": {d["label"]: d["median_s"] * 1e3
                                                      for d in alloc["timings"]}}
    out["pool"] = pool_demo()
    out["checks"] = checks
    out["passed"] = all(c["passed"] for c in checks.values())
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def run_all(quick: bool = True, progress=None) -> dict:
    """Every experiment of the chapter, as JSON-ready results (for the headless runner)."""
    steps = 6
    done = 0

    def tick():
        nonlocal done
        done += 1
        if progress:
            progress(done / steps)

    out = {"transfers": transfer_sweep(sizes=QUICK_GPU_SIZES if quick and device.is_cuda() else None,
                                       min_time_s=0.05 if quick else 0.2)}
    tick()
    out["loops_model"] = loop_timelines()
    if device.is_cuda() and device.torch_cuda_works():
        out["loops_measured"] = [t.to_dict() for t in time_loops(min_time_s=0.1 if quick else 0.5)]
    else:
        check_loops()
    tick()
    out["bank_conflicts"] = [tile_access_conflicts(t, p) for t in (16, 32) for p in (False, True)]
    out["transpose"] = transpose_ladder(quick=quick)
    tick()
    out["allocation"] = allocation_experiment(min_time_s=0.05 if quick else 0.2)
    out["toy_pool"] = toy_pool_run()
    tick()
    out["footprint"] = footprints()
    tick()
    if device.is_cuda() and device.torch_cuda_works():
        out["peak_memory"] = [peak_memory(dt) for dt in ("fp32", "bf16")]
    tick()
    return out
