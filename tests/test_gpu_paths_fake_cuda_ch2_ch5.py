"""SMOKE TEST of chapters 2 and 5's GPU-only code paths on a FAKE CUDA device: not a measurement.

The same kind of test as test_gpu_paths_fake_cuda.py (chapters 1 and 4), on ``tests/fakecuda``:
``gpu_check()`` of chapters 2 and 5, and the CuPy branches they and the notebooks call: the
transpose ladder and its widget, allocation with CuPy's pool off and on, the pool demo, CuPy
host-to-device copies, ``run_all`` of chapter 2; the SGEMM ladder against ``cupy.matmul`` (with
v6's tile tuning), the matmul size widget, the CuPy ElementwiseKernel fusion, cupyx's sparse
products and the library table of chapter 5; and the figures the notebooks draw from them.
``gpu_check()``'s results also go through what ``make gpu-check`` does with them: the threshold
summary, and the reference data that a machine without a GPU then draws.

PyTorch is a CPU build here, so ``device.torch_cuda_works()`` is False: the experiments that
need PyTorch on the GPU skip themselves (or run PyTorch on the CPU), and the tests check that
the results say so rather than faking CUDA for PyTorch.

Only shapes are asserted: keys, lengths, finite numbers, threshold records. The fake's timings
are host times of an emulator and mean nothing; no test looks at a timing's size or at whether
a GPU threshold passed. Problem sizes are shrunk by patching size helpers and defaults, never
the code paths.
"""
from __future__ import annotations

import contextlib
import ctypes
import io

import numpy as np
import pytest

from fakecuda.testing import (all_finite, assert_jsonable, assert_threshold, capped, finite,
                              installed, shrink_defaults, thresholds_printed)
from gpucourse import bench, device, reference, specs
from gpucourse.display import Note, Table
from gpucourse.experiments import ch2, ch5
from gpucourse.experiments.ch2 import allocation as ch2_allocation, common as ch2_common
from gpucourse.experiments.ch2 import transfers as ch2_transfers, transpose as ch2_transpose
from gpucourse.kernels import matmul
from gpucourse.plot import ch2 as fig2, ch5 as fig5, ladder

# Tiny problem sizes (the real ones fill the H200).
CH2_TRANSPOSE_SIDE = 256
CH2_ALLOC_N = 1 << 15
CH2_POOL_MIB = 4
CH5_SGEMM_N = 128  # one 128 x 128 tile of v5/v6, two column blocks of the tuned 128 x 64 tile
CH5_FUSION_N = 1 << 14
CH5_SPARSE_N = 256
CH5_PRECISION_N = 64

NO_TORCH_CUDA_NOTE = "transfers, training loops and peak memory skipped: PyTorch has no CUDA here"
CUPY_ALLOCATION_LABELS = ["CuPy: new arrays, pool OFF", "CuPy: new arrays, pool on",
                          "CuPy: out= buffer"]
TRANSPOSE_LABELS = [*ch2_transpose.CEILINGS, *ch2_transpose.TRANSPOSE_VERSIONS, "ref (library device-to-device copy)"]
FUSION_LABELS = ["eager: 5 ops, 5 new tensors", "5 ops into one buffer", "CuPy: 5 ops",
                 "fused: CuPy ElementwiseKernel"]

# cupy.asarray of a CPU torch tensor (PyTorch has no CUDA here) goes through torch's __array__,
# which NumPy 2 warns about; not the course's concern.
pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning")


