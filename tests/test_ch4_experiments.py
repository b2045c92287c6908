"""Chapter 4's experiments on the CPU: kernels checked on the emulator, models, results."""
import json

import numpy as np
import pytest
from matplotlib.text import Text

import gpucourse as gc
from gpucourse import models
from gpucourse.experiments import ch4
from gpucourse.experiments.ch4 import (atomics, block_size, headless, reduce_ladder,
                                       stream_overlap, warp_divergence)
from gpucourse.kernels import divergence as divergence_cu
from gpucourse.kernels import reduce as reduce_cu
from gpucourse.plot import ch4 as plot4

pytestmark = pytest.mark.skipif(gc.device.is_cuda(), reason="the CPU path (models, emulator)")


@pytest.fixture(scope="module")
def sweep():
    return ch4.block_size_sweep(block_sizes=(32, 48, 100, 128, 256, 1024))


def test_block_size_sweep_models(sweep):
    assert sweep["measured"] is None  # no GPU: nothing pretends to be measured
    assert sweep["block_sizes"] == [32, 48, 100, 128, 256, 1024]
    i32, i100, i256 = (sweep["block_sizes"].index(b) for b in (32, 100, 256))
    # 32 blocks per SM at most: a block of one warp fills half of an H100 SM's 64 warp slots.
    assert sweep["occupancy"][i32] == pytest.approx(0.5)
    assert sweep["limited_by"][i32] == "blocks"
    assert sweep["occupancy"][i256] == pytest.approx(1.0)
    assert sweep["lane_efficiency"][i100] == pytest.approx(100 / 128)
    assert sweep["recommended"] % 32 == 0
    assert all(u <= 1.0 for u in sweep["wave_utilization"])


def test_block_size_point_changes_with_the_slider(sweep):
    a = ch4.block_size_point(48, sweep)
    b = ch4.block_size_point(1024, sweep)
    assert a["point"]["occupancy"] != b["point"]["occupancy"] or \
        a["point"]["tail"]["blocks_per_wave"] != b["point"]["tail"]["blocks_per_wave"]
    fa, fb = plot4.block_size_figure(a), plot4.block_size_figure(b)
    assert len(fa.axes) == len(fb.axes) == 3
    assert "model" in fa.axes[0].get_title() and "model" in fa.axes[2].get_title()


@pytest.mark.cpu_check
def test_saxpy_check_catches_a_wrong_kernel(monkeypatch):
    bad = gc.kernels.from_source(r"""
extern "C" __global__ void saxpy_v1_one_per_thread(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n - 1) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void saxpy_v2_grid_stride(float a, const float* x, float* y, int n) {}
""", name="saxpy_bad")
    monkeypatch.setattr(gc.kernels, "load", lambda name: bad)
    with pytest.raises(AssertionError, match="saxpy_v1"):
        block_size.check_saxpy(block_sizes=(64,), sizes=(33,))


def test_divergence_model_and_lanes():
    m = warp_divergence.divergence_model(n=4096)
    assert m["divergence_v1_odd_even_lanes"]["efficiency"] == pytest.approx(0.5)
    assert m["divergence_v2_per_warp"]["efficiency"] == pytest.approx(1.0)
    assert m["divergence_v3_branch_free"]["passes"] == pytest.approx(1.0)
    # v2's remapping is a permutation: every element is handled exactly once.
    g = np.arange(64 * 10)
    assert sorted(divergence_cu.element_of_thread("divergence_v2_per_warp", g)) == list(g)


@pytest.mark.cpu_check
def test_divergence_kernels_checked():
    assert warp_divergence.check_divergence(sizes=(65, 130), blocks=(64,)) == 6
    res = ch4.divergence()
    assert res["measured"] is None
    assert len(plot4.divergence_figure(res).axes) == 2


