"""Chapter 2 experiments on the CPU: models, checks, the emulator trace, real allocation and
footprint measurements, and every figure (including the GPU and reference branches)."""
import json

import numpy as np
import pytest

from gpucourse import models
from gpucourse.bench import Timing
from gpucourse.experiments import ch2
from gpucourse.plot import ch2 as fig2

MiB = 2**20


def _timing(label, seconds, nbytes=None, size=None, device="NVIDIA H200"):
    return Timing(label=label, samples_s=[seconds * f for f in (0.98, 1.0, 1.02)], batch=1,
                  device=device, backend="cuda", method="CUDA events", bytes=nbytes,
                  size=size).to_dict()


# --------------------------------------------------------------------------- transfers

def test_transfer_model_pinned_wins_only_for_large_copies():
    sweep = ch2.transfer_sweep(gpu="H100-PCIe")
    assert sweep["kind"] == "model" and not sweep["series"]
    pin, page = sweep["model"]["pinned"], sweep["model"]["pageable"]
    assert all(p >= q for p, q in zip(pin, page))
    assert pin[0] / page[0] < 1.1  # 1 KiB: the fixed cost dominates both
    assert pin[-1] / page[-1] == pytest.approx(2.0, rel=0.02)  # large: half rate when pageable
    assert max(pin) < sweep["link_peak_gbps"]
    table = ch2.transfer_table(sweep)
    assert [r["size"] for r in table] == ["4 KiB", "256 KiB", "4 MiB", "64 MiB"]
    assert ch2.pinned_over_pageable(sweep) == {}  # nothing measured here


def test_transfer_at_splits_latency_and_streaming():
    r = ch2.transfer_at(64 * MiB, gpu="T4")
    assert r["model"]["pinned"]["time_s"] < r["model"]["pageable"]["time_s"]
    assert r["model"]["pinned"]["latency_s"] == models.TRANSFER_LATENCY_S
    assert r["measured"] == {}


def test_zero_copy_wins_only_for_a_single_read():
    rows = ch2.zero_copy_model(gpu="H100-PCIe")
    assert [r["better"] for r in rows] == ["zero-copy", "copy first", "copy first", "copy first"]


# --------------------------------------------------------------------------- loops

def test_the_three_loops_train_to_the_same_weights():
    ch2.check_loops({"batches": 3, "batch": 16, "features": 12, "hidden": 8, "classes": 3})


def test_loop_timelines_prefetch_hides_the_copy():
    tl = ch2.loop_timelines(gpu="H100-PCIe")
    v = tl["versions"]
    naive = v["copy every step (pageable)"]["per_step_ms"]
    prefetch = v["pinned + non_blocking + prefetch"]["per_step_ms"]
    resident = v["resident on the device"]["per_step_ms"]
    step = tl["step"]
    assert naive == pytest.approx((step["h2d_pageable_s"] + step["compute_s"]) * 1e3, rel=1e-6)
    assert resident <= prefetch < naive
    assert prefetch < 1.1 * max(step["h2d_pinned_s"], step["compute_s"]) * 1e3
    lanes = {lane for lane, *_ in v["resident on the device"]["ops"]}
    assert lanes == {"compute"}


# --------------------------------------------------------------------------- transpose

@pytest.mark.parametrize("tile,padded,read,write", [(32, False, 32, 1), (32, True, 1, 1),
                                                    (16, False, 8, 1), (16, True, 2, 2)])
def test_tile_access_conflicts(tile, padded, read, write):
    m = ch2.tile_access_conflicts(tile, padded)
    assert (m["read_ways"], m["write_ways"]) == (read, write)
    # the figure's bank map: every lane's bank, and the busiest bank serves read_ways words
    assert max(m["read_words_per_bank"]) == read and len(m["read_words_per_bank"]) == 32
    assert len(m["read_banks"]) == len(m["write_banks"]) == 32
    if tile == 32 and not padded:
        assert set(m["read_banks"]) == {0} and m["write_banks"] == list(range(32))


def test_transpose_versions_pass_on_the_emulator_and_the_trace_finds_the_conflict():
    ch2.check_transpose(32)
    ch2.check_transpose(16, shapes=((1, 1), (17, 33), (40, 9)))
    c = ch2.transpose_conflicts(32)
    assert c["naive"]["accesses_per_thread"] == 0
    assert c["shared tile"]["worst_ways"] == 32 and c["padded tile"]["worst_ways"] == 1
    assert c["shared tile"]["accesses_per_thread"] == 8  # 4 writes + 4 reads of the tile


def test_transpose_ladder_on_the_cpu_is_the_model_only():
    lad = ch2.transpose_ladder()
    assert lad["kind"] == "model" and lad["timings"] == []
    cfg = ch2.transpose_config(16, False)
    assert cfg["model"]["read_ways"] == 8 and cfg["gbps"] is None