@contextlib.contextmanager
def _fake_gpu():
    """The fake GPU with chapters 2 and 5 at small sizes; yields the fake cupy."""
    with installed() as (cp, mp):
        capped(mp, ch2_transpose, "transpose_side", CH2_TRANSPOSE_SIDE)
        mp.setattr(ch2_allocation, "ALLOC_N_GPU", CH2_ALLOC_N)
        shrink_defaults(mp, ch2.pool_demo, mib=CH2_POOL_MIB)
        capped(mp, ch5.sgemm, "default_sgemm_n", CH5_SGEMM_N)
        real_sgemm = ch5.sgemm.sgemm_ladder

        def sgemm_at_most(n=None, *args, **kwargs):
            # gpu_check asks for 4096³ by a literal argument: the real ladder runs, smaller.
            return real_sgemm(min(n or ch5.sgemm.default_sgemm_n(), CH5_SGEMM_N), *args, **kwargs)

        # where gpu_check and the size widget look it up
        mp.setattr(ch5.sgemm, "sgemm_ladder", sgemm_at_most)
        # The fusion's CuPy rows run on the (fake) GPU, so it takes the GPU size rule; PyTorch
        # is on the CPU here, so the sparse sweep takes the CPU sizes.
        capped(mp, device, "bandwidth_buffer_bytes", 4 * CH5_FUSION_N)
        mp.setitem(ch5.sparse.SPARSE_CPU, "n", CH5_SPARSE_N)
        mp.setitem(ch5.sparse.SPARSE_GPU, "n", CH5_SPARSE_N)
        shrink_defaults(mp, ch5.precision_sweep, n=CH5_PRECISION_N)
        yield cp


@pytest.fixture
def fake_gpu():
    """The fake CUDA GPU, installed for one test and fully removed afterwards."""
    with _fake_gpu() as cp:
        yield cp


# --------------------------------------------------------------------------- helpers

def _drawn(fig) -> None:
    """Render a figure (as a notebook would show it)."""
    fig.savefig(io.BytesIO(), format="png", dpi=30)


def _timings_ok(timings, labels) -> None:
    """Timing dicts (or Timings) with these labels, every one with finite samples."""
    ts = [bench.Timing.from_dict(t) if isinstance(t, dict) else t for t in timings]
    assert [t.label for t in ts] == list(labels)
    for t in ts:
        assert t.count >= 1 and all_finite(t.samples_s), t.label


def _assert_ch2_result(r) -> None:
    assert set(r) == {"device", "notes", "transpose", "allocation", "pool", "checks", "passed",
                      "seconds"}
    assert r["device"] == "NVIDIA H200" and isinstance(r["passed"], bool) and finite(r["seconds"])
    # PyTorch has no CUDA here: its parts are skipped, and the result says so.
    assert r["notes"] == [NO_TORCH_CUDA_NOTE]
    assert set(r["checks"]) == {"padded_pct_of_copy", "padded_over_naive"}
    for name, c in r["checks"].items():
        assert_threshold(name, c)

    tr = r["transpose"]
    assert tr["side"] == CH2_TRANSPOSE_SIDE and tr["tile"] == 32
    assert set(tr["gbps"]) == set(TRANSPOSE_LABELS) and all_finite(list(tr["gbps"].values()))
    assert tr["ceiling"] in ch2_transpose.CEILINGS
    for k in ("padded_pct_of_copy", "padded_over_naive", "shared_over_naive", "spec_gbps"):
        assert finite(tr[k]), k
    assert set(tr["padded_pct_of_each_copy"]) == set(ch2_transpose.CEILINGS)
    assert set(tr["conflicts"]) == set(ch2_transpose.TRANSPOSE_VERSIONS)

    alloc = r["allocation"]
    assert alloc["n"] == CH2_ALLOC_N
    assert list(alloc["median_ms"]) == CUPY_ALLOCATION_LABELS
    assert all_finite(list(alloc["median_ms"].values()))
    _assert_pool(r["pool"])
    assert_jsonable(r)


def _assert_pool(pool) -> None:
    assert pool["mib"] == CH2_POOL_MIB
    stages = pool["stages"]
    # torch's pool is read only where PyTorch has CUDA
    assert [s["library"] for s in stages] == ["CuPy"] * 4
    assert [s["stage"] for s in stages] == ["start", f"after cp.empty ({CH2_POOL_MIB} MiB)",
                                             "after del", "after free_all_blocks()"]
    for s in stages:
        assert finite(s["in use (MiB)"]) and finite(s["held by the pool (MiB)"]), s


