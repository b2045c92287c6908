"""Chapter 7 (a transformer, end to end): the tolerances every rung is checked with, the
comparisons themselves, and the lab's checkers.

Tolerances (derived, first order, normwise). A rung changes how the step is computed, not
what: its loss and gradients may differ from the naive version's only by rounding. With unit
roundoff u and n roundings that an error can pass through on the longest path from the input
to a weight gradient, independent roundings of random sign add up to at most lambda * sqrt(n)
* u relative, with probability at least 1 - 2 exp(-lambda^2 / 2) (Higham and Mary, "A new
approach to probabilistic rounding error analysis", SIAM J. Sci. Comput. 2019); lambda = 4
makes that 1 - 7e-4 for each comparison, and the norm of a gradient averages many of them.

- FP32 rungs (SDPA, torch.compile, checkpointing, a custom operator, Triton) keep every value
  in float32 and change the order of additions inside reductions: n = R * K, R the reductions
  on the path (9 per layer and 4 more, forward and backward: 2 (9L + 4)) and K the longest
  (max(4d, seq, vocab, batch * seq): a weight gradient sums over every token).
- Autocast (BF16, FP16) accumulates in float32 but rounds each matrix product's two inputs
  and its output to 16 bits (3 roundings of u = 2^-8 or 2^-11), and runs softmax and GELU on
  16-bit values (1 rounding each, forward and backward): n = 3 * 3 M + 4L with M = 6L + 1
  matrix products in the forward pass (each has two in the backward). BF16 keeps 8
  significant bits, so its bound is 2^16 times FP32's unit roundoff: it needs its own.
"""
from __future__ import annotations

import logging
import math

import numpy as np

from ..errors import PrecisionError
from ..kernels import bias_gelu as bias_gelu_cu
from ..precision import UNIT_ROUNDOFF
from .lab import Exercise, answer_error, callable_answer, number_answer, text_answer, whole_answer

#: The precisions a training step computes in (their unit roundoff: precision.UNIT_ROUNDOFF).
COMPUTE_PRECISIONS = ("fp32", "bf16", "fp16")
#: How many standard deviations of the rounding-error sum the bound allows.
LAMBDA = 4.0


def _torch():
    import torch  # heavy: the lab's first checks and this module's import run without it

    return torch


def unit_roundoff(precision: str) -> float:
    if precision not in COMPUTE_PRECISIONS:
        raise PrecisionError(f"precision {precision!r} is not one of "
                             f"{', '.join(map(repr, COMPUTE_PRECISIONS))}: pick one of them.")
    return UNIT_ROUNDOFF[precision]


def path_roundings(cfg, precision: str) -> int:
    """n: roundings an error can pass through from the input to a weight gradient (see the
    module's docstring). ``cfg`` has layers, d, seq, vocab and batch (a GPTConfig)."""
    layers = cfg.layers
    if precision == "fp32":
        reductions = 2 * (9 * layers + 4)
        longest = max(4 * cfg.d, cfg.seq, cfg.vocab, cfg.batch * cfg.seq)
        return reductions * longest
    unit_roundoff(precision)
    matmuls = 6 * layers + 1
    return 3 * 3 * matmuls + 4 * layers


def tolerance(cfg, precision: str) -> float:
    """Relative bound on the loss and the gradients' norm: lambda sqrt(n) u (plus FP32's own
    bound under autocast, whose float32 parts reorder too)."""
    u = unit_roundoff(precision)
    tol = LAMBDA * math.sqrt(path_roundings(cfg, precision)) * u
    if precision != "fp32":
        tol += tolerance(cfg, "fp32")
    return tol


def tolerance_text(cfg, precision: str) -> str:
    """How the tolerance of ``precision`` was derived, in one line with the numbers."""
    n, u = path_roundings(cfg, precision), unit_roundoff(precision)
    extra = " + the fp32 bound" if precision != "fp32" else ""
    return (f"{tolerance(cfg, precision):.3g} = {LAMBDA:g} x sqrt(n = {n}) x u = 2^"
            f"{int(round(math.log2(u)))}{extra}")


# --------------------------------------------------------------------------- comparisons

def relative_error(got, want) -> float:
    """||got - want|| / ||want|| in float64 (0 when both are zero)."""
    torch = _torch()
    got = torch.as_tensor(got).detach().double().cpu()
    want = torch.as_tensor(want).detach().double().cpu()
    den = float(want.norm())
    num = float((got - want).norm())
    return num / den if den else num


