"""kernels/saxpy.py, the Python home of saxpy.cu: versions in the file's order, launch, reference, tolerance, bytes and FLOPs."""
import numpy as np
import pytest

import gpucourse as gc
from gpucourse import check
from gpucourse.errors import LaunchError
from gpucourse.kernels import saxpy
from gpucourse.kernels.shape import Launch


def test_versions_are_the_kernels_of_the_cu_file_in_order():
    assert saxpy.VERSIONS == tuple(gc.kernels.load("saxpy", backend="cpu").names)
    with pytest.raises(LaunchError, match=f"saxpy.cu has no version 'v9'; use one of {saxpy.VERSIONS[0]}"):
        saxpy.launch("v9", 10)


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
