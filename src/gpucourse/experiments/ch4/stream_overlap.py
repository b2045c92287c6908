"""Section 3 of chapter 4, streams: copy in, compute, copy out, run serially, chunked with a
sync per chunk, and over several streams; measured with CUDA events on a GPU, from
``models.stream_timeline`` elsewhere."""
from __future__ import annotations

import numbers

import numpy as np

from ... import check, device, kernels, models
from ...errors import LaunchError, positive_number, whole_number
from ...kernels import divergence as divergence_cu
from ...specs import model_gpu

#: The compute step: a kernel whose time grows with its k argument and that diverges nowhere.
STREAM_KERNEL = "divergence_v3_branch_free"


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
    return getattr(kernels.load("divergence"), STREAM_KERNEL)


def check_streams_kernel(n: int = 1000 + 1, k: int = 5, seed: int = 11) -> None:
    """The compute step of the streams experiment (divergence_v3) against NumPy."""
    x = check.random_array(n, np.float32, seed=seed, kind="uniform")
    y = device.empty(n, np.float32)
    divergence_cu.launch(STREAM_KERNEL, n, 128).run(
        _stream_compute_kernel(), divergence_cu.args(device.asarray(x), y, n, k))
    check.assert_close(device.to_host(y), divergence_cu.reference(x, k), rtol=0,
                       atol=divergence_cu.tolerance(x, k), name="streams compute kernel")


def _measure_streams(n_streams: int, chunks: int, nbytes: int, compute_ratio: float,
                     repeats: int = 5) -> dict:
    """Copy in, compute, copy out on a GPU: serial, chunked with a sync per chunk, and over streams."""
    import cupy as cp  # optional: installed only where there is a GPU
    import cupyx

    n = nbytes // 4
    n -= n % chunks
    host_in = cupyx.empty_pinned(n, dtype=np.float32)
    host_in[:] = np.random.default_rng(3).random(n, dtype=np.float32)
    host_out = cupyx.empty_pinned(n, dtype=np.float32)
    d_in = cp.empty(n, dtype=cp.float32)
    d_out = cp.empty(n, dtype=cp.float32)
    kern = _stream_compute_kernel()
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(n_streams)]
    main = cp.cuda.Stream(non_blocking=True)

    def ev(stream):
        e = cp.cuda.Event()
        e.record(stream)
        return e

    def timed(k, nchunks, nstreams, sync_each):
        """Run once; return (total seconds, [(engine, op, end event, stream)])."""
        size = n // nchunks
        shape = divergence_cu.launch(STREAM_KERNEL, size)
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
                shape.run(kern, divergence_cu.args(d_in[lo:hi], d_out[lo:hi], size, k))
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
    head = host_in[: min(n, 4096)]
    check.assert_close(host_out[: min(n, 4096)], divergence_cu.reference(head, k),
                       rtol=0, atol=divergence_cu.tolerance(head, k), name="streams output")
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
    if device.on_gpu():
        res = _measure_streams(n_streams, chunks, nbytes, compute_ratio)
        res["gpu"] = device.describe().name
    else:
        res = stream_model(n_streams, chunks, nbytes, compute_ratio, gpu)
    res["device"] = device.describe().short_name
    res["overlap_vs_bound"] = res["multi"]["total_s"] / res["bound_s"]
    res["overlap_vs_isolated_bound"] = res["multi"]["total_s"] / res["bound_isolated_s"]
    return res

