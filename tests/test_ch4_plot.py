"""Chapter 4's figures from results of the CPU path: reference data drawn hollow and named,
ceilings and models labelled, nothing of another GPU drawn against this one's ceiling."""
import pytest
from matplotlib.text import Text

import gpucourse as gc
from gpucourse.experiments import ch4
from gpucourse.kernels import divergence as divergence_cu
from gpucourse.plot import ch4 as plot4

pytestmark = pytest.mark.skipif(gc.device.is_cuda(), reason="the CPU path (models, emulator)")


def test_reference_data_is_drawn_hollow_and_labelled(tmp_path, monkeypatch):
    sizes = [32, 100, 256]
    gc.reference.write({"ch4": {
        "block_sweep": {"block_sizes": sizes, "gbps": [600.0, 1900.0, 3300.0]},
        "histogram": {"skews": [0.0, 1.0], "v1_s": [8e-3, 12e-3], "v2_s": [8e-5, 8e-5],
                      "speedup": [100.0, 150.0]},
        "reduction": {"labels": ["reduce_v1_atomic", "ref: cupy.sum"], "gbps": [2.0, 4200.0],
                      "copy_gbps": 4100.0},
        "divergence": {"versions": list(divergence_cu.VERSIONS), "median_s": [4e-4, 2e-4, 3e-4]},
    }}, gpu="Test GPU", command="ch4.gpu_check()", folder=tmp_path, date="2026-01-02")
    real_find = gc.reference.find
    monkeypatch.setattr(gc.reference, "find",
                        lambda section, *keys: real_find(section, *keys, folder=tmp_path))
    sweep = ch4.block_size_sweep(block_sizes=sizes)
    assert sweep["reference"][0]["label"].startswith("reference: Test GPU, 2026-01-02")
    fig = plot4.block_size_figure(ch4.block_size_point(100, sweep))
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert any("reference: Test GPU, 2026-01-02" in t for t in labels)
    # a reference panel is subtitled with the reference run, not with this machine
    assert fig.axes[1].get_title().endswith("reference: Test GPU, 2026-01-02")
    hist = ch4.histogram(n=1 << 12, check_first=False)
    fig = plot4.histogram_figure(hist)
    assert len(fig.axes) == 2 and fig.axes[1].get_title().endswith("reference: Test GPU, 2026-01-02")
    div = ch4.divergence(n=1 << 12)
    title = plot4.divergence_figure(div).axes[1].get_title()
    assert "Reference" in title and title.endswith("reference: Test GPU, 2026-01-02")
    red = ch4.reduction(n=1 << 12, min_time_s=0.01)
    fig = plot4.reduction_reference_figure(red)
    assert "reference data" in fig.axes[0].get_title()
    # the CPU ladder never mixes GPU reference bars into the CPU's copy ceiling
    cpu_fig = plot4.reduction_figure(red)
    assert not any("reference" in t.get_text() for t in cpu_fig.axes[0].get_yticklabels())
    red["reference"] = []
    assert "No reference measurement" in repr(plot4.reduction_reference_figure(red))


def test_block_size_figure_draws_no_reference_of_another_gpu_against_this_ones_ceiling():
    sweep = {**ch4.block_size_sweep(block_sizes=(128, 256), n=1 << 20, gpu="H200"),
             "reference": [{"label": "reference: NVIDIA H200, 2026-11-29", "gpu": "NVIDIA H200",
                            "block_sizes": [128, 256], "gbps": [3000.0, 3300.0]}]}
    fig = plot4.block_size_figure(ch4.block_size_point(256, sweep))
    assert fig.axes[1].get_ylim()[1] >= 3300.0
    fig = plot4.block_size_figure(ch4.block_size_point(256, sweep, gpu="T4"))
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert not any("reference" in t for t in labels)
    assert any("not drawn against the NVIDIA T4" in t.get_text() for t in fig.axes[1].texts)


def test_block_size_figure_names_the_reference_runs_size_and_the_modelled_gpu():
    # The models use this sweep's n; the reference points were measured at the run's own n.
    sweep = {**ch4.block_size_sweep(block_sizes=(128, 256), n=1 << 20, gpu="H200"),
             "reference": [{"label": "reference: NVIDIA H200, 2026-11-29", "gpu": "NVIDIA H200",
                            "n": 1 << 28, "block_sizes": [128, 256], "gbps": [3000.0, 3300.0]}]}
    fig = plot4.block_size_figure(ch4.block_size_point(256, sweep))
    assert f"{1 << 28:,} elements" in fig.axes[1].get_title()
    fig = plot4.block_size_figure(ch4.block_size_point(256, sweep, gpu="T4"))
    assert f"{1 << 20:,} elements" in fig.axes[1].get_title()  # nothing of the run drawn
    assert "NVIDIA T4" in fig.axes[2].get_title()  # the waves are the T4's, not this CPU's


def test_streams_figure_marks_the_isolated_bound_when_the_link_is_slower_both_ways():
    res = ch4.streams(n_streams=4, chunks=16)
    measured = {**res, "kind": "measured", "copy_s": 1.2 * res["copy_s"],
                "bound_s": 1.2 * res["bound_s"]}  # as if both directions at once were 20 % slower
    labels = plot4.streams_figure(measured).axes[0].get_legend_handles_labels()[1]
    assert "the longest stage run alone" in labels
    labels = plot4.streams_figure(res).axes[0].get_legend_handles_labels()[1]
    assert "the longest stage run alone" not in labels


def test_cpu_reduction_figure_names_the_rate_its_notes_compare_with():
    res = ch4.reduction(n=1 << 16, min_time_s=0.01)
    fig = plot4.reduction_figure(res)
    name = "dot" if res["copy"]["label"].startswith("dot") else "copy"
    notes = [t.get_text() for t in fig.axes[0].texts if "%" in t.get_text()]
    assert notes and all(f"% of {name})" in t for t in notes)


def test_streams_figure_says_one_stream_not_one_streams():
    fig = plot4.streams_figure(ch4.streams(n_streams=1))
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert any("over 1 stream:" in t for t in titles), titles


def test_a_sweep_where_no_block_size_can_launch_still_draws(reference_folder, monkeypatch):
    from gpucourse import reference

    reference.write({"ch4": {"block_sweep": {"regs_per_thread": 255}}}, gpu="NVIDIA H200",
                    command="make gpu-check", folder=reference_folder, date="2026-11-02")
    res = ch4.block_size_sweep(block_sizes=(512, 1024), gpu="H200", n=1 << 20)
    assert res["block_sizes"] == [] and len(res["skipped"]) == 2
    assert "block 512" in str(ch4.sweep_table(res))
    for name in ("divergence_figure", "streams_figure", "histogram_figure", "reduction_figure",
                 "reduction_reference_figure"):
        monkeypatch.setattr(plot4, name, lambda result: None)
    fig = plot4.figures({"block_size_sweep": res, "divergence": {}, "streams": {},
                         "histogram": {}, "reduction": {}})["block_size"]
    texts = " ".join(t.get_text() for t in fig.findobj(Text))
    assert "not drawn: 512, 1024 threads per block" in texts
    assert f"block {res['recommended']}" in texts  # the tail effect of the recommended size
