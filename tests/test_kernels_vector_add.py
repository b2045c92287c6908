"""kernels/vector_add.py, the Python home of vector_add.cu: versions, launch shapes, reference,
tolerances, FLOPs and bytes, each launch checked on the emulator."""
import numpy as np
import pytest

import gpucourse as gc
from gpucourse.errors import LaunchError
from gpucourse.kernels import copy, vector_add


@pytest.fixture(autouse=True)
def _cpu(monkeypatch):
    monkeypatch.setenv("GPUCOURSE_DEVICE", "cpu")


def test_the_versions_are_the_kernels_of_the_cu_file_in_order():
    assert vector_add.VERSIONS == tuple(gc.kernels.load("vector_add", backend="cpu").names)


def test_launch_shapes():
    assert vector_add.launch("vector_add_v1_naive", 1000) == (4, 256, 0)
    assert vector_add.launch("vector_add_v1_naive", 1000, block=96) == (11, 96, 0)
    for version in vector_add.VERSIONS[1:]:  # grid-stride: as copy.cu's grid-stride version
        assert vector_add.launch(version, 1 << 20, sm_count=3) == \
            copy.launch("copy_v3_float4", 1 << 20, sm_count=3) == (96, 256, 0)
    with pytest.raises(LaunchError, match=r"^vector_add.cu has no version 'vector_add_v4'"):
        vector_add.launch("vector_add_v4", 10)


@pytest.mark.parametrize("n", (1, 7, 1000, 4099))
def test_every_launch_matches_the_reference_bit_for_bit(n):
    """Outputs start as NaN (the emulator's poison), so an element no thread writes fails."""
    mod = gc.kernels.load("vector_add", backend="cpu")
    a = gc.check.random_array(n, np.float32, seed=n)
    b = gc.check.random_array(n, np.float32, seed=n + 1)
    rtol, atol = vector_add.TOLERANCE
    for version in vector_add.VERSIONS:
        for block, sm_count in ((256, None), (32, 1), (1, 1)):  # small grids: the loops turn
            out = gc.device.empty(n, np.float32)
            vector_add.run(mod[version], a, b, out, n, block=block, sm_count=sm_count)
            gc.check.assert_close(out, vector_add.reference(a, b), rtol=rtol, atol=atol,
                                  name=f"{version}, n={n}, block {block}")


def test_the_exact_tolerance_is_one_rounding_of_the_float64_sum():
    a = gc.check.random_array(10_000, np.float32, seed=1)
    b = gc.check.random_array(10_000, np.float32, seed=2)
    rtol, atol = vector_add.EXACT_TOLERANCE
    assert (rtol, atol) == (gc.precision.U32, 0.0)
    exact = a.astype(np.float64) + b
    gc.check.assert_close(vector_add.reference(a, b), exact, rtol=rtol, atol=atol)
    # A result off by two units in the last place of the largest sum does not pass.
    worst = np.argmax(np.abs(exact))
    bad = vector_add.reference(a, b)
    bad[worst] = np.nextafter(np.nextafter(bad[worst], np.inf), np.inf)
    with pytest.raises(AssertionError):
        gc.check.assert_close(bad, exact, rtol=rtol, atol=atol)


def test_flops_and_bytes():
    assert vector_add.flops(1000) == 1000
    assert vector_add.bytes_moved(1000) == 12000
    assert vector_add.bytes_moved(1000, itemsize=2) == 6000
