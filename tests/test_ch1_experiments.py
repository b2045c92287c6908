"""Chapter 1 experiments at small sizes on the CPU: structure, correctness checks and models."""
import json

import numpy as np
import pytest

from gpucourse import models
from gpucourse.errors import LaunchError, PrecisionError
from gpucourse.experiments import ch1
from gpucourse.experiments.ch1 import common, headless, rooflines, strided, transfer
from gpucourse.plot import ch1 as plot1

MiB = 2**20


@pytest.fixture(autouse=True)
def _cpu(monkeypatch):
    monkeypatch.setenv("GPUCOURSE_DEVICE", "cpu")


def test_timing_rows_show_the_wrong_and_right_numbers():
    r = ch1.timing_wrong_vs_right(n=1 << 16, min_time_s=0.02)
    sim = {row["method"]: row["seconds"] for row in r["rows"] if row["kind"] in ("simulation", "truth")}
    true = sim["true time per call"]
    assert sim["host timer, no synchronize"] < 0.2 * true      # timed the launch, not the work
    assert sim["one cold call + synchronize"] > 3 * true       # the cold phase
    assert 0.8 * true < sim["warm-up, synchronize, median"] < 3 * true
    groups = {row["group"] for row in r["rows"]}
    assert any("NumPy" in g for g in groups) and any("emulator" in g for g in groups)
    assert all(row["seconds"] > 0 for row in r["rows"])


def test_cache_line_and_sector_models():
    assert strided.cache_line_model([1, 2, 16, 32]) == [1.0, 0.5, 1 / 16, 1 / 16]
    m = ch1.sector_model("H100-SXM", strides=[1, 2, 4, 8, 32])
    assert m["efficiency"] == [1.0, 0.5, 0.25, 0.125, 0.125]
    assert m["model_gbps"][0] == m["peak_gbps"] == 3350.0
    # 2-byte elements: a warp's 64 bytes fill two sectors; at stride 16 every lane has its own.
    assert ch1.sector_model("T4", strides=[1, 16], elem_bytes=2)["efficiency"] == [1.0, 2 / 32]
    w = ch1.warp_sectors(8)
    assert w["sectors"] == 32 and w["moved_bytes"] == 1024 and w["requested_bytes"] == 128


@pytest.mark.cpu_check
def test_cpu_stride_sweep_checks_then_measures():
    r = strided.cpu_stride_sweep(strides=(1, 4, 32), footprint_bytes=2 * MiB, min_time_s=0.01)
    assert r["strides"] == [1, 4, 32] and len(r["gbps"]) == 3 and min(r["gbps"]) > 0
    assert r["ceiling_gbps"] == r["gbps"][0]
    assert r["model_gbps"][2] == pytest.approx(r["ceiling_gbps"] / 16)


def test_numpy_strided_copy_matches_the_kernel_order():
    src = np.arange(10, dtype=np.float32)
    dst = np.full(10, np.nan, np.float32)
    strided.strided_copy_numpy(src, dst, 3)
    assert np.array_equal(src, dst)


@pytest.mark.cpu_check
def test_copy_kernels_on_the_emulator():
    r = ch1.check_copy_kernels(sizes=(1, 33, 257), strides=(None, 1, 3, 32), block=96)
    assert r["cases"] == 12 and r["where"] == "CPU emulator"
    launch = strided.copy_at_block_size(stride=32, block_size=48)
    assert launch["checked_n"] == 149 and launch["gbps"] is None
    with pytest.raises(LaunchError):
        strided.copy_at_block_size(stride=1, block_size=1025)


