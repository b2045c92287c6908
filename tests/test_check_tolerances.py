"""Every lab checker's float tolerance is a stated bound that a correct answer meets in any order.

For each checker the quantity it compares is evaluated the ways a correct learner's code (or a
CPU or GPU schedule) may evaluate it: float32 sums one after another, in reverse, pairwise, as
a warp-shuffle tree with blocks added by atomics, with and without fused multiply-adds. Each
must stay inside the checker's tolerance at the sizes and on the data the checker uses, and the
tolerance must still reject a plausible wrong answer, so that it is not merely large.
"""
import numpy as np
import pytest
import torch

from gpucourse import check, precision
from gpucourse.check import ch1 as c1, ch2 as c2, ch3 as c3, ch4 as c4, ch5 as c5
from gpucourse.errors import ModelInputError
from gpucourse.kernels import divergence as divergence_cu
from gpucourse.kernels import reduce as reduce_cu

U = precision.U32
F32 = np.float32


# --------------------------------------------------------------------------- summation orders

def sequential(x) -> float:
    x = np.asarray(x, F32)
    return float(np.cumsum(x, dtype=F32)[-1]) if x.size else 0.0


def reverse(x) -> float:
    return sequential(np.asarray(x, F32)[::-1])


def pairwise(x) -> float:
    """A balanced tree of float32 additions (a warp shuffle, a block tree)."""
    x = np.asarray(x, F32)
    while x.size > 1:
        if x.size % 2:
            x = np.append(x, F32(0))
        x = x[0::2] + x[1::2]
    return float(x[0]) if x.size else 0.0


