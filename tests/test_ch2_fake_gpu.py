"""Chapter 2's GPU-only code paths on a FAKE CUDA device (tests/fakecuda):
a SMOKE TEST, not a measurement.

What the fake is and what its tests assert (shapes only, never timings): fakecuda/testing.py.

Here: ``gpu_check()``, the transpose ladder and its widget, allocation with CuPy's pool off
and on, the pool demo, CuPy host-to-device copies, ``run_all`` and the figures the notebook
draws from them; ``gpu_check()``'s result also goes through what ``make gpu-check`` does with
it (the threshold summary, and the reference data a machine without a GPU then draws).
"""
from __future__ import annotations

import pytest

from fakecuda.testing import (CH2_ALLOC_N, CH2_POOL_MIB, CH2_TRANSPOSE_SIDE, all_finite,
                              assert_jsonable, assert_threshold, drawn, finite,
                              gpu_check_as_reference_data, small_ch2_ch5, small_fake_gpu,
                              timings_ok)
from gpucourse import specs
from gpucourse.display import Table
from gpucourse.experiments import ch2
from gpucourse.experiments.ch2 import common as ch2_common
from gpucourse.experiments.ch2 import transfers as ch2_transfers, transpose as ch2_transpose
from gpucourse.plot import ch2 as fig2

NO_TORCH_CUDA_NOTE = "transfers, training loops and peak memory skipped: PyTorch has no CUDA here"
CUPY_ALLOCATION_LABELS = ["CuPy: new arrays, pool OFF", "CuPy: new arrays, pool on",
                          "CuPy: out= buffer"]
TRANSPOSE_LABELS = [*ch2_transpose.CEILINGS, *ch2_transpose.TRANSPOSE_VERSIONS, "ref (library device-to-device copy)"]

pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning")


@pytest.fixture
def fake_gpu():
    """The fake CUDA GPU (chapters 2 and 5 at small sizes), for one test."""
    with small_fake_gpu(small_ch2_ch5) as cp:
        yield cp


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


def test_ch2_gpu_check_runs_on_the_fake_gpu_and_makes_reference_data(tmp_path, capsys,
                                                                     monkeypatch):
    gpu_check_as_reference_data(ch2, small_ch2_ch5, _assert_ch2_result, 2, capsys, monkeypatch, tmp_path)
    # A machine without a GPU draws the transpose bandwidths from this reference data.
    assert ch2.target_gpu().key == ch2_common.DEFAULT_MODEL_GPU  # no transfers measured
    lad = ch2.transpose_ladder()
    assert lad["kind"] == "model" and lad["timings"] == []
    fig = fig2.transpose_figure(lad)
    assert "reference data" in fig.axes[0].get_legend_handles_labels()[1]
    drawn(fig)


def test_other_ch2_gpu_branches_run_on_the_fake_gpu(fake_gpu):
    # the transpose widget: each tile and padding, measured against the copy kernels
    for tile in (16, 32):
        for padded in (False, True):
            c = ch2.transpose_config(tile, padded, min_time_s=0.01)
            assert c["device"] == "NVIDIA H200" and c["tile"] == tile, c
            assert finite(c["gbps"]) and finite(c["copy_gbps"]), c
            drawn(fig2.bank_map(c))
    lad = ch2.transpose_ladder(tile=16, min_time_s=0.01)
    assert lad["kind"] == "measured" and lad["side"] == CH2_TRANSPOSE_SIDE
    timings_ok(lad["timings"], TRANSPOSE_LABELS)
    assert set(ch2_transpose.transpose_summary(lad)["gbps"]) == set(TRANSPOSE_LABELS)
    drawn(fig2.transpose_figure(lad))

    alloc = ch2.allocation_experiment(min_time_s=0.01)
    assert alloc["n"] == CH2_ALLOC_N and alloc["allocations"] == {}
    timings_ok(alloc["timings"], CUPY_ALLOCATION_LABELS)
    drawn(fig2.allocation_figure(alloc))
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
    timings_ok(res["transpose"]["timings"], TRANSPOSE_LABELS)
    timings_ok(res["allocation"]["timings"], CUPY_ALLOCATION_LABELS)
    assert_jsonable(res)
    for name, fig in fig2.figures(res).items():
        drawn(fig)