def _assert_ch5_result(r) -> None:
    # PyTorch is a CPU build here: its parts are left out with a note, never saved as the GPU's
    assert set(r) == {"checks", "passed", "sgemm", "fusion", "notes", "cudnn_benchmark", "seconds",
                      "tensor_cores"}
    assert r["tensor_cores"]["labels"][-1] == "ref (cuBLAS FP16, cupy.matmul)"
    assert len(r["notes"]) == 1 and "PyTorch has no CUDA" in r["notes"][0]
    assert isinstance(r["passed"], bool) and finite(r["seconds"])
    # no torch.compile threshold and no sparse crossover: both need PyTorch on the GPU
    assert set(r["checks"]) == {"sgemm_vs_cublas", "sgemm_vs_cublas_stretch", "fusion_speedup"}
    for name, c in r["checks"].items():
        assert_threshold(name, c)

    sg = r["sgemm"]
    assert sg["n"] == CH5_SGEMM_N
    assert sg["labels"] == [*matmul.VERSIONS, "ref (cuBLAS, cupy.matmul)"]
    assert len(sg["gflops"]) == len(sg["median_s"]) == len(sg["labels"])
    assert all_finite(sg["gflops"]) and all_finite(sg["median_s"])
    assert finite(sg["cublas_gflops"]) and finite(sg["peak_gflops"])
    assert finite(sg["best_pct_of_cublas"]) and sg["best"] in matmul.VERSIONS
    assert set(sg["configs"]) == set(matmul.VERSIONS)
    # v6 was tuned: its config is one of the tile shapes tried
    tried = [{**matmul.DEFAULTS, **d} for d in matmul.V6_TUNING]
    assert sg["configs"]["matmul_v6_vectorized"] in tried

    fu = r["fusion"]
    assert fu["n"] == CH5_FUSION_N and fu["labels"] == FUSION_LABELS
    assert all_finite(fu["median_s"]) and finite(fu["copy_s"]) and finite(fu["cupy_speedup"])
    assert fu["speedup"] == {} and fu["compile_s"] is None and fu["compile_error"] is None
    assert r["cudnn_benchmark"] is None
    assert_jsonable(r)


def _as_reference_data(mp, tmp_path, section: str, result: dict):
    """Write ``result`` as reference data of the fake H200 (as make gpu-check does, into a
    temporary folder), and make it the only reference data the course sees."""
    path = reference.write({section: result}, gpu="NVIDIA H200",
                           command="python tools/gpu_check.py (fake GPU)", folder=tmp_path)
    real_load = reference.load
    mp.setattr(reference, "available", lambda folder=None: [real_load(path)])
    return path


# --------------------------------------------------------------------------- the fake's additions

def test_the_fake_pools_memory_and_runs_elementwise_kernels_and_sparse_products(fake_gpu):
    cp = fake_gpu
    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    used, held = pool.used_bytes(), pool.total_bytes()
    x = cp.empty(1 << 16, dtype=cp.float32)
    assert pool.used_bytes() - used == x.nbytes
    del x
    assert pool.used_bytes() == used and pool.total_bytes() - held == 1 << 18  # cached
    pool.free_all_blocks()
    assert pool.total_bytes() == used
    cp.cuda.set_allocator(None)  # no pool: not counted
    y = cp.empty(1 << 16, dtype=cp.float32)
    assert pool.used_bytes() == used
    cp.cuda.set_allocator(pool.malloc)
    del y

    ek = cp.ElementwiseKernel("float32 x", "float32 y", ch5.kernel_fusion.CUPY_CHAIN, "chain")
    host = np.linspace(-2, 2, 1003, dtype=np.float32)
    got = ek(cp.asarray(host))
    assert type(got).__module__ == "cupy"
    np.testing.assert_allclose(got.get(), ch5.kernel_fusion.chain_numpy(host), rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError):
        ek(host)  # a NumPy array, as with CuPy
    with pytest.raises(TypeError):
        ek(cp.asarray(host.astype(np.float64)))  # the fake does not cast

    import cupyx.scipy.sparse as cps

    dense = np.where(np.arange(60).reshape(6, 10) % 7 == 0, 1.5, 0.0).astype(np.float32)
    s = cps.csr_matrix(cp.asarray(dense))
    assert s.nnz == np.count_nonzero(dense)
    b = np.arange(30, dtype=np.float32).reshape(10, 3)
    np.testing.assert_allclose(cp.asnumpy(s @ cp.asarray(b)), dense @ b)
    with pytest.raises(TypeError):
        s @ b

    dst = cp.zeros(8, dtype=cp.float32)
    src = np.arange(8, dtype=np.float32)
    dst.data.copy_from_host_async(ctypes.c_void_p(src.ctypes.data), 32, cp.cuda.Stream())
    assert np.array_equal(dst.get(), src)
    assert float(cp.linalg.norm(cp.asarray(np.array([3.0, 4.0])))) == 5.0


