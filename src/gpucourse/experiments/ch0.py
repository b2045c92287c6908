"""Chapter 0 (start here): a Python loop against a vectorized call, checked then timed."""
from __future__ import annotations

import numpy as np

from .. import bench, check
from ..errors import whole_number


def sum_of_squares_loop(x: np.ndarray) -> float:
    """One element at a time, in the Python interpreter."""
    total = 0.0
    for v in x.tolist():
        total += v * v
    return total


def sum_of_squares_vectorized(x: np.ndarray) -> float:
    """One call into compiled code (NumPy's dot product)."""
    return float(np.dot(x, x))


VERSIONS = {"python loop": sum_of_squares_loop, "numpy vectorized": sum_of_squares_vectorized}


def check_versions(n: int = 10_007, seed: int = 0) -> None:
    """Every version agrees with a float64 reference on random non-uniform data."""
    for size in (1, 7, n):
        x = check.random_array(size, np.float64, seed=seed + size)
        ref = float(np.sum(x.astype(np.float64) ** 2))
        for name, fn in VERSIONS.items():
            check.assert_close(np.float64(fn(x)), np.float64(ref), rtol=1e-9, atol=0,
                               name=f"{name} at n={size}")


def loop_vs_vectorized(n: int = 100_000, seed: int = 0, min_time_s: float = 0.2) -> bench.Timings:
    """Check, then time both versions on ``n`` random float64 values."""
    whole_number(n, "n", "100_000")
    check_versions(seed=seed)
    x = check.random_array(n, np.float64, seed=seed)
    return bench.Timings(
        bench.benchmark(fn, x, label=name, bytes=x.nbytes, flops=2 * n, size=n,
                        min_time_s=min_time_s, backend="cpu")
        for name, fn in VERSIONS.items())


def size_sweep(sizes=(10, 100, 1_000, 10_000, 100_000), seed: int = 0,
               min_time_s: float = 0.05, progress=None) -> dict:
    """Median time of both versions over ``sizes``; returns {"sizes": [...], label: [...]}."""
    out = {"sizes": list(sizes), **{name: [] for name in VERSIONS}}
    for i, n in enumerate(sizes):
        for t in loop_vs_vectorized(n, seed=seed, min_time_s=min_time_s):
            out[t.label].append(t.median_s)
        if progress:
            progress((i + 1) / len(sizes))
    return out


def run_all(quick: bool = True, progress=None) -> dict:
    """Every experiment of the chapter, as JSON-ready results (for the headless runner)."""
    timings = loop_vs_vectorized(min_time_s=0.1 if quick else 0.5)
    sweep = size_sweep(min_time_s=0.02 if quick else 0.1, progress=progress)
    return {"loop_vs_vectorized": [t.to_dict() for t in timings], "size_sweep": sweep}
