"""Section 4 of chapter 4, atomics and privatization: histogram.cu's global atomics against
per-block shared bins, checked exactly, timed on uniform and skewed data on a GPU, and the
contention counted from the data and the launch everywhere."""
from __future__ import annotations

import numpy as np

from ... import bench, check, device, kernels, models
from ...errors import LaunchError
from ...kernels import histogram as histogram_cu
from ...models import WARP_SIZE
from ...specs import model_gpu
from .common import references

GLOBAL, PRIVATE = histogram_cu.VERSIONS


def histogram_data(n: int, skew: float = 1.0, seed: int = 0) -> np.ndarray:
    """int32 values in [0, 256): a share ``skew`` from the course's skewed generator (half in bin 0, a quarter in bin 1, ...), the rest uniform."""
    if not (isinstance(skew, (int, float)) and 0.0 <= skew <= 1.0):
        raise LaunchError(f"skew is a fraction from 0 (uniform) to 1 (all skewed), e.g. 0.5 for "
                          f"50 %; got {skew!r}.")
    skewed = check.random_array(n, np.int32, seed=seed, kind="skewed")
    uniform = check.rng(seed + 1).integers(0, histogram_cu.NBINS, n).astype(np.int32)
    pick = check.rng(seed + 2).random(n) < skew
    return np.where(pick, skewed, uniform).astype(np.int32)


def contention(data: np.ndarray) -> dict:
    """Properties of the data that set atomic contention: the hottest bin's share, and per warp of 32 consecutive elements the most lanes that hit one bin."""
    data = np.asarray(data)
    counts = np.bincount(data, minlength=histogram_cu.NBINS)
    m = data.size // WARP_SIZE * WARP_SIZE
    if m:
        warps = np.sort(data[:m].reshape(-1, WARP_SIZE), axis=1)
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
    mod = kernels.load("histogram")
    launches = 0
    for n in sizes:
        for skew in (0.0, 1.0):
            data = histogram_data(n, skew, seed=seed + n)
            want = histogram_cu.reference(data)
            d = device.asarray(data)
            for bs in blocks:
                for v in histogram_cu.VERSIONS:
                    # three v2 blocks: each counts many values in its shared bins
                    shape = histogram_cu.launch(v, n, bs, blocks=3 if v == PRIVATE else None)
                    bins = device.asarray(np.zeros(histogram_cu.NBINS, np.uint32))
                    shape.run(getattr(mod, v), histogram_cu.args(d, bins, n))
                    got = device.to_host(bins)
                    if not np.array_equal(got, want):
                        bad = np.flatnonzero(got != want)
                        raise AssertionError(
                            f"{v} with n={n}, block {bs}, skew {skew}: {bad.size} bins differ, "
                            f"first bin {bad[0]}: got {got[bad[0]]}, expected {want[bad[0]]}.")
                    launches += 1
    return launches


