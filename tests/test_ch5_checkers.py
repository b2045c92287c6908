"""Chapter 5 lab checkers: the solutions pass and plausible wrong answers fail with a useful message."""
import time

import numpy as np
import pytest

import gpucourse as gc
from gpucourse.check import ch5 as c5
from gpucourse.check import expect_failure
from gpucourse.experiments.ch5 import kernel_fusion

TILED = r"""
extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C,
                                        int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}
"""

FUSED = r"""
extern "C" __global__ void fused_chain(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float t = x[i] * 1.5f + 0.25f;
        t = t > 0.0f ? t : 0.0f;
        y[i] = t * t - 1.0f;
    }
}
"""


def traffic(n):
    return 5 * 2 * 4 * n, 2 * 4 * n


def crossover(densities, sparse_ms, dense_ms):
    for i in range(len(densities) - 1):
        s0, s1 = sparse_ms[i], sparse_ms[i + 1]
        if s0 < dense_ms <= s1:
            d0, d1 = densities[i], densities[i + 1]
            return d0 + (dense_ms - s0) * (d1 - d0) / (s1 - s0)
    return None


def choose(density, cross):
    return "sparse" if density < cross else "dense"


def smallest_size(sizes, gflops):
    half = max(gflops) / 2
    answer = None
    for n, g in zip(reversed(sizes), reversed(gflops)):
        if g < half:
            break
        answer = n
    return answer


# --------------------------------------------------------------------------- 5.1

def test_tiled_matmul_solution_passes(capsys):
    c5.check_tiled_matmul(TILED)
    assert capsys.readouterr().out.strip() == "Exercise 5.1 passed: a shared-memory tiled matmul."


def _without_second_barrier(src):
    head, tail = src.split("acc += As[ty][k] * Bs[k][tx];")
    return head + "acc += As[ty][k] * Bs[k][tx];" + tail.replace("__syncthreads();", "", 1)


TILED_WRONG = [
    (_without_second_barrier(TILED), "race"),
    (TILED.replace("        __syncthreads();\n        for", "        for"), "race"),
    (TILED.replace("(row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f", "A[row * K + k0 + tx]")
     .replace("(k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f", "B[(k0 + ty) * N + col]"),
     ("reads `A` out of bounds", "whole multiples of TILE and wrong here")),
    # the emulator names the read past A, the checker adds its bounds hint
    (TILED.replace("(row < M && k0 + tx < K)", "(row < M)"),
     ("reads `A` out of bounds", "whole multiples of TILE and wrong here", "k < K for A")),
    (TILED.replace("A[row * K + k0 + tx]", "A[(k0 + tx) * M + row]"), "not yet right"),
    (TILED.replace("k0 < K; k0 += TILE", "k0 + TILE <= K; k0 += TILE"), "not yet right"),
    (TILED.replace("if (row < M && col < N) C[row * N + col] = acc;",
                   "if (row < M) C[row * N + col] = acc;"), "not yet right"),
    (TILED.replace("if (row < M && col < N) C[row * N + col] = acc;",
                   "if (row < M - 1 && col < N) C[row * N + col] = acc;"), "never written"),
    # right values (the stray reads only feed outputs never stored), but reads past A and B
    (TILED.replace("(row < M && k0 + tx < K)", "(k0 + tx < K)")
     .replace("(k0 + ty < K && col < N)", "(k0 + ty < K)"),
     ("out of bounds", "whole multiples of TILE and wrong here")),
]


@pytest.mark.parametrize("source,match", TILED_WRONG,
                         ids=["no barrier after use", "no barrier after load", "no load bounds",
                              "half the load bounds", "A indexed as column-major",
                              "last partial k-tile skipped", "store not guarded by col",
                              "last row not stored", "row and col not guarded on load"])
def test_tiled_matmul_wrong_answers_fail(source, match):
    _fails_naming(lambda: c5.check_tiled_matmul(source), match)