def flat_grads(model) -> dict:
    """{parameter name: gradient as float64 on the CPU} (zeros where autograd left None)."""
    torch = _torch()
    return {n: (p.grad if p.grad is not None else torch.zeros_like(p)).detach().double().cpu()
            for n, p in model.named_parameters()}


def compare_loss_and_grads(loss, grads: dict, ref_loss, ref_grads: dict, tol: float,
                           what: str = "this rung") -> dict:
    """Loss and gradients against the naive version's; a report dict, or AssertionError with
    the numbers when either is over ``tol`` (relative, gradients as one vector)."""
    torch = _torch()
    if set(grads) != set(ref_grads):
        missing = sorted(set(ref_grads) - set(grads))
        raise AssertionError(f"{what}: the model's parameters differ from the naive model's "
                             f"(missing {missing[:3]}); build it from the same GPT.")
    loss = float(loss.detach()) if hasattr(loss, "detach") else float(loss)
    names = list(ref_grads)
    g = torch.cat([grads[n].reshape(-1) for n in names])
    r = torch.cat([ref_grads[n].reshape(-1) for n in names])
    loss_rel = abs(float(loss) - float(ref_loss)) / abs(float(ref_loss))
    grad_rel = relative_error(g, r)
    per = {n: relative_error(grads[n], ref_grads[n]) for n in names}
    worst = max(per, key=per.get)
    report = {"loss": float(loss), "ref_loss": float(ref_loss), "loss_rel_error": loss_rel,
              "grad_rel_error": grad_rel, "tolerance": tol, "worst_parameter": worst,
              "worst_parameter_error": per[worst],
              "finite": bool(math.isfinite(float(loss)) and bool(torch.isfinite(g).all()))}
    problems = []
    if not report["finite"]:
        problems.append("the loss or a gradient is inf or NaN")
    if not loss_rel <= tol:
        problems.append(f"loss {float(loss):.6g} vs naive {float(ref_loss):.6g}: relative error "
                        f"{loss_rel:.3g} > {tol:.3g}")
    if not grad_rel <= tol:
        problems.append(f"gradients: relative error {grad_rel:.3g} > {tol:.3g} (worst: {worst}, "
                        f"{per[worst]:.3g})")
    report["passed"] = not problems
    if problems:
        raise AssertionError(f"{what} does not match the naive version: " + "; ".join(problems)
                             + ".")
    return report


def optimizer_bound(before, ref_after):
    """Elementwise bound between two AdamW implementations' new weights from the same weights,
    gradients and state: each computes the update in at most 16 float32 roundings (both
    moments, bias corrections, sqrt, eps, division, lr) and applies it and the weight decay to
    p with 3 more (the decay factor 1 - lr * wd as a float32, its product with p, the
    subtraction), so the two differ by at most 2 (3u |p| + gamma_16 |step|), u = 2^-24."""
    u = UNIT_ROUNDOFF["fp32"]
    step = (ref_after - before).abs()
    return 2 * (3 * u * before.abs().maximum(ref_after.abs()) + 16 * u / (1 - 16 * u) * step) \
        + 1e-30


def compare_optimizer_step(params: dict, ref_params: dict, before: dict,
                           what: str = "this optimizer") -> dict:
    """New weights of an optimizer against the reference loop's, element by element."""
    worst, worst_name, rel = 0.0, None, 0.0
    for name, want in ref_params.items():
        got = params[name]
        bound = optimizer_bound(before[name], want)
        excess = float(((got - want).abs() / bound).max())
        step = (want - before[name]).norm()
        rel = max(rel, float((got - want).norm() / step) if float(step) else 0.0)
        if excess > worst:
            worst, worst_name = excess, name
    report = {"worst_ratio_to_bound": worst, "worst_parameter": worst_name,
              "step_rel_error": rel, "passed": worst <= 1.0}
    if worst > 1.0:
        raise AssertionError(
            f"{what}: the new weights of {worst_name} differ from the per-parameter loop's by "
            f"{worst:.3g} times the rounding bound (the steps differ by {rel:.3g} relative): "
            "same weights, gradients and hyperparameters must give the same step.")
    return report


