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

import math

import numpy as np

from . import Exercise, answer_error, callable_answer, number_answer, text_answer

#: Unit roundoff (half the gap after 1.0) of each compute precision: 2^-(significant bits).
UNIT_ROUNDOFF = {"fp32": 2.0 ** -24, "bf16": 2.0 ** -8, "fp16": 2.0 ** -11}
#: How many standard deviations of the rounding-error sum the bound allows.
LAMBDA = 4.0


def _torch():
    import torch

    return torch


def unit_roundoff(precision: str) -> float:
    if precision not in UNIT_ROUNDOFF:
        from ..errors import PrecisionError

        raise PrecisionError(f"precision {precision!r} is not one of "
                             f"{', '.join(map(repr, UNIT_ROUNDOFF))}: pick one of them.")
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
