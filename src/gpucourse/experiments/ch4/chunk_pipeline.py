"""Lab 4.5's measurement: a copy in, compute, copy out job in chunks on the CPU, three threads
standing in for a GPU's copy engines and its SMs, so that the learner decides how many chunks
from times measured now (the check, ``check.ch4.check_chunks``, decides on them too)."""
from __future__ import annotations

import queue
import threading

import numpy as np

from ... import bench, device
from ...check.ch4 import CHUNK_COUNTS
from ...check.compare import random_array


def _run_pipeline(src: np.ndarray, staged: np.ndarray, dst: np.ndarray, chunks: int) -> None:
    """Copy in, compute, copy out, chunk by chunk, with one thread per stage (the host thread
    copies in): chunk c's compute overlaps chunk c+1's copy in and chunk c-1's copy out."""
    size = -(-src.size // chunks)
    computed, done = queue.SimpleQueue(), queue.SimpleQueue()

    def compute():
        while (c := computed.get()) is not None:
            v = staged[c]
            for _ in range(2):  # NumPy releases the interpreter lock while it loops
                np.multiply(v, np.float32(0.999), out=v)
                np.add(v, np.float32(0.001), out=v)
            done.put(c)
        done.put(None)

    def copy_out():
        while (c := done.get()) is not None:
            np.copyto(dst[c], staged[c])

    workers = [threading.Thread(target=compute), threading.Thread(target=copy_out)]
    for w in workers:
        w.start()
    for lo in range(0, src.size, size):
        c = slice(lo, min(src.size, lo + size))
        np.copyto(staged[c], src[c])
        computed.put(c)
    computed.put(None)
    for w in workers:
        w.join()


def pipeline_sweep(chunk_counts=CHUNK_COUNTS, n: int = 2**21, min_time_s: float = 0.05) -> dict:
    """Measured now on this CPU: a copy in, compute, copy out job of ``n`` float32 values in
    each number of chunks, three threads standing in for a GPU's copy engines and its SMs
    (the result checked against NumPy first). Returns chunks, median seconds and the device."""
    src = random_array(n, np.float32, seed=45, kind="uniform")
    staged, dst = np.empty_like(src), np.empty_like(src)
    want = src.copy()
    for _ in range(2):
        want = (want * np.float32(0.999) + np.float32(0.001)).astype(np.float32)
    seconds = []
    for chunks in chunk_counts:
        dst[:] = np.nan
        _run_pipeline(src, staged, dst, chunks)
        bad = np.flatnonzero(np.abs(dst - want) > 4 * np.finfo(np.float32).eps)
        assert not bad.size, f"the pipeline in {chunks} chunks is wrong at element {bad[0]}."
        t = bench.benchmark(_run_pipeline, src, staged, dst, chunks, label=f"{chunks} chunks",
                            bytes=3 * 2 * 4 * n, backend="cpu", min_time_s=min_time_s,
                            min_samples=3, warmup_s=0.01)
        seconds.append(t.median_s)
    return {"chunks": [int(c) for c in chunk_counts], "seconds": seconds, "n": int(n),
            "device": device.describe().short_name, "kind": "measured"}
