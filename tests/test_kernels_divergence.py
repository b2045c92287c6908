"""kernels/divergence.py, the Python home of divergence.cu: versions in the file's order, launch, the element each thread takes, reference and tolerance, bytes and FLOPs."""
import numpy as np
import pytest

import gpucourse as gc
from gpucourse import check
from gpucourse.errors import LaunchError
from gpucourse.kernels import divergence
from gpucourse.kernels.shape import Launch


def test_versions_are_the_kernels_of_the_cu_file_in_order():
    assert divergence.VERSIONS == tuple(gc.kernels.load("divergence", backend="cpu").names)
    with pytest.raises(LaunchError, match=f"divergence.cu has no version 'v9'; use one of {divergence.VERSIONS[0]}"):
        divergence.launch("v9", 10)


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
