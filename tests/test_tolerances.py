"""Every float check's tolerance covers the worst common order of its additions.

That order is a sequential float32 accumulation (one running sum, products rounded first: a
BLAS or library without blocking or pairwise summation, one core). Each test evaluates the
checked quantity that way, at the sizes the chapters use, and asserts it stays inside the
tolerance the chapter's check uses; most also show that the tolerance still rejects a
plausible wrong answer, so that it is not merely large.
"""
import functools

import numpy as np
import pytest
import torch

from gpucourse import check, precision
from gpucourse.errors import ModelInputError
from gpucourse.experiments import ch4, ch5, cpu
from gpucourse.experiments.ch1 import common as ch1_common, rooflines as ch1_rooflines
from gpucourse.experiments.ch4 import reduce_ladder
from gpucourse.kernels import divergence as divergence_cu
from gpucourse.kernels import reduce as reduce_cu
from gpucourse.kernels.shape import Launch
from gpucourse.kernels import matmul

#: make test-cpu-checks runs this whole file (AVX2 cap, one core).
pytestmark = pytest.mark.cpu_check

U = precision.U32


def seq_dot(a, b) -> np.float32:
    """a . b with float32 products added one after another in float32."""
    p = np.asarray(a, np.float32) * np.asarray(b, np.float32)
    return np.cumsum(p, dtype=np.float32)[-1] if p.size else np.float32(0)