def shuffle_then_atomics(x, block: int = 256) -> float:
    """The warp-reduce kernel's order: a tree in each warp, the warps' totals in a tree, the
    blocks' totals added one after another (atomics in launch order)."""
    x = np.asarray(x, F32)
    blocks = -(-x.size // block)
    padded = np.zeros(blocks * block, F32)
    padded[:x.size] = x
    totals = [pairwise([pairwise(w) for w in b.reshape(-1, 32)]) for b in padded.reshape(blocks, block)]
    return sequential(totals)


ORDERS = {"sequential": sequential, "reverse": reverse, "pairwise": pairwise,
          "shuffle then atomics": shuffle_then_atomics}


# --------------------------------------------------------------------------- shared defaults

def test_default_float32_tolerance_covers_one_rounding_but_not_a_sum():
    """TOLERANCES is for results a few roundings from their reference: a sum of 1000 terms can
    lie further from the exact sum than its relative 1e-5 (here 999 halves of an ulp of 1 that a
    sequential float32 sum drops, 6e-5 of the sum) and needs its own bound."""
    rtol, atol = precision.tolerance(np.float32)
    x = check.random_array(1000, seed=1)
    check.assert_close((x.astype(np.float64) * 1.75).astype(F32), x.astype(np.float64) * 1.75)
    assert rtol >= 100 * U
    ties = np.full(1000, U, F32)
    ties[0] = 1
    exact = float(np.sum(ties, dtype=np.float64))
    assert abs(sequential(ties) - exact) > atol + rtol * exact
    assert abs(sequential(ties) - exact) <= precision.sum_error_bound(1000, exact)


def test_an_elementwise_atol_is_applied_and_reported_element_by_element():
    want = np.array([1.0, 100.0, -3.0])
    bound = np.array([1e-6, 1e-3, 1e-6])
    assert check.compare_report(want + [5e-7, 5e-4, 0.0], want, 0, bound, "y") is None
    report = check.compare_report(want + [5e-7, 5e-6, 2e-6], want, 0, bound, "y")
    assert "1 of 3 elements differ" in report and "elementwise bound up to 0.001" in report
    assert "at index (2,)" in report and "allowed 1e-06" in report


def test_signs_data_sum_exactly_in_every_order():
    for n in c4.REDUCE_SIZES:
        x = check.random_array(n, F32, seed=3 * n, kind="signs")
        assert set(np.unique(x)) <= {-1.0, 1.0} and (n == 1 or np.unique(x).size == 2)
        want = float(np.sum(x, dtype=np.float64))
        assert reduce_cu.tolerance(x) == 0
        for name, order in ORDERS.items():
            assert order(x) == want, (n, name)


# --------------------------------------------------------------------------- 1.1 scale

@pytest.mark.parametrize("n, blocks, threads", c1.SCALE_CASES)
def test_scale_tolerance_is_one_rounding_of_the_product(n, blocks, threads):
    x = check.random_array(n, F32, seed=n)
    a = F32(1.75)
    exact = x.astype(np.float64) * a
    assert check.compare_report(x * a, exact, U, 0, "y") is None  # float32, rounded once
    fused = (x.astype(np.float64) * np.float64(a)).astype(F32)  # the same single rounding
    assert check.compare_report(fused, exact, U, 0, "y") is None
    assert check.compare_report(x * a * a, exact, U, 0, "y") is not None  # scaled twice


# --------------------------------------------------------------------------- 2.4 momentum

def _momentum_variants():
    def naive(w, v, grads, lr, beta):
        for g in grads:
            v = beta * v + g
            w = w - lr * v
        return w, v

    def in_place(w, v, grads, lr, beta):
        for g in grads:
            v.mul_(beta).add_(g)
            w.add_(v, alpha=-lr)
        return w, v

    def fused(w, v, grads, lr, beta):  # g + beta*v in one kernel, w - lr*v in one
        for g in grads:
            torch.add(g, v, alpha=beta, out=v)
            w.sub_(v, alpha=lr)
        return w, v

    def in_float64(w, v, grads, lr, beta):  # each step rounded once to float32
        for g in grads:
            v.copy_(beta * v.double() + g.double())
            w.copy_(w.double() - lr * v.double())
        return w, v

    return {"naive": naive, "in place": in_place, "fused": fused, "in float64": in_float64}


def _momentum_case(n, steps):
    w = torch.from_numpy(check.random_array(n, F32, seed=n))
    v = torch.from_numpy(check.random_array(n, F32, seed=n + 1, kind="uniform"))
    grads = [torch.from_numpy(check.random_array(n, F32, seed=n + 2 + k)) for k in range(steps)]
    return w, v, grads


@pytest.mark.parametrize("n, steps", [(1, 1), (7, 3), (4099, 5)])  # check_buffer_reuse's cases
def test_momentum_bound_covers_every_float32_form_of_the_steps(n, steps):
    w, v, grads = _momentum_case(n, steps)
    want_w, want_v = c2._momentum_reference(w.double(), v.double(), [g.double() for g in grads],
                                            0.05, 0.9)
    bound_w, bound_v = c2.momentum_error_bound(w, v, grads, 0.05, 0.9)
    for name, fn in _momentum_variants().items():
        got_w, got_v = fn(w.clone(), v.clone(), grads, 0.05, 0.9)
        assert np.all((got_v.double() - want_v).abs().numpy() <= bound_v), name
        assert np.all((got_w.double() - want_w).abs().numpy() <= bound_w), name
    # w updated with the old v: caught
    got_w = w.clone()
    old_v = v.clone()
    for g in grads:
        got_w.add_(old_v, alpha=-0.05)
        old_v.mul_(0.9).add_(g)
    assert not np.all((got_w.double() - want_w).abs().numpy() <= bound_w)


# --------------------------------------------------------------------------- 3.2 average

@pytest.mark.parametrize("p", [2, 3, 4, 8])
def test_average_bound_covers_every_float32_way_to_average(p):
    g = check.rng(p)
    grads = [(g.standard_normal(4099) * np.exp(g.uniform(-4, 4, 4099))).astype(F32)
             for _ in range(p)]
    want = np.mean(np.asarray(grads, np.float64), axis=0)
    bound = c3.average_error_bound(grads)
    stack = np.asarray(grads, F32)
    sums = {"sequential": np.cumsum(stack, axis=0, dtype=F32)[-1],
            "reverse": np.cumsum(stack[::-1], axis=0, dtype=F32)[-1],
            "pairwise": np.apply_along_axis(pairwise, 0, stack).astype(F32)}
    for name, total in sums.items():
        ways = {"sum / p": total / F32(p), "sum * (1/p)": total * (F32(1) / F32(p)),
                "each / p, then summed": np.cumsum(stack / F32(p), axis=0, dtype=F32)[-1]}
        for how, got in ways.items():
            assert np.all(np.abs(got.astype(np.float64) - want) <= bound), (name, how)
    # one rank's gradient in half precision (a compressed all-reduce) is caught
    half = (stack.sum(axis=0) + grads[0].astype(np.float16) - grads[0]) / p
    assert not np.all(np.abs(half - want) <= bound)


# --------------------------------------------------------------------------- 4.2 divergence

@pytest.mark.parametrize("n", [1, 63, 64, 65, 1000 + 3, 4099])  # check_no_divergence's sizes
def test_branch_bound_covers_fused_and_unfused_steps(n):
    k = 5
    x = check.random_array(n, F32, seed=n, kind="uniform")
    want = divergence_cu.reference(x, k)
    even = np.arange(n) % 2 == 0
    (a0, b0), (a1, b1) = divergence_cu.COEFS
    a, b = np.where(even, F32(a0), F32(a1)), np.where(even, F32(b0), F32(b1))
    bound = divergence_cu.tolerance(x, k)
    for fused in (False, True):
        v = x.copy()
        for _ in range(k):
            v = (a.astype(np.float64) * v + b).astype(F32) if fused else a * v + b
        assert np.all(np.abs(v - want) <= bound), fused
    assert bound < 1e-5  # tighter than the old fixed tolerance, and still derived
    # an element given the other branch is caught
    swapped = divergence_cu.reference(np.concatenate([[F32(0)], x]), k)[1:]
    if n > 1:
        assert not np.all(np.abs(swapped - want) <= bound)


# --------------------------------------------------------------------------- 4.3 reduction

@pytest.mark.parametrize("n", c4.REDUCE_SIZES)
def test_reduction_bound_covers_every_order_on_the_checkers_mixed_data(n):
    x = check.random_array(n, F32, seed=3 * n)  # the checker's non-uniform data
    want = float(np.sum(x, dtype=np.float64))
    tol = reduce_cu.tolerance(x)
    for name, order in ORDERS.items():
        assert abs(order(x) - want) <= tol, name
    for block in c4.REDUCE_BLOCKS:
        assert abs(shuffle_then_atomics(x, block) - want) <= tol, block
    # values rounded to integers (a kernel that sums them as int) are caught
    assert abs(float(np.sum(np.trunc(x), dtype=np.float64)) - want) > tol


def test_the_old_reduction_tolerance_failed_a_correct_sum_the_bound_holds():
    """2e-6 * sum|x| + 1e-6 is below gamma_n * sum|x| for n > 34: a sum whose terms are each half
    an ulp of the running total loses all of them in a sequential order (atomics in a row)."""
    n = 65_537  # the checker's largest size
    x = np.full(n, U, F32)
    x[0] = 1
    want = float(np.sum(x, dtype=np.float64))
    scale = float(np.sum(np.abs(x), dtype=np.float64))
    err = abs(sequential(x) - want)
    assert err > 2e-6 * scale + 1e-6  # the old tolerance
    assert err <= reduce_cu.tolerance(x)
    assert abs(pairwise(x) - want) <= reduce_cu.tolerance(x)


# --------------------------------------------------------------------------- 5.1 tiled matmul

def _dots(A, B, order):
    """A @ B with each element a float32 dot summed in ``order`` (products rounded first)."""
    P = A[:, :, None].astype(F32) * B[None, :, :].astype(F32)  # (M, K, N)
    return np.array([[order(P[i, :, j]) for j in range(B.shape[1])] for i in range(A.shape[0])])


def _fma_dots(A, B):
    """Each element accumulated with fused multiply-adds: acc = fl(acc + a*b exactly)."""
    acc = np.zeros((A.shape[0], B.shape[1]), F32)
    for k in range(A.shape[1]):
        acc = (acc.astype(np.float64) + np.outer(A[:, k], B[k]).astype(np.float64)).astype(F32)
    return acc


@pytest.mark.parametrize("i, shape", list(enumerate(c5.TILED_SHAPES)))
def test_tiled_matmul_bound_covers_every_order_of_the_dots(i, shape):
    M, N, K = shape
    seed = 50  # check_tiled_matmul's default
    A = check.random_array((M, K), seed=seed + 2 * i)
    B = check.random_array((K, N), seed=seed + 2 * i + 1)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    bound = precision.matmul_error_bound(A, B)
    for name, order in (("sequential", sequential), ("reverse", reverse), ("pairwise", pairwise)):
        assert np.all(np.abs(_dots(A, B, order) - ref) <= bound), name
    assert np.all(np.abs(_fma_dots(A, B) - ref) <= bound)
    assert np.all(np.abs(np.matmul(A, B) - ref) <= bound)  # this machine's BLAS
    if K > 1:  # a dot that skips its last term is caught
        assert not np.all(np.abs(A[:, :-1].astype(np.float64) @ B[:-1] - ref) <= bound)


# --------------------------------------------------------------------------- 5.2 fused chain

@pytest.mark.parametrize("i, n", list(enumerate(c5.FUSED_SIZES)))
def test_chain_tolerance_covers_fused_and_unfused_float32(i, n):
    x = check.random_array(n, F32, seed=60 + i, kind="normal")  # check_fused_chain's data
    want = c5.chain_reference(x)
    rtol, atol = c5.chain_tolerance()
    t = np.maximum(x * F32(1.5) + F32(0.25), F32(0))
    unfused = t * t - F32(1)
    t_fma = np.maximum((x.astype(np.float64) * 1.5 + 0.25).astype(F32), F32(0))
    fused = (t_fma.astype(np.float64) ** 2 - 1).astype(F32)
    for got in (unfused, fused):
        assert check.compare_report(got, want, rtol, atol, "y") is None
    # the chain in half precision is caught
    half = np.maximum(x.astype(np.float16) * np.float16(1.5) + np.float16(0.25), 0)
    assert check.compare_report(half * half - np.float16(1), want, rtol, atol, "y") is not None


# --------------------------------------------------------------------------- the bound function

def test_affine_steps_bound_is_chapter_4s_divergence_bound():
    """precision.affine_steps_error_bound is the divergence kernels' bound, one branch at a time,
    so that checkers (which never import experiments) can use it."""
    for n, k in ((1, 6), (1003, 5), (4096, 1000)):
        x = check.random_array(n, F32, seed=n, kind="uniform")
        top = float(np.max(np.abs(x)))
        ours = max(precision.affine_steps_error_bound(top, a, b, k) for a, b in divergence_cu.COEFS)
        assert ours == pytest.approx(divergence_cu.tolerance(x, k), rel=1e-12)
    assert precision.affine_steps_error_bound(1.0, 0.5, 1.0, 0) == 0  # no step, no rounding
    with pytest.raises(ModelInputError, match="below 1"):
        precision.affine_steps_error_bound(1.0, 1.5, 0.0, 3)