def test_copy_explorer_and_precision():
    r = ch1.copy_explorer(stride=4, block_size=128, gpu="A10")
    assert r["model_at_stride"] == pytest.approx(600.0 / 4)
    p = ch1.precision_bandwidth("bf16", stride=8, footprint_bytes=MiB, min_time_s=0.01)
    assert [(row["precision"], row["stride"]) for row in p["rows"]] == \
        [("fp32", 1), ("fp32", 8), ("bf16", 1), ("bf16", 8)]
    assert p["model"]["bf16"]["load_efficiency"] == [1.0, 2 / 16]
    with pytest.raises(PrecisionError):
        ch1.precision_bandwidth("fp8")
    bits = strided._precision_array(np.array([1.5, -2.0], np.float32), "bf16")
    assert bits.dtype == np.uint16 and bits[0] == 0x3FC0


@pytest.mark.cpu_check
def test_transfer_vs_compute_and_sweep():
    r = ch1.transfer_vs_compute(gpu="L4", nbytes=MiB, matmul_n=128, min_time_s=0.01)
    add, mm = r["rows"]
    assert add["op"] == "vector add" and mm["size"] == 128 and "measured" not in add
    want = 2 * models.transfer_time(MiB, "L4").time
    assert add["model"]["h2d_pinned_s"] == pytest.approx(want)
    assert add["model"]["h2d_pageable_s"] > add["model"]["h2d_pinned_s"]
    s = ch1.transfer_sweep("H100-SXM")
    assert s["ratio"][-1] > 30  # HBM is far faster than PCIe


@pytest.mark.cpu_check
def test_rooflines():
    c = rooflines.cpu_ceilings(copy_bytes=2 * MiB, matmul_sizes=(64, 96), min_time_s=0.01)
    r = rooflines.cpu_roofline(c, n=1 << 16, matmul_n=64, min_time_s=0.01)
    roof = r["ceilings"]
    for p in r["points"]:
        assert p["rate"] <= min(roof["peak_flops"], p["intensity"] * roof["bandwidth_Bps"]) * 1.0001
    assert [round(p["intensity"], 4) for p in r["points"]] == [round(1 / 12, 4), 0.25, round(64 / 6, 4)]
    m = ch1.gpu_roofline_model("A100-SXM4-80GB", "bf16")
    assert [p["bound"] for p in m["points"]] == ["memory", "memory", "compute"]
    with pytest.raises(PrecisionError):
        ch1.model_views("T4", "bf16")


def test_run_all_is_json_and_draws_every_figure(monkeypatch, tmp_path):
    monkeypatch.setattr(headless, "RUN_SIZES", {
        "timing_n": (1 << 14,) * 2, "stride_bytes": (MiB,) * 2, "transfer_bytes": (MiB,) * 2,
        "copy_bytes": (MiB,) * 2, "roofline_n": (1 << 14,) * 2, "matmul_sizes": ((64,),) * 2,
        "transfer_matmul_n": (64,) * 2})
    r = json.loads(json.dumps(ch1.run_all(quick=True)))
    assert r["kernel_check"]["cases"] > 0 and r["target_gpu"] == common.FALLBACK_GPU
    figs = plot1.figures(r)
    assert set(figs) == {"timing", "stride_sweep", "transfer", "transfer_sweep", "roofline"}
    for name, fig in figs.items():
        for ax in fig.axes:
            assert ax.get_xlabel() and ax.get_title(), name
        fig.savefig(tmp_path / f"{name}.png")
    assert "(model)" in figs["roofline"].axes[1].get_title()
    # compute on the CPU and on the GPU are two colours, so two legend entries
    labels = [t.get_text() for t in figs["transfer"].legends[0].get_texts()]
    assert "compute (CPU)" in labels and "compute (GPU)" in labels