# --------------------------------------------------------------------------- 7.1 naive attention

ATTENTION_SHAPES = ((1, 1, 1, 4), (2, 3, 7, 5), (1, 2, 33, 16), (2, 4, 64, 16))


def reference_attention(q, k, v):
    """softmax(q k^T / sqrt(d) with a causal mask) v, in float64."""
    torch = _torch()
    q, k, v = (z.double() for z in (q, k, v))
    t = q.shape[-2]
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    s = s.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(s, -1) @ v


def _attention_variants(q, k, v):
    """Plausible slips, for naming the one an answer made."""
    torch = _torch()
    q, k, v = (z.double() for z in (q, k, v))
    t, d = q.shape[-2], q.shape[-1]
    raw = q @ k.transpose(-2, -1)
    tril = torch.ones(t, t, dtype=torch.bool).tril()
    mask = lambda s, m: s.masked_fill(~m, float("-inf"))  # noqa: E731
    return {
        "no mask: every query also sees later tokens; mask the scores above the diagonal":
            torch.softmax(raw / math.sqrt(d), -1) @ v,
        "the mask hides the diagonal too (torch.triu(..., diagonal=0)): a token must see itself":
            torch.softmax(mask(raw / math.sqrt(d), torch.ones(t, t, dtype=torch.bool).tril(-1)), -1) @ v,
        "the mask lets each query see the next token too: keep j <= i (tril, diagonal=0)":
            torch.softmax(mask(raw / math.sqrt(d), torch.ones(t, t, dtype=torch.bool).tril(1)), -1) @ v,
        "no scaling: divide the scores by sqrt(d_head) (the last dimension of q)":
            torch.softmax(mask(raw, tril), -1) @ v,
        "scaled by d_head instead of sqrt(d_head)":
            torch.softmax(mask(raw / d, tril), -1) @ v,
        "softmax over the queries (dim=-2): each row of weights must sum to 1 over the keys":
            torch.softmax(mask(raw / math.sqrt(d), tril), -2).nan_to_num() @ v,
        "the mask was applied after the softmax (weights zeroed, not renormalized): fill the "
        "scores with -inf before the softmax":
            (torch.softmax(raw / math.sqrt(d), -1) * tril) @ v,
    }


def check_attention(fn, number: str = "7.1", title: str = "causal attention, written out") -> None:
    """``fn(q, k, v)`` for (batch, heads, T, d_head) tensors: softmax(q k^T / sqrt(d_head) +
    causal mask) v. Compared in float64 with a float32 bound; a slip is named."""
    torch = _torch()
    with Exercise(number, title):
        callable_answer(fn, "attention is", "def attention(q, k, v): ...")
        for i, shape in enumerate(ATTENTION_SHAPES):
            g = torch.Generator().manual_seed(70 + i)
            q, k, v = (torch.randn(*shape, generator=g) * 2 for _ in range(3))
            got = fn(q.clone(), k.clone(), v.clone())
            if not torch.is_tensor(got):
                raise answer_error(f"attention(q, k, v) for shape {shape} returned", got,
                                   "return a tensor of the shape of v")
            assert tuple(got.shape) == shape, (f"shape {shape}: the result has shape "
                                               f"{tuple(got.shape)}, expected {shape} (as v).")
            want = reference_attention(q, k, v)
            tol = LAMBDA * math.sqrt(4 * max(shape[2], shape[3])) * UNIT_ROUNDOFF["fp32"]
            err = relative_error(got, want) if bool(torch.isfinite(got).all()) else math.inf
            if err <= tol:
                continue
            for slip, alt in _attention_variants(q, k, v).items():
                if bool(torch.isfinite(got).all()) and bool(torch.isfinite(alt).all()) and \
                        relative_error(got, alt) <= tol:
                    raise AssertionError(f"shape {shape}: {slip}.")
            if not bool(torch.isfinite(got).all()):
                raise AssertionError(f"shape {shape}: the result has NaN or inf; a row whose "
                                     "scores are all -inf (the first query with the diagonal "
                                     "masked) gives 0/0 in the softmax.")
            raise AssertionError(f"shape {shape}: relative error {err:.3g} against softmax(q k^T"
                                 f" / sqrt(d_head) + causal mask) v (bound {tol:.2g}).")


# --------------------------------------------------------------------------- 7.2 a tolerance