def test_streams_model():
    res = ch4.streams(n_streams=4, chunks=16)
    assert res["kind"] == "model"
    assert res["serial"]["total_s"] == pytest.approx(res["h2d_s"] + res["compute_s"] + res["d2h_s"])
    assert res["synced"]["total_s"] == pytest.approx(res["serial"]["total_s"])
    # 16 equal chunks of 3 equal stages: (16 + 2) / 16 of the bound
    assert res["overlap_vs_bound"] == pytest.approx(18 / 16)
    # The model's link is full duplex: copies in and out together cost one copy.
    assert res["copy_s"] == pytest.approx(max(res["h2d_s"], res["d2h_s"]))
    assert res["bound_isolated_s"] == pytest.approx(res["bound_s"])
    one = ch4.streams(n_streams=1, chunks=16)
    assert one["multi"]["total_s"] == pytest.approx(one["serial"]["total_s"])
    assert "(model)" in plot4.streams_figure(res).axes[0].get_title(loc="left")


def test_pipeline_formula_matches_the_model():
    for h, c, d, k in [(1, 1, 1, 8), (4, 1, 2, 16), (0.5, 3, 0.5, 4)]:
        want = (h + c + d) / k + (k - 1) * max(h, c, d) / k
        assert models.stream_timeline(k, h, c, d, chunks=k).total == pytest.approx(want)


@pytest.mark.cpu_check
def test_histogram_checked_and_contention():
    assert atomics.check_histogram(sizes=(1, 4099), blocks=(100,)) == 8
    uni = atomics.contention(atomics.histogram_data(1 << 14, 0.0))
    skw = atomics.contention(atomics.histogram_data(1 << 14, 1.0))
    assert skw["hottest_bin_share"] > 0.4 > 0.05 > uni["hottest_bin_share"]
    assert skw["lanes_on_one_bin_per_warp"] > 3 * uni["lanes_on_one_bin_per_warp"]
    skewed = gc.check.random_array(1 << 14, np.int32, kind="skewed")
    assert np.array_equal(atomics.histogram_data(1 << 14, 1.0), skewed)
    ch = atomics.atomic_chains(atomics.histogram_data(1 << 16, 1.0), grid=64)
    assert ch["v1_longest_chain"] > 20 * ch["v2_longest_shared_chain"]
    assert ch["v2_global_atomics"] <= 64 * 256


def test_histogram_point_and_figure():
    res = ch4.histogram_point(0.5, n=1 << 14)
    assert res["skews"] == [0.5]
    assert len(plot4.histogram_figure(res).axes) == 2
    with pytest.raises(ValueError, match="skew"):
        atomics.histogram_data(10, 1.5)


@pytest.mark.cpu_check
def test_reduce_ladder_checked():
    assert reduce_ladder.check_reduce(sizes=(1, 33, 1001)) == 3 * len(reduce_cu.VERSIONS)
    assert reduce_cu.VERSIONS[0].startswith("reduce_v1")
    assert "global atomics" in str(ch4.reduce_counts(1 << 20))


def test_run_all_is_json_and_draws(monkeypatch):
    small = ch4.reduction
    monkeypatch.setattr(headless, "reduction", lambda min_time_s=0.1: small(n=1 << 16, min_time_s=0.01))
    res = ch4.run_all(quick=True)
    json.dumps(res)
    figs = plot4.figures(res)
    ladder_on_a_gpu = {"reduction_reference"} if res["reduction"]["reference"] else set()
    assert set(figs) == {"block_size", "divergence", "streams", "histogram", "reduction"} | ladder_on_a_gpu
    # reduction on the CPU: library sums and the copy, measured here
    assert {t["label"] for t in res["reduction"]["cpu_measured"]} == {"numpy.sum", "torch.sum"}