def test_reference_summary_reads_old_and_new_check_shapes(reference_folder):
    from gpucourse import check, reference

    new = {"checks": {"coalesced_pct_of_copy": check.at_least(91.5, 80, "copy")}}
    old = {"checks": {"coalesced_pct_of_copy": {"value": 59.4, "threshold": 80.0, "pass": False}}}
    reference.write({"ch1": new}, gpu="NVIDIA H100 80GB HBM3", command="make gpu-check",
                    folder=reference_folder, date="2026-11-01")
    reference.write({"ch1": old}, gpu="NVIDIA A100-SXM4-40GB", command="make gpu-check",
                    folder=reference_folder, date="2026-10-01")
    text = ch1.reference_summary()
    assert "coalesced_pct_of_copy = 91.5 (copy; the course's target is at least 80: met)" in text
    assert "coalesced_pct_of_copy = 59.4 (coalesced_pct_of_copy; the course's target is 80: not met)" in text
    reference.write({"ch1": {"timing": {"rows": []}}}, gpu="NVIDIA L4", command="c",
                    folder=reference_folder, date="2026-09-01")
    assert "NVIDIA L4, measured 2026-09-01 with `c`\n" in ch1.reference_summary() + "\n"  # no dangling colon


def test_every_roofline_uses_the_same_minimum_work():
    """Reads and writes once each: 12 bytes per fp32 add, 4 per summed float, 3 matrices."""
    w = common.minimum_work(1000, 64)
    assert w == {"vector add": (1000, 12000), "sum": (1000, 4000),
                 "matmul": (2 * 64**3, 12 * 64 * 64)}
    model = {p["name"]: p for p in ch1.gpu_roofline_model("H200", "bf16")["points"]}
    n, m = rooflines.GPU_MODEL_SIZES["vector add"], rooflines.GPU_MODEL_SIZES["matmul"]
    assert model["vector add"]["bytes"] == 6 * n and model[f"matmul {m}x{m}"]["flops"] == 2 * m**3
    add = transfer._work("vector add", 4000, 64)
    assert (add["flops"], add["dev_bytes"]) == w["vector add"]


@pytest.mark.parametrize("stride,block", [(0, 256), (1, 0), (-2, 128), (1, 100.7), (1.5, 128)])
def test_a_zero_or_fractional_block_or_stride_is_one_sentence(stride, block):
    with pytest.raises(LaunchError, match="must both be whole numbers of at least 1"):
        strided.copy_at_block_size(stride, block)


def test_precision_names_are_not_case_sensitive_and_unknown_ones_are_one_sentence():
    assert ch1.gpu_roofline_model("T4", "FP16")["points"][0]["bytes"] == \
        ch1.gpu_roofline_model("T4", "fp16")["points"][0]["bytes"]  # 2 bytes, not 4
    with pytest.raises(PrecisionError, match="no fp8 peak"):
        ch1.model_views("T4", "fp8")


@pytest.mark.parametrize("call,match", [
    (lambda: ch1.transfer_vs_compute(nbytes=-1), "nbytes=-1: use a whole number of at least 4"),
    (lambda: ch1.transfer_vs_compute(nbytes=2), "nbytes=2: use a whole number of at least 4"),
    (lambda: strided.cpu_stride_sweep(footprint_bytes=0), "footprint_bytes=0"),
    (lambda: strided.cpu_stride_sweep(strides=(1, 0)), "stride=0: use a whole number"),
    (lambda: ch1.transfer_vs_compute(matmul_n=0), "matmul_n=0"),
    (lambda: ch1.timing_wrong_vs_right(n=0), "n=0: use a whole number of at least 1"),
    (lambda: ch1.sector_model("H100", strides=(1, 0)), "stride=0: use a whole number"),
])
def test_sizes_and_strides_below_one_are_one_sentence(call, match):
    from gpucourse.errors import InputError

    with pytest.raises(InputError, match=match):
        call()


def test_the_roofline_model_counts_each_precisions_own_element_size():
    """fp64 moves 8 bytes per element (the element-size table once had 4 for it)."""
    n = rooflines.GPU_MODEL_SIZES["vector add"]
    sizes = {p: ch1.gpu_roofline_model("H100-SXM", p)["points"][0]["bytes"] / (3 * n)
             for p in ("fp64", "fp32", "tf32", "fp16", "bf16", "int8")}
    assert sizes == {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "int8": 1}
