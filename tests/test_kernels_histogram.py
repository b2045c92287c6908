"""kernels/histogram.py, the Python home of histogram.cu: versions in the file's order, launch and reference, each version on the emulator."""
import numpy as np
import pytest

import gpucourse as gc
from gpucourse import check
from gpucourse.errors import LaunchError
from gpucourse.kernels import histogram
from gpucourse.kernels.shape import Launch


def test_versions_are_the_kernels_of_the_cu_file_in_order():
    assert histogram.VERSIONS == tuple(gc.kernels.load("histogram", backend="cpu").names)
    with pytest.raises(LaunchError, match=f"histogram.cu has no version 'v9'; use one of {histogram.VERSIONS[0]}"):
        histogram.launch("v9", 10)


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
