"""Chapter 2 experiments on the CPU: models, checks, the emulator trace, real allocation and
footprint measurements, and every figure (including the GPU and reference branches)."""
import json

import numpy as np
import pytest

from gpucourse import models
from gpucourse.bench import Timing
from gpucourse.experiments import ch2
from gpucourse.experiments.ch2 import allocation, loops, memory_footprint, transfers, transpose
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
    assert transfers.pinned_over_pageable(sweep) == {}  # nothing measured here


def test_transfer_at_splits_latency_and_streaming():
    r = ch2.transfer_at(64 * MiB, gpu="T4")
    assert r["model"]["pinned"]["time_s"] < r["model"]["pageable"]["time_s"]
    assert r["model"]["pinned"]["latency_s"] == models.TRANSFER_LATENCY_S
    assert r["measured"] == {}


def test_zero_copy_wins_only_for_a_single_read():
    rows = ch2.zero_copy_model(gpu="H100-PCIe")
    assert [r["better"] for r in rows] == ["zero-copy", "copy first", "copy first", "copy first"]


# --------------------------------------------------------------------------- loops

@pytest.mark.cpu_check
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
    m = transpose.tile_access_conflicts(tile, padded)
    assert (m["read_ways"], m["write_ways"]) == (read, write)
    # the figure's bank map: every lane's bank, and the busiest bank serves read_ways words
    assert max(m["read_words_per_bank"]) == read and len(m["read_words_per_bank"]) == 32
    assert len(m["read_banks"]) == len(m["write_banks"]) == 32
    if tile == 32 and not padded:
        assert set(m["read_banks"]) == {0} and m["write_banks"] == list(range(32))


@pytest.mark.cpu_check
def test_transpose_versions_pass_on_the_emulator_and_the_trace_finds_the_conflict():
    transpose.check_transpose(32)
    transpose.check_transpose(16, shapes=((1, 1), (17, 33), (40, 9)))
    c = transpose.transpose_conflicts(32)
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
    s = transpose.transpose_summary(lad)
    assert s["ceiling"] == "tile copy (tile_copy.cu)"
    assert s["padded_pct_of_copy"] == pytest.approx(80.0)
    assert s["padded_over_naive"] == pytest.approx(4.0)


# --------------------------------------------------------------------------- allocation

@pytest.mark.cpu_check
def test_allocation_versions_agree_and_are_counted():
    allocation.check_allocation_versions(n=10_007)
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
    fp32, bf16, pure = (memory_footprint.footprint(dt, m, batch=32) for dt, m in
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
        memory_footprint.mlp(dtype="fp64")


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


def test_tile_copy_kernel_copies_at_awkward_shapes_on_the_emulator():
    from gpucourse import check
    from gpucourse.kernels import tile_copy

    for tile in (16, 32):
        k = tile_copy.load(tile, 8, backend="cpu").tile_copy_v1_rows
        for rows, cols in ((1, 1), (1, 35), (35, 1), (67, 45)):
            a = check.random_array((rows, cols), np.float32, seed=rows + cols)
            out = np.full_like(a, np.nan)
            tile_copy.run(k, a, out, tile, 8, race_check=True)
            np.testing.assert_array_equal(out, a)


def test_bad_tile_is_a_clear_error():
    from gpucourse.errors import LaunchError

    with pytest.raises(LaunchError, match="use 16 or 32"):
        transpose.transpose_module(24)


def test_a_footprint_batch_given_as_text_is_one_sentence():
    from gpucourse.errors import InputError

    with pytest.raises(InputError, match="batch='8'"):
        ch2.footprint_pair("fp32", True, "8")


def test_reference_note_names_gpu_date_and_command(monkeypatch):
    from gpucourse import reference

    note = ch2.reference_note()
    if reference.find("ch2"):
        ref, _ = reference.find("ch2")[0]
        assert ref.gpu in note and ref.date in note and f"`{ref.command}`" in note
    monkeypatch.setattr(reference, "find", lambda *a, **k: [])
    assert "No reference measurements of chapter 2" in ch2.reference_note()
