"""The homes of chapter 4's kernels (kernels/saxpy.py, reduce.py, histogram.py, divergence.py):
versions in the .cu's order, the launch of each, references, bytes and FLOPs, tolerances."""
import numpy as np
import pytest

import gpucourse as gc
from gpucourse import check, precision
from gpucourse.errors import LaunchError
from gpucourse.kernels import divergence, histogram, reduce, saxpy
from gpucourse.kernels.shape import Launch

HOMES = (saxpy, reduce, histogram, divergence)


@pytest.mark.parametrize("home", HOMES, ids=lambda h: h.__name__.rsplit(".", 1)[-1])
def test_versions_are_the_kernel_files_in_source_order(home):
    op = home.__name__.rsplit(".", 1)[-1]
    assert home.VERSIONS == tuple(gc.kernels.load(op, backend="cpu").names)
    with pytest.raises(LaunchError, match=f"{op}.cu has no version 'v9'; use one of {home.VERSIONS[0]}"):
        home.launch("v9", 10)


def test_reduce_launches_one_thread_per_element_or_fills_every_sm():
    n = 1 << 28
    assert reduce.launch("reduce_v1_atomic", n, 132) == Launch(1_048_576, 256, 0)
    assert reduce.launch("reduce_v2_shared_tree", n, 132) == Launch(1_048_576, 256, 1024)
    assert reduce.launch("reduce_v3_warp_shuffle", 1000, 132) == Launch(4, 256, 0)
    # grid-stride versions: 8 blocks of 256 per SM, fewer where n needs fewer
    assert reduce.launch("reduce_v4_grid_stride", n, 132) == Launch(1056, 256, 0)
    assert reduce.launch("reduce_v4_grid_stride", 1000, 132) == Launch(4, 256, 0)
    assert reduce.launch("reduce_v5_float4_unrolled", n, 132) == Launch(1056, 256, 0)
    assert reduce.launch("reduce_v5_float4_unrolled", 5000, 132) == Launch(2, 256, 0)
    assert reduce.launch("reduce_v4_grid_stride", n) == Launch(128, 256, 0)  # 16 SMs assumed
    assert reduce.launch("reduce_v2_shared_tree", 100, block=96) == Launch(2, 96, 384)
    assert reduce.depth("reduce_v1_atomic", Launch(4, 256), 1000) == 1000
    assert reduce.depth("reduce_v4_grid_stride", Launch(4, 256), 1000) == 1 + 256 + 4


@pytest.mark.skipif(gc.device.is_cuda(), reason="host arrays: the emulator's path")
@pytest.mark.parametrize("version", reduce.VERSIONS)
def test_reduce_run_sums_on_the_emulator_within_the_tolerance_of_its_launch(version):
    n = 30_011
    x = check.random_array(n, np.float32, seed=3)
    got = float(reduce.run(version, x, n, sm_count=2)[0])
    want, shape = reduce.reference(x), reduce.launch(version, n, 2)
    tol = reduce.tolerance(x, version, shape)
    assert abs(got - want) <= tol <= reduce.tolerance(x)
    assert reduce.bytes_moved(n) == 4 * n and reduce.flops(n) == n


def test_reduce_tolerance_is_zero_on_exact_data_and_gamma_n_elsewhere():
    signs = check.random_array(4099, np.float32, seed=1, kind="signs")
    assert reduce.tolerance(signs) == 0  # integer partial sums: exact in any order
    x = check.random_array(4099, np.float32, seed=1)
    scale = float(np.sum(np.abs(x.astype(np.float64))))
    assert reduce.tolerance(x) == precision.sum_error_bound(4099, scale)
    # a float32 sum in one order lies within it, one element lost does not
    assert abs(float(np.cumsum(x)[-1]) - reduce.reference(x)) <= reduce.tolerance(x)
    lost = np.delete(x, np.argmax(np.abs(x)))
    assert abs(reduce.reference(lost) - reduce.reference(x)) > reduce.tolerance(x)


def test_saxpy_launch_reference_and_traffic():
    assert saxpy.launch("saxpy_v1_one_per_thread", 1000, 256) == Launch(4, 256, 0)
    assert saxpy.launch("saxpy_v1_one_per_thread", 1000, 256, blocks=3) == Launch(4, 256, 0)
    assert saxpy.launch("saxpy_v2_grid_stride", 1000, 256) == Launch(4, 256, 0)
    assert saxpy.launch("saxpy_v2_grid_stride", 1000, 256, blocks=3) == Launch(3, 256, 0)
    x = check.random_array(1007, np.float32, seed=2)
    y = check.random_array(1007, np.float32, seed=3)
    want = saxpy.reference(np.float32(1.75), x, y)
    assert want.dtype == np.float32
    assert np.abs((np.float32(1.75) * x + y) - want).max() <= saxpy.tolerance(1.75, x, y)
    assert saxpy.bytes_moved(10) == 120 and saxpy.flops(10) == 20


def test_histogram_launch_and_reference():
    assert histogram.launch("histogram_v1_global_atomics", 2003, 128) == Launch(16, 128, 0)
    assert histogram.launch("histogram_v2_shared_privatized", 2003, 128) == Launch(16, 128, 0)
    assert histogram.launch("histogram_v2_shared_privatized", 2003, 128, blocks=2) == Launch(2, 128, 0)
    data = check.random_array(5000, np.int32, seed=4, kind="skewed")
    want = histogram.reference(data)
    assert want.dtype == np.uint32 and want.size == histogram.NBINS and want.sum() == 5000
    k = gc.kernels.load("histogram", backend="cpu")
    for v in histogram.VERSIONS:
        bins = np.zeros(histogram.NBINS, np.uint32)
        histogram.launch(v, data.size, 128, blocks=3).run(getattr(k, v),
                                                          histogram.args(data, bins, data.size))
        assert np.array_equal(bins, want), v


def test_divergence_launch_reference_and_tolerance():
    for v in divergence.VERSIONS:
        assert divergence.launch(v, 65, 64) == Launch(2, 64, 0)  # whole pairs of warps
        assert divergence.launch(v, 1, 256) == Launch(1, 256, 0)
    g = np.arange(64 * 10)
    assert sorted(divergence.element_of_thread("divergence_v2_per_warp", g)) == list(g)
    x = check.random_array(1003, np.float32, seed=7, kind="uniform")
    k = gc.kernels.load("divergence", backend="cpu")
    want, tol = divergence.reference(x, 6), divergence.tolerance(x, 6)
    for v in divergence.VERSIONS:
        y = np.full(x.size, np.nan, np.float32)
        divergence.launch(v, x.size, 128).run(getattr(k, v), divergence.args(x, y, x.size, 6))
        assert np.abs(y - want).max() <= tol, v
    # the other branch's coefficients are caught
    assert np.abs(divergence.reference(np.concatenate([[np.float32(0)], x]), 6)[1:] - want).max() > tol
    assert divergence.flops(10, 6) == 120 and divergence.bytes_moved(10) == 80


def test_reduce_v5_sums_right_with_blocks_that_are_not_whole_warps():
    """v5 ends with the same block_sum_to as v3 and v4, which takes any block size."""
    k = gc.kernels.load("reduce", backend="cpu").reduce_v5_float4_unrolled
    for n, block in ((1000 + 3, 100), (4099, 48), (33, 1)):
        x = check.random_array(n, np.float32, seed=n)
        out = np.zeros(1, np.float32)
        k((3,), (block,), (x, out, np.int32(n)))
        assert abs(float(out[0]) - float(np.sum(x, dtype=np.float64))) <= 1e-5 * np.abs(x).sum()
