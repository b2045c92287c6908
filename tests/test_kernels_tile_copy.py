"""kernels/tile_copy.py, the Python home of tile_copy.cu: launched as a transpose, checked
against its reference on the emulator."""
import numpy as np
import pytest

import gpucourse as gc
from gpucourse.kernels import tile_copy, transpose


@pytest.fixture(autouse=True)
def _cpu(monkeypatch):
    monkeypatch.setenv("GPUCOURSE_DEVICE", "cpu")


def test_the_versions_are_the_kernels_of_the_cu_file_and_launch_as_a_transpose():
    assert tile_copy.VERSIONS == tuple(tile_copy.load(backend="cpu").names)
    assert tile_copy.launch_config is transpose.launch_config
    assert tile_copy.bytes_moved(10, 20) == transpose.bytes_moved(10, 20)


@pytest.mark.parametrize("tile,block_rows", ((32, 8), (16, 16), (8, 2)))
def test_the_copy_matches_the_reference_at_awkward_shapes(tile, block_rows):
    (name,) = tile_copy.VERSIONS
    k = tile_copy.load(tile, block_rows, backend="cpu")[name]
    rtol, atol = tile_copy.TOLERANCE
    for rows, cols in ((1, 1), (1, 35), (35, 1), (67, 45)):
        a = gc.check.random_array((rows, cols), np.float32, seed=rows + cols)
        out = np.full_like(a, np.nan)
        tile_copy.run(k, a, out, tile, block_rows)
        gc.check.assert_close(out, tile_copy.reference(a), rtol=rtol, atol=atol,
                              name=f"tile copy at {rows} x {cols}, tile {tile}")
