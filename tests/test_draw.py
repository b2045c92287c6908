"""gc.draw and the tracer under it: the recorded accesses of known kernels are exactly the
ones they make, and uncoalesced requests, bank conflicts and accesses out of bounds are marked."""
import numpy as np
import pytest

import gpucourse as gc
from gpucourse.profiler.trace import trace

SOURCE = r"""
extern "C" __global__ void strided(const float* x, float* y, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) y[t] = x[2 * t];
}
extern "C" __global__ void tile_shift(const float* x, float* y, int n, int stride) {
  __shared__ float tile[64];
  int t = threadIdx.x;
  tile[t] = x[blockIdx.x * 64 + t];
  __syncthreads();
  y[blockIdx.x * 64 + t] = tile[(t * stride) % 64];
}
extern "C" __global__ void count(const float* x, float* total, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) atomicAdd(total, x[t]);
}
"""


@pytest.fixture(scope="module")
def mod():
    return gc.kernels.from_source(SOURCE, name="draw_test.cu", backend="cpu")


def test_strided_copy_reads_element_2t(mod):
    x, y = np.arange(200, dtype=np.float32), np.full(100, np.nan, np.float32)
    tr = trace(mod.strided, 2, 64, (x, y, np.int32(100)))
    assert not tr.error
    np.testing.assert_array_equal(y, x[::2])          # the launch is real: results come back
    reads, writes = tr.of("x", "read"), tr.of("y", "write")
    assert len(reads) == len(writes) == 100 and not len(tr.of("x", "write"))
    t = tr.global_thread(reads)
    np.testing.assert_array_equal(reads["element"], 2 * t)
    np.testing.assert_array_equal(np.sort(tr.global_thread(writes)), np.arange(100))
    np.testing.assert_array_equal(writes["element"], tr.global_thread(writes))
    # A warp's 32 reads of every other float span 8 sectors where 4 would hold the data.
    full = reads[reads["thread"] < 32]
    assert set(full["sectors"]) == {8} and set(full["ideal_sectors"]) == {4}
    assert (writes["sectors"] <= writes["ideal_sectors"]).all()
    assert tr.code(int(reads[0]["line"])) == "if (t < n) y[t] = x[2 * t];"
    r, w = tr.per_thread()
    assert (r[:100] == 1).all() and (w[:100] == 1).all() and r[100:].sum() == 0


# stride 32: lanes read only the words 0 and 32, both in bank 0; the rest is broadcast.
@pytest.mark.parametrize("stride,ways", [(1, 1), (2, 2), (32, 2)])
def test_shared_bank_conflicts_are_measured(mod, stride, ways):
    x, y = np.arange(128, dtype=np.float32), np.zeros(128, np.float32)
    tr = trace(mod.tile_shift, 2, 64, (x, y, np.int32(128), np.int32(stride)))
    tile = tr.array("tile")
    assert tr.arrays[tile].space == "shared" and tr.arrays[tile].shape == (64,)
    loads = tr.of("tile", "read")
    assert len(loads) == 128 and set(loads["phase"]) == {1}    # after the barrier
    np.testing.assert_array_equal(loads["element"], (loads["thread"] * stride) % 64)
    assert int(loads["ways"].max()) == ways
    assert set(tr.of("tile", "write")["phase"]) == {0}
    np.testing.assert_array_equal(y[:64], x[:64][(np.arange(64) * stride) % 64])


def test_out_of_bounds_is_recorded_and_stops_the_launch(mod):
    x, y = np.arange(128, dtype=np.float32), np.zeros(128, np.float32)
    tr = trace(mod.strided, 2, 64, (x, y, np.int32(128)))
    bad = tr.out_of_bounds()
    assert len(bad) == 1 and int(bad[0]["element"]) == 128 and int(bad[0]["block"]) == 1
    assert tr.oob_sentence().startswith("thread 0 of block 1 read x[128], outside its 128 elements")


def test_atomics_are_writes(mod):
    x, total = np.ones(70, np.float32), np.zeros(1, np.float32)
    tr = trace(mod.count, 3, 32, (x, total, np.int32(70)))
    assert total[0] == 70
    assert len(tr.of("total", "atomic")) == 70
    r, w = tr.per_thread()
    assert (w[:70] == 1).all() and (r[:70] == 1).all()