TOLERANCE_CASES = (("bf16", 125), ("fp16", 125), ("fp32", 22528), ("bf16", 1), ("fp16", 4096))


def reference_tolerance(precision: str, n: int) -> float:
    return LAMBDA * math.sqrt(n) * unit_roundoff(precision)


def check_tolerance(fn, number: str = "7.2", title: str = "a tolerance from unit roundoff") -> None:
    """``fn(precision, n) -> LAMBDA * sqrt(n) * u`` with u the precision's unit roundoff."""
    with Exercise(number, title):
        callable_answer(fn, "tolerance is", "def tolerance(precision, n): ...")
        for prec, n in TOLERANCE_CASES:
            got = number_answer(fn(prec, n), f"tolerance({prec!r}, {n}) returned",
                                "a relative error bound")
            want = reference_tolerance(prec, n)
            if abs(got - want) <= 1e-12 * want:
                continue
            u = unit_roundoff(prec)
            hints = {2 * want: f"that is twice the bound: {prec}'s eps (the gap after 1.0, "
                               f"2^{int(math.log2(2 * u))}) is 2u; unit roundoff is half of it, "
                               f"2^{int(math.log2(u))}",
                     n * LAMBDA * u: "that is the worst case (n roundings in a line); the "
                                     "probabilistic bound grows as sqrt(n)",
                     LAMBDA * n * u: "that is the worst case (n roundings in a line); the "
                                     "probabilistic bound grows as sqrt(n)",
                     math.sqrt(n) * u: f"lambda is missing: multiply by LAMBDA = {LAMBDA:g}",
                     n * u: "that is n u: use LAMBDA sqrt(n) u"}
            for p2 in COMPUTE_PRECISIONS:
                u2 = UNIT_ROUNDOFF[p2]
                if p2 != prec:
                    hints.setdefault(LAMBDA * math.sqrt(n) * u2,
                                     f"that is {p2}'s unit roundoff ({u2:.3g}); {prec} has "
                                     f"{int(-math.log2(u))} significant bits, so u = "
                                     f"2^-{int(-math.log2(u))}")
            why = next((h for v, h in hints.items() if abs(got - v) <= 1e-9 * abs(v)), None)
            raise AssertionError(f"tolerance({prec!r}, {n}) = {got:.4g}, expected {want:.4g}"
                                 + (f": {why}." if why else
                                    f" = {LAMBDA:g} x sqrt({n}) x {u:.3g} ({prec}'s unit "
                                    "roundoff)."))


# --------------------------------------------------------------------------- 7.3 counting kernels

class Event:
    """One profiler event as the exercise sees it: a name and the events it called."""

    def __init__(self, name: str, children=()):
        self.name, self.children = name, list(children)

    def __repr__(self):
        return f"Event({self.name!r}, {len(self.children)} children)"


#: Operators that do no work of their own (as in experiments.ch7.profile).
NO_WORK = frozenset({
    "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::as_strided", "aten::transpose",
    "aten::t", "aten::permute", "aten::expand", "aten::unsqueeze", "aten::squeeze",
    "aten::select", "aten::slice", "aten::split", "aten::detach", "aten::resolve_conj",
    "aten::contiguous", "aten::empty", "aten::empty_like", "aten::empty_strided",
    "aten::_local_scalar_dense", "aten::item", "aten::to", "aten::_to_copy", "aten::zeros",
    "aten::resize_", "aten::alias"})


def _works(name: str) -> bool:
    return "cpp_fused" in name or (name.startswith("aten::") and name not in NO_WORK)


def reference_count(events) -> int:
    """Innermost events that do work: does work, and no descendant does."""
    def count(e):
        below = sum(count(c) for c in e.children)
        return below if below else int(_works(e.name))
    return sum(count(e) for e in events)


