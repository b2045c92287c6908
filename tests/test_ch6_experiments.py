"""Chapter 6 experiments on the CPU at small sizes: numerics, checks and result shapes."""
import json
import math

import numpy as np
import pytest
import torch

from gpucourse.errors import PrecisionError
from gpucourse.experiments import ch6


@pytest.fixture(scope="module")
def results():
    return ch6.run_all(quick=True)


def test_rounding_is_the_formats_definition():
    ch6.check_rounding()
    f = ch6.formats()
    assert f["fp16"].min_normal == 2.0 ** -14 and f["fp16"].max == 65504.0
    assert f["bf16"].eps == 2.0 ** -7 and f["tf32"].mantissa_bits == 10
    x = torch.tensor([1 + 2.0 ** -9, 3.0])
    assert ch6.round_to(x, "bf16")[0] == 1.0 and ch6.round_to(x, "tf32")[0] == x[0]
    assert ch6.round_to(torch.tensor([1000.0]), "fp8_e4m3")[0] == 448.0  # saturates like scaled FP8


def test_format_table_orders_precision(results):
    rows = {r["format"]: r for r in results["formats"]["rows"]}
    err = {k: r["median rel. rounding error"] for k, r in rows.items()}
    assert err["fp32"] == 0 and err["fp16"] == pytest.approx(err["tf32"])
    assert err["fp16"] < err["bf16"] < err["fp8_e4m3"] < err["fp8_e5m2"]


def test_loss_scaling_loses_gradients_without_scaling_and_matches_with_it(results):
    r = results["loss_scaling"]
    assert r["max_zeroed_unscaled"] > 0.05
    assert r["max_zeroed_scaled"] < 1e-3
    assert r["scaled_match"] == {"static": True, "dynamic": True}
    assert r["max_rel_gap"]["none"] > 10 * ch6.LOSS_MATCH_RTOL
    dyn = r["runs"]["dynamic"]
    assert dyn["scales"][0] == 2.0 ** 16 and max(dyn["scales"]) > 2.0 ** 16  # it grew


def test_fp16_gradients_are_real_fp16_tensors():
    master, xb, yb = ch6._checkpoint(60, ch6.ScalingSetup())
    _, raw = ch6.scaled_gradients(master, xb, yb, ch6.ScalingSetup(), torch.float16, 1.0)
    assert all(g.dtype == torch.float16 for g in raw)
    assert any(bool((g == 0).any()) for g in raw[::2])


def test_scale_sweep_has_a_window(results):
    s = results["scale_sweep"]
    zeroed, overflow = np.array(s["zeroed"]), np.array(s["overflow"])
    assert zeroed[0] > 0.05 and overflow[0] == 0
    assert overflow[-1] > 0.5 and zeroed[-1] == 0
    ok = (zeroed < 1e-3) & (overflow == 0)
    assert ok.any(), "some scale must keep every gradient"


def test_gradient_histogram_is_mostly_below_fp16_normal(results):
    g = results["gradients"]
    assert g["share_below_normal"]["activations"] > 0.9
    assert sum(g["activations_hist"]) + g["activations_zero"] > 0


def test_int8_linear_matches_fp32_on_awkward_shapes():
    torch.manual_seed(0)
    for rows, fin, fout in ((1, 13, 7), (5, 64, 10), (33, 100, 17)):
        lin = torch.nn.Linear(fin, fout)
        x = torch.randn(rows, fin)
        for mode in ("dynamic", "weight-only"):
            q = ch6.Int8Linear(lin, mode)
            with torch.no_grad():
                err = float((q(x) - lin(x)).norm() / lin(x).norm())
            assert err < 0.03, (rows, fin, fout, mode, err)
            assert q(x).shape == (rows, fout)


def test_per_channel_beats_per_tensor_with_outliers():
    d = ch6.per_channel_demo()
    assert d["per-channel"] * 5 < d["per-tensor"]


def test_int8_inference_keeps_accuracy_and_shrinks_the_model(results):
    r = results["int8"]
    rows = {row["version"]: row for row in r["rows"]}
    assert 0.7 < rows["fp32"]["accuracy"] < 0.97  # a non-trivial task
    assert abs(r["accuracy_drop"]) < 0.01
    assert r["size_ratio"] > 3.5
    assert all(row["output rel. error"] < 0.05 for row in r["rows"])


def test_check_int8_rejects_a_broken_model():
    model = ch6.trained_classifier(dev="cpu")
    broken = ch6.int8_model(model)
    broken[2].scale.mul_(1.5)
    with pytest.raises(AssertionError, match="relative output error"):
        ch6.check_int8(model, broken, ch6.make_dataset().x_test[:256])