def test_draw_marks_what_it_found(mod, tmp_path):
    x, y = np.arange(200, dtype=np.float32), np.zeros(100, np.float32)
    fig = gc.draw(mod.strided, 2, 64, (x, y, np.int32(100)))
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert any(t.startswith("x (kernel argument") and "uncoalesced" in t for t in titles)
    x2, y2 = np.arange(128, dtype=np.float32), np.zeros(128, np.float32)
    fig = gc.draw(mod.tile_shift, 2, 64, (x2, y2, np.int32(128), np.int32(2)))
    assert any("2-way bank conflicts" in ax.get_title(loc="left") for ax in fig.axes)
    fig = gc.draw(mod.strided, 2, 64, (x2, y2, np.int32(128)))
    assert "x[128]" in fig._suptitle.get_text()
    fig.savefig(tmp_path / "oob.png")


def test_large_launch_draws_one_block(mod):
    x, y = np.arange(20_000, dtype=np.float32), np.zeros(10_000, np.float32)
    fig = gc.draw(mod.strided, 40, 256, (x, y, np.int32(10_000)))
    assert "block 0 shown" in fig._suptitle.get_text()


def test_draw_needs_the_launch(mod):
    with pytest.raises(gc.errors.InputError, match="needs the launch"):
        gc.draw(mod.strided)


def test_on_the_gpu_path_draw_uses_the_emulator_run_of_the_same_source():
    """With CuPy (the fake one here) the kernel is a RawModule's; gc.draw traces the same source
    on the emulator, takes device arrays and leaves the launch's results in them."""
    from fakecuda.testing import installed

    with installed() as (cp, _):
        import gpucourse.kernels as gk

        mod = gk.from_source(SOURCE, name="draw_gpu.cu")
        assert mod.backend == "cuda"
        x, y = cp.asarray(np.arange(200, dtype=np.float32)), cp.zeros(100, np.float32)
        fig = gc.draw(mod.strided, 2, 64, (x, y, np.int32(100)))
        np.testing.assert_array_equal(y.get(), np.arange(0, 200, 2))
        assert any("uncoalesced" in ax.get_title(loc="left") for ax in fig.axes)


def test_blocks_smaller_than_a_warp_get_their_own_colours(mod):
    """Each block has its own warps: with blocks of 4 threads, elements of block 0 and block 1
    were drawn in one colour when the colour came from the global thread number / 32."""
    x, y = np.arange(12, dtype=np.float32), np.zeros(12, np.float32)
    fig = gc.draw(mod.strided, 3, 4, (x, y, np.int32(6)))
    y_panel = next(ax for ax in fig.axes if ax.get_title(loc="left").startswith("y "))
    cells = y_panel.images[0].get_array().reshape(-1, 4)[:6]
    assert not np.allclose(cells[0], cells[4])           # thread 0 of block 0, thread 0 of block 1
    assert np.allclose(cells[0], cells[3])               # one warp within block 0


def test_a_large_matrix_is_drawn_as_the_box_its_block_touched():
    """A 256 x 256 transpose: one block's 32 x 32 tile, in rows and columns, with the
    column-wise writes of the naive version marked uncoalesced."""
    tp = gc.kernels.load("transpose", backend="cpu")
    a, out = gc.check.random_array((256, 256)), np.zeros((256, 256), np.float32)
    fig = gc.draw(tp.transpose_v1_naive, (8, 8), (32, 8), (a, out, np.int32(256), np.int32(256)))
    panels = {ax.get_title(loc="left").split(" ")[0]: ax for ax in fig.axes if ax.get_title(loc="left")}
    assert set(panels) == {"in", "out"}
    for ax in panels.values():
        assert ax.images[0].get_array().shape[:2] == (32, 32)
        assert ax.get_xlabel() == "column" and ax.get_ylabel() == "row"
    assert "uncoalesced" in panels["out"].get_title(loc="left")
    assert "uncoalesced" not in panels["in"].get_title(loc="left")


def test_an_endless_loop_stops_at_the_time_limit():
    from gpucourse.profiler import ProfilerError

    spin = gc.kernels.from_source(r"""
extern "C" __global__ void spin(float* y, int n) {
  while (n > 0) y[0] += 1.0f;
}""", name="spin.cu", backend="cpu")
    with pytest.raises(ProfilerError, match="The launch of spin failed under the tracer"):
        trace(spin.spin, 1, 1, (np.zeros(1, np.float32), np.int32(1)), timeout=1.0)
