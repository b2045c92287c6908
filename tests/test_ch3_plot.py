"""Chapter 3 figures from synthetic results: units, ceilings, device names, models marked."""
import dataclasses
import json

import pytest

from gpucourse import bench
from gpucourse.experiments import ch3
from gpucourse.experiments.ch3 import pipelining
from gpucourse.plot import ch3 as p3

DEV = "test CPU"


def T(label, s, **kw):
    return bench.Timing(label, [s * 0.95, s, s * 1.05], 1, DEV, "cpu", "perf_counter", **kw)


@pytest.fixture
def results():
    scaling = ch3.Scaling(T("1 worker", 0.1), T("2 workers (DDP)", 0.12), 2, 64, 1000, "gloo", DEV)
    sizes = [1024, 65536, 1 << 22]
    sweep = ch3.AllReduceSweep(sizes, [T(f"ar {n}", 1e-4 + n / 1e9, bytes=n) for n in sizes],
                               [T(f"pp {n}", 2e-4 + 2 * n / 2e9) for n in sizes], 2, "gloo", DEV,
                               1e-4, 2e9)
    buck = ch3.Bucketing(bench.Timings([T("one all-reduce per tensor", 0.05, bytes=4e6),
                                        T("buckets of 25 MiB", 0.01, bytes=4e6)]), [96, 1],
                         [0.0, 25 * 2**20], 96, 4_000_000, 2, "gloo", DEV, [[40_000] * 96, [4_000_000]])
    ev = [("forward", 0.0, 0.01), ("backward", 0.01, 0.03), ("all-reduce bucket 0", 0.02, 0.035),
          ("wait + optimizer", 0.03, 0.04)]
    tl = ch3.DDPTimeline([ev, ev], 1.0, [4_000_000], T("step", 0.04), 2, "gloo", DEV, 4_000_000)
    runs = [pipelining.PipelineRun(1, T("1 micro-batch", 0.06),
                                   [[(0, "forward", 0, .01), (0, "backward", .03, .05)],
                                    [(0, "forward", .01, .02), (0, "backward", .02, .03)]]),
            pipelining.PipelineRun(2, T("2 micro-batches", 0.045),
                                   [[(0, "forward", 0, .005), (1, "forward", .005, .01),
                                     (1, "backward", .02, .03), (0, "backward", .03, .04)],
                                    [(0, "forward", .005, .01), (1, "forward", .01, .015),
                                     (1, "backward", .015, .025), (0, "backward", .025, .035)]])]
    pipe = ch3.Pipeline(2, 90, runs, [100, 100], 200, [[0, 4], [4, 8]], [None, None], "gloo", DEV)
    return {"scaling": scaling, "sweep": sweep, "buck": buck, "tl": tl, "pipe": pipe}


def _legend_texts(fig):
    out = []
    for ax in fig.axes:
        if ax.get_legend():
            out += [t.get_text() for t in ax.get_legend().get_texts()]
    for leg in fig.legends:
        out += [t.get_text() for t in leg.get_texts()]
    return out


def test_concept_is_labelled_as_a_model():
    fig = p3.concept(4, (1, 4))
    assert "(model)" in fig._suptitle.get_text()
    assert "75%" in fig.axes[0].get_title(loc="left") and "43%" in fig.axes[1].get_title(loc="left")


def test_scaling_draws_perfect_scaling(results):
    fig = p3.scaling(results["scaling"])
    ax = fig.axes[0]
    assert "samples/s" in ax.get_xlabel() and DEV in ax.get_title()
    assert any("perfect scaling" in t for t in _legend_texts(fig))


def test_allreduce_has_model_ceiling_and_units(results):
    fig = p3.allreduce(results["sweep"])
    labels = _legend_texts(fig)
    assert any("(model)" in t or "model" in t for t in labels)
    assert any(t.startswith("ring limit") for t in labels)
    assert fig.axes[0].get_xlabel() == "message size (bytes)"
    assert "(ms)" in fig.axes[0].get_ylabel() and "GB/s" in fig.axes[1].get_ylabel()
    assert all(DEV in ax.get_title() for ax in fig.axes)


def test_bucketing_ladder_against_the_ring_limit(results):
    fig = p3.bucketing(results["buck"], results["sweep"])
    assert any("ring limit" in t for t in _legend_texts(fig))
    assert fig.axes[0].get_xlabel() == "effective bandwidth (GB/s)"


def test_timelines_and_memory(results, tmp_path):
    fig = p3.ddp_timeline(results["tl"])
    assert "ms" in fig.axes[0].get_xlabel() and DEV in fig.axes[0].get_title()
    fig = p3.pipeline(results["pipe"])
    assert len(fig.axes) == 4
    assert any("(model)" in t for t in _legend_texts(fig))
    assert DEV in fig._suptitle.get_text()
    fig = p3.memory(results["pipe"])
    assert "MiB" in fig.axes[0].get_xlabel()
    fig = p3.explore({"ddp": results["tl"], "pipeline": results["pipe"], "microbatches": 2})
    fig.savefig(tmp_path / "w.png")
    assert (tmp_path / "w.png").stat().st_size > 1000


def test_figures_from_json_results(results):
    r = results
    data = {"scaling": r["scaling"].to_dict(), "allreduce": r["sweep"].to_dict(),
            "bucketing": r["buck"].to_dict(), "ddp_timelines": [r["tl"].to_dict()],
            "pipeline": r["pipe"].to_dict()}
    data = json.loads(json.dumps(data))  # what run_all writes must survive JSON
    figs = p3.figures(data)
    assert {"concept", "scaling", "allreduce", "bucketing", "pipeline", "memory",
            "ddp_timeline_1MiB"} <= set(figs)


def test_ddp_timeline_names_a_small_bucket_in_kib(results):
    """The widget's bucket slider is in KiB: 64 KiB, not 0.0625 MiB."""
    tl = dataclasses.replace(results["tl"], bucket_cap_mb=64 / 1024)
    assert "buckets of 64 KiB:" in p3.ddp_timeline(tl).axes[0].get_title()
    assert "buckets of 1 MiB:" in p3.ddp_timeline(results["tl"]).axes[0].get_title()