def _fails_naming(check, match) -> None:
    """``check`` fails with a message holding ``match`` (every one of a tuple: the emulator's
    line naming a stray access, then the checker's hint)."""
    with pytest.raises(AssertionError) as info:
        check()
    assert all(m in str(info.value) for m in (match if isinstance(match, tuple) else (match,))), \
        str(info.value)


# Right whenever M = N = K (so also at the square whole-tile shape the checker tries first):
# the hint must name the swapped dimension, not the bounds checks.
TILED_SWAPPED_DIMENSIONS = [
    TILED.replace("int row = blockIdx.y * TILE + ty;", "int row = blockIdx.x * TILE + ty;")
         .replace("int col = blockIdx.x * TILE + tx;", "int col = blockIdx.y * TILE + tx;"),
    TILED.replace("C[row * N + col]", "C[row * K + col]"),
    TILED.replace("B[(k0 + ty) * N + col]", "B[(k0 + ty) * K + col]"),
    TILED.replace("(row < M && k0 + tx < K)", "(row < M && k0 + tx < M)"),
]


@pytest.mark.parametrize("source", TILED_SWAPPED_DIMENSIONS,
                         ids=["row from blockIdx.x", "C row stride K", "B row stride K",
                              "A bound k < M"])
def test_tiled_matmul_swapped_dimensions_get_their_own_hint(source):
    with pytest.raises(AssertionError, match="M = N = K") as info:
        c5.check_tiled_matmul(source)
    assert "whole multiples of TILE and wrong here" not in str(info.value)


def test_tiled_matmul_must_use_shared_memory():
    naive = r"""
    extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
        int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
        if (row < M && col < N) { float s = 0; for (int k = 0; k < K; ++k) s += A[row*K+k] * B[k*N+col];
                                  C[row*N+col] = s; }
    }"""
    with expect_failure("__shared__"):
        c5.check_tiled_matmul(naive)
    with expect_failure("matmul_tiled"):
        c5.check_tiled_matmul(TILED.replace("matmul_tiled", "my_matmul"))


# --------------------------------------------------------------------------- 5.2

def test_fused_chain_solution_passes(capsys):
    c5.check_fused_chain(FUSED, traffic)
    assert "Exercise 5.2 passed" in capsys.readouterr().out


@pytest.mark.parametrize("source,match", [
    # the emulator's bounds check names the read past x, the checker adds its hint
    (FUSED.replace("if (i < n) {", "{"), ("reads `x` out of bounds", c5.FUSED_BOUNDS_HINT)),
    (FUSED.replace("t = t > 0.0f ? t : 0.0f;", ""), "not yet right"),
    (FUSED.replace("x[i] * 1.5f + 0.25f", "(x[i] + 0.25f) * 1.5f"), "not yet right"),
    (FUSED.replace("int i = blockIdx.x * blockDim.x + threadIdx.x;", "int i = threadIdx.x;"),
     "never written"),
    # the load before the bounds test: y comes out right, x is read one past its end
    (FUSED.replace("if (i < n) {", "float first = x[i];\n    if (i < n) {")
          .replace("x[i] * 1.5f", "first * 1.5f"), ("reads `x` out of bounds", c5.FUSED_READ_HINT)),
], ids=["no bounds check", "no ReLU", "add before multiply", "threadIdx only", "load before the test"])
def test_fused_chain_wrong_kernels_fail(source, match):
    _fails_naming(lambda: c5.check_fused_chain(source, traffic), match)


@pytest.mark.parametrize("fn,match", [
    (lambda n: (5 * 4 * n, 4 * n), "reads AND writes"),
    (lambda n: (5 * 2 * n, 2 * n), "4 bytes"),
    (lambda n: 40 * n, "pair"),
    (lambda n: (5 * 2 * 2 * n, 2 * 2 * n), "2 bytes a value"),  # counted as fp16
], ids=["reads only", "elements not bytes", "one number", "2-byte values"])
def test_fused_chain_wrong_traffic_fails(fn, match):
    with expect_failure(match):
        c5.check_fused_chain(FUSED, fn)


