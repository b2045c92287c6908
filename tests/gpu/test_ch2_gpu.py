"""Chapter 2 on a real GPU: the kernels against NumPy, the issue's thresholds (padded transpose
>= 80 % of the copy kernel and >= 2x the naive one; pinned beats pageable from 64 MiB), the
loops, the memory pools and peak memory."""
import numpy as np
import pytest

from gpucourse import device
from gpucourse.errors import DeviceError

pytestmark = pytest.mark.gpu

try:
    _CUDA = device.backend() == "cuda"
except DeviceError:
    _CUDA = False
if not _CUDA:
    pytest.skip("no usable CUDA GPU here", allow_module_level=True)

from gpucourse.experiments import ch2  # noqa: E402
from gpucourse.experiments.ch2 import (common, headless, memory_footprint,  # noqa: E402
                                       transfers, transpose)

needs_cupy = pytest.mark.skipif(not device.cupy_works(), reason="CuPy is not installed")
needs_torch = pytest.mark.skipif(not device.torch_cuda_works(), reason="PyTorch has no CUDA here")


@needs_cupy
@pytest.mark.parametrize("tile", [16, 32])
def test_transpose_versions_match_numpy_on_the_gpu(tile):
    transpose.check_transpose(tile)


@needs_cupy
def test_tile_copy_matches_numpy_on_the_gpu():
    from gpucourse import check
    from gpucourse.kernels import tile_copy

    k = tile_copy.load(32, 8).tile_copy_v1_rows
    for rows, cols in ((1, 1), (35, 1), (67, 45), (1000, 1031)):
        host = check.random_array((rows, cols), np.float32, seed=rows)
        out = device.empty((rows, cols))
        tile_copy.run(k, device.asarray(host), out, 32, 8)
        check.assert_close(out, host, rtol=0, atol=0)


@needs_cupy
def test_transpose_ladder_meets_the_issue_thresholds():
    summary = transpose.transpose_summary(ch2.transpose_ladder(min_time_s=0.2))
    assert summary["padded_pct_of_copy"] >= headless.THRESHOLDS["padded_pct_of_copy"], summary
    assert summary["padded_over_naive"] >= headless.THRESHOLDS["padded_over_naive"], summary


@needs_torch
def test_pinned_beats_pageable_from_64_mib():
    sweep = ch2.transfer_sweep(sizes=(64 * common.MiB, 256 * common.MiB), min_time_s=0.1,
                               cupy_too=False)
    ratios = transfers.pinned_over_pageable(sweep)
    assert len(ratios) == 2 and all(r > 1.0 for r in ratios.values()), ratios


@needs_torch
def test_loops_agree_and_prefetch_is_not_slower_than_copy_every_step():
    t = ch2.time_loops(min_time_s=0.1).by_label()
    naive = t["copy every step (pageable)"]
    assert t["pinned + non_blocking + prefetch"].median_s <= naive.median_s * 1.05
    assert t["resident on the device"].median_s <= naive.median_s * 1.05


@needs_torch
def test_footprint_matches_on_the_gpu_and_peak_covers_the_model():
    for dt in ("fp32", "bf16"):
        f = memory_footprint.footprint(dt, device_="cuda")
        assert f["match"], f
    peak = ch2.peak_memory("bf16", widths=(1024, 2048, 2048, 100), batch=512)
    assert peak["peak_over_model"] >= 0.95, peak


def test_pools_keep_memory_after_del():
    demo = ch2.pool_demo(mib=64)
    for lib in {s["library"] for s in demo["stages"]}:
        stages = [s for s in demo["stages"] if s["library"] == lib]
        after_del = stages[2]
        assert after_del["in use (MiB)"] < 1 and after_del["held by the pool (MiB)"] >= 63, stages
        assert stages[3]["held by the pool (MiB)"] < after_del["held by the pool (MiB)"], stages


@needs_cupy
def test_cupy_without_pool_is_slower_than_with_pool():
    res = ch2.allocation_experiment(n=1 << 20, min_time_s=0.1)
    t = {d["label"]: d["median_s"] for d in res["timings"]}
    assert t["CuPy: new arrays, pool OFF"] > t["CuPy: new arrays, pool on"], t


@pytest.mark.full_gpu_check
@needs_cupy
def test_gpu_check_is_json_ready():
    import json

    out = ch2.gpu_check()
    json.dumps(out)
    assert set(out["checks"]) >= {"padded_pct_of_copy", "padded_over_naive"}
    assert all(set(c) == {"value", "threshold", "passed", "what", "rule"} for c in out["checks"].values())
