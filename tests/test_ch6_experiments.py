"""Chapter 6 experiments on the CPU at small sizes: numerics, checks and result shapes, the
package's exports, and INT8 products that are right on every CPU (a ``torch._int_mm`` that
saturates 16-bit sums, as oneDNN's kernels do without VNNI, is stood in for by
``ch6_support.saturating_int_mm``)."""
import json
import pathlib
import re

import numpy as np
import pytest
import torch

from ch6_support import exact_int_mm, quick_results, saturating_int_mm
from gpucourse import precision, specs
from gpucourse.errors import PrecisionError
from gpucourse.experiments import ch6
from gpucourse.experiments.ch6 import amp, data, device_support, int8, number_formats, scaling


@pytest.fixture(scope="module")
def results():
    return quick_results()


def test_rounding_is_the_formats_definition():
    ch6.check_rounding()
    f = number_formats.formats()
    assert f["fp16"].min_normal == 2.0 ** -14 and f["fp16"].max == 65504.0
    assert f["bf16"].eps == 2.0 ** -7 and f["tf32"].mantissa_bits == 10
    x = torch.tensor([1 + 2.0 ** -9, 3.0])
    round_to = number_formats.round_to
    assert round_to(x, "bf16")[0] == 1.0 and round_to(x, "tf32")[0] == x[0]
    assert round_to(torch.tensor([1000.0]), "fp8_e4m3")[0] == 448.0  # saturates like scaled FP8


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
    assert r["max_rel_gap"]["none"] > 10 * scaling.LOSS_MATCH_RTOL
    dyn = r["runs"]["dynamic"]
    assert dyn["scales"][0] == 2.0 ** 16 and max(dyn["scales"]) > 2.0 ** 16  # it grew


def test_fp16_gradients_are_real_fp16_tensors():
    master, xb, yb = scaling._checkpoint(60, scaling.ScalingSetup())
    _, raw = scaling.scaled_gradients(master, xb, yb, scaling.ScalingSetup(), torch.float16, 1.0)
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


@pytest.mark.cpu_check
def test_int8_linear_matches_fp32_on_awkward_shapes():
    torch.manual_seed(0)
    for rows, fin, fout in ((1, 13, 7), (5, 64, 10), (33, 100, 17)):
        lin = torch.nn.Linear(fin, fout)
        x = torch.randn(rows, fin)
        for mode in ("dynamic", "weight-only"):
            q = int8.Int8Linear(lin, mode)
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


@pytest.mark.cpu_check
def test_check_int8_rejects_a_broken_model():
    model = data.trained_classifier(dev="cpu")
    broken = int8.int8_model(model)
    broken[2].scale.mul_(1.5)
    with pytest.raises(AssertionError, match="relative output error"):
        int8.check_int8(model, broken, data.make_dataset().x_test[:256])


@pytest.mark.cpu_check
def test_amp_training_checks_and_counts_memory():
    r = ch6.amp_training(("fp32", "bf16"), tokens=32, d=64, min_time_s=0.01)
    rows = {row["precision"]: row for row in r["rows"]}
    # FP32: the saved activations alone, near the model's count (a linear layer's saved weight is
    # the weight itself, not counted again: counting it made them 2.6x the model here)
    model_bytes = 4 * amp._activation_count(32, 64, 2)
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
    assert list(a) == list(precision.INFERENCE)
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
    assert (not precision.bf16_is_native(specs.parse_cc("7.5"))
            and precision.bf16_is_native((8, 0)))
    assert "emulated" in precision.bf16_emulated_reason((7, 5))


def test_precision_choices_and_memory_tables():
    rows = {r["GPU"]: r for r in ch6.precision_choices().rows}
    assert rows["T4"]["train in"] == "fp16" and rows["H100-SXM"]["train in"] == "bf16"
    mem = ch6.memory_by_precision().rows
    assert mem[0]["total GB"] > mem[1]["total GB"]


def test_the_loss_scale_sweep_trains_its_checkpoint_once(monkeypatch):
    """Every scale of the sweep (and every move of its slider) starts from one cached
    checkpoint: retraining it per scale made the sweep about 15x slower."""
    scaling._checkpoint.cache_clear()
    calls = []
    real = scaling._scaling_init
    monkeypatch.setattr(scaling, "_scaling_init", lambda *a, **k: calls.append(1) or real(*a, **k))
    ch6.scale_sweep(log2_scales=(0, 16, 40))
    ch6.zeroed_at_scale(8)
    assert len(calls) == 1