def test_transpose_summary_uses_the_faster_copy_as_ceiling():
    lad = {"timings": [_timing("copy (copy.cu)", 2.0, 100), _timing("tile copy (tile_copy.cu)", 1.0, 100),
                       _timing("naive", 5.0, 100), _timing("shared tile", 2.5, 100),
                       _timing("padded tile", 1.25, 100)]}
    s = ch2.transpose_summary(lad)
    assert s["ceiling"] == "tile copy (tile_copy.cu)"
    assert s["padded_pct_of_copy"] == pytest.approx(80.0)
    assert s["padded_over_naive"] == pytest.approx(4.0)


# --------------------------------------------------------------------------- allocation

def test_allocation_versions_agree_and_are_counted():
    ch2.check_allocation_versions(n=10_007)
    res = ch2.allocation_experiment(n=1 << 16, min_time_s=0.01)
    labels = [t["label"] for t in res["timings"]]
    assert labels == ["NumPy: new arrays each call", "NumPy: out= buffer",
                      "torch: new tensors each call", "torch: out= buffer"]
    table = {r["version"]: r["new buffers per call"] for r in ch2.allocation_table(res)}
    assert table["torch: new tensors each call"] == 2 and table["torch: out= buffer"] == 0
    # NumPy adds c into the temporary a*b in place (temporary elision): one new array per call.
    assert table["NumPy: new arrays each call"] >= 1 and table["NumPy: out= buffer"] < 0.5


def test_toy_caching_allocator():
    r = ch2.toy_pool_run(iterations=50)
    assert r["device_mallocs_without_pool"] == 150 and r["device_mallocs_with_pool"] == 3
    assert r["in_use_after_loop"] == 0 and r["reserved_after_loop"] == 9 * MiB
    assert r["reserved_after_empty_cache"] == 0


# --------------------------------------------------------------------------- footprint

def test_footprint_model_equals_real_tensors():
    ch2.check_footprint()
    fp32, bf16, pure = (ch2.footprint(dt, m, batch=32) for dt, m in
                        (("fp32", None), ("bf16", None), ("bf16", False)))
    assert fp32["match"] and bf16["match"] and pure["match"]
    p = fp32["params"]
    assert fp32["measured"]["weights"] + fp32["measured"]["gradients"] + \
        fp32["measured"]["optimizer_state"] == 16 * p
    assert bf16["measured"]["master_copy"] == 4 * p and bf16["measured"]["optimizer_state"] == 8 * p
    assert pure["measured"]["optimizer_state"] == 4 * p
    assert bf16["measured"]["activations"] * 2 == fp32["measured"]["activations"]


def test_unknown_dtype_is_a_clear_error():
    from gpucourse.errors import PrecisionError

    with pytest.raises(PrecisionError, match="not one of"):
        ch2.mlp(dtype="fp64")


def test_largest_batch_doubles_in_16_bit():
    rows = ch2.largest_batches(64 * MiB)
    fp32, mixed = rows[0]["largest batch"], rows[1]["largest batch"]
    assert mixed == pytest.approx(2 * fp32, rel=0.01)


# --------------------------------------------------------------------------- figures

def test_run_all_is_json_ready_and_every_figure_draws():
    res = json.loads(json.dumps(ch2.run_all(quick=True)))
    figs = fig2.figures(res)
    assert set(figs) == {"transfers", "loops", "transpose", "allocation", "footprint"}
    for f in figs.values():
        assert f.axes and all(ax.get_xlabel() or ax.get_ylabel() for ax in f.axes)
    title = figs["transfers"].axes[0].get_title()
    assert "model of the" in title