def test_reduction_reference_falls_back_to_the_kernel_sweep(reference_folder):
    rows = [{"file": "reduce", "kernel": "reduce_v1_atomic", "gbps": 2.0, "median_s": 0.5,
             "size": 1 << 28},
            {"file": "reduce", "kernel": "reduce_v4_grid_stride", "gbps": 2100.0, "median_s": 5e-4,
             "size": 1 << 28},
            {"file": "copy", "kernel": "copy_v1_coalesced", "gbps": 2500.0, "median_s": 9e-4}]
    gc.reference.write({"kernels": {"rows": rows}}, gpu="NVIDIA H200", command="kernel sweep cmd",
                       folder=reference_folder, date="2026-11-28")
    gc.reference.write({"ch4": {"histogram": {"speedup": [1.0]}}}, gpu="NVIDIA H200",
                       command="ch4.gpu_check()", folder=reference_folder, date="2026-11-29")
    [ref] = reduce_ladder.reduction_references()
    assert ref["labels"] == ["reduce_v1_atomic", "reduce_v4_grid_stride"]
    assert ref["copy_gbps"] == 2500.0 and ref["copy_label"] == "copy_v1_coalesced, same sweep"
    # the kernel sweep's own date and command, and the label says where the rows come from
    assert ref["label"] == "reference: NVIDIA H200, 2026-11-28, kernel sweep"
    assert ref["command"] == "kernel sweep cmd"
    fig = plot4.reduction_reference_figure({"versions": list(reduce_cu.VERSIONS), "reference": [ref]})
    assert "kernel sweep" in fig.axes[0].get_title() and "reduce_v5" in fig.axes[0].get_title()
    # the same file's library copy (chapter 1's check) is the ceiling where it has one: the best
    # copy kernel of the sweep can be far below it
    gc.reference.write({"ch1": {"stride_sweep": {"ceiling_gbps": 4100.0}}}, gpu="NVIDIA H200",
                       command="ch1.gpu_check()", folder=reference_folder, date="2026-11-29")
    [ref] = reduce_ladder.reduction_references()
    assert ref["copy_gbps"] == 4100.0 and "library" in ref["copy_label"]
    fig = plot4.reduction_reference_figure({"versions": list(reduce_cu.VERSIONS), "reference": [ref]})
    legends = fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert any("library device-to-device copy" in t.get_text()
               for legend in legends for t in legend.get_texts())
    # a ch4/reduction section, when there is one, comes first
    gc.reference.write({"ch4": {"reduction": {"labels": ["reduce_v1_atomic"], "gbps": [2.0],
                                              "copy_gbps": 4000.0}}},
                       gpu="NVIDIA H200", command="ch4.gpu_check()", folder=reference_folder,
                       date="2026-11-30")
    assert [r["copy_gbps"] for r in reduce_ladder.reduction_references()] == [4000.0]


def test_switching_the_model_gpu_refreshes_every_waves_series():
    sweep = ch4.block_size_sweep(block_sizes=(128, 256), n=1 << 20)
    other = "T4" if sweep["gpu"] != "NVIDIA T4" else "H200"
    res = ch4.block_size_point(256, sweep, gpu=other)
    fresh = ch4.block_size_sweep(block_sizes=(128, 256), n=1 << 20, gpu=other)
    assert res["waves"] == fresh["waves"]
    assert res["wave_utilization"] == fresh["wave_utilization"]
    assert res["point"] == ch4.sweep_point(res, 256)


def test_block_sweep_without_gpu_takes_registers_from_reference_data(reference_folder):
    from gpucourse import reference

    regs, source = block_size._saxpy_regs_without_gpu()
    assert regs == block_size.SAXPY_REGS_ASSUMED and source.startswith("assumed")
    reference.write({"ch4": {"block_sweep": {"regs_per_thread": 11, "block_sizes": [32]}}},
                    gpu="NVIDIA L4", command="make gpu-check", folder=reference_folder, date="2026-11-02")
    assert block_size._saxpy_regs_without_gpu() == (11, "compiled on NVIDIA L4, reference run of 2026-11-02")
    # a GPU run that could not read the count recorded its assumption: not a compiler's figure
    reference.write({"ch4": {"block_sweep": {"regs_per_thread": 16, "regs_source": "assumed"}}},
                    gpu="NVIDIA L4", command="make gpu-check", folder=reference_folder, date="2026-11-03")
    assert block_size._saxpy_regs_without_gpu()[1].startswith("assumed")


def test_block_size_zero_is_one_sentence():
    from gpucourse.errors import LaunchError

    sweep = ch4.block_size_sweep(n=4096)
    with pytest.raises(LaunchError, match="must be at least 1"):
        ch4.block_size_point(0, sweep)


