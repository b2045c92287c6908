"""Numerical comparison: ``assert_close`` with a readable report, tolerances by dtype, and the
seeded, awkward inputs that every check runs on (random non-uniform data, sizes and shapes
that break sloppy bounds checks)."""
from __future__ import annotations

import numpy as np

from .. import precision
from ..device import to_host


def _as_numpy(x) -> np.ndarray:
    arr = to_host(x)
    if arr.dtype.kind == "V" or str(arr.dtype) == "bfloat16":
        arr = arr.astype(np.float32)
    return np.asarray(arr)


def _dtype_name(x) -> str:
    dtype = getattr(x, "dtype", None)  # not a getattr default: np.asarray fails on bf16 tensors
    return str(np.asarray(x).dtype if dtype is None else dtype).replace("torch.", "")


def compare_report(actual, expected, rtol: float, atol: float, name: str) -> str | None:
    """None when close, else a few lines saying where and how much they differ."""
    a, e = _as_numpy(actual), _as_numpy(expected)
    if a.shape != e.shape:
        return f"{name}: shape {a.shape} but expected {e.shape}."
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    nan_a, nan_e = np.isnan(a64), np.isnan(e64)
    allowed = np.broadcast_to(atol + rtol * np.abs(e64), e64.shape)  # atol may be elementwise
    bad = (nan_a != nan_e) | (np.abs(a64 - e64) > allowed)
    bad &= ~(nan_a & nan_e)
    if not bad.any():
        return None
    idx = np.argwhere(bad)
    atol_text = f"{atol:g}" if np.ndim(atol) == 0 else \
        f"an elementwise bound up to {float(np.max(atol, initial=0.0)):.3g}"
    lines = [f"{name}: {len(idx)} of {a.size} elements differ (rtol={rtol:g}, atol={atol_text})."]
    if nan_a.any() and not nan_e.any():
        count = int(nan_a.sum())
        lines.append(f"  {count} element{'s are' if count != 1 else ' is'} NaN: "
                     f"{'were they' if count != 1 else 'was it'} ever written?")
    for i in idx[:5]:
        i = tuple(int(v) for v in i)
        lines.append(f"  at index {i}: got {a64[i]!r}, expected {e64[i]!r}"
                     + ("" if np.ndim(atol) == 0 else f" (allowed {allowed[i]:.3g})"))
    if len(idx) > 5:
        lines.append(f"  ... first bad index {tuple(idx[0])}, last {tuple(idx[-1])}")
    with np.errstate(invalid="ignore", divide="ignore"):
        finite = np.isfinite(a64) & np.isfinite(e64)
        denom = np.linalg.norm(e64[finite]) or 1.0
        lines.append(f"  relative error norm |a-e|/|e| = "
                     f"{np.linalg.norm((a64 - e64)[finite]) / denom:.3g}")
    return "\n".join(lines)


def assert_close(actual, expected, rtol: float | None = None, atol: float | None = None,
                 name: str = "result") -> None:
    """Raise AssertionError with a readable diff unless ``actual`` matches ``expected``.

    Tolerances default to those of the less precise of the two dtypes (``precision.TOLERANCES``: a few
    roundings, not a sum). ``atol`` may be an array of elementwise bounds. NaN never passes
    unless the reference is NaN at the same place.
    """
    if rtol is None or atol is None:
        tols = [precision.tolerance(_dtype_name(actual)),
                precision.tolerance(_dtype_name(expected))]
        d_rtol, d_atol = max(tols)
        rtol = d_rtol if rtol is None else rtol
        atol = d_atol if atol is None else atol
    report = compare_report(actual, expected, rtol, atol, name)
    if report:
        raise AssertionError(report)


# --------------------------------------------------------------------------- inputs

def rng(seed: int = 0) -> np.random.Generator:
    """The course's seeded generator: every random input starts here."""
    return np.random.default_rng(seed)


def random_array(shape, dtype=np.float32, seed: int = 0, kind: str = "normal") -> np.ndarray:
    """Random, non-uniform data (never zeros, never all equal).

    ``kind``: ``normal`` (mean 0.5, mixed magnitudes), ``uniform`` in [-1, 1),
    ``positive`` in [0.5, 2), ``skewed`` (integers mostly in a few small values), ``int``
    (integers in [-100, 100]) or ``signs`` (+1 and -1 at random: every partial sum is an
    integer below 2^24 in magnitude, so a float32 sum of fewer than 2^24 of them is exact in
    any order; pair it with non-uniform data, which a kernel that handles only +-1 fails).
    """
    g = rng(seed)
    shape = (shape,) if np.isscalar(shape) else tuple(shape)
    if kind == "normal":
        # Mixed magnitudes catch relative-error bugs that unit-scale data hides.
        x = 0.5 + g.standard_normal(shape) * np.exp(g.uniform(-2, 2, shape))
    elif kind == "uniform":
        x = g.uniform(-1, 1, shape)
    elif kind == "positive":
        x = g.uniform(0.5, 2.0, shape)
    elif kind == "skewed":
        x = np.minimum(g.geometric(0.5, shape) - 1, 255)
    elif kind == "int":
        x = g.integers(-100, 101, shape)
    elif kind == "signs":
        x = 2 * g.integers(0, 2, shape) - 1
    else:
        raise ValueError(f"unknown kind {kind!r}: use normal, uniform, positive, skewed, int or "
                         "signs.")
    return np.ascontiguousarray(x.astype(dtype))


def awkward_sizes(block: int = 256, large: int = 1 << 20) -> list[int]:
    """Sizes that break kernels with sloppy bounds checks: 1, primes, block±1, large."""
    sizes = {1, 2, 7, 31, 33, 97, block - 1, block, block + 1, 3 * block + 5, 4099, large + 3}
    return sorted(s for s in sizes if s >= 1)


def awkward_shapes(tile: int = 32) -> list[tuple[int, int]]:
    """2-D shapes that are not multiples of ``tile``, including a single row and column."""
    return [(1, 1), (1, tile + 3), (tile + 3, 1), (tile - 1, tile + 1), (2 * tile + 5, 3 * tile - 7),
            (tile, tile), (97, 61)]