def _synthetic_profiles():
    E = Event
    linear = E("aten::linear", [E("aten::t", [E("aten::transpose", [E("aten::as_strided")])]),
                                E("aten::addmm", [E("aten::empty_strided"),
                                                  E("aten::resolve_conj")])])
    cast = E("aten::to", [E("aten::_to_copy", [E("aten::empty_strided"), E("aten::copy_")])])
    views = E("aten::reshape", [E("aten::view")])
    compiled = E("Torch-Compiled Region", [E("CompiledFunction", [
        E("graph_0_cpp_fused_add_gelu_0"), E("aten::mm", [E("aten::empty")]),
        E("graph_0_cpp_fused_native_layer_norm_1")])])
    step = E("Optimizer.step#AdamW.step", [E("aten::mul_"), E("aten::lerp_"),
                                           E("aten::addcdiv_", [E("aten::empty")])])
    backward = E("autograd::engine::evaluate_function: MmBackward0", [
        E("MmBackward0", [E("aten::mm", [E("aten::resolve_conj")]), E("aten::mm")])])
    return [("a linear layer", [linear]), ("an autocast cast", [cast]),
            ("views only", [views]), ("a compiled region", [compiled]),
            ("an optimizer step", [step]), ("a backward node", [backward]),
            ("all of them", [linear, cast, views, compiled, step, backward])]


def check_count_kernels(fn, number: str = "7.3", title: str = "kernels counted from a profile") -> None:
    """``fn(events) -> int``: the kernels in a forest of :class:`Event` (see NO_WORK)."""
    with Exercise(number, title):
        callable_answer(fn, "count_kernels is", "def count_kernels(events): ...")
        for what, events in _synthetic_profiles():
            got = whole_answer(fn(events), f"count_kernels({what}) returned", "kernels")
            want = reference_count(events)
            if got == want:
                continue
            flat = []
            stack = list(events)
            while stack:
                e = stack.pop()
                flat.append(e)
                stack.extend(e.children)
            ops = sum(e.name.startswith("aten::") or "cpp_fused" in e.name for e in flat)
            leaves = sum(not e.children and _works(e.name) for e in flat)
            working = sum(_works(e.name) for e in flat)
            hint = {ops: "you counted every operator, views and allocations too",
                    working: "you counted every operator that works, but an outer one (aten::linear)"
                             " only calls an inner one (aten::addmm): count the innermost",
                    len(events): "you counted the top-level events only",
                    leaves: "you counted leaves only: aten::addmm has children (an allocation), "
                            "yet it is the kernel"}.get(got)
            if "cpp_fused" in str([e.name for e in flat]) and got == want - 2:
                hint = "torch.compile's fused kernels (names with cpp_fused) are kernels too"
            raise AssertionError(f"{what}: {got} kernels, expected {want}"
                                 + (f": {hint}." if hint else "."))


# --------------------------------------------------------------------------- 7.4 a custom op

_OP_COUNTER = [0]


def fresh_op_name(base: str = "bias_gelu") -> str:
    """A new ``lab7::...`` name, so that a cell that registers an operator can run again."""
    _OP_COUNTER[0] += 1
    return f"lab7::{base}_{_OP_COUNTER[0]}"