def seq_matmul_rows(a, b, rows) -> np.ndarray:
    """Rows ``rows`` of a @ b, each element a sequential float32 dot."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return np.stack([np.cumsum(a[i][:, None] * b, axis=0, dtype=np.float32)[-1] for i in rows])


# --------------------------------------------------------------------------- the bound itself

def test_gamma_and_sum_bound_follow_higham():
    assert precision.gamma(1) == pytest.approx(U / (1 - U))
    assert precision.gamma(1000) == pytest.approx(1000 * U / (1 - 1000 * U))
    assert precision.sum_error_bound(10, 2.0, terms=10) == pytest.approx(
        2 * (precision.gamma(10) + precision.gamma(10, precision.U64)))
    # n*u = 1: the worst case of a float32 sum of 2^24 terms is no bound at all
    with pytest.raises(ModelInputError, match="blocks"):
        precision.gamma(1 << 24)


@pytest.mark.parametrize("n", [1000, 1 << 16, 1 << 20])
def test_sequential_float32_sum_stays_inside_gamma_n(n):
    x = check.random_array(n, np.float32, seed=n, kind="positive")  # one sign: errors add up
    err = abs(float(np.cumsum(x, dtype=np.float32)[-1]) - float(np.sum(x, dtype=np.float64)))
    assert err <= precision.sum_error_bound(n, float(np.sum(np.abs(x), dtype=np.float64)))


@pytest.mark.parametrize("n", [1000, 1 << 16])
def test_the_bound_is_reached_so_no_smaller_tolerance_holds_in_every_order(n):
    # 1 followed by n - 1 halves of its ulp: each addition ties and rounds back to 1
    x = np.full(n, U, np.float32)
    x[0] = 1
    err = abs(float(np.cumsum(x, dtype=np.float32)[-1]) - float(np.sum(x, dtype=np.float64)))
    bound = precision.sum_error_bound(n, float(np.sum(x, dtype=np.float64)))
    assert 0.9 * bound < err <= bound


# --------------------------------------------------------------------------- dot_on_every_core

@pytest.fixture
def sequential_blas(monkeypatch):
    """np.dot and NumPy's matmul row dots add sequentially in the inputs' precision."""
    real_dot, real_matmul = np.dot, np.matmul

    def dot(a, b, *args, **kw):
        if np.ndim(a) != 1 or np.ndim(b) != 1:
            return real_dot(a, b, *args, **kw)
        dt = np.result_type(a, b)
        return np.cumsum(np.multiply(a, b, dtype=dt), dtype=dt)[-1] if np.size(a) else dt.type(0)

    def matmul(a, b, *args, **kw):
        if np.ndim(a) == 3 and a.shape[1] == 1 and b.shape[2] == 1:  # one dot per row
            p = a[:, 0, :] * b[:, :, 0]
            return np.cumsum(p, axis=1, dtype=p.dtype)[:, -1:, None] if p.shape[1] else \
                np.zeros((p.shape[0], 1, 1), p.dtype)
        return real_matmul(a, b, *args, **kw)

    monkeypatch.setattr(np, "dot", dot)
    monkeypatch.setattr(np, "matmul", matmul)


@functools.lru_cache(maxsize=1)
def _chapter_dot_inputs():
    n = 1 << 24  # chapter 1's cpu_ceilings (64 MiB) and chapter 4's CPU reduction
    a, b = ch1_common.big_random(n, 0), ch1_common.big_random(n, 1)
    # chapter 4's ceiling before its data became +-1: x . x of mixed-magnitude values, every
    # term positive, the case that failed on one core at 1e-4 * sum|x*x|
    x = check.random_array(n, np.float32, seed=3)
    return {"ch1 a . b": (a, b), "x . x, one sign": (x, x)}


@pytest.mark.parametrize("cores", [1, 3])  # pinned to one core; chunks of uneven length
def test_dot_on_every_core_passes_with_a_sequential_blas_on_any_core_count(
        sequential_blas, monkeypatch, cores):
    monkeypatch.setattr(cpu, "cpu_cores", lambda: cores)
    for what, (a, b) in _chapter_dot_inputs().items():
        t = cpu.dot_on_every_core(a, b, min_time_s=0.001, min_samples=1, max_samples=1,
                                  warmup_s=0)
        assert t.size == a.size, what


def test_one_sequential_dot_of_2_24_terms_breaks_any_fixed_tolerance():
    """Why the dot is blocked: unblocked, the x . x of chapter 4 is off by percents."""
    x = _chapter_dot_inputs()["x . x, one sign"][0]
    scale = float(np.dot(x.astype(np.float64), x.astype(np.float64)))
    err = abs(float(seq_dot(x, x)) - scale)
    assert err > 1e-4 * scale  # the old tolerance
    assert err > cpu.dot_error_bound(x, x)  # blocking is what makes the bound hold


def test_dot_error_bound_still_catches_a_lost_chunk():
    a, b = _chapter_dot_inputs()["ch1 a . b"]
    want = float(np.dot(a.astype(np.float64), b.astype(np.float64)))
    lost = float(np.dot(a[-(a.size // 64):].astype(np.float64), b[-(b.size // 64):]))
    assert abs(lost) > cpu.dot_error_bound(a, b)  # one chunk of 64 cores missing shows


def test_blocked_dot_rows_are_never_longer_than_the_block(monkeypatch):
    seen = []
    real = cpu.block_dots
    monkeypatch.setattr(cpu, "block_dots", lambda a, b: seen.append(a.shape) or real(a, b))
    x = check.random_array(3 * cpu.DOT_BLOCK + 5, np.float32, seed=2)
    got = cpu.blocked_dot(x, x)
    assert max(s[1] for s in seen) <= cpu.DOT_BLOCK and sum(s[0] * s[1] for s in seen) == x.size
    assert abs(got - float(np.dot(x.astype(np.float64), x))) <= cpu.dot_error_bound(x, x)


# --------------------------------------------------------------------------- exact sums

@pytest.mark.parametrize("n", [1 << 24, 1 << 25])  # chapter 4's CPU sum; chapter 1's roofline
def test_sums_of_exact_sum_data_are_exact_in_any_order(n):
    x = cpu.exact_sum_data(n, seed=3)
    assert set(np.unique(x)) == {-1.0, 1.0}
    want = float(np.sum(x, dtype=np.float64))
    assert float(np.cumsum(x, dtype=np.float32)[-1]) == want  # sequential
    assert float(np.sum(x)) == want  # NumPy's pairwise
    assert float(np.sum(x[::-1].reshape(64, -1).T, dtype=np.float32)) == want
    old = torch.get_num_threads()
    try:
        for threads in (1, old):
            torch.set_num_threads(threads)
            assert float(torch.sum(torch.from_numpy(x))) == want
    finally:
        torch.set_num_threads(old)
    assert float(np.sum(x[1:], dtype=np.float32)) != want  # one element lost shows


def test_a_sequential_sum_of_chapter_1_data_fails_the_old_relative_1e_4():
    """Why the sum checks moved to +-1 data: chapter 1's roofline checked np.sum of its 2^25
    values at rtol 1e-4, which a library adding sequentially does not meet."""
    a = ch1_common.big_random(1 << 25, 0)
    want = float(np.sum(a, dtype=np.float64))
    assert abs(float(np.cumsum(a, dtype=np.float32)[-1]) - want) > 1e-4 * abs(want)


# --------------------------------------------------------------------------- matmuls

@pytest.mark.parametrize("m", [64, 384, 512, 1024, 2048])  # ch1 roofline, ceilings, transfer
def test_matmul_bound_covers_sequential_dots_at_chapter_1_sizes(m):
    x = check.random_array((m, m), np.float32, seed=m, kind="uniform")
    y = check.random_array((m, m), np.float32, seed=m + 1, kind="uniform")
    rows = range(0, m, max(1, m // 8))
    ref = x[list(rows)].astype(np.float64) @ y.astype(np.float64)
    seq = seq_matmul_rows(x, y, rows)
    bound = precision.matmul_error_bound(x, y)
    assert np.abs(seq - ref).max() <= bound
    assert np.abs(np.matmul(x[list(rows)], y) - ref).max() <= bound  # this BLAS too
    # dropping the largest product of an element is caught
    i, j = 0, int(np.argmax(np.abs(x[0]) @ np.abs(y)))
    big = np.max(np.abs(x[0].astype(np.float64) * y[:, j]))
    assert big > bound


@pytest.mark.parametrize("M,N,K", ch5.sgemm.CHECK_SHAPES + ((37, 29, 41),))
def test_chapter_5_matmul_tolerance_covers_sequential_dots(M, N, K):
    A = check.random_array((M, K), seed=M)
    B = check.random_array((K, N), seed=N + 1)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    rtol, atol = matmul.tolerance(A, B)
    got = seq_matmul_rows(A, B, range(M))
    assert check.compare_report(got, ref, rtol, atol, "sequential") is None
    assert check.compare_report(got[:, ::-1] if N > 1 else got + 1, ref, rtol, atol, "wrong") is not None


def test_sparse_product_tolerance_covers_sequential_dots():
    n, k = ch5.sparse.SPARSE_CPU["n"], ch5.sparse.SPARSE_CPU["k"]
    D = check.random_array((n, k), seed=1, kind="uniform")
    for i, dens in enumerate((0.01, 0.3, 1.0)):
        S = ch5.sparse.sparse_matrix(n, dens, seed=7 * i)
        allowed = 2 * precision.matmul_error_bound(S, D)
        rows = range(0, n, 256)
        dense = np.matmul(S[list(rows)], D)
        assert np.abs(seq_matmul_rows(S, D, rows) - dense).max() <= allowed


# --------------------------------------------------------------------------- convolutions

def _seq_conv(x, w, padding, positions):
    """Outputs at ``positions`` (n, o, i, j), each a sequential float32 dot over (c, kh, kw)."""
    cols = torch.nn.functional.unfold(x, w.shape[2:], padding=padding).numpy()
    wr = w.reshape(w.shape[0], -1).numpy()
    wo = x.shape[3] + 2 * padding - w.shape[3] + 1
    return np.array([seq_dot(wr[o], cols[n, :, i * wo + j]) for n, o, i, j in positions])


@pytest.mark.parametrize("cfg", [
    {"batch": 2, "channels": 3, "size": 11, "out_channels": 5, "kernel": 3},  # check_conv
    ch5.conv.CONV_CPU])
def test_conv_bound_covers_sequential_dots(cfg):
    x, w = ch5.conv._conv_inputs(cfg, 0, "cpu")
    p = cfg["kernel"] // 2
    ref = torch.nn.functional.conv2d(x.double(), w.double(), padding=p).numpy()
    g = check.rng(5)
    pos = [tuple(int(g.integers(0, s)) for s in ref.shape) for _ in range(300)]
    seq = _seq_conv(x, w, p, pos)
    want = np.array([ref[q] for q in pos])
    bound = ch5.conv.conv_error_bound(x, w, p)
    assert np.abs(seq - want).max() <= bound
    for fn in (ch5.conv.conv_taps, ch5.conv.conv_unfold, ch5.conv.conv_library):
        assert np.abs(fn(x, w, p).numpy() - ref).max() <= bound


# --------------------------------------------------------------------------- elementwise

@pytest.mark.parametrize("n", [1, 33, 1000 + 7])  # check_saxpy's sizes and seed
def test_saxpy_tolerance_covers_rounding_with_and_without_fma(n):
    a, seed = np.float32(1.75), 4
    x = check.random_array(n, np.float32, seed=seed + n)
    y = check.random_array(n, np.float32, seed=seed + 2 * n + 1)
    want = (np.float64(a) * x + y.astype(np.float64)).astype(np.float32)
    tol = precision.sum_error_bound(3, float(np.max(np.abs(np.float64(a) * x) + np.abs(y))))
    two = a * x + y  # float32: the product rounds, then the sum
    fused = (np.float64(a) * x + y).astype(np.float32)
    assert np.abs(two.astype(np.float64) - want).max() <= tol
    assert np.abs(fused.astype(np.float64) - want).max() <= tol
    if n > 1:  # a neighbour's y is caught
        assert np.abs((a * x + np.roll(y, 1)) - want).max() > tol


def _divergence_float32(x, k, fused):
    a = np.where(np.arange(x.size) % 2 == 0, *(np.float32(c[0]) for c in divergence_cu.COEFS))
    b = np.where(np.arange(x.size) % 2 == 0, *(np.float32(c[1]) for c in divergence_cu.COEFS))
    v = x.astype(np.float32)
    for _ in range(k):
        v = (a.astype(np.float64) * v + b).astype(np.float32) if fused else a * v + b
    return v


@pytest.mark.parametrize("n,k", [(1, 6), (63, 6), (1003, 6), (1001, 5), (4096, 1000)])
def test_divergence_bound_covers_every_step_rounding(n, k):
    x = check.random_array(n, np.float32, seed=7 + n, kind="uniform")
    want = divergence_cu.reference(x, k)
    bound = divergence_cu.tolerance(x, k)
    for fused in (False, True):
        assert np.abs(_divergence_float32(x, k, fused) - want).max() <= bound
    # each element given the other branch's coefficients is caught
    swapped = divergence_cu.reference(np.concatenate([[np.float32(0)], x]), k)[1:]
    assert np.abs(swapped - want).max() > bound


def test_fusion_chain_tolerance_covers_unfused_and_fused_float32():
    x = check.random_array(1 << 24, seed=0, kind="normal")  # chapter 5's CPU fusion size
    want = ch5.kernel_fusion.chain_numpy(x)
    rtol, atol = precision.gamma(6), 2 * precision.gamma(6)
    t = np.maximum(x * np.float32(1.5) + np.float32(0.25), np.float32(0))
    unfused = t * t - np.float32(1)
    t64 = np.maximum((x.astype(np.float64) * 1.5 + 0.25).astype(np.float32), 0).astype(np.float64)
    fused = (t64 * t64 - 1).astype(np.float32)  # multiply-adds rounding once
    for got in (unfused, fused):
        assert np.all(np.abs(got - want) <= rtol * np.abs(want) + atol)
    assert not np.all(np.abs(unfused + np.float32(1e-5) - want) <= rtol * np.abs(want) + atol)


@pytest.mark.parametrize("precision", ["fp32", "tf32", "fp16", "bf16"])
def test_precision_bound_covers_sequential_float32_accumulation(precision):
    k = 256
    A = check.random_array((67, k), seed=0, kind="uniform")
    B = check.random_array((k, 45), seed=1, kind="uniform")
    ref = A.astype(np.float64) @ B.astype(np.float64)

    def rounded(m):  # the inputs in the format, as float32 values
        if precision == "fp16":
            return m.astype(np.float16).astype(np.float32)
        if precision == "bf16":
            return torch.from_numpy(m).bfloat16().float().numpy()
        if precision == "tf32":  # round to nearest on 10 fraction bits
            bits = m.view(np.uint32).astype(np.uint64)
            return ((bits + 0xFFF + ((bits >> 13) & 1)) & ~np.uint64(0x1FFF)).astype(np.uint32).view(np.float32)
        return m

    C = seq_matmul_rows(rounded(A), rounded(B), range(67))
    if precision in ("fp16", "bf16"):
        C = rounded(C)
    err = np.linalg.norm(C - ref) / np.linalg.norm(ref)
    assert err <= ch5.tensor_cores.precision_error_bound(precision, A, B)
    if precision == "tf32":  # TF32 passed off as FP32 fails FP32's bound
        assert err > ch5.tensor_cores.precision_error_bound("fp32", A, B)
    else:  # and the chapter's own check, on this CPU
        assert ch5.tensor_cores.check_precision_matmul(precision) <= ch5.tensor_cores.precision_error_bound(precision, A, B)


# --------------------------------------------------------------------------- GPU reductions

@pytest.mark.parametrize("n,grid,block", [(30_011, 7, 128), (1 << 22, 1056, 256)])
def test_reduction_depth_bound_covers_three_sequential_levels(n, grid, block):
    """The bound of chapter 1's GPU roofline check and of the kernel tests' float data: each
    thread adds its elements, then each block its threads, then the blocks, all sequentially."""
    x = check.random_array(n, np.float32, seed=n)
    threads = grid * block
    per = -(-n // threads)
    padded = np.zeros(per * threads, np.float32)
    padded[:n] = x
    t = np.cumsum(padded.reshape(per, threads), axis=0, dtype=np.float32)[-1]  # grid-stride
    blocks = np.cumsum(t.reshape(grid, block), axis=1, dtype=np.float32)[:, -1]
    got = float(np.cumsum(blocks, dtype=np.float32)[-1])
    depth = reduce_cu.depth("reduce_v4_grid_stride", Launch(grid, block), n)  # per + block + grid
    bound = precision.sum_error_bound(depth, float(np.sum(np.abs(x), dtype=np.float64)))
    assert abs(got - float(np.sum(x, dtype=np.float64))) <= bound


# --------------------------------------------------------------------------- the chapters' checks

def test_chapter_1_roofline_sum_check_passes_with_a_sequential_numpy_sum(monkeypatch):
    real = np.sum

    def seq_sum(a, axis=None, dtype=None, **kw):
        if axis is not None or kw:
            return real(a, axis=axis, dtype=dtype, **kw)
        a = np.asarray(a)
        return np.cumsum(a.ravel(), dtype=dtype or a.dtype)[-1]

    monkeypatch.setattr(np, "sum", seq_sum)
    ceilings = {"bandwidth_Bps": 1e9, "peak_flops": 1e9}
    # the quick run's n
    r = ch1_rooflines.cpu_roofline(ceilings, n=1 << 24, matmul_n=32, min_time_s=0.001)
    assert r["points"][1]["name"] == "sum (reduction)"


def test_chapter_4_reduction_runs_pinned_to_one_core(monkeypatch):
    monkeypatch.setattr(cpu, "cpu_cores", lambda: 1)
    res = ch4.reduction(n=1 << 24, min_time_s=0.001)  # the chapter's CPU size
    assert res["n"] == 1 << 24 and res["copy"]["gbps"] > 0


def test_chapter_4_reduce_check_rejects_a_sum_that_loses_one_element(monkeypatch):
    real = reduce_cu.run

    def loses_the_last(name, x, n, out=None, sm_count=None):
        return real(name, x, n - 1 if n > 1 else n, out, sm_count)

    monkeypatch.setattr(reduce_cu, "run", loses_the_last)
    with pytest.raises(AssertionError, match="exactly"):
        reduce_ladder.check_reduce(sizes=(65_537,))
