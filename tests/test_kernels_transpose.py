"""kernels/transpose.py, the Python home of transpose.cu: versions, launch, static shared
memory, reference, tolerance and bytes, each launch checked on the emulator."""
import numpy as np
import pytest

import gpucourse as gc
from gpucourse.emulator.build import SHARED_MEM_LIMIT
from gpucourse.errors import LaunchError
from gpucourse.kernels import transpose

BUILDS = ((32, 8), (16, 16), (8, 2))  # (tile, block_rows)


@pytest.fixture(autouse=True)
def _cpu(monkeypatch):
    monkeypatch.setenv("GPUCOURSE_DEVICE", "cpu")


def test_the_versions_are_the_kernels_of_the_cu_file_in_order():
    assert transpose.VERSIONS == tuple(transpose.load(backend="cpu").names)


def test_launch_config():
    # The grid's x walks the columns of `in`, its y the rows: one block per tile.
    assert transpose.launch_config(67, 45) == ((2, 3), (32, 8))
    assert transpose.launch_config(1, 1, tile=16, block_rows=16) == ((1, 1), (16, 16))
    assert transpose.launch_config(129, 257, tile=8, block_rows=2) == ((33, 17), (8, 2))
    assert transpose.defines() == {"TILE": 32, "BLOCK_ROWS": 8}


@pytest.mark.parametrize("tile,block_rows", BUILDS)
def test_static_shared_memory_is_what_the_source_declares(tile, block_rows):
    """The emulator counts each kernel's __shared__ arrays in the build: the home agrees."""
    mod = transpose.load(tile, block_rows, backend="cpu")
    for v in transpose.VERSIONS:
        counted = SHARED_MEM_LIMIT - mod.emulator_limits(v).max_dynamic_shared
        assert transpose.static_shared_bytes(v, tile) == counted, v
    with pytest.raises(LaunchError, match=r"^transpose.cu has no version 'transpose_v4'"):
        transpose.static_shared_bytes("transpose_v4", tile)


@pytest.mark.parametrize("tile,block_rows", BUILDS)
def test_every_version_matches_the_reference_at_awkward_shapes(tile, block_rows):
    """Outputs start as NaN, so an element no thread writes fails; the shared versions are
    also race-checked (a missing barrier shows)."""
    mod = transpose.load(tile, block_rows, backend="cpu")
    rtol, atol = transpose.TOLERANCE
    for rows, cols in ((1, 1), (1, 7), (17, 33), (64, 65)):
        a = gc.check.random_array((rows, cols), np.float32, seed=rows * 100 + cols)
        for v in transpose.VERSIONS:
            out = np.full((cols, rows), np.nan, np.float32)
            transpose.run(mod[v], a, out, tile, block_rows, race_check=v != transpose.VERSIONS[0])
            gc.check.assert_close(out, transpose.reference(a), rtol=rtol, atol=atol,
                                  name=f"{v} at {rows} x {cols}, tile {tile}")


def test_reference_tolerance_and_bytes():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    ref = transpose.reference(a)
    assert ref.shape == (3, 2) and ref.flags.c_contiguous and np.array_equal(ref, a.T)
    assert transpose.TOLERANCE == (0.0, 0.0)
    assert transpose.bytes_moved(100, 30) == 24_000
    assert transpose.bytes_moved(4, 4, itemsize=2) == 64
