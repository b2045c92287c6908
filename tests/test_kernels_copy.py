"""kernels/copy.py, the Python home of copy.cu: versions, launch shapes, arguments, reference,
tolerance and bytes, each launch checked on the emulator."""
import numpy as np
import pytest

import gpucourse as gc
from gpucourse.errors import LaunchError
from gpucourse.kernels import copy

SIZES = (1, 7, 33, 257, 4099)


@pytest.fixture(autouse=True)
def _cpu(monkeypatch):
    monkeypatch.setenv("GPUCOURSE_DEVICE", "cpu")


def test_the_versions_are_the_kernels_of_the_cu_file_in_order():
    assert copy.VERSIONS == tuple(gc.kernels.load("copy", backend="cpu").names)


def test_launch_shapes():
    assert copy.launch("copy_v1_coalesced", 1000, block=128) == (8, 128, 0)
    # 1000 elements as rows of 32: 32 rows of 32 = 1024 threads.
    assert copy.launch("copy_v2_strided", 1000, stride=32, block=128) == (8, 128, 0)
    assert copy.launch("copy_v2_strided", 1000, stride=3, block=128) == (8, 128, 0)  # 1002
    assert copy.launch("copy_v2_strided", 1025, stride=1025, block=1024) == (2, 1024, 0)
    # A grid-stride version: one block per 256 elements, at most 32 blocks per SM.
    assert copy.launch("copy_v3_float4", 1000, sm_count=2) == (4, 256, 0)
    assert copy.launch("copy_v3_float4", 1 << 20, sm_count=2) == (64, 256, 0)
    # The emulator reports no SM count: the home's default stands in.
    assert copy.launch("copy_v3_float4", 1 << 30).grid == copy.BLOCKS_PER_SM * copy.DEFAULT_SM_COUNT


def test_a_strided_launch_without_a_stride_or_an_unknown_version_is_one_sentence():
    with pytest.raises(LaunchError, match=r"^copy_v2_strided needs a stride: pass stride=1"):
        copy.launch("copy_v2_strided", 10)
    with pytest.raises(LaunchError, match=r"^copy.cu has no version 'copy_v9'; use one of "
                                          r"copy_v1_coalesced, copy_v2_strided, copy_v3_float4\.$"):
        copy.launch("copy_v9", 10)


@pytest.mark.parametrize("n", SIZES)
def test_every_launch_writes_every_element_once_as_the_reference_says(n):
    """Outputs start as NaN (the emulator's poison), so an element no thread writes fails."""
    mod = gc.kernels.load("copy", backend="cpu")
    x = gc.check.random_array(n, np.float32, seed=n)
    rtol, atol = copy.TOLERANCE
    for version in copy.VERSIONS:
        strides = (1, 2, 7, 32, 33) if version == "copy_v2_strided" else (None,)
        for stride in strides:
            for block, sm_count in ((256, None), (32, 1)):  # one SM: the grid-stride loop turns
                y = gc.device.empty(n, np.float32)
                copy.run(mod[version], x, y, n, stride=stride, block=block, sm_count=sm_count)
                gc.check.assert_close(y, copy.reference(x), rtol=rtol, atol=atol,
                                      name=f"{version}, n={n}, stride {stride}, block {block}")


def test_reference_and_bytes():
    x = np.arange(5, dtype=np.float32)
    ref = copy.reference(x)
    assert np.array_equal(ref, x) and ref is not x
    assert copy.TOLERANCE == (0.0, 0.0)
    assert copy.bytes_moved(1000) == 8000 and copy.bytes_moved(1000, itemsize=2) == 4000
    assert copy.args("copy_v2_strided", x, ref, 5, 3)[2:] == (5, 3)
    assert len(copy.args("copy_v1_coalesced", x, ref, 5)) == 3