# --------------------------------------------------------------------------- 5.3

def test_crossover_solution_passes(capsys):
    c5.check_crossover(crossover, choose)
    assert "Exercise 5.3 passed" in capsys.readouterr().out


def _first_slower(densities, sparse_ms, dense_ms):
    for d, s in zip(densities, sparse_ms):
        if s >= dense_ms:
            return d
    return None


def _zero_not_none(densities, sparse_ms, dense_ms):
    return crossover(densities, sparse_ms, dense_ms) or 0.0


@pytest.mark.parametrize("fn,pick,match", [
    (lambda d, s, t: 0.1, choose, "rule of thumb"),
    (lambda d, s, t: 0.05, choose, "rule of thumb"),
    (_first_slower, choose, "measured density"),
    (_zero_not_none, choose, "return None"),
    (crossover, lambda d, c: "dense" if d < c else "sparse", "choose("),
    (crossover, lambda d, c: "sparse" if d <= c else "dense", "choose("),
], ids=["fixed 0.1", "fixed 0.05", "first slower density", "0 instead of None", "reversed",
        "tie goes to sparse"])
def test_crossover_wrong_answers_fail(fn, pick, match):
    with expect_failure(match):
        c5.check_crossover(fn, pick)


# --------------------------------------------------------------------------- 5.4

def test_efficient_size_accepts_the_solution(capsys):
    measured = {"sizes": [8, 64, 512], "gflops": [0.5, 9.0, 20.0], "device": "a test CPU"}
    c5.check_efficient_size(128, smallest_size, measured)
    assert capsys.readouterr().out.strip() == (
        "Exercise 5.4 passed: how large a matmul must be, from measured GFLOP/s.")


def test_efficient_size_sweeps_need_the_data():
    """The answers differ from sweep to sweep, one is None, both ends of the range occur, and
    one sweep has a rate of exactly half the best at its answer."""
    wants = [c5.smallest_efficient_size_reference(n, g) for _, n, g in c5.SIZE_CASES]
    assert None in wants and len(set(wants)) >= 5
    assert c5.MATMUL_SIZES[0] in wants and c5.MATMUL_SIZES[-1] in wants
    assert any(2 * g[n.index(w)] == max(g) for (_, n, g), w in zip(c5.SIZE_CASES, wants) if w)


def test_efficient_size_decides_on_the_measured_sweep_too():
    measured = {"sizes": [8, 16, 32], "gflops": [1.0, 30.0, 31.0], "device": "a test CPU"}

    def fits_the_fixed_sweeps_only(sizes, gflops):
        return 32 if len(sizes) == 3 else smallest_size(sizes, gflops)

    with expect_failure("measured now on a test CPU"):
        c5.check_efficient_size(64, fits_the_fixed_sweeps_only, measured)


@pytest.mark.parametrize("guess", [None, "64", 64.5, False, (64,)])
def test_efficient_size_wants_a_whole_number_as_the_guess(guess):
    with expect_failure("my_guess_size is"):
        c5.check_efficient_size(guess, smallest_size)


def test_efficient_size_unanswered_is_not_done_yet():
    def unanswered(sizes, gflops):
        raise NotImplementedError("Exercise 5.4")

    with expect_failure("Exercise 5.4 is not done yet"):
        c5.check_efficient_size(64, unanswered)


def test_efficient_size_check_is_fast():
    start = time.perf_counter()
    c5.check_efficient_size(64, smallest_size, {"sizes": [8, 16], "gflops": [1.0, 2.0]})
    assert time.perf_counter() - start < 2.0


def test_checker_helpers_agree_with_the_experiments():
    x = gc.check.random_array(101, seed=3)
    np.testing.assert_allclose(c5.chain_reference(x), kernel_fusion.chain_numpy(x))
    assert c5.chain_bytes(1000) == tuple(kernel_fusion.fusion_bytes(1000).values())
