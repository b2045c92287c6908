"""CPU measurements more than one chapter compares with: the memory's read ceiling."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import bench, check


def cpu_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


def dot_on_every_core(a: np.ndarray, b: np.ndarray | None = None, **timing) -> bench.Timing:
    """``np.dot(a, b)`` (``b`` defaults to ``a``) timed with one contiguous chunk per core on a
    thread pool: a read of the arrays as fast as all cores together pull it.

    NumPy's dot releases the GIL but runs on one core (BLAS does not thread a vector dot), so a
    plain ``np.dot`` understates the read bandwidth of a multi-core CPU, and a multi-threaded
    library sum then passes its "ceiling". Checked against a float64 dot before it is timed.
    ``timing`` goes to ``bench.benchmark`` (``min_time_s``, ``warmup_s``).
    """
    same = b is None or b is a
    b = a if b is None else b
    a, b = np.ravel(a), np.ravel(b)
    workers = max(1, min(cpu_cores(), a.size))
    parts = list(zip(np.array_split(a, workers), np.array_split(b, workers)))
    with ThreadPoolExecutor(workers) as pool:
        def dot() -> float:
            return float(sum(pool.map(lambda p: np.dot(p[0], p[1]), parts)))

        want = float(np.dot(a.astype(np.float64), b))
        # float32 partial sums in another order: a few ulps of the sum of the magnitudes.
        scale = float(np.dot(np.abs(a).astype(np.float64), np.abs(b)))
        check.assert_close(np.float64(dot()), np.float64(want), rtol=0, atol=1e-4 * scale + 1e-30,
                           name="dot product on every core")
        return bench.benchmark(dot, label=f"dot product on {workers} core(s) (read)",
                               bytes=a.nbytes if same else a.nbytes + b.nbytes, size=a.size,
                               backend="cpu", **timing)