def test_amp_training_checks_and_counts_memory():
    r = ch6.amp_training(("fp32", "bf16"), tokens=32, d=64, min_time_s=0.01)
    rows = {row["precision"]: row for row in r["rows"]}
    # FP32: the saved activations alone, near the model's count (a linear layer's saved weight is
    # the weight itself, not counted again: counting it made them 2.6x the model here)
    model_bytes = 4 * ch6._activation_count(32, 64, 2)
    assert abs(rows["fp32"]["activations_MB"] * 1e6 / model_bytes - 1) < 0.2
    # BF16: 16-bit activations plus autocast's 16-bit copy of each weight
    copies = 2 * r["params"]
    assert rows["bf16"]["activations_MB"] * 1e6 - copies < rows["fp32"]["activations_MB"] * 1e6
    assert rows["bf16"]["activations_MB"] * 1e6 > copies
    assert rows["bf16"]["loss_rel_diff"] < 3e-2
    assert set(r["speedup_vs_fp32"]) == {"fp32", "bf16"}
    assert r["ceiling_gflops"]["fp32"] > 0 and r["cpu_support"]["sentence"]


def test_precision_availability_on_cpu():
    a = ch6.precision_availability("cpu")
    assert list(a) == list(ch6.PRECISIONS)
    assert a["fp32"] is None and "tensor-core" in a["tf32"]
    with pytest.raises(PrecisionError, match="not available here"):
        ch6.run_precision("tf32", dev="cpu")
    with pytest.raises(PrecisionError, match="not one of"):
        ch6.run_precision("fp64", dev="cpu")


def test_run_precision_int8():
    r = ch6.run_precision("int8", batch=32, min_time_s=0.01, dev="cpu")
    assert r["int8"]["weights_bytes"] * 3.5 < r["fp32"]["weights_bytes"]
    assert 0 < r["int8"]["rel_error"] < 0.05 and r["fp32"]["rel_error"] == 0


def test_bf16_emulation_rule():
    assert not ch6.bf16_is_native("7.5") and ch6.bf16_is_native((8, 0))
    assert "emulated" in ch6.bf16_emulated_reason((7, 5))


def test_precision_choices_and_memory_tables():
    rows = {r["GPU"]: r for r in ch6.precision_choices().rows}
    assert rows["T4"]["train in"] == "fp16" and rows["H100-SXM"]["train in"] == "bf16"
    mem = ch6.memory_by_precision().rows
    assert mem[0]["total GB"] > mem[1]["total GB"]


def test_run_all_is_json_ready_and_draws(results):
    from gpucourse.plot import ch6 as p6

    json.dumps(results, allow_nan=False)
    figs = p6.figures(results)
    assert set(figs) == {"formats", "gradients", "loss_scaling", "scale_sweep", "amp", "int8"}
    for f in figs.values():
        assert f.axes and all(ax.get_title() for ax in f.axes)


def test_widget_figures_draw():
    from gpucourse.plot import ch6 as p6

    sweep = ch6.scale_sweep(log2_scales=(0, 16, 40))
    p6.scale_sweep_figure(sweep, ch6.zeroed_at_scale(16))
    p6.precision_figure(ch6.run_precision("bf16", batch=32, min_time_s=0.01, dev="cpu"))
    p6.gradient_histogram(ch6.gradient_magnitudes())
    assert math.isfinite(ch6.zeroed_at_scale(16)["grad_error"])


def test_cpu_only_figures_name_the_cpu_even_beside_gpu_results(results):
    """The gradient checkpoint always runs on the CPU; on a GPU machine its figures must not
    carry the GPU's name from the other experiments."""
    from gpucourse import device
    from gpucourse.plot import ch6 as p6

    cpu = device.describe("cpu").short_name
    on_gpu = dict(results, loss_scaling=dict(results["loss_scaling"], device="NVIDIA H200"),
                  amp=dict(results["amp"], device="NVIDIA H200"))
    figs = p6.figures(on_gpu)
    for name in ("gradients", "scale_sweep"):
        assert results[name]["device"] == cpu
        text = " ".join(ax.get_title() for ax in figs[name].axes)
        assert cpu in text and "H200" not in text, name


def test_the_loss_scale_sweep_trains_its_checkpoint_once(monkeypatch):
    """Every scale of the sweep (and every move of its slider) starts from one cached
    checkpoint: retraining it per scale made the sweep about 15x slower."""
    ch6._checkpoint.cache_clear()
    calls = []
    real = ch6._scaling_init
    monkeypatch.setattr(ch6, "_scaling_init", lambda *a, **k: calls.append(1) or real(*a, **k))
    ch6.scale_sweep(log2_scales=(0, 16, 40))
    ch6.zeroed_at_scale(8)
    assert len(calls) == 1