def check_custom_op(make, number: str = "7.4", title: str = "bias + GELU as a custom operator") -> None:
    """``make(name)`` registers ``name`` with torch.library (an implementation, a fake, an
    autograd formula) and returns the operator; checked with torch.library.opcheck, against
    float64 values and gradients, and under torch.compile (fullgraph)."""
    torch = _torch()
    with Exercise(number, title):
        callable_answer(make, "make_bias_gelu is", "def make_bias_gelu(name): ...")
        op = make(fresh_op_name())
        if not callable(op):
            raise answer_error("make_bias_gelu(name) returned", op,
                               "return the operator torch.library.custom_op made")
        g = torch.Generator().manual_seed(74)
        x = torch.randn(5, 7, 24, generator=g) * 3
        b = torch.randn(24, generator=g)
        y = op(x, b)
        if not torch.is_tensor(y):
            raise answer_error("op(x, bias) returned", y, "return a tensor shaped like x")
        assert tuple(y.shape) == tuple(x.shape), f"op(x, bias) has shape {tuple(y.shape)}, not x's."
        v = x.double() + b.double()
        want = 0.5 * v * (1 + torch.special.erf(v / math.sqrt(2)))
        bound = bias_gelu_cu.bound(want.abs() + v.abs())  # the course kernel's bound
        if not bool(((y.double() - want).abs() <= bound).all()):
            tanh = 0.5 * v * (1 + torch.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))
            hint = ("that is the tanh approximation of GELU; use the exact one, "
                    "0.5 v (1 + erf(v / sqrt(2)))" if relative_error(y, tanh) < 1e-6 else
                    "compute gelu(x + bias) with the exact (erf) GELU")
            raise AssertionError(f"op(x, bias) differs from gelu(x + bias) by up to "
                                 f"{float((y.double() - want).abs().max()):.3g}: {hint}.")
        try:  # schema, fake and autograd registration (the AOT test would compile: slow)
            torch.library.opcheck(op, (x.clone().requires_grad_(), b.clone().requires_grad_()),
                                  test_utils=("test_schema", "test_autograd_registration",
                                              "test_faketensor"))
        except Exception as exc:  # opcheck names the failing test and the fix
            text = str(exc).strip().splitlines()[0][:300]
            raise AssertionError(f"torch.library.opcheck rejects the operator: {text} (register "
                                 "a fake with @op.register_fake returning torch.empty_like(x), "
                                 "and the backward with op.register_autograd).") from None
        xg = x.detach().double().requires_grad_()
        bg = b.detach().double().requires_grad_()
        ref = torch.nn.functional.gelu(xg + bg)
        dy = torch.randn(x.shape, generator=g).double()
        rx, rb = torch.autograd.grad(ref, (xg, bg), dy)
        xl, bl = x.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
        lx, lb = torch.autograd.grad(op(xl, bl), (xl, bl), dy.float())
        for name, got, want_g in (("x", lx, rx), ("bias", lb, rb)):
            assert tuple(got.shape) == tuple(want_g.shape), (
                f"the gradient of {name} has shape {tuple(got.shape)}, expected "
                f"{tuple(want_g.shape)}" + (": the bias was added to every row, so sum dx over "
                                            "all rows" if name == "bias" else "") + ".")
            err = relative_error(got, want_g)
            limit = LAMBDA * math.sqrt(16 * x.numel() / b.numel()) * UNIT_ROUNDOFF["fp32"]
            x_ok = relative_error(lx, rx) <= limit
            hint = ("the bias was added to every row, so its gradient is dx summed over all rows"
                    if name == "bias" and x_ok else
                    "gelu'(v) = Phi(v) + v phi(v), with Phi the normal CDF and phi its density; "
                    "multiply dy by it")
            assert err <= limit, f"the gradient of {name} is off by {err:.3g} relative: {hint}."
        # Traced by Dynamo on fake tensors (through the fake), as one graph.
        compiled = torch.compile(lambda a, c: op(a, c) * 2, fullgraph=True, backend="eager")
        out = compiled(x.detach(), b.detach())
        assert bool(torch.allclose(out, 2 * op(x.detach(), b.detach()))), \
            "under torch.compile the operator gives other values than in eager mode."


# --------------------------------------------------------------------------- 7.5 a graph break

def logged_normalize(x, log: list):
    """The function with a graph break: centres x, records its largest value, scales."""
    y = x - x.mean(-1, keepdim=True)
    log.append(y.abs().max().item())  # a Python float: Dynamo must stop its graph here
    return y / y.std(-1, keepdim=True)


def check_no_graph_break(fn, number: str = "7.5", title: str = "a graph break removed") -> None:
    """``fn(x) -> (out, largest)``: logged_normalize's output, and the largest |centred value|
    kept as a tensor, traced by torch._dynamo.explain as one graph with no break."""
    torch = _torch()
    with Exercise(number, title):
        callable_answer(fn, "normalize is", "def normalize(x): ...")
        x = torch.randn(6, 40, generator=torch.Generator().manual_seed(75)) * 3 + 1
        log: list = []
        want = logged_normalize(x, log)
        res = fn(x.clone())
        if not (isinstance(res, tuple) and len(res) == 2):
            raise answer_error("normalize(x) returned", res, "return a tuple (out, largest)")
        out, largest = res
        if not torch.is_tensor(largest):
            raise AssertionError(f"largest is {type(largest).__name__}, not a tensor: a Python "
                                 "number (.item(), float()) is what breaks the graph; keep the "
                                 "tensor and read it after the step.")
        assert torch.is_tensor(out) and out.shape == x.shape, "out must be a tensor shaped like x."
        assert relative_error(out, want) <= 1e-6, ("out differs from logged_normalize's: keep the "
                                                   "same arithmetic (centre, then divide by std).")
        assert abs(float(largest) - log[0]) <= 1e-6 * abs(log[0]), (
            f"largest is {float(largest):.6g}, but the largest |centred value| is {log[0]:.6g}.")
        dlog = logging.getLogger("torch._dynamo")
        level = dlog.level
        dlog.setLevel(logging.ERROR)
        try:
            ex = torch._dynamo.explain(fn)(x)
        finally:
            dlog.setLevel(level)
        if ex.graph_break_count:
            why = str(getattr(ex.break_reasons[0], "reason", ex.break_reasons[0])).splitlines()[0]
            raise AssertionError(f"torch._dynamo.explain still finds {ex.graph_break_count} graph "
                                 f"break(s): {why[:160]}.")


