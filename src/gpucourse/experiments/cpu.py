"""CPU measurements more than one chapter compares with (the memory's read ceiling), and the
data that lets a check demand an exact float32 sum."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import bench, check, precision

#: Float32 terms per BLAS dot in ``dot_on_every_core``: its longest float32 accumulation. The
#: rounding bound is then gamma_16384 = 9.8e-4 of sum|a*b| in any order, where one float32 dot
#: of 2^24 terms has no useful bound (n*u = 1). Shorter rows cost speed: one dot call per row
#: (4096 terms took about 4 % longer than one np.dot over 64 MiB here; 16384, under 2 %).
DOT_BLOCK = 16384


def cpu_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


def exact_sum_data(n: int, seed: int = 0, xp=np):
    """``n`` random float32 values, each +1 or -1 (``xp``: NumPy or CuPy), whose float32 sum is exact.

    Every partial sum is an integer; float32 holds every integer up to 2^24 exactly, so for
    n <= 2^24 a correct sum, in any order, equals the exact one (tolerance 0, and one element
    dropped or counted twice shows). For larger n the same holds in any order that does not
    look at the values (every library's and kernel's), except with probability below
    2n*exp(-2^47/n) (Hoeffding: a partial sum of m random signs passes t with probability at
    most 2*exp(-t^2/(2m))): below 1e-50000 at n = 2^30.
    """
    g = xp.random.default_rng(seed)
    return (g.random(n, dtype=xp.float32) < 0.5).astype(xp.float32) * 2 - 1


def block_dots(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-by-row float32 dot products of two (rows, k) arrays (NumPy's matmul: one dot per row)."""
    return np.matmul(a[:, None, :], b[:, :, None]).ravel()


def blocked_dot(a: np.ndarray, b: np.ndarray) -> float:
    """``a . b`` as float32 dots of at most DOT_BLOCK terms, added in float64."""
    whole = a.size - a.size % DOT_BLOCK
    rows = block_dots(a[:whole].reshape(-1, DOT_BLOCK), b[:whole].reshape(-1, DOT_BLOCK))
    tail = block_dots(a[whole:].reshape(1, -1), b[whole:].reshape(1, -1)) if whole < a.size else ()
    return float(np.sum(rows, dtype=np.float64)) + float(np.sum(tail, dtype=np.float64))


def dot_error_bound(a: np.ndarray, b: np.ndarray) -> float:
    """Largest error of ``blocked_dot(a, b)`` (and of any split of it into chunks) against the exact dot.

    Each float32 dot has at most DOT_BLOCK terms: gamma_DOT_BLOCK * sum|a*b| whatever the BLAS
    kernel's order. Adding the partial dots in float64 (at most gamma_n(2^-53) * sum|a*b| more)
    and the float64 reference (as much again) are the last two terms.
    """
    scale = float(np.dot(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64)))
    depth = max(1, min(a.size, DOT_BLOCK))
    return (precision.sum_error_bound(depth, scale, terms=a.size)
            + precision.gamma(a.size, precision.U64) * scale)


def dot_on_every_core(a: np.ndarray, b: np.ndarray | None = None, **timing) -> bench.Timing:
    """``a . b`` (``b`` defaults to ``a``) timed with one contiguous chunk per core on a
    thread pool: a read of the arrays as fast as all cores together pull it.

    NumPy's dot releases the GIL but a BLAS vector dot mostly runs on one core, so a plain
    ``np.dot`` understates the read bandwidth of a multi-core CPU, and a multi-threaded library
    sum then passes its "ceiling". Each chunk is a ``blocked_dot``, so its float32 rounding is
    bounded whatever the core count; checked against a float64 dot before it is timed.
    ``timing`` goes to ``bench.benchmark`` (``min_time_s``, ``warmup_s``).
    """
    same = b is None or b is a
    b = a if b is None else b
    a, b = np.ravel(a), np.ravel(b)
    workers = max(1, min(cpu_cores(), a.size))
    parts = list(zip(np.array_split(a, workers), np.array_split(b, workers)))
    with ThreadPoolExecutor(workers) as pool:
        def dot() -> float:
            return float(sum(pool.map(lambda p: blocked_dot(p[0], p[1]), parts)))

        want = float(np.dot(a.astype(np.float64), b.astype(np.float64)))
        # Float32 dots of at most DOT_BLOCK terms, added in float64: see dot_error_bound.
        check.assert_close(np.float64(dot()), np.float64(want), rtol=0, atol=dot_error_bound(a, b),
                           name="dot product on every core")
        return bench.benchmark(dot, label=f"dot product on {workers} core(s) (read)",
                               bytes=a.nbytes if same else a.nbytes + b.nbytes, size=a.size,
                               backend="cpu", **timing)
