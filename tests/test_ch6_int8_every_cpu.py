"""Chapter 6's INT8 products are right on every CPU, and its checkers answer in one sentence.

On x86 CPUs without VNNI, ``torch._int_mm`` can run through oneDNN's u8 x s8 kernels, which
add 128 to each signed activation and sum pairs of products in INT16 with saturation
(vpmaddubsw). Where ``torch._int_mm`` does not call oneDNN it is exact, so these tests replace
it with :func:`saturating_int_mm`, a stand-in that computes what those kernels compute.
"""
import numpy as np
import pytest
import torch

from gpucourse.check import ch6 as c6
from gpucourse.check import expect_failure
from gpucourse.experiments import ch6


def saturating_int_mm(a, b):
    """a @ b as oneDNN's u8 x s8 kernels without VNNI compute it: a + 128 (unsigned), pairs of
    products summed and saturated to INT16, pair sums added in INT32, 128 * sum(b) taken off."""
    u, w = a.to(torch.int64) + 128, b.to(torch.int64)
    if u.shape[1] % 2:
        u, w = torch.nn.functional.pad(u, (0, 1)), torch.nn.functional.pad(w, (0, 0, 0, 1))
    out = torch.zeros(u.shape[0], w.shape[1], dtype=torch.int64)
    step = 2 * max(1, 2 ** 22 // (u.shape[0] * w.shape[1]))  # (m, pairs, n) blocks of 4M values
    for p in range(0, u.shape[1], step):
        pairs = (u[:, p:p + step:2, None] * w[None, p:p + step:2]
                 + u[:, p + 1:p + step:2, None] * w[None, p + 1:p + step:2])
        out += pairs.clamp(-32768, 32767).sum(1)
    return (out - 128 * w.sum(0)).to(torch.int32)


def exact_int_mm(a, b):
    return (a.to(torch.int64) @ b.to(torch.int64)).to(torch.int32)


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


# --------------------------------------------------------------------------- the probe


def test_the_stand_in_saturates_like_the_kernels_it_stands_for():
    a, b = _extreme_int8(48, 128, 128)
    exact = a.long() @ b.long()
    got = saturating_int_mm(a, b).long()
    assert (got != exact).sum() > 0.8 * exact.numel()
    # small values never saturate: there it is exact (so the shift and its compensation are right)
    small_a, small_b = (a // 16), (b // 16)
    assert torch.equal(saturating_int_mm(small_a, small_b).long(), small_a.long() @ small_b.long())


def test_probe_detects_a_saturating_int_mm(saturating):
    probe = c6.int8_gemm_probe("cpu")
    assert probe.status == "wrong" and not probe.exact
    assert probe.wrong > probe.total // 2 and probe.worst > 32767
    assert probe.path == "float64 matmul of the INT8 values"
    assert "WRONG" in probe.sentence and f"{probe.wrong} of {probe.total}" in probe.sentence
    assert "WRONG" in ch6.int8_gemm_report("cpu")


def test_probe_finds_an_exact_int_mm_exact_and_keeps_it(monkeypatch):
    calls = []
    monkeypatch.setattr(torch, "_int_mm", lambda a, b: calls.append(1) or exact_int_mm(a, b))
    probe = c6.int8_gemm_probe("cpu")
    assert probe.exact and probe.path == "torch._int_mm" and probe.wrong == 0
    assert "is exact" in probe.sentence
    q = torch.ones(20, 16, dtype=torch.int8)
    c6.int8_mm(q, q.t())
    c6.int8_gemm_probe("cpu")
    assert len(calls) == 2  # probed once per device and function; the product itself used it


def test_probe_of_an_int_mm_that_fails_says_why(monkeypatch):
    def broken(a, b):
        raise RuntimeError("no kernel for this CPU")

    monkeypatch.setattr(torch, "_int_mm", broken)
    probe = c6.int8_gemm_probe("cpu")
    assert probe.status == "fails" and "no kernel for this CPU" in probe.sentence
    assert probe.path == "float64 matmul of the INT8 values"


def test_fallback_gives_exact_results(saturating):
    for m, k, n in ((48, 128, 128), (17, 4099, 40), (1, 3, 1)):
        a, b = _extreme_int8(m, k, n, seed=k)
        got = c6.int8_mm(a, b)
        assert got.dtype == torch.int32
        assert torch.equal(got.long(), a.long() @ b.long())
    a, b = _extreme_int8(48, 128, 128)
    assert not torch.equal(saturating(a, b).long(), a.long() @ b.long())  # the stand-in bites


# --------------------------------------------------------------------------- the chapter


def test_int8_linear_matches_fp32_with_a_saturating_int_mm(saturating):
    torch.manual_seed(0)
    for rows, fin, fout in ((1, 13, 7), (33, 100, 17), (64, 512, 512)):
        lin = torch.nn.Linear(fin, fout)
        x = torch.randn(rows, fin) * 3
        with torch.no_grad():
            err = float((ch6.Int8Linear(lin, "dynamic")(x) - lin(x)).norm() / lin(x).norm())
        assert err < 0.03, (rows, fin, fout, err)


def test_int8_inference_error_is_under_its_limit_with_a_saturating_int_mm(saturating):
    r = ch6.int8_inference(batch=32, min_time_s=0.01, dev="cpu")
    rows = {row["version"]: row for row in r["rows"]}
    assert rows["int8 dynamic (ours)"]["output rel. error"] < ch6.INT8_OUTPUT_RTOL / 5
    assert r["int8_path"] == "float64 matmul of the INT8 values"
    assert "did not use an INT8 kernel" in ch6.int8_explanation(r)


def test_int8_inference_names_the_path_it_used():
    r = ch6.int8_inference(batch=32, min_time_s=0.01, dev="cpu")
    assert r["int8_path"] == c6.int8_gemm_probe("cpu").path
    assert r["int8_probe"] == c6.int8_gemm_probe("cpu").sentence


# --------------------------------------------------------------------------- lab 6.5


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


# --------------------------------------------------------------------------- other bounds


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


def test_amp_reference_is_fp32_whatever_comes_first():
    r = ch6.amp_training(("bf16", "fp32"), tokens=32, d=64, min_time_s=0.01)
    rows = {row["precision"]: row for row in r["rows"]}
    assert rows["fp32"]["loss_rel_diff"] == 0 and rows["bf16"]["loss_rel_diff"] > 0


def test_square_matmul_check_allows_fp32_sums_within_their_worst_case():
    """A product within k * 2^-24 * sum|products| of the exact one (here 3e-5 of each entry, for
    k = 1024 positive values) is a possible FP32 result; the old limit of 1e-5 rejected it."""
    a = torch.rand(1024, 1024, generator=torch.Generator().manual_seed(0))
    err = ch6.check_square_matmul(a, "fp32", product=lambda x, y: (x.double() @ y.double()
                                                                    * (1 + 3e-5)).float())
    assert 2e-5 < err < 4e-5
    with pytest.raises(AssertionError, match="relative error"):
        ch6.check_square_matmul(a, "fp32", product=lambda x, y: x @ y.t())


# --------------------------------------------------------------------------- wrong-typed answers

CHECKERS = {"6.1": c6.check_quantize, "6.2": c6.check_loss_scaler,
            "6.3": c6.check_choose_precision, "6.4": c6.check_training_bytes,
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