# --------------------------------------------------------------------------- chapter checks

def _gpu_check_as_reference_data(chapter, assert_result, thresholds: int, capsys, mp,
                                 tmp_path) -> dict:
    """``chapter.gpu_check()`` on the fake GPU: its result's shape, make gpu-check's one line
    per threshold, then the result made the only reference data the course sees."""
    with _fake_gpu():
        r = chapter.gpu_check()
    assert_result(r)
    n = chapter.__name__.rsplit("ch", 1)[1]
    lines = thresholds_printed(capsys, {n: r})
    assert len(lines) == thresholds and all(" PASS " in l or " FAIL " in l for l in lines), lines
    _as_reference_data(mp, tmp_path, f"ch{n}", r)
    return r


def test_ch2_gpu_check_runs_on_the_fake_gpu_and_makes_reference_data(tmp_path, capsys,
                                                                     monkeypatch):
    _gpu_check_as_reference_data(ch2, _assert_ch2_result, 2, capsys, monkeypatch, tmp_path)
    # A machine without a GPU draws the transpose bandwidths from this reference data.
    assert ch2.target_gpu().key == ch2_common.DEFAULT_MODEL_GPU  # no transfers measured
    lad = ch2.transpose_ladder()
    assert lad["kind"] == "model" and lad["timings"] == []
    fig = fig2.transpose_figure(lad)
    assert "reference data" in fig.axes[0].get_legend_handles_labels()[1]
    _drawn(fig)


def test_ch5_gpu_check_runs_on_the_fake_gpu_and_makes_reference_data(tmp_path, capsys,
                                                                     monkeypatch):
    r = _gpu_check_as_reference_data(ch5, _assert_ch5_result, 3, capsys, monkeypatch, tmp_path)
    # A machine without a GPU shows the SGEMM ladder and the precisions from reference data.
    sg = ch5.sgemm_ladder()
    assert sg["source"] == "reference" and len(sg["reference"]) == 1
    table = ch5.sgemm_summary(sg)
    assert isinstance(table, Table) and len(table.rows) == len(r["sgemm"]["labels"])
    _drawn(fig5.sgemm_figure(sg))
    refs = ch5.reference_for()
    assert len(refs) == 1 and refs[0]["gpu"] == "NVIDIA H200"
    _drawn(fig5.precision_figure(ch5.precision_model(), None, refs))


# --------------------------------------------------------------------------- other GPU branches

def test_other_ch2_gpu_branches_run_on_the_fake_gpu(fake_gpu):
    # the transpose widget: each tile and padding, measured against the copy kernels
    for tile in (16, 32):
        for padded in (False, True):
            c = ch2.transpose_config(tile, padded, min_time_s=0.01)
            assert c["device"] == "NVIDIA H200" and c["tile"] == tile, c
            assert finite(c["gbps"]) and finite(c["copy_gbps"]), c
            _drawn(fig2.bank_map(c))
    lad = ch2.transpose_ladder(tile=16, min_time_s=0.01)
    assert lad["kind"] == "measured" and lad["side"] == CH2_TRANSPOSE_SIDE
    _timings_ok(lad["timings"], TRANSPOSE_LABELS)
    assert set(ch2_transpose.transpose_summary(lad)["gbps"]) == set(TRANSPOSE_LABELS)
    _drawn(fig2.transpose_figure(lad))

    alloc = ch2.allocation_experiment(min_time_s=0.01)
    assert alloc["n"] == CH2_ALLOC_N and alloc["allocations"] == {}
    _timings_ok(alloc["timings"], CUPY_ALLOCATION_LABELS)
    _drawn(fig2.allocation_figure(alloc))
    pool = ch2.pool_demo()
    _assert_pool(pool)
    assert len(Table(pool["stages"], caption="measured on this GPU").rows) == 4

    # CuPy's host-to-device copy (reached from transfer_sweep where PyTorch has CUDA too)
    for pinned in (False, True):
        t = ch2_transfers._cupy_h2d(1 << 14, pinned, 0.01, seed=1)
        assert t.label == ("pinned (CuPy)" if pinned else "pageable (CuPy)")
        assert t.backend == "cuda" and all_finite(t.samples_s)

    # PyTorch has no CUDA: the transfer experiments stay models (and say which GPU)
    sweep = ch2.transfer_sweep(min_time_s=0.01)
    assert sweep["kind"] == "model" and sweep["series"] == {}
    assert sweep["gpu"] == specs.lookup("H200").name  # the models describe the active GPU
    assert ch2.transfer_at(1 << 20)["measured"] == {}
    # and the PyTorch-only measurements say what is missing in one sentence
    from gpucourse.errors import MissingDependency

    for step in (ch2.time_loops, ch2.peak_memory):
        with pytest.raises(MissingDependency, match="CUDA build of PyTorch"):
            step()