# --------------------------------------------------------------------------- 7.6 which rung

SCENARIOS = {
    "A": {"what": "H100, FP32 training of a 1.3B-parameter model, 2048 tokens: matmul 71% of the "
                  "step, attention 12%, elementwise 9%, GPU idle 3%, 410 kernels, memory 40% full",
          "answer": "amp",
          "why": "FP32 matrix products leave the tensor cores idle: autocast (BF16) is the big "
                 "step"},
    "B": {"what": "A100, BF16, sequence length 16384: attention 64% of the step and its T x T "
                  "scores 70% of peak memory, written out as softmax(QK^T)V",
          "answer": "sdpa",
          "why": "the T x T scores are materialized: scaled_dot_product_attention (flash) keeps "
                 "them in on-chip memory, O(T) memory and less traffic"},
    "C": {"what": "L4, BF16, already torch.compile'd small model: 380 kernels of 4 us each per "
                  "step, the GPU idle 62% of the step between them",
          "answer": "cuda_graphs",
          "why": "the GPU waits for the CPU to launch kernels: replaying a CUDA Graph launches "
                 "the whole step at once"},
    "D": {"what": "H200, BF16, eager: elementwise and norms 48% (2,600 small kernels: adds, GELU, "
                  "LayerNorm, casts), matmul 30%, GPU idle 9%",
          "answer": "compile",
          "why": "chains of elementwise kernels each read and write memory: torch.compile fuses "
                 "them into a few kernels"},
    "E": {"what": "A10 (24 GB), BF16 + SDPA + compile: out of memory at the batch you need; "
                  "activations saved for backward are 78% of peak memory",
          "answer": "checkpoint",
          "why": "activation checkpointing drops the saved activations and recomputes them: "
                 "memory for about a third more compute"},
    "F": {"what": "H100, BF16, compiled model with 700 parameter tensors: Optimizer.step is 27% "
                  "of the step, 4,900 small kernels, AdamW(foreach=False)",
          "answer": "fused_adamw",
          "why": "the per-parameter loop launches several kernels per tensor: the fused AdamW "
                 "updates every tensor in one kernel"},
}
RUNG_CHOICES = ("amp", "sdpa", "compile", "cuda_graphs", "checkpoint", "fused_adamw",
                "custom_op", "triton")


def check_rung_choices(answers, number: str = "7.6", title: str = "which rung, from a profile") -> None:
    """``answers``: {scenario letter: rung name} for every scenario in SCENARIOS (or a
    function that returns it)."""
    with Exercise(number, title):
        if callable(answers):
            answers = answers()
        if not isinstance(answers, dict):
            raise answer_error("answers is", answers,
                               "make it a dict such as {'A': 'amp', 'B': 'sdpa', ...}")
        missing = [s for s in SCENARIOS if s not in answers]
        assert not missing, f"no answer for scenario {missing[0]}: give one for each of A-F."
        for s, sc in SCENARIOS.items():
            got = text_answer(answers[s], f"answers[{s!r}] is", "give a rung's name as text")
            got = got.strip().lower()
            if got not in RUNG_CHOICES:
                raise AssertionError(f"scenario {s}: {got!r} is not a rung; choose from "
                                     f"{', '.join(RUNG_CHOICES)}.")
            assert got == sc["answer"], (f"scenario {s} ({sc['what']}): not {got!r}. Look at "
                                         "the largest share of time or memory and at what causes "
                                         "it.")


def warm_up() -> None:
    """Load TorchDynamo once (a few seconds, the first time in a process), so that the checks
    that trace a learner's code answer in well under two seconds."""
    torch = _torch()
    torch.compile(lambda a: a * 2, fullgraph=True, backend="eager")(torch.ones(2))
