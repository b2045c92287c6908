"""Rounding-error bounds of the chapter's float checks.

Every float check of this chapter compares with a bound from error analysis (Higham,
"Accuracy and Stability of Numerical Algorithms", 2002, ch. 2-3) that holds for any
summation order, blocking, core count or split of the rows over ranks and micro-batches:
with unit roundoff u (``precision.U32`` = 2^-24, ``precision.U64`` = 2^-53), k roundings in a
row err by at most gamma_k = k*u / (1 - k*u) relative (``precision.gamma``), and a sum of n
terms computed in any order by at most gamma_(n-1) * sum|terms| (an FMA only rounds less).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn as nn

from ...precision import U32, U64, gamma


def _check_all_reduce(got: np.ndarray, terms: Sequence[np.ndarray], what: str) -> float:
    """A float32 all-reduce (sum) of the ranks' data against the float64 sum of the data each
    rank's float32 values were rounded from; the largest error as a fraction of its bound.

    Bound, element by element: rounding the inputs to float32 moves the sum by at most
    u*sum|x|, summing p float32 terms in any order (ring, tree, buckets) by gamma_(p-1)*sum|x|,
    and the float64 reference is 2^29 times closer still: (p + 1)*u*sum|x| covers all three.
    """
    terms = np.asarray(terms, dtype=np.float64)
    want, size = terms.sum(axis=0), np.abs(terms).sum(axis=0)
    bound = (len(terms) + 1) * U32 * size
    err = np.abs(np.asarray(got, dtype=np.float64) - want)
    bad = ~(err <= bound)  # NaN fails too
    if bad.any():
        i = np.unravel_index(int(np.argmax(np.where(bad, err - bound, -np.inf))), err.shape)
        raise AssertionError(
            f"{what}: element {tuple(map(int, i))} is {float(np.asarray(got)[i]):.9g} where the "
            f"ranks' data sum to {want[i]:.9g}, more than float32 rounding of "
            f"{len(terms)} terms allows ({bound[i]:.3g}); the all-reduce did not sum every rank.")
    return float(np.max(err / np.where(bound > 0, bound, np.inf), initial=0.0))


def _linear(block: nn.Module) -> nn.Linear:
    return block if isinstance(block, nn.Linear) else block[0]


def mlp_grad_bound(blocks: Sequence[nn.Module], x: torch.Tensor, y: torch.Tensor,
                   loss_scale: float, unit: float = U64, roundings: int = 8) -> list[torch.Tensor]:
    """Element-wise bounds on the rounding error of every gradient (``parameters()`` order) of
    ``loss_scale * sum((mlp(x) - y)**2)`` over the blocks of ``mlp_blocks``, computed in
    arithmetic with unit roundoff ``unit`` in any order, on any split of the rows into shards
    or micro-batches whose gradients are then added (all one sum over rows in another order).

    Each quantity q gets E (a bound on |computed - exact|) and M = |q| + 2E (a bound on both;
    q is this float64 pass). Forward: a layer with k inputs errs by gamma_(k+1)(M_a |W|^T + |b|)
    + E_a |W|^T, and ReLU passes errors on unchanged. Backward: a sum over k outputs or n rows
    errs by gamma times the sum of magnitudes, plus the propagated E's; where a pre-activation
    lies within 2E of 0 the two masks may differ, and the whole incoming gradient is error.
    ``roundings`` covers scalar steps (the loss's 2 * scale, DDP's division by the ranks).
    A worst case: useful in float64 for small models, far too wide in float32.
    """
    def mag(q, e):
        return q.abs() + 2 * e

    a, ea = x.double(), torch.zeros_like(x, dtype=torch.float64)
    saved = []
    for block in blocks:
        lin = _linear(block)
        w, b = lin.weight.detach().double(), lin.bias.detach().double()
        z = a @ w.T + b
        ez = (gamma(w.shape[1] + 1, unit) * (mag(a, ea) @ w.abs().T + b.abs())
              + ea @ w.abs().T)
        saved.append((a, ea, z, ez, w))
        a, ea = (z if isinstance(block, nn.Linear) else torch.relu(z)), ez
    diff = a - y.double()
    ediff = ea + unit * mag(diff, ea)
    d = 2 * loss_scale * diff
    ed = 2 * loss_scale * (ediff + gamma(roundings, unit) * mag(diff, ediff))
    rows = x.shape[0]
    out: list[torch.Tensor] = []
    for i in reversed(range(len(blocks))):
        a, ea, _, _, w = saved[i]
        g_rows = gamma(rows + roundings, unit)  # the sum over rows, in any grouping
        md = mag(d, ed)
        ew = g_rows * md.T @ mag(a, ea) + ed.T @ mag(a, ea) + (d.abs() + ed).T @ ea
        eb = g_rows * md.sum(0) + ed.sum(0)
        out[:0] = [ew, eb]
        if i:
            da = d @ w
            eda = gamma(w.shape[0], unit) * md @ w.abs() + ed @ w.abs()
            z, ez = saved[i - 1][2], saved[i - 1][3]
            mask = (z > 0).double()
            unsure = z.abs() <= 2 * ez
            d = da * mask
            ed = torch.where(unsure, mag(da, eda), eda * mask)
    return out


def _check_grads(got: Sequence[np.ndarray], want: Sequence[np.ndarray],
                 bound: Sequence[np.ndarray], names: Sequence[str], what: str,
                 why: str) -> float:
    """Gradients of a float64 run against a float64 reference of the same gradients: each
    element within twice ``bound`` (from ``mlp_grad_bound``: both runs are within it of the
    exact gradient), widened by 2^-20 for the rounding in the bound itself; the largest
    error as a fraction of the largest reference value. ``why``: what a failure means."""
    worst = 0.0
    for g, w, b, name in zip(got, want, bound, names):
        g, w = np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64)
        tol = 2 * np.asarray(b) * (1 + 2.0**-20)
        err = np.abs(g - w)
        bad = ~(err <= tol)  # NaN fails too
        if bad.any():
            i = np.unravel_index(int(np.argmax(np.where(bad, err - tol, -np.inf))), err.shape)
            raise AssertionError(
                f"{what}: {name} differs from the full-batch gradient at {tuple(map(int, i))} "
                f"({float(g[i]):.9g} against {float(w[i]):.9g}), more than float64 rounding "
                f"allows ({float(tol[i]):.3g}); {why}.")
        worst = max(worst, float(err.max(initial=0.0) / (np.abs(w).max(initial=0.0) or 1.0)))
    return worst
