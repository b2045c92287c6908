"""Chapter 7 lab checkers: each accepts the reference answer and rejects plausible wrong ones
with a message that names the mistake."""
import math

import pytest
import torch

from gpucourse.check import ch7 as c7
from gpucourse.check import expect_failure

# --------------------------------------------------------------------------- 7.1 attention


def _attn(mask_diag=0, scale="sqrt", dim=-1, after=False, mask=True):
    def f(q, k, v):
        t, d = q.shape[-2], q.shape[-1]
        s = q @ k.transpose(-2, -1)
        s = s / {"sqrt": math.sqrt(d), "d": d, "none": 1}[scale]
        keep = torch.ones(t, t, dtype=torch.bool).tril(mask_diag)
        if after:
            return (torch.softmax(s, -1) * keep) @ v
        if mask:
            s = s.masked_fill(~keep, float("-inf"))
        return torch.softmax(s, dim) @ v
    return f


def test_attention_accepts_the_reference(capsys):
    c7.check_attention(_attn())
    c7.check_attention(lambda q, k, v: c7.reference_attention(q, k, v).float())
    assert "Exercise 7.1 passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, match", [
    (_attn(mask=False), "no mask"),
    (_attn(mask_diag=-1), "NaN"),              # the first query sees nothing: 0/0
    (_attn(mask_diag=1), "see the next token"),
    (_attn(scale="none"), "no scaling"),
    (_attn(scale="d"), "instead of sqrt(d_head)"),
    (_attn(dim=-2), "over the queries"),
    (_attn(after=True), "after the softmax"),
    (lambda q, k, v: (q @ k.transpose(-2, -1)).softmax(-1), "expected"),  # shape of the scores
    (lambda q, k, v: None, "return a tensor"),
])
def test_attention_rejects_wrong_answers(wrong, match):
    with expect_failure(match):
        c7.check_attention(wrong)


# --------------------------------------------------------------------------- 7.2 tolerance

U = {"fp32": 24, "fp16": 11, "bf16": 8}


def test_tolerance_accepts_the_reference(capsys):
    c7.check_tolerance(lambda p, n: 4 * math.sqrt(n) * 2.0 ** -U[p])
    assert "Exercise 7.2 passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, match", [
    (lambda p, n: 4 * math.sqrt(n) * 2.0 ** -(U[p] - 1), "eps"),            # eps, not u
    (lambda p, n: 4 * math.sqrt(n) * 2.0 ** -{"fp32": 23, "fp16": 10, "bf16": 7}[p], "eps"),
    (lambda p, n: 4 * math.sqrt(n) * 2.0 ** -{"fp32": 24, "fp16": 11, "bf16": 11}[p],
     "fp16's unit roundoff"),                                               # bf16 = fp16's u
    (lambda p, n: 4 * math.sqrt(n) * 2.0 ** -24, "fp32's unit roundoff"),   # fp32's u for all
    (lambda p, n: 4 * n * 2.0 ** -U[p], "worst case"),
    (lambda p, n: math.sqrt(n) * 2.0 ** -U[p], "lambda is missing"),
    (lambda p, n: str(4 * math.sqrt(n) * 2.0 ** -U[p]), "not text"),
])
def test_tolerance_rejects_wrong_answers(wrong, match):
    with expect_failure(match):
        c7.check_tolerance(wrong)


# --------------------------------------------------------------------------- 7.3 kernels


def _works(name):
    return "cpp_fused" in name or (name.startswith("aten::") and name not in c7.NO_WORK)


def _count_innermost(events):
    total = 0
    for e in events:
        below = _count_innermost(e.children)
        total += below if below else int(_works(e.name))
    return total


def _flat(events):
    for e in events:
        yield e
        yield from _flat(e.children)


def test_count_kernels_accepts_the_reference(capsys):
    c7.check_count_kernels(_count_innermost)
    assert "Exercise 7.3 passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, match", [
    (lambda ev: sum(1 for e in _flat(ev) if e.name.startswith("aten::") or "cpp_fused" in e.name),
     "every operator"),
    (lambda ev: sum(1 for e in _flat(ev) if _works(e.name)), "count the innermost"),
    (lambda ev: len(ev), "top-level"),
    (lambda ev: sum(1 for e in _flat(ev) if not e.children and _works(e.name)), "leaves only"),
    (lambda ev: sum(1 for e in _flat(ev) if _works(e.name) and e.name.startswith("aten::")
                    and not any(_works(c.name) for c in _flat(e.children))), "fused kernels"),
    (lambda ev: float("nan"), "finite"),
])
def test_count_kernels_rejects_wrong_answers(wrong, match):
    with expect_failure(match):
        c7.check_count_kernels(wrong)


# --------------------------------------------------------------------------- 7.4 custom op

