"""Chapter 5's GPU-only code paths on a FAKE CUDA device (tests/fakecuda):
a SMOKE TEST, not a measurement.

What the fake is and what its tests assert (shapes only, never timings): fakecuda/testing.py.

Here: ``gpu_check()``, the SGEMM ladder against ``cupy.matmul`` (with v6's tile tuning), the
matmul size widget, the CuPy ElementwiseKernel fusion, cupyx's sparse products, the library
table and the figures the notebook draws from them; ``gpu_check()``'s result also goes through
what ``make gpu-check`` does with it (the threshold summary, and the reference data a machine
without a GPU then draws).
"""
from __future__ import annotations

import pytest

from fakecuda.testing import (CH5_FUSION_N, CH5_SGEMM_N, CH5_SPARSE_N, all_finite,
                              assert_jsonable, assert_threshold, drawn, finite,
                              gpu_check_as_reference_data, small_ch2_ch5, small_fake_gpu,
                              timings_ok)
from gpucourse.display import Note, Table
from gpucourse.experiments import ch5
from gpucourse.kernels import matmul
from gpucourse.plot import ch5 as fig5, ladder

FUSION_LABELS = ["eager: 5 ops, 5 new tensors", "5 ops into one buffer", "CuPy: 5 ops",
                 "fused: CuPy ElementwiseKernel"]

pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning")


@pytest.fixture
def fake_gpu():
    """The fake CUDA GPU (chapters 2 and 5 at small sizes), for one test."""
    with small_fake_gpu(small_ch2_ch5) as cp:
        yield cp


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


def test_ch5_gpu_check_runs_on_the_fake_gpu_and_makes_reference_data(tmp_path, capsys,
                                                                     monkeypatch):
    r = gpu_check_as_reference_data(ch5, small_ch2_ch5, _assert_ch5_result, 3, capsys, monkeypatch, tmp_path)
    # A machine without a GPU shows the SGEMM ladder and the precisions from reference data.
    sg = ch5.sgemm_ladder()
    assert sg["source"] == "reference" and len(sg["reference"]) == 1
    table = ch5.sgemm_summary(sg)
    assert isinstance(table, Table) and len(table.rows) == len(r["sgemm"]["labels"])
    drawn(fig5.sgemm_figure(sg))
    refs = ch5.reference_for()
    assert len(refs) == 1 and refs[0]["gpu"] == "NVIDIA H200"
    drawn(fig5.precision_figure(ch5.precision_model(), None, refs))


def test_other_ch5_gpu_branches_run_on_the_fake_gpu(fake_gpu):
    rows = ch5.library_table().rows
    assert [r["call"] for r in rows][-3:] == [
        "cupy.matmul", "cupyx.scipy.sparse.csr_matrix @ dense", "cupy.ElementwiseKernel / RawKernel"]

    sg = ch5.sgemm_ladder(n=64, min_time_s=0.01)
    assert sg["source"] == "measured" and sg["n"] == 64 and sg["device"] == "NVIDIA H200"
    timings_ok(sg["timings"], [*matmul.VERSIONS, "ref (cuBLAS, cupy.matmul)"])
    assert all(finite(t.meta["rel_err"]) for t in sg["timings"][:-1])
    assert isinstance(ch5.sgemm_summary(sg), Table) and not isinstance(ch5.sgemm_summary(sg), Note)
    drawn(fig5.sgemm_figure(sg))

    # the size widget, at a size smaller than one v6 tile
    ts = ch5.matmul_size_point(32, min_time_s=0.01)
    timings_ok(ts, ["matmul_v2_coalesced", "matmul_v3_shared", "matmul_v6_vectorized",
                     "ref (cuBLAS, cupy.matmul)"])
    drawn(ladder(ts, metric="gflops", title_text="Matmul at n = 32"))

    fu = ch5.fusion(use_compile=False, min_time_s=0.01)
    timings_ok(fu["timings"], FUSION_LABELS)
    assert fu["n"] == CH5_FUSION_N and finite(fu["cupy_speedup"])
    assert len(ch5.fusion_table(fu).rows) == len(FUSION_LABELS) + 1
    drawn(fig5.fusion_figure(fu))

    densities = (0.01, 0.1, 0.5)
    sp = ch5.sparse_sweep(densities=densities, min_time_s=0.01)
    assert sp["n"] == CH5_SPARSE_N and len(sp["cupyx_s"]) == 3 and all_finite(sp["cupyx_s"])
    assert "cupyx_crossover" in sp
    drawn(fig5.sparse_figure(sp))
    point = ch5.sparse_point(0.03, min_time_s=0.01)  # the density widget: no cupyx
    assert len(point) == 2 and all(finite(t.median_s) for t in point)
    drawn(fig5.sparse_point_figure(point))
