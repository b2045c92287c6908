"""Lab 7's wrong-answer tables: for each exercise, plausible wrong answers of a learner who
half-understood the chapter, each rejected with a message that names the real mistake."""
import math

import torch

from gpucourse.check import ch7 as c7
from test_ch7_checkers import _maker
from wrong_answer_table import table_tests


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


U = {"fp32": 24, "fp16": 11, "bf16": 8}


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


def _tanh_gelu(v):
    return 0.5 * v * (1 + torch.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))


def _norm(largest):
    def f(x):
        y = x - x.mean(-1, keepdim=True)
        return y / y.std(-1, keepdim=True), largest(y)
    return f


def _printing(x):
    y = x - x.mean(-1, keepdim=True)
    print(y.abs().max())
    return y / y.std(-1, keepdim=True), y.abs().max()


def _breaking(x):
    y = x - x.mean(-1, keepdim=True)
    if float(y.abs().max()) > 0:  # data-dependent Python control flow
        pass
    return y / y.std(-1, keepdim=True), y.abs().max()


RIGHT = {s: v["answer"] for s, v in c7.SCENARIOS.items()}


CHECKS = {"7.1": c7.check_attention, "7.2": c7.check_tolerance, "7.3": c7.check_count_kernels,
          "7.4": c7.check_custom_op, "7.5": c7.check_no_graph_break, "7.6": c7.check_rung_choices}
REFERENCES = {"7.1": _attn(), "7.2": lambda p, n: 4 * math.sqrt(n) * 2.0 ** -U[p],
              "7.3": _count_innermost, "7.4": _maker(),
              "7.5": _norm(lambda y: y.abs().max()), "7.6": RIGHT}

WRONG_ANSWERS = {
    "7.1": [
        ("no mask", _attn(mask=False), "no mask"),
        ("the diagonal masked too", _attn(mask_diag=-1), "NaN"),
        ("the next token visible", _attn(mask_diag=1), "see the next token"),
        ("no scaling", _attn(scale="none"), "no scaling"),
        ("scaled by d, not sqrt(d)", _attn(scale="d"), "instead of sqrt(d_head)"),
        ("softmax over the queries", _attn(dim=-2), "over the queries"),
        ("masked after the softmax", _attn(after=True), "after the softmax"),
    ],
    "7.2": [
        ("eps, not u", lambda p, n: 4 * math.sqrt(n) * 2.0 ** -(U[p] - 1), "eps"),
        ("bf16 with fp16's u", lambda p, n: 4 * math.sqrt(n) * 2.0 ** -{"fp32": 24, "fp16": 11,
                                                                        "bf16": 11}[p],
         "fp16's unit roundoff"),
        ("fp32's u for all", lambda p, n: 4 * math.sqrt(n) * 2.0 ** -24, "fp32's unit roundoff"),
        ("the worst case n u", lambda p, n: 4 * n * 2.0 ** -U[p], "worst case"),
        ("no lambda", lambda p, n: math.sqrt(n) * 2.0 ** -U[p], "lambda is missing"),
        ("text", lambda p, n: str(4 * math.sqrt(n) * 2.0 ** -U[p]), "not text"),
    ],
    "7.3": [
        ("every operator counted", lambda ev: sum(1 for e in _flat(ev) if e.name.startswith("aten::")
                                                  or "cpp_fused" in e.name), "every operator"),
        ("every working operator at every depth", lambda ev: sum(1 for e in _flat(ev) if _works(e.name)),
         "count the innermost"),
        ("the top-level events", lambda ev: len(ev), "top-level"),
        ("leaves only", lambda ev: sum(1 for e in _flat(ev) if not e.children and _works(e.name)),
         "leaves only"),
        ("fused kernels left out", lambda ev: sum(
            1 for e in _flat(ev) if _works(e.name) and e.name.startswith("aten::")
            and not any(_works(c.name) for c in _flat(e.children))), "fused kernels"),
        ("NaN", lambda ev: float("nan"), "finite"),
    ],
    "7.4": [
        ("the tanh approximation", _maker(forward=_tanh_gelu), "tanh approximation"),
        ("ReLU", _maker(forward=lambda v: torch.relu(v)), "exact (erf) GELU"),
        ("no fake implementation", _maker(fake=False), "opcheck"),
        ("Phi(v) alone in the backward", _maker(backward="cdf_only"), "Phi(v) + v phi(v)"),
        ("the bias gradient averaged", _maker(bias_grad="mean"), "summed over all rows"),
        ("the bias gradient of the first row", _maker(bias_grad="first row"), "summed over all rows"),
        ("the operator not returned", _maker(returns=False), "return the operator"),
    ],
    "7.5": [
        ("largest as a Python number", _norm(lambda y: y.abs().max().item()), "not a tensor"),
        ("largest by float()", _norm(lambda y: float(y.abs().max())), "not a tensor"),
        ("the signed max", _norm(lambda y: y.max()), "largest |centred value|"),
        ("not centred", lambda x: (x / x.std(-1, keepdim=True), x.abs().max()), "same arithmetic"),
        ("a print left in", _printing, "graph break"),
        ("Python control flow on a value", _breaking, "graph break"),
        ("one value returned", lambda x: x, "tuple (out, largest)"),
    ],
    "7.6": [
        ("compile for everything", {s: "compile" for s in RIGHT}, "scenario A"),
        ("compile for launch overhead", {**RIGHT, "C": "compile"}, "scenario C"),
        ("amp and sdpa swapped", {**RIGHT, "A": "sdpa", "B": "amp"}, "scenario A"),
        ("amp for memory", {**RIGHT, "E": "amp"}, "scenario E"),
        ("compile for the optimizer", {**RIGHT, "F": "compile"}, "scenario F"),
        ("a scenario left out", {k: v for k, v in RIGHT.items() if k != "D"}, "no answer for scenario D"),
        ("a word that is no rung", {**RIGHT, "B": "flash"}, "not a rung"),
    ],
}


test_the_reference_passes, test_a_wrong_answer_is_rejected_and_named = \
    table_tests(CHECKS, REFERENCES, WRONG_ANSWERS)
