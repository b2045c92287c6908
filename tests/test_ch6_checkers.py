"""Chapter 6 lab checkers: each accepts the reference answer and rejects plausible wrong ones,
also where ``torch._int_mm`` saturates 16-bit sums (``ch6_support.saturating_int_mm``), and
answers a wrong-typed answer in one sentence."""
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from ch6_support import exact_int_mm, saturating_int_mm
from gpucourse import precision, specs
from gpucourse.check import ch6 as c6
from gpucourse.check import expect_failure
from gpucourse.errors import InputError
from gpucourse.experiments.ch6 import int8
from gpucourse.experiments.ch6.gpu_choice import training_precision

# --------------------------------------------------------------------------- 6.1


def test_quantize_accepts_reference(capsys):
    c6.check_quantize(int8.quantize_per_channel)
    assert "Exercise 6.1 passed" in capsys.readouterr().out


def _per_tensor(w):
    s = w.abs().max() / 127
    return torch.round(w / s).clamp(-127, 127).to(torch.int8), s.repeat(w.shape[0])


def _truncating(w):
    amax = w.abs().amax(1, keepdim=True)
    s = torch.where(amax > 0, amax / 127, torch.ones_like(amax))
    return (w / s).to(torch.int8), s.squeeze(1)


def _no_zero_guard(w):
    s = w.abs().amax(1, keepdim=True) / 127
    return torch.round(w / s).clamp(-127, 127).to(torch.int8), s.squeeze(1)


def _signed_max(w):
    s = w.amax(1, keepdim=True) / 127
    s = torch.where(s > 0, s, torch.ones_like(s))
    return torch.round(w / s).clamp(-127, 127).to(torch.int8), s.squeeze(1)


def _by_128_wrapping(w):
    amax = w.abs().amax(1, keepdim=True)
    s = torch.where(amax > 0, amax / 127.5, torch.ones_like(amax))
    return torch.round(w / s).to(torch.int32).to(torch.int8), s.squeeze(1)


def _per_column(w):
    amax = w.abs().amax(0, keepdim=True)
    s = torch.where(amax > 0, amax / 127, torch.ones_like(amax))
    return torch.round(w / s).clamp(-127, 127).to(torch.int8), s.squeeze(0)


def _float_q(w):
    q, s = int8.quantize_per_channel(w)
    return q.float(), s


@pytest.mark.parametrize("wrong, match", [
    (_per_tensor, "scale"), (_truncating, "Round to the nearest"), (_no_zero_guard, "all-zero"),
    (_signed_max, "MAGNITUDE"), (_by_128_wrapping, "-127..127"), (_per_column, "one scale per row"),
    (_float_q, "int8"),
])
def test_quantize_rejects_wrong_answers(wrong, match):
    with expect_failure(match):
        c6.check_quantize(wrong)


def test_lab_6_1_accepts_a_reciprocal_scale_next_to_a_half_step(monkeypatch, capsys):
    """w * (127 / max|w|) rounds three times; for this value it lands below the half step that
    w / (max|w| / 127) lands above, 1.000024 half steps from w, which a bound of 1 + 1e-5 rejected."""
    real = c6.weights_with_outliers

    def with_a_tie(rows, cols, seed=0, **kw):
        w = real(rows, cols, seed=seed, **kw)
        if cols >= 2:
            w[0] = 0.01
            w[0, 0], w[0, 1] = 1.7282496690750122, 1.6942291259765625
        return w

    def reciprocal(w):
        amax = w.abs().amax(dim=1, keepdim=True)
        safe = torch.where(amax > 0, amax, torch.ones_like(amax))
        q = torch.round(w * (127 / safe)).clamp(-127, 127).to(torch.int8)
        return q, (torch.where(amax > 0, amax / 127, torch.ones_like(amax))).squeeze(1)

    monkeypatch.setattr(c6, "weights_with_outliers", with_a_tie)
    c6.check_quantize(reciprocal)
    assert "Exercise 6.1 passed" in capsys.readouterr().out


# --------------------------------------------------------------------------- 6.2


class _NoReset(c6.ReferenceScaler):
    def update(self, found_inf):
        if found_inf:
            self.scale *= self.backoff_factor  # forgets to reset the clean-step count
        else:
            self.clean_steps += 1
            if self.clean_steps == self.growth_interval:
                self.scale *= self.growth_factor
                self.clean_steps = 0