@pytest.mark.parametrize("call,match", [
    (lambda: ch4.streams(n_streams=0), "use 1 to 32 streams"),
    (lambda: ch4.streams(n_streams=1000), "use 1 to 32 streams"),
    (lambda: ch4.streams(n_streams=2.5), "use 1 to 32 streams"),
    (lambda: ch4.streams(n_streams=4, chunks=0), "chunks=0: use a whole number of at least 1"),
    (lambda: ch4.reduce_counts(0), "n=0: use a whole number of at least 1"),
    (lambda: ch4.reduce_counts(-1), "n=-1: use a whole number of at least 1"),
    (lambda: ch4.streams(nbytes=0), "nbytes=0: use a whole number of at least 1"),
    (lambda: ch4.streams(compute_ratio=-1), "compute_ratio=-1: use a number above 0"),
    (lambda: block_size.recommend_block_size("H100", smem_per_block=300_000), "over the 232,448 B"),
    (lambda: gc.models.warp_efficiency(16), "give one count per branch"),
])
def test_stream_and_launch_counts_refuse_impossible_numbers_in_one_sentence(call, match):
    from gpucourse.errors import CourseError

    with pytest.raises(CourseError, match=match):
        call()


def test_stream_and_launch_counts_take_numpy_integers():
    assert ch4.streams(n_streams=np.int64(32), nbytes=1 << 20)["n_streams"] == 32
    assert "n = 1" in str(ch4.reduce_counts(np.int64(1)))


def test_kernel_source_and_skew_say_what_to_use():
    from gpucourse.errors import CourseError

    with pytest.raises(CourseError, match="no kernel file bogus.cu"):
        ch4.kernel_source("bogus", "x")
    with pytest.raises(CourseError, match="histogram.cu has no kernel 'x'; it has: histogram_v1"):
        ch4.kernel_source("histogram", "x")
    with pytest.raises(CourseError, match="0.5 for 50 %"):
        ch4.histogram_point(50, n=1000, min_time_s=0.01)


def test_block_sizes_that_cannot_launch_at_the_reference_register_count_are_skipped(
        reference_folder):
    """At 128 registers a block of 768 or 1024 threads needs more than the 65,536 registers a
    block may use: the sweep, its table and its figure leave them out and say why."""
    from gpucourse import reference

    reference.write({"ch4": {"block_sweep": {"regs_per_thread": 128}}}, gpu="NVIDIA H200",
                    command="make gpu-check", folder=reference_folder, date="2026-11-02")
    assert reference.problems(reference_folder) == []
    res = ch4.block_size_sweep(block_sizes=(128, 256, 512, 768, 1024), gpu="H200", n=1 << 20)
    assert res["regs_per_thread"] == 128
    assert res["block_sizes"] == [128, 256, 512]
    assert len(res["occupancy"]) == len(res["waves"]) == 3
    assert [s["block_size"] for s in res["skipped"]] == [768, 1024]
    assert res["skipped"][1]["reason"] == (
        "too many registers per block (a block of 1024 threads at 128 registers each needs "
        "131,072 registers, over the 65,536 a block may use on cc 9.0)")
    assert res["checked"].endswith("for every block size that can launch")
    assert res["recommended"] <= 512
    table = str(ch4.sweep_table(res))
    assert "block 1024" in table and "skipped: cannot launch, too many registers per block" in table
    texts = " ".join(t.get_text() for t in plot4.block_size_figure(
        {**res, "point": ch4.sweep_point(res, 256)}).findobj(Text))
    assert "not drawn: 768, 1024 threads per block cannot launch" in texts
    assert "too many registers per block" in texts
    # The slider may still stop at 1024: the point says why there is nothing to show.
    point = ch4.block_size_point(1024, res)["point"]
    assert point["skipped"].startswith("too many registers per block")
    fig = plot4.block_size_figure(ch4.block_size_point(1024, res))
    assert "Block 1024: cannot launch, too many registers" in " ".join(
        t.get_text().replace("\n", " ") for t in fig.findobj(Text))
    assert "occupancy" in ch4.block_size_point(512, res)["point"]
    # Another GPU's models start from every size asked for, not only those this one launched.
    other = ch4.block_size_point(256, res, gpu="T4")
    assert other["requested_block_sizes"] == [128, 256, 512, 768, 1024]
    assert [s["block_size"] for s in other["skipped"]] == [768, 1024]