def _maker(forward=None, fake=True, backward="exact", bias_grad="sum", returns=True):
    def make(name):
        @torch.library.custom_op(name, mutates_args=())
        def op(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
            v = x + bias
            return forward(v) if forward else 0.5 * v * (1 + torch.erf(v / math.sqrt(2)))

        if fake:
            op.register_fake(lambda x, bias: torch.empty_like(x))

        def setup(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        def bwd(ctx, dy):
            x, bias = ctx.saved_tensors
            v = x + bias
            cdf = 0.5 * (1 + torch.erf(v / math.sqrt(2)))
            pdf = torch.exp(-0.5 * v * v) / math.sqrt(2 * math.pi)
            d = {"exact": cdf + v * pdf, "cdf_only": cdf, "pdf_only": v * pdf}[backward]
            dx = dy * d
            rows = dx.reshape(-1, bias.numel())
            db = rows.sum(0) if bias_grad == "sum" else rows.mean(0) if bias_grad == "mean" else rows[0]
            return dx, db

        op.register_autograd(bwd, setup_context=setup)
        return op if returns else None
    return make


def test_custom_op_accepts_the_reference(capsys):
    c7.check_custom_op(_maker())
    assert "Exercise 7.4 passed" in capsys.readouterr().out


def _tanh_gelu(v):
    return 0.5 * v * (1 + torch.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))


@pytest.mark.parametrize("wrong, match", [
    (_maker(forward=_tanh_gelu), "tanh approximation"),
    (_maker(forward=lambda v: torch.relu(v)), "exact (erf) GELU"),
    (_maker(fake=False), "opcheck"),
    (_maker(backward="cdf_only"), "Phi(v) + v phi(v)"),
    (_maker(backward="pdf_only"), "Phi(v) + v phi(v)"),
    (_maker(bias_grad="mean"), "summed over all rows"),
    (_maker(bias_grad="first row"), "summed over all rows"),
    (_maker(returns=False), "return the operator"),
])
def test_custom_op_rejects_wrong_answers(wrong, match):
    with expect_failure(match):
        c7.check_custom_op(wrong)


# --------------------------------------------------------------------------- 7.5 graph break

def _norm(largest):
    def f(x):
        y = x - x.mean(-1, keepdim=True)
        return y / y.std(-1, keepdim=True), largest(y)
    return f


def test_no_graph_break_accepts_the_reference(capsys):
    c7.check_no_graph_break(_norm(lambda y: y.abs().max()))
    assert "Exercise 7.5 passed" in capsys.readouterr().out


def _printing(x):
    y = x - x.mean(-1, keepdim=True)
    print(y.abs().max())
    return y / y.std(-1, keepdim=True), y.abs().max()


def _breaking(x):
    y = x - x.mean(-1, keepdim=True)
    if float(y.abs().max()) > 0:  # data-dependent Python control flow
        pass
    return y / y.std(-1, keepdim=True), y.abs().max()


@pytest.mark.parametrize("wrong, match", [
    (_norm(lambda y: y.abs().max().item()), "not a tensor"),
    (_norm(lambda y: float(y.abs().max())), "not a tensor"),
    (_norm(lambda y: y.max()), "largest |centred value|"),
    (lambda x: (x / x.std(-1, keepdim=True), x.abs().max()), "same arithmetic"),
    (_printing, "graph break"),
    (_breaking, "graph break"),
    (lambda x: x, "tuple (out, largest)"),
])
def test_no_graph_break_rejects_wrong_answers(wrong, match):
    with expect_failure(match):
        c7.check_no_graph_break(wrong)


# --------------------------------------------------------------------------- 7.6 rungs

RIGHT = {s: v["answer"] for s, v in c7.SCENARIOS.items()}


def test_rung_choices_accept_the_reference(capsys):
    c7.check_rung_choices(RIGHT)
    c7.check_rung_choices(lambda: RIGHT)
    assert "Exercise 7.6 passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, match", [
    ({s: "compile" for s in RIGHT}, "scenario A"),
    ({**RIGHT, "C": "compile"}, "scenario C"),
    ({**RIGHT, "A": "sdpa", "B": "amp"}, "scenario A"),
    ({**RIGHT, "E": "amp"}, "scenario E"),
    ({**RIGHT, "F": "compile"}, "scenario F"),
    ({k: v for k, v in RIGHT.items() if k != "D"}, "no answer for scenario D"),
    ({**RIGHT, "B": "flash"}, "not a rung"),
    (["amp", "sdpa"], "make it a dict"),
])
def test_rung_choices_reject_wrong_answers(wrong, match):
    with expect_failure(match):
        c7.check_rung_choices(wrong)


# --------------------------------------------------------------------------- wrong types

def _returns(value):
    return lambda *args, **kwargs: value


NOT_A_FUNCTION = (None, "f", 3.0, [len], {"f": len}, True)
WRONG_RETURNS = (None, "0.25", [1.0, 2.0], {"value": 1.0}, float("nan"), True)


@pytest.mark.parametrize("number, check", [
    ("7.1", c7.check_attention), ("7.2", c7.check_tolerance), ("7.3", c7.check_count_kernels),
    ("7.4", c7.check_custom_op), ("7.5", c7.check_no_graph_break)])
def test_a_wrong_type_is_one_sentence_of_the_exercise(number, check):
    for value in NOT_A_FUNCTION + tuple(_returns(v) for v in WRONG_RETURNS):
        with pytest.raises(AssertionError) as err:
            check(value)
        text = str(err.value)
        assert text.startswith(f"Exercise {number} (") and "Traceback" not in text, text


@pytest.mark.parametrize("value", [None, "amp", ["amp"], {"A": 3, "B": "sdpa", "C": "x",
                                                          "D": "x", "E": "x", "F": "x"}])
def test_rung_choices_of_the_wrong_type_are_one_sentence(value):
    with pytest.raises(AssertionError, match=r"^Exercise 7\.6 \("):
        c7.check_rung_choices(value)