class _OffByOne(c6.ReferenceScaler):
    def update(self, found_inf):
        if found_inf:
            self.scale *= self.backoff_factor
            self.clean_steps = 0
        else:
            self.clean_steps += 1
            if self.clean_steps > self.growth_interval:
                self.scale *= self.growth_factor
                self.clean_steps = 0


class _InfOnly(c6.ReferenceScaler):
    def unscale(self, grads):
        out = [g.float() / self.scale for g in grads]
        return out, any(bool(torch.isinf(g).any()) for g in out)


class _HalfUnscale(c6.ReferenceScaler):
    def unscale(self, grads):
        out = [g / self.scale for g in grads]
        return out, not all(bool(torch.isfinite(g).all()) for g in out)


class _HalfThenFloat(c6.ReferenceScaler):
    def unscale(self, grads):  # divides in FP16, then converts: the dtype is right, the values not
        out = [(g.half() / self.scale).float() for g in grads]
        return out, not all(bool(torch.isfinite(g).all()) for g in out)


class _GrowsEveryStep(c6.ReferenceScaler):
    def update(self, found_inf):
        self.scale *= self.backoff_factor if found_inf else self.growth_factor


class _PositiveInfOnly(c6.ReferenceScaler):
    def unscale(self, grads):
        out = [g.float() / self.scale for g in grads]
        return out, any(bool((g == float("inf")).any()) or bool(torch.isnan(g).any()) for g in out)


def test_loss_scaler_accepts_reference(capsys):
    c6.check_loss_scaler(c6.ReferenceScaler)
    assert "Exercise 6.2 passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, match", [
    (_NoReset, "reset"), (_OffByOne, "exactly growth_interval"), (_InfOnly, "NaN"),
    (_HalfUnscale, "FP32"), (_GrowsEveryStep, "expected"), (_PositiveInfOnly, "-inf"),
    (_HalfThenFloat, "dividing in FP16 first"),
])
def test_loss_scaler_rejects_wrong_answers(wrong, match):
    with expect_failure(match):
        c6.check_loss_scaler(wrong)