def atomic_chains(data: np.ndarray, grid: int, block: int = histogram_cu.BLOCK) -> dict:
    """Longest run of atomic updates to one address, counted from the data and the launch shape.

    v1 sends every element to a global bin, so the hottest bin's count is one chain served by
    one L2 slice. v2's block ``b`` takes elements ``i`` with ``(i // block) % grid == b``
    (the grid-stride loop) and counts them in its own shared copy; its global chain is the
    number of blocks that add to the hottest global bin.
    """
    data = np.asarray(data)
    n, bins = data.size, histogram_cu.NBINS
    blk = (np.arange(n) // block) % grid
    per = np.bincount(blk * bins + data, minlength=grid * bins).reshape(grid, bins)
    return {"grid_v2": int(grid), "block": int(block),
            "v1_longest_chain": int(per.sum(axis=0).max()), "v1_global_atomics": int(n),
            "v2_longest_shared_chain": int(per.max()),
            "v2_longest_global_chain": int((per > 0).sum(axis=0).max()),
            "v2_global_atomics": int((per > 0).sum())}


def privatized_grid(gpu=None, block: int = histogram_cu.BLOCK) -> int:
    """v2's grid: as many blocks as fit on the GPU at once (SMs x resident blocks per SM)."""
    spec = model_gpu(gpu)
    return spec.sm_count * models.occupancy(spec.cc, block).active_blocks


def _measure_histogram(datasets, n: int, block: int, min_time_s: float) -> dict:
    import cupy as cp  # optional: installed only where there is a GPU

    mod = kernels.load("histogram")
    grid2 = privatized_grid(block=block)
    shape1 = histogram_cu.launch(GLOBAL, n, block)
    shape2 = histogram_cu.launch(PRIVATE, n, block, blocks=grid2)
    bins = cp.zeros(histogram_cu.NBINS, dtype=cp.uint32)
    meas = {"v1_s": [], "v2_s": [], "speedup": [], "grid_v2": grid2, "method": "CUDA events"}
    for data in datasets:
        d = cp.asarray(data)

        def v1():
            bins.fill(0)
            shape1.run(mod.histogram_v1_global_atomics, histogram_cu.args(d, bins, n))

        def v2():
            bins.fill(0)
            shape2.run(mod.histogram_v2_shared_privatized, histogram_cu.args(d, bins, n))

        want = histogram_cu.reference(data)
        for f in (v1, v2):
            f()
            if not np.array_equal(bins.get(), want):
                raise AssertionError(f"{f.__name__} histogram is wrong at full size on the GPU.")
        t1 = bench.benchmark(v1, label="v1 global atomics", bytes=histogram_cu.bytes_moved(n),
                             min_time_s=min_time_s)
        t2 = bench.benchmark(v2, label="v2 shared privatized", bytes=histogram_cu.bytes_moved(n),
                             min_time_s=min_time_s)
        meas["v1_s"].append(t1.median_s)
        meas["v2_s"].append(t2.median_s)
        meas["speedup"].append(t1.median_s / t2.median_s)
        del d
    return meas


def histogram(n: int | None = None, skews=(0.0, 1.0), block: int = histogram_cu.BLOCK, gpu=None,
              min_time_s: float = 0.1, check_first: bool = True) -> dict:
    """Check both kernels; time them on uniform and skewed data on a GPU; count contention everywhere."""
    if check_first:
        check_histogram()
    n = int(n or ((1 << 25) if device.on_gpu() else 1 << 22))
    spec = model_gpu(gpu)
    grid2 = privatized_grid(spec, block)
    chains_n = min(n, 1 << 22)  # counting is exact but costs host time: a prefix is enough
    out = {"device": device.describe().short_name, "backend": device.backend(), "n": n,
           "block": block, "skews": [float(s) for s in skews], "gpu": spec.name,
           "chains_n": chains_n,
           "contention": [], "chains": [], "measured": None,
           "reference": references("histogram", "speedup")}
    datasets = [histogram_data(n, s, seed=17) for s in skews]
    for data in datasets:
        out["contention"].append(contention(data[: 1 << 16]))
        out["chains"].append(atomic_chains(data[:chains_n], grid2, block))
    if device.on_gpu():
        out["measured"] = _measure_histogram(datasets, n, block, min_time_s)
    return out


def histogram_point(skew: float, n: int | None = None, gpu=None, min_time_s: float = 0.05) -> dict:
    """One position of the skew slider: an exact emulator check on data of this skew, then as ``histogram``."""
    mod = kernels.load("histogram")
    data = histogram_data(2000 + 3, skew, seed=23)
    want = histogram_cu.reference(data)
    for v in histogram_cu.VERSIONS:
        # v1 one thread per value (16 blocks of 128), v2 two blocks that loop
        shape = histogram_cu.launch(v, data.size, 128, blocks=2 if v == PRIVATE else None)
        bins = device.asarray(np.zeros(histogram_cu.NBINS, np.uint32))
        shape.run(getattr(mod, v), histogram_cu.args(device.asarray(data), bins, data.size))
        if not np.array_equal(device.to_host(bins), want):
            raise AssertionError(f"{v} is wrong at skew {skew} on n={data.size}.")
    return histogram(n=n or ((1 << 24) if device.on_gpu() else 1 << 20), skews=(float(skew),),
                     gpu=gpu, min_time_s=min_time_s, check_first=False)

