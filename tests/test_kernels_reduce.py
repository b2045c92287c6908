"""kernels/reduce.py, the Python home of reduce.cu: versions in the file's order, the launch of each version (one thread per element, or enough blocks to fill every SM), the sum on the emulator within the tolerance of its launch, the tolerance itself, bytes and FLOPs."""
import numpy as np
import pytest

import gpucourse as gc
from gpucourse import check, precision
from gpucourse.errors import LaunchError
from gpucourse.kernels import reduce
from gpucourse.kernels.shape import Launch


def test_versions_are_the_kernels_of_the_cu_file_in_order():
    assert reduce.VERSIONS == tuple(gc.kernels.load("reduce", backend="cpu").names)
    with pytest.raises(LaunchError, match=f"reduce.cu has no version 'v9'; use one of {reduce.VERSIONS[0]}"):
        reduce.launch("v9", 10)


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


def test_reduce_v5_sums_right_with_blocks_that_are_not_whole_warps():
    """v5 ends with the same block_sum_to as v3 and v4, which takes any block size."""
    k = gc.kernels.load("reduce", backend="cpu").reduce_v5_float4_unrolled
    for n, block in ((1000 + 3, 100), (4099, 48), (33, 1)):
        x = check.random_array(n, np.float32, seed=n)
        out = np.zeros(1, np.float32)
        k((3,), (block,), (x, out, np.int32(n)))
        assert abs(float(out[0]) - float(np.sum(x, dtype=np.float64))) <= 1e-5 * np.abs(x).sum()