def test_reference_scaler_follows_torch_gradscaler():
    """The checker's rule is GradScaler's: same scale after every step of the script."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gs = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_factor=2.0,
                                  backoff_factor=0.5, growth_interval=3)
    ref = c6.ReferenceScaler(2.0 ** 10, 2.0, 0.5, 3)
    p = torch.nn.Parameter(torch.zeros(4))
    opt = torch.optim.SGD([p], lr=0.0)
    values = {None: 1.0, "inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}
    for event in c6.SCALER_SCRIPT:
        gs.scale(torch.ones(()))  # initialises the scale as a training loop would
        p.grad = torch.full((4,), values[event])
        gs.step(opt)
        gs.update()
        ref.update(bool(event))
        assert gs.get_scale() == ref.scale


def test_experiment_scaler_matches_the_checker():
    c6.check_loss_scaler(precision.DynamicLossScaler)


# --------------------------------------------------------------------------- 6.3


def test_choose_precision_accepts_reference(capsys):
    c6.check_choose_precision(c6._expected_choice)
    assert "Exercise 6.3 passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, match", [
    (lambda g: ("bf16", False), "expected"),
    (lambda g: ("bf16", False) if g.compute_capability >= (8, 0) else ("fp16", True), "P-slow-fp16"),
    (lambda g: ("bf16", True) if "bf16" in g.precisions else ("fp16", True), "loss scaling"),
    (lambda g: (max(g.precisions, key=g.peak_flops), False), "inference format"),
    (lambda g: ("bf16", False) if any(k in g.name for k in ("A100", "H100", "H200", "L4", "A10", "RTX"))
     else ("fp16", True), "expected"),
    (lambda g: ("fp16", False) if "bf16" not in g.precisions else ("bf16", False), "loss scaling"),
])
def test_choose_precision_rejects_wrong_answers(wrong, match):
    with expect_failure(match):
        c6.check_choose_precision(wrong)


def test_experiment_choice_matches_the_checker():
    for g in specs.all_gpus():
        assert training_precision(g.key) == c6._expected_choice(g)


# --------------------------------------------------------------------------- 6.4


def test_step_memory_accepts_reference_within_two_seconds(capsys):
    c6.measure_step_memory(c6._mlp, 4, 8)  # torch's first autocast step is not the check's
    c6.memory_cases.cache_clear()
    start = time.perf_counter()
    c6.check_step_memory(c6.reference_memory_explanation, 0.5, "weights")
    elapsed = time.perf_counter() - start
    assert "Exercise 6.4 passed" in capsys.readouterr().out
    assert elapsed <= 2.0, f"the check took {elapsed:.2f} s"


def test_step_memory_counts_each_part_of_an_autocast_step():
    m = c6.measure_step_memory(c6._mlp, 16, 32, ("fp32", "bf16", "fp16"))
    model = c6._mlp(32)
    weights = sum(q.numel() * 4 for q in model.parameters())
    for p, parts in m.items():
        assert list(parts) == list(c6.STEP_PARTS)
        # autocast leaves the parameters, their gradients and AdamW's two moments (and its
        # step counter, 4 bytes per tensor) in FP32
        assert parts["weights"] == parts["gradients"] == weights, p
        assert parts["optimizer state"] == 2 * weights + 4 * len(list(model.parameters())), p
    assert m["fp32"]["16-bit weight copies"] == 0
    # only the second layer's weight is saved: the first one's input needs no gradient
    second = model[2].weight.numel()
    assert m["bf16"]["16-bit weight copies"] == m["fp16"]["16-bit weight copies"] == 2 * second
    assert m["bf16"]["saved activations"] < m["fp32"]["saved activations"]


def test_step_memory_finds_weight_copies_behind_a_transposed_view():
    # a first layer whose input needs a gradient: both cast weights are saved, as views
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.LayerNorm(8), torch.nn.Linear(8, 24), torch.nn.GELU(),
                                torch.nn.Linear(24, 8))
    g = torch.Generator().manual_seed(1)
    x, target = torch.randn(5, 8, generator=g), torch.randn(5, 8, generator=g)
    parts = c6.step_memory(model, x, target, "bf16")
    assert parts["16-bit weight copies"] == 2 * (8 * 24 + 24 * 8)


def test_step_memory_names_a_precision_it_cannot_run():
    with pytest.raises(InputError, match="'fp32', 'bf16' or 'fp16'"):
        c6.step_memory(c6._mlp(4), torch.ones(2, 4), torch.ones(2, 4), "int8")


def test_memory_cases_lie_on_both_sides_of_the_break_even_point():
    totals = [c6.reference_memory_explanation(f, l)["total"] for _, f, l in c6.memory_cases()]
    assert totals[:4] == ["larger", "smaller", "smaller", "same"]
    what, fp32, low = c6.memory_cases()[0]
    assert 0 < sum(low.values()) - sum(fp32.values()) <= 0.001 * sum(fp32.values())


def test_the_explanation_is_read_from_the_data_it_is_given():
    fp32 = {"weights": 8, "gradients": 8, "activations": 6}
    low = {"weights": 8, "gradients": 4, "activations": 9, "copies": 2}  # 23 bytes against 22
    assert c6.reference_memory_explanation(fp32, low) == {
        "weights": "same", "gradients": "smaller", "activations": "larger", "copies": "larger",
        "total": "larger"}


def test_memory_table_puts_the_prediction_beside_the_measurement():
    m = c6.measure_step_memory(c6._mlp, 14, 32)
    table = c6.memory_table(m, 0.5, "weights")
    assert "You predicted bf16/fp32 = 0.50 and that 'weights' would shrink the most" in table.caption
    assert "measured: 1.00, and 'saved activations' shrank the most" in table.caption
    assert [r["part"] for r in table] == [*c6.STEP_PARTS, "total"]


@pytest.mark.parametrize("ratio, part, named", [
    ("half", "weights", "predicted_ratio is the text 'half'"),
    (-0.5, "weights", "above 0"),
    (0.5, "master weights", "predicted_part is the text 'master weights'"),
    (0.5, None, "predicted_part is None"),
])
def test_a_prediction_of_the_wrong_type_is_one_sentence(ratio, part, named):
    m = {"fp32": {"weights": 4}, "bf16": {"weights": 4}}
    with pytest.raises(InputError, match=named):
        c6.memory_table(m, ratio, part)
    with pytest.raises(AssertionError) as e:
        c6.check_step_memory(c6.reference_memory_explanation, ratio if ratio != -0.5 else "x",
                             part)
    _one_sentence(e.value, "6.4", "predicted_")


def test_a_verdict_that_is_not_one_of_the_three_words_is_one_sentence():
    def shouting(fp32, low):
        return {k: v.upper() for k, v in c6.reference_memory_explanation(fp32, low).items()}

    with pytest.raises(AssertionError) as e:
        c6.check_step_memory(shouting)
    _one_sentence(e.value, "6.4", "the text 'SAME'")


# --------------------------------------------------------------------------- 6.5


def test_int8_matmul_accepts_reference(capsys):
    c6.check_int8_matmul(c6.reference_int8_matmul)
    assert "Exercise 6.5 passed" in capsys.readouterr().out


def _q(x, dim):
    s = x.abs().amax(dim=dim, keepdim=True) / 127
    s = torch.where(s > 0, s, torch.ones_like(s))
    return torch.round(x / s).clamp(-127, 127), s


def _fp16_accumulate(a, b):
    qa, sa = _q(a, 1)
    qb, sb = _q(b, 0)
    return (qa.half() @ qb.half()).float() * sa * sb


def _int16_accumulate(a, b):
    qa, sa = _q(a, 1)
    qb, sb = _q(b, 0)
    acc = (qa.to(torch.int32) @ qb.to(torch.int32)).to(torch.int16)
    return acc.float() * sa * sb


def _per_tensor_gemm(a, b):
    sa, sb = a.abs().max() / 127, b.abs().max() / 127
    qa, qb = torch.round(a / sa), torch.round(b / sb)
    return (qa.to(torch.int32) @ qb.to(torch.int32)).float() * sa * sb


def _one_scale(a, b):
    qa, sa = _q(a, 1)
    qb, sb = _q(b, 0)
    return (qa.to(torch.int32) @ qb.to(torch.int32)).float() * sa


def _b_per_row(a, b):
    qa, sa = _q(a, 1)
    qb, sb = _q(b, 1)
    return (qa.to(torch.int32) @ (qb * sb).round().to(torch.int32)).float() * sa


def _no_zero_guard_gemm(a, b):
    """Exact FP64 sums (accepted), but a scale of 0 for an all-zero row: 0/0 = NaN."""
    sa = a.abs().amax(dim=1, keepdim=True) / 127
    sb = b.abs().amax(dim=0, keepdim=True) / 127
    qa, qb = torch.round(a / sa).clamp(-127, 127), torch.round(b / sb).clamp(-127, 127)
    return (qa.double() @ qb.double()).float() * sa * sb


def _fp32_accumulate(a, b):
    qa, sa = _q(a, 1)
    qb, sb = _q(b, 0)
    return (qa @ qb) * sa * sb


def _fp64_accumulate(a, b):
    """Exact for these sizes (products of INT8 sum exactly in FP64), so it passes."""
    qa, sa = _q(a, 1)
    qb, sb = _q(b, 0)
    return (qa.double() @ qb.double()).float() * sa * sb


def test_int8_matmul_accepts_exact_fp64_sums_and_an_fp64_result(capsys):
    c6.check_int8_matmul(_fp64_accumulate)
    c6.check_int8_matmul(lambda a, b: c6.reference_int8_matmul(a, b).double())
    assert capsys.readouterr().out.count("Exercise 6.5 passed") == 2


@pytest.mark.parametrize("wrong, match", [
    (_fp16_accumulate, "INT32"), (_int16_accumulate, "INT8 reference"),
    (_fp32_accumulate, "exact integer product"),
    (_per_tensor_gemm, "per ROW"), (_one_scale, "both scales"), (_b_per_row, "COLUMN"),
    (_no_zero_guard_gemm, "all-zero row"),
])
def test_int8_matmul_rejects_wrong_answers(wrong, match):
    with expect_failure(match):
        c6.check_int8_matmul(wrong)


@pytest.fixture
def saturating(monkeypatch):
    monkeypatch.setattr(torch, "_int_mm", saturating_int_mm)
    return saturating_int_mm


def test_lab_reference_answer_passes_with_a_saturating_int_mm(saturating, capsys):
    c6.check_int8_matmul(c6.reference_int8_matmul)
    assert "Exercise 6.5 passed" in capsys.readouterr().out


def _with_int_mm(a, b):
    """A right answer that multiplies with torch._int_mm."""
    sa = a.abs().amax(dim=1, keepdim=True) / 127
    sb = b.abs().amax(dim=0, keepdim=True) / 127
    sa = torch.where(sa > 0, sa, torch.ones_like(sa))
    sb = torch.where(sb > 0, sb, torch.ones_like(sb))
    qa = torch.round(a / sa).clamp(-127, 127).to(torch.int8)
    qb = torch.round(b / sb).clamp(-127, 127).to(torch.int8)
    return torch._int_mm(qa, qb).float() * sa * sb


def test_a_right_answer_on_a_cpu_whose_int_mm_is_wrong_hears_it_is_the_cpu(saturating):
    with expect_failure("your scales and quantization are right, but torch._int_mm is wrong "
                        "on this CPU"):
        c6.check_int8_matmul(_with_int_mm)
    with pytest.raises(AssertionError) as e:
        c6.check_int8_matmul(_with_int_mm)
    assert "per ROW" not in str(e.value) and "qa.to(torch.int32) @ qb.to(torch.int32)" in str(e.value)


def test_a_wrong_answer_on_such_a_cpu_hears_both(saturating):
    def one_scale(a, b):
        return _with_int_mm(a, b) / (b.abs().amax(dim=0, keepdim=True) / 127)

    with expect_failure("both scales"):
        c6.check_int8_matmul(one_scale)
    with pytest.raises(AssertionError, match="Also: torch._int_mm is wrong on this CPU"):
        c6.check_int8_matmul(one_scale)


def test_a_right_answer_that_calls_int_mm_passes_where_it_is_exact(monkeypatch, capsys):
    monkeypatch.setattr(torch, "_int_mm", exact_int_mm)
    c6.check_int8_matmul(_with_int_mm)
    assert "Exercise 6.5 passed" in capsys.readouterr().out


@pytest.mark.parametrize("seed", [24, 54])
def test_lab_6_5_accepts_fp32_rounding_next_to_a_half_step(monkeypatch, seed, capsys):
    """On these inputs x / scale lies within FP32 rounding of a half step in a large entry's row:
    the reference answer (FP32 quantization) rounds it the other way from the FP64 reference,
    1.3e-4 and 1.3e-3 of the largest entry away, which a bound of 1e-4 of it rejected."""
    m, k, n = c6.GEMM_SHAPES[1]
    a, b = c6._gemm_inputs(1, m, k, n, seed=seed)
    want, _ = c6._ref_int8_matmul(a.numpy(), b.numpy())
    got = c6.reference_int8_matmul(a, b).double().numpy()
    assert np.abs(got - want).max() / np.abs(want).max() > 1e-4
    monkeypatch.setattr(c6, "GEMM_SEED", seed)
    c6.check_int8_matmul(c6.reference_int8_matmul)
    assert "Exercise 6.5 passed" in capsys.readouterr().out


# --------------------------------------------------------------------------- one home


def test_the_checkers_keep_no_copy_of_precisions_int8_product():
    """The INT8 probe and product have one home, ``precision``; the checker's reference scaler
    keeps its name (the tests subclass it) as a subclass of the one rule."""
    assert not hasattr(c6, "int8_gemm_probe") and not hasattr(c6, "int8_mm")
    assert issubclass(c6.ReferenceScaler, precision.DynamicLossScaler)


# --------------------------------------------------------------------------- wrong-typed answers

CHECKERS = {"6.1": c6.check_quantize, "6.2": c6.check_loss_scaler,
            "6.3": c6.check_choose_precision, "6.4": c6.check_step_memory,
            "6.5": c6.check_int8_matmul}
PASSED = {"a string": ("quantize", "the text 'quantize'"), "a list": ([1, 2], "a list [1, 2]"),
          "None": (None, "None")}


def _one_sentence(err: AssertionError, number: str, names: str) -> None:
    head, _, body = str(err).partition("\n")
    assert head.startswith(f"Exercise {number} (") and head.endswith("not yet right:")
    # one sentence; a function that returned None is also asked whether it ends with `return`
    assert "\n" not in body and body.endswith((".", "?")) and names in body, body
    assert "Traceback" not in body


@pytest.mark.parametrize("number", list(CHECKERS))
@pytest.mark.parametrize("kind", list(PASSED))
def test_a_wrong_typed_answer_passed_to_a_checker_is_one_sentence(number, kind):
    value, named = PASSED[kind]
    with pytest.raises(AssertionError) as e:
        CHECKERS[number](value)
    _one_sentence(e.value, number, named)


def test_a_function_where_the_scaler_class_is_expected_is_one_sentence():
    def unscale(scaler, grads):
        return grads, False

    with pytest.raises(AssertionError) as e:
        c6.check_loss_scaler(unscale)
    _one_sentence(e.value, "6.2", "the function unscale")
    with pytest.raises(AssertionError) as e:  # an instance, not the class
        c6.check_loss_scaler(c6.ReferenceScaler())
    _one_sentence(e.value, "6.2", "a ReferenceScaler")


RETURNED = {"a string": ("fp16", "the text 'fp16'"), "a list": ([1.0, 2.0, 3.0], "a list [1.0, 2.0, 3.0]"),
            "a function": (len, "the function len"), "None": (None, "None")}


@pytest.mark.parametrize("number", ["6.1", "6.3", "6.4", "6.5"])
@pytest.mark.parametrize("kind", list(RETURNED))
def test_a_function_that_returns_the_wrong_type_is_one_sentence(number, kind):
    value, named = RETURNED[kind]
    with pytest.raises(AssertionError) as e:
        CHECKERS[number](lambda *args: value)
    _one_sentence(e.value, number, named)


@pytest.mark.parametrize("kind", list(RETURNED))
def test_wrong_types_inside_a_two_part_answer_are_one_sentence(kind):
    value, named = RETURNED[kind]
    cases = {"6.1": lambda w: (value, torch.ones(w.shape[0])),
             "6.3": lambda gpu: ("bf16", value)}
    for number, fn in cases.items():
        with pytest.raises(AssertionError) as e:
            CHECKERS[number](fn)
        _one_sentence(e.value, number, named)


@pytest.mark.parametrize("kind", list(RETURNED))
def test_a_scaler_with_a_wrong_typed_part_is_one_sentence(kind):
    value, named = RETURNED[kind]

    class ScaleOfWrongType(c6.ReferenceScaler):
        def update(self, found_inf):
            self.scale = value

    class GradsOfWrongType(c6.ReferenceScaler):
        def unscale(self, grads):
            return [value] * len(grads), False

    for cls in (ScaleOfWrongType, GradsOfWrongType):
        with pytest.raises(AssertionError) as e:
            c6.check_loss_scaler(cls)
        _one_sentence(e.value, "6.2", named)


def _hidden_nan(cast):
    """6.1 without the zero-row guard: 0/0 = NaN, made int8 by ``cast``; the scale returned
    is guarded, so q and scale both look right."""
    def quantize(w):
        m = w.abs().amax(dim=1, keepdim=True)
        x = torch.round(w / m * 127).clamp(-127, 127)
        return cast(x), torch.where(m > 0, m / 127, torch.ones_like(m)).squeeze(1)
    return quantize


def _into_int8(how):
    def cast(x):
        q = torch.empty(x.shape, dtype=torch.int8)
        if how == "setitem":
            q[...] = x
        else:
            q.copy_(x)
        return q
    return cast


@pytest.mark.parametrize("cast", [
    lambda x: x.to(torch.int8), lambda x: x.to(dtype=torch.int8), lambda x: x.char(),
    lambda x: x.type(torch.int8), _into_int8("setitem"), _into_int8("copy_"),
    lambda x: torch.from_numpy(x.numpy().astype("int8"))],
    ids=["to", "to-dtype", "char", "type", "setitem", "copy_", "numpy"])
def test_a_nan_hidden_by_any_cast_to_integers_is_caught(cast):
    with expect_failure("NaN or inf value"):
        c6.check_quantize(_hidden_nan(cast))


def test_checking_quantize_does_not_load_torch_compile():
    """The NaN watch is a function mode: a dispatch mode's first use imports torch._dynamo,
    2-4 s of a learner's first check."""
    code = ("import sys, torch\nfrom gpucourse.check import ch6\n"
            "def quantize(w):\n"
            "    m = w.abs().amax(dim=1, keepdim=True)\n"
            "    s = torch.where(m > 0, m / 127, torch.ones_like(m))\n"
            "    return torch.round(w / s).clamp(-127, 127).to(torch.int8), s.squeeze(1)\n"
            "ch6.check_quantize(quantize)\nprint('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"