def test_a_block_size_outside_the_gpus_range_or_too_many_registers_per_thread_still_raise():
    from gpucourse.errors import SpecError

    with pytest.raises(SpecError, match="outside 1..1024"):
        block_size.occupancy_curve("H200", (256, 2048))
    with pytest.raises(SpecError, match="over the limit of 255"):
        block_size.occupancy_curve("H200", (32,), regs_per_thread=256)
    assert block_size.occupancy_curve("H200", (32, 64, 256, 384), regs_per_thread=255)["block_sizes"] == \
        [32, 64, 256]


def test_a_gpu_passed_to_the_models_is_kept_on_a_cuda_machine(monkeypatch):
    """The models describe the GPU a learner picks, on a GPU too; without one, the active GPU."""
    monkeypatch.setattr(gc.device, "is_cuda", lambda: True)
    monkeypatch.setattr(gc.specs, "for_active_device", lambda: gc.specs.lookup("H100-SXM"))
    assert ch4.model_gpu().key == "H100-SXM"
    assert ch4.model_gpu("T4").key == "T4"
    assert block_size.recommend_block_size("T4") == block_size.recommend_block_size(gc.specs.lookup("T4"))


def test_the_block_sizes_and_the_divergence_launch_have_one_home():
    """The sweep and the slider share kernels.BLOCK_SIZES; the chapter and its checker keep no
    copy of what the kernel homes hold (launch grids, coefficients) or of device.on_gpu."""
    import inspect

    from gpucourse import kernels, widgets
    from gpucourse.check import ch4 as c4

    sweep_default = inspect.signature(ch4.block_size_sweep).parameters["block_sizes"].default
    assert sweep_default is kernels.BLOCK_SIZES
    slider = inspect.signature(widgets.block_size_slider).parameters["values"]
    assert slider.default is kernels.BLOCK_SIZES
    copies = {"BLOCK_SIZES", "on_gpu", "divergence_grid", "_COEF", "COEFS", "BRANCH_COEFS",
              "divergence_reference", "divergence_error_bound", "branch_error_bound",
              "reduction_error_bound", "run_reduce", "_reduce_launch"}
    for module in (ch4, c4, warp_divergence, stream_overlap, reduce_ladder):
        assert not copies & set(vars(module)), (module.__name__, copies & set(vars(module)))
    for n, block in ((1, 64), (1000 + 3, 128), (4099, 256)):
        for v in divergence_cu.VERSIONS:
            assert divergence_cu.launch(v, n, block).grid == divergence_cu.divergence_grid(n, block)


# --------------------------------------------------------------------------- lab 4.5's sweep

def test_pipeline_sweep_measures_every_chunk_count_on_this_machine():
    from gpucourse.check import ch4 as c4

    sweep = ch4.pipeline_sweep(chunk_counts=(1, 3, 8), n=10_007, min_time_s=0.001)
    assert sweep["chunks"] == [1, 3, 8] and sweep["kind"] == "measured"
    assert len(sweep["seconds"]) == 3 and all(t > 0 for t in sweep["seconds"])
    assert c4.fewest_chunks_near_best(sweep["chunks"], sweep["seconds"]) in (1, 3, 8)


def test_pipeline_sweep_checks_its_result_before_it_times(monkeypatch):
    from gpucourse.experiments.ch4 import chunk_pipeline

    def copy_without_compute(src, staged, dst, chunks):
        dst[:] = src  # the compute stage forgotten: the result is the input

    monkeypatch.setattr(chunk_pipeline, "_run_pipeline", copy_without_compute)
    with pytest.raises(AssertionError, match="1 chunks is wrong at element 0"):
        ch4.pipeline_sweep(chunk_counts=(1, 3), n=1001, min_time_s=0.001)