def test_gpu_and_reference_branches_of_the_figures():
    sizes = [64 * MiB, 256 * MiB]
    sweep = {"kind": "measured", "device": "NVIDIA H200", "gpu": "NVIDIA H200 SXM", "sizes": sizes,
             "link_peak_gbps": 63.0, "model": {"pageable": [26, 27], "pinned": [52, 53]},
             "series": {"pageable (torch)": [7, 6], "pinned (torch)": [54, 55], "pinned (CuPy)": [55, 55]}}
    ref = [("reference: NVIDIA H200, 2026-11-29, `make gpu-check`", sweep)]
    f = fig2.transfer_figure(sweep, reference_rows=ref)
    labels = [t.get_text() for t in f.axes[0].get_legend().get_texts()]
    assert any("measured" in t for t in labels) and any("model" in t for t in labels)
    assert any("reference: NVIDIA H200" in t for t in labels)
    cpu = {"tile": 32, "device": "CPU", "timings": [], "conflicts": ch2.transpose_conflicts(32)}
    gbps = {"copy (copy.cu)": 2500.0, "tile copy (tile_copy.cu)": 3500.0, "naive": 500.0,
            "shared tile": 1600.0, "padded tile": 3300.0}
    f = fig2.transpose_figure(cpu, reference_rows=[(ref[0][0], {"gbps": gbps})])
    assert "reference: NVIDIA H200" in f.axes[0].get_title()
    gpu = dict(cpu, timings=[_timing(k, 2 * MiB / (v * 1e9), 2 * MiB) for k, v in gbps.items()])
    f = fig2.transpose_figure(gpu)
    assert any("tile copy" in t.get_text() for t in f.axes[0].get_legend().get_texts())
    tl = ch2.loop_timelines(gpu="H200")
    meas = [_timing(name, 0.02 * (i + 1), size=16) for i, name in enumerate(tl["versions"])]
    assert len(fig2.loop_figure(tl, meas).axes) == 4
    # a reference run of the same loop sits beside the model; one of another loop does not
    per_step = {name: {"per_step_ms": 2.5 * v["per_step_ms"]} for name, v in tl["versions"].items()}
    same = {**per_step, "gpu": "NVIDIA H200", "config": dict(ch2.GPU_LOOP_CONFIG)}
    other = {**same, "config": {**same["config"], "batch": 1024}}
    label = "reference: NVIDIA H200, 2026-11-29"
    f = fig2.loop_figure(tl, reference_rows=[(label, same)])
    assert len(f.axes) == 4 and label in f.axes[-1].get_legend_handles_labels()[1]
    assert any("2.5x the model" in t.get_text() for t in f.axes[-1].texts)
    assert len(fig2.loop_figure(tl, reference_rows=[(label, other)]).axes) == 3
    alloc = {"n": 1 << 20, "device": "NVIDIA H200", "allocations": {},
             "timings": [_timing("CuPy: new arrays, pool OFF", 2e-4, 16 * MiB),
                         _timing("CuPy: out= buffer", 5e-5, 16 * MiB)]}
    assert fig2.allocation_figure(alloc).axes[0].get_xlabel() == "median time per call (ms)"
    # the GPU versions of a reference run sit beside a CPU run, never beside that GPU's own run
    ref = [(label, {"n": 1 << 22, "gpu": "NVIDIA H200", "median_ms": {"CuPy: out= buffer": 0.05}})]
    assert len(fig2.allocation_figure(alloc, reference_rows=ref).axes) == 1
    f = fig2.allocation_figure({**alloc, "device": "CPU: test"}, reference_rows=ref)
    assert len(f.axes) == 2 and label in f.axes[1].get_title()
    bars = fig2.transfer_bars({**ch2.transfer_at(MiB, gpu="H200"),
                               "measured": {"pinned": {"time_s": 3e-5, "gbps": 35.0}}})
    assert len(bars.axes[0].get_yticklabels()) == 3
    assert fig2.bank_map(ch2.transpose_config(32, True)).axes[1].get_ylabel() == "distinct words requested"


def test_tile_copy_kernel_copies_at_awkward_shapes_on_the_emulator():
    from gpucourse import check, kernels

    for tile in (16, 32):
        k = kernels.load("tile_copy", defines={"TILE": tile, "BLOCK_ROWS": 8}, backend="cpu").tile_copy_v1_rows
        for rows, cols in ((1, 1), (1, 35), (35, 1), (67, 45)):
            a = check.random_array((rows, cols), np.float32, seed=rows + cols)
            out = np.full_like(a, np.nan)
            k(((cols + tile - 1) // tile, (rows + tile - 1) // tile), (tile, 8),
              (a, out, np.int32(rows), np.int32(cols)), race_check=True)
            np.testing.assert_array_equal(out, a)


def test_bad_tile_is_a_clear_error():
    from gpucourse.errors import LaunchError

    with pytest.raises(LaunchError, match="use 16 or 32"):
        ch2.transpose_module(24)


def test_a_footprint_batch_given_as_text_is_one_sentence():
    from gpucourse.errors import InputError

    with pytest.raises(InputError, match="batch='8'"):
        ch2.footprint_pair("fp32", True, "8")


def test_bank_map_legends_sit_below_the_panels():
    """At tile 16 with padding the column read reaches banks 27-31 at lanes 11-15: a legend in
    the upper left corner hid them."""
    fig = fig2.bank_map(ch2.transpose_config(16, True))
    fig.canvas.draw()
    for ax in fig.axes:
        legend = ax.get_legend().get_window_extent()
        assert legend.y1 <= ax.get_window_extent().y0, ax.get_title()


def test_reference_note_names_gpu_date_and_command(monkeypatch):
    from gpucourse import reference

    note = ch2.reference_note()
    if reference.find("ch2"):
        ref, _ = reference.find("ch2")[0]
        assert ref.gpu in note and ref.date in note and f"`{ref.command}`" in note
    monkeypatch.setattr(reference, "find", lambda *a, **k: [])
    assert "No reference measurements of chapter 2" in ch2.reference_note()