def test_int8_rounding_keeps_nan_and_zero_apart():
    x = torch.tensor([1.0, float("nan")])
    # a NaN poisons its scale, as before
    assert torch.isnan(number_formats.round_to(x, "int8")).all()
    z = torch.zeros(3, 4)
    q, s = int8.quantize_per_channel(z)
    assert (q == 0).all() and (s == 1).all()  # all-zero rows: scale 1, not 0/127
    w = torch.tensor([[0.5, -2.0], [0.0, 0.0]])
    q, s = int8.quantize_per_channel(w)
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


@pytest.mark.cpu_check
def test_a_low_precision_square_matmul_is_checked_against_float64_before_timing():
    for name, rtol in precision.LOW_PRECISION_MATMUL_RTOL.items():
        a = torch.randn(67, 67, generator=torch.Generator().manual_seed(1)).to(
            precision.torch_dtype(name))
        assert device_support.check_square_matmul(a, "ok") < rtol / 5  # rounding of the output only
    a = torch.randn(67, 67).to(torch.bfloat16)
    with pytest.raises(AssertionError, match="relative error"):  # a product of the wrong operand
        device_support.check_square_matmul(a, "transposed", product=lambda x, y: x @ y.t())


def test_amp_explanation_says_why_16_bits_can_take_more_memory_at_a_small_step():
    rows = [{"precision": "fp32", "memory_MB": 4.9}, {"precision": "bf16", "memory_MB": 5.2},
            {"precision": "tf32", "skipped": "no tensor cores"}]
    s = amp._memory_sentence({"rows": rows, "tokens": 64})
    assert "fp32 4.90 MB, bf16 5.20 MB" in s and "16-bit copy" in s and "64 tokens" in s
    rows[1]["memory_MB"] = 3.0
    s = amp._memory_sentence({"rows": rows, "tokens": 8192})
    assert "bf16 3.00 MB" in s and "copy" not in s
    assert amp._memory_sentence({"rows": rows[:1], "tokens": 64}) == ""


# --------------------------------------------------------------------------- the package


