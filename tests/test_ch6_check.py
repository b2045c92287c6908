"""Chapter 6 lab checkers: each accepts the reference answer and rejects plausible wrong ones."""
import pytest
import torch

from gpucourse import specs
from gpucourse.check import ch6 as c6
from gpucourse.check import expect_failure
from gpucourse.experiments import ch6

# --------------------------------------------------------------------------- 6.1


def test_quantize_accepts_reference(capsys):
    c6.check_quantize(ch6.quantize_per_channel)
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
    q, s = ch6.quantize_per_channel(w)
    return q.float(), s


@pytest.mark.parametrize("wrong, match", [
    (_per_tensor, "scale"), (_truncating, "Round to the nearest"), (_no_zero_guard, "all-zero"),
    (_signed_max, "MAGNITUDE"), (_by_128_wrapping, "-127..127"), (_per_column, "one scale per row"),
    (_float_q, "int8"),
])
def test_quantize_rejects_wrong_answers(wrong, match):
    with expect_failure(match):
        c6.check_quantize(wrong)


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
    from gpucourse.experiments.ch6 import DynamicLossScaler

    c6.check_loss_scaler(DynamicLossScaler)


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
    from gpucourse.experiments.ch6 import training_precision

    for g in specs.all_gpus():
        assert training_precision(g.key) == c6._expected_choice(g)


# --------------------------------------------------------------------------- 6.4


def test_training_bytes_accepts_reference(capsys):
    c6.check_training_bytes(c6.reference_training_bytes)
    assert "Exercise 6.4 passed" in capsys.readouterr().out


def _no_master(p, a, dt, opt):
    size = 4 if dt == "fp32" else 2
    return p * size * 2 + p * {"sgd": 0, "momentum": 1, "adam": 2}[opt] * 4 + a * size


def _half_state(p, a, dt, opt):
    size = 4 if dt == "fp32" else 2
    master = 0 if dt == "fp32" else 4 * p
    return p * size * 2 + master + p * {"sgd": 0, "momentum": 1, "adam": 2}[opt] * size + a * size


def _fp32_acts(p, a, dt, opt):
    return c6.reference_training_bytes(p, a, dt, opt) + (0 if dt == "fp32" else 2 * a)


def _halve_everything(p, a, dt, opt):
    full = c6.reference_training_bytes(p, a, "fp32", opt)
    return full if dt == "fp32" else full // 2


@pytest.mark.parametrize("wrong, match", [
    (_no_master, "master"), (_half_state, "optimizer state"), (_fp32_acts, "Activations"),
    (_halve_everything, "expected"),
])
def test_training_bytes_rejects_wrong_answers(wrong, match):
    with expect_failure(match):
        c6.check_training_bytes(wrong)


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