def test_int8_rounding_keeps_nan_and_zero_apart():
    x = torch.tensor([1.0, float("nan")])
    assert torch.isnan(ch6.round_to(x, "int8")).all()  # a NaN poisons its scale, as before
    z = torch.zeros(3, 4)
    q, s = ch6.quantize_per_channel(z)
    assert (q == 0).all() and (s == 1).all()  # all-zero rows: scale 1, not 0/127
    w = torch.tensor([[0.5, -2.0], [0.0, 0.0]])
    q, s = ch6.quantize_per_channel(w)
    assert q.tolist() == [[32, -127], [0, 0]] and s.tolist() == pytest.approx([2.0 / 127, 1.0])


def test_a_loss_scale_exponent_out_of_range_is_one_sentence():
    for bad in (65536, float("inf"), float("nan")):
        with pytest.raises(PrecisionError, match="16 means a scale of 65536"):
            ch6.zeroed_at_scale(bad)


def test_steps_below_one_and_unknown_autocast_names_are_one_sentence():
    from gpucourse.errors import InputError

    with pytest.raises(InputError, match="steps=-1: use a whole number of at least 1"):
        ch6.loss_scaling(steps=-1)
    with pytest.raises(InputError, match="steps=0"):
        ch6.gradient_magnitudes(steps=0)
    with pytest.raises(InputError, match="rows=0: use a whole number of at least 1"):
        ch6.per_channel_demo(rows=0)
    with pytest.raises(InputError, match="n=0: use a whole number of at least 1"):
        ch6.format_table(n=0)
    with pytest.raises(PrecisionError, match="'bf16' or 'fp16'"):
        ch6.autocast_dtypes("int8")


def test_autocast_dtypes_takes_a_precision_name_as_well():
    assert str(ch6.autocast_dtypes("bf16")) == str(ch6.autocast_dtypes(torch.bfloat16))


def test_a_low_precision_square_matmul_is_checked_against_float64_before_timing():
    for dtype, rtol in ch6.LOW_PRECISION_MATMUL_RTOL.items():
        a = torch.randn(67, 67, generator=torch.Generator().manual_seed(1)).to(dtype)
        assert ch6.check_square_matmul(a, "ok") < rtol / 5  # rounding of the output only
    a = torch.randn(67, 67).to(torch.bfloat16)
    with pytest.raises(AssertionError, match="relative error"):  # a product of the wrong operand
        ch6.check_square_matmul(a, "transposed", product=lambda x, y: x @ y.t())


def _overlaps(fig, ax, artist) -> bool:
    """True when ``artist`` (a legend) covers any bar of ``ax``, in display coordinates."""
    fig.canvas.draw()
    box = artist.get_window_extent()
    return any(box.overlaps(bar.get_window_extent()) for bar in ax.patches)


def test_int8_accuracy_legend_leaves_the_bars_visible(results):
    from gpucourse.plot import ch6 as p6

    fig = p6.int8_figure(results["int8"])
    ax = fig.axes[2]
    assert not _overlaps(fig, ax, ax.get_legend())


def test_precision_widget_notes_sit_above_their_error_bars():
    from gpucourse.plot import ch6 as p6

    r = ch6.run_precision("int8", batch=32, min_time_s=0.01, dev="cpu")
    ax = p6.precision_figure(r).axes[0]
    tops = {n: (r[n]["p80_s"]) * 1e3 for n in ("fp32", "int8")}
    notes = [t for t in ax.texts if t.get_text().endswith(" ms")]
    assert len(notes) == 2
    for note, n in zip(notes, ("fp32", "int8")):
        assert note.xy[1] >= tops[n] - 1e-12


def test_amp_explanation_says_why_16_bits_can_take_more_memory_at_a_small_step():
    rows = [{"precision": "fp32", "memory_MB": 4.9}, {"precision": "bf16", "memory_MB": 5.2},
            {"precision": "tf32", "skipped": "no tensor cores"}]
    s = ch6._memory_sentence({"rows": rows, "tokens": 64})
    assert "fp32 4.90 MB, bf16 5.20 MB" in s and "16-bit copy" in s and "64 tokens" in s
    rows[1]["memory_MB"] = 3.0
    s = ch6._memory_sentence({"rows": rows, "tokens": 8192})
    assert "bf16 3.00 MB" in s and "copy" not in s
    assert ch6._memory_sentence({"rows": rows[:1], "tokens": 64}) == ""


def test_amp_figure_draws_no_model_marker_on_fp32_whose_ratio_is_one_by_definition():
    import math

    from gpucourse.plot import ch6 as plot6

    r = ch6.amp_training(("fp32", "bf16"), tokens=32, d=64, min_time_s=0.01)
    fig = plot6.amp_figure(r, model_gpu="H200")
    [diamonds] = [line for line in fig.axes[1].get_lines() if line.get_marker() == "D"]
    fp32, bf16 = diamonds.get_ydata()
    assert math.isnan(fp32) and bf16 > 1  # the fp32 bar's "1x" note stays clear