def _names_the_notebook_calls() -> set[str]:
    """What chapter 6's notebook and its lab take from the package: ``ch6.name`` and
    ``from gpucourse.experiments.ch6 import name``."""
    root = pathlib.Path(__file__).parent.parent
    names = set()
    for path in (next((root / "notebooks").glob("06_*.ipynb")),
                 next((root / "solutions").glob("06_*.ipynb"))):
        cells = json.loads(path.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        names |= set(re.findall(r"\bch6\.(\w+)", code))
        for imported in re.findall(r"from gpucourse\.experiments\.ch6 import ([\w, ]+)", code):
            names |= {n.strip() for n in imported.split(",")}
    return names


def test_the_package_exports_what_the_notebook_the_runner_and_gpu_check_call():
    """Exactly those names (the headless runner calls run_all, make gpu-check gpu_check) and
    what the lab imports; the rest is the modules'. Chapter 6 keeps no copy of precision's
    names: one home each."""
    assert set(ch6.__all__) == _names_the_notebook_calls() | {"run_all", "gpu_check"}
    assert all(callable(getattr(ch6, name)) for name in ch6.__all__)
    assert ch6.precision_availability is precision.availability
    moved = ("PRECISIONS", "DTYPES", "CPU_THREADS", "cpu_threads", "_sync", "AMP_LOSS_RTOL",
             "LOW_PRECISION_MATMUL_RTOL", "DynamicLossScaler", "Int8GemmProbe", "int8_gemm_probe",
             "int8_mm", "bf16_emulated_reason", "_int_mm_works", "bf16_is_native")
    for module in (ch6, amp, data, device_support, int8, number_formats, scaling):
        assert not [n for n in moved if hasattr(module, n)], module.__name__


# --------------------------------------------------------------------------- INT8 on every CPU: the probe


@pytest.fixture
def saturating(monkeypatch):
    monkeypatch.setattr(torch, "_int_mm", saturating_int_mm)
    return saturating_int_mm


def _extreme_int8(m, k, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(-127, 128, (m, k), generator=g)
    b = torch.randint(-127, 128, (k, n), generator=g)
    a[0], b[:, 0] = 127, 127
    return a.to(torch.int8), b.to(torch.int8)


def test_the_stand_in_saturates_like_the_kernels_it_stands_for():
    a, b = _extreme_int8(48, 128, 128)
    exact = a.long() @ b.long()
    got = saturating_int_mm(a, b).long()
    assert (got != exact).sum() > 0.8 * exact.numel()
    # small values never saturate: there it is exact (so the shift and its compensation are right)
    small_a, small_b = (a // 16), (b // 16)
    assert torch.equal(saturating_int_mm(small_a, small_b).long(), small_a.long() @ small_b.long())


def test_probe_detects_a_saturating_int_mm(saturating):
    probe = precision.int8_gemm_probe("cpu")
    assert probe.status == "wrong" and not probe.exact
    assert probe.wrong > probe.total // 2 and probe.worst > 32767
    assert probe.path == "float64 matmul of the INT8 values"
    assert "WRONG" in probe.sentence and f"{probe.wrong} of {probe.total}" in probe.sentence
    assert "WRONG" in ch6.int8_gemm_report("cpu")


def test_probe_finds_an_exact_int_mm_exact_and_keeps_it(monkeypatch):
    calls = []
    monkeypatch.setattr(torch, "_int_mm", lambda a, b: calls.append(1) or exact_int_mm(a, b))
    probe = precision.int8_gemm_probe("cpu")
    assert probe.exact and probe.path == "torch._int_mm" and probe.wrong == 0
    assert "is exact" in probe.sentence
    q = torch.ones(20, 16, dtype=torch.int8)
    precision.int8_mm(q, q.t())
    precision.int8_gemm_probe("cpu")
    assert len(calls) == 2  # probed once per device and function; the product itself used it


def test_probe_of_an_int_mm_that_fails_says_why(monkeypatch):
    def broken(a, b):
        raise RuntimeError("no kernel for this CPU")

    monkeypatch.setattr(torch, "_int_mm", broken)
    probe = precision.int8_gemm_probe("cpu")
    assert probe.status == "fails" and "no kernel for this CPU" in probe.sentence
    assert probe.path == "float64 matmul of the INT8 values"


def test_fallback_gives_exact_results(saturating):
    for m, k, n in ((48, 128, 128), (17, 4099, 40), (1, 3, 1)):
        a, b = _extreme_int8(m, k, n, seed=k)
        got = precision.int8_mm(a, b)
        assert got.dtype == torch.int32
        assert torch.equal(got.long(), a.long() @ b.long())
    a, b = _extreme_int8(48, 128, 128)
    assert not torch.equal(saturating(a, b).long(), a.long() @ b.long())  # the stand-in bites


# --------------------------------------------------------------------------- INT8 on every CPU: the chapter


def test_int8_linear_matches_fp32_with_a_saturating_int_mm(saturating):
    torch.manual_seed(0)
    for rows, fin, fout in ((1, 13, 7), (33, 100, 17), (64, 512, 512)):
        lin = torch.nn.Linear(fin, fout)
        x = torch.randn(rows, fin) * 3
        with torch.no_grad():
            err = float((int8.Int8Linear(lin, "dynamic")(x) - lin(x)).norm() / lin(x).norm())
        assert err < 0.03, (rows, fin, fout, err)


def test_int8_inference_error_is_under_its_limit_with_a_saturating_int_mm(saturating):
    r = ch6.int8_inference(batch=32, min_time_s=0.01, dev="cpu")
    rows = {row["version"]: row for row in r["rows"]}
    assert rows["int8 dynamic (ours)"]["output rel. error"] < int8.INT8_OUTPUT_RTOL / 5
    assert r["int8_path"] == "float64 matmul of the INT8 values"
    assert "did not use an INT8 kernel" in ch6.int8_explanation(r)


def test_int8_inference_names_the_path_it_used():
    r = ch6.int8_inference(batch=32, min_time_s=0.01, dev="cpu")
    assert r["int8_path"] == precision.int8_gemm_probe("cpu").path
    assert r["int8_probe"] == precision.int8_gemm_probe("cpu").sentence


# --------------------------------------------------------------------------- bounds


def test_amp_reference_is_fp32_whatever_comes_first():
    r = ch6.amp_training(("bf16", "fp32"), tokens=32, d=64, min_time_s=0.01)
    rows = {row["precision"]: row for row in r["rows"]}
    assert rows["fp32"]["loss_rel_diff"] == 0 and rows["bf16"]["loss_rel_diff"] > 0


def test_square_matmul_check_allows_fp32_sums_within_their_worst_case():
    """A product within k * 2^-24 * sum|products| of the exact one (here 3e-5 of each entry, for
    k = 1024 positive values) is a possible FP32 result; the old limit of 1e-5 rejected it."""
    a = torch.rand(1024, 1024, generator=torch.Generator().manual_seed(0))
    err = device_support.check_square_matmul(
        a, "fp32", product=lambda x, y: (x.double() @ y.double() * (1 + 3e-5)).float())
    assert 2e-5 < err < 4e-5
    with pytest.raises(AssertionError, match="relative error"):
        device_support.check_square_matmul(a, "fp32", product=lambda x, y: x @ y.t())