def test_ch2_run_all_and_its_figures_run_on_the_fake_gpu(fake_gpu):
    seen = []
    res = ch2.run_all(quick=True, progress=seen.append)
    assert seen[-1] == 1.0
    assert set(res) == {"transfers", "loops_model", "bank_conflicts", "transpose", "allocation",
                        "toy_pool", "footprint"}  # no measured loops or peak memory: no torch CUDA
    assert res["transpose"]["kind"] == "measured"
    _timings_ok(res["transpose"]["timings"], TRANSPOSE_LABELS)
    _timings_ok(res["allocation"]["timings"], CUPY_ALLOCATION_LABELS)
    assert_jsonable(res)
    for name, fig in fig2.figures(res).items():
        _drawn(fig)


def test_other_ch5_gpu_branches_run_on_the_fake_gpu(fake_gpu):
    rows = ch5.library_table().rows
    assert [r["call"] for r in rows][-3:] == [
        "cupy.matmul", "cupyx.scipy.sparse.csr_matrix @ dense", "cupy.ElementwiseKernel / RawKernel"]

    sg = ch5.sgemm_ladder(n=64, min_time_s=0.01)
    assert sg["source"] == "measured" and sg["n"] == 64 and sg["device"] == "NVIDIA H200"
    _timings_ok(sg["timings"], [*matmul.VERSIONS, "ref (cuBLAS, cupy.matmul)"])
    assert all(finite(t.meta["rel_err"]) for t in sg["timings"][:-1])
    assert isinstance(ch5.sgemm_summary(sg), Table) and not isinstance(ch5.sgemm_summary(sg), Note)
    _drawn(fig5.sgemm_figure(sg))

    # the size widget, at a size smaller than one v6 tile
    ts = ch5.matmul_size_point(32, min_time_s=0.01)
    _timings_ok(ts, ["matmul_v2_coalesced", "matmul_v3_shared", "matmul_v6_vectorized",
                     "ref (cuBLAS, cupy.matmul)"])
    _drawn(ladder(ts, metric="gflops", title_text="Matmul at n = 32"))

    fu = ch5.fusion(use_compile=False, min_time_s=0.01)
    _timings_ok(fu["timings"], FUSION_LABELS)
    assert fu["n"] == CH5_FUSION_N and finite(fu["cupy_speedup"])
    assert len(ch5.fusion_table(fu).rows) == len(FUSION_LABELS) + 1
    _drawn(fig5.fusion_figure(fu))

    densities = (0.01, 0.1, 0.5)
    sp = ch5.sparse_sweep(densities=densities, min_time_s=0.01)
    assert sp["n"] == CH5_SPARSE_N and len(sp["cupyx_s"]) == 3 and all_finite(sp["cupyx_s"])
    assert "cupyx_crossover" in sp
    _drawn(fig5.sparse_figure(sp))
    point = ch5.sparse_point(0.03, min_time_s=0.01)  # the density widget: no cupyx
    assert len(point) == 2 and all(finite(t.median_s) for t in point)
    _drawn(fig5.sparse_point_figure(point))
