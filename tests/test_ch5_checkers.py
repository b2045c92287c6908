"""Chapter 5 lab checkers: the solutions pass and plausible wrong answers fail with a useful message."""
import numpy as np
import pytest

import gpucourse as gc
from gpucourse.check import ch5 as c5
from gpucourse.check import expect_failure
from gpucourse.experiments.ch5 import kernel_fusion, tensor_cores

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


def percent_of_peak(m, n, k, seconds, gpu, precision):
    return 100 * 2 * m * n * k / seconds / gc.specs.lookup(gpu).peak_flops(precision)


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

def test_percent_of_peak_solution_passes(capsys):
    c5.check_percent_of_peak(percent_of_peak)
    assert "Exercise 5.4 passed" in capsys.readouterr().out


def _fp32_peak(m, n, k, s, gpu, p):
    return 100 * 2 * m * n * k / s / gc.specs.lookup(gpu).peak_flops("fp32")


def _no_raise(m, n, k, s, gpu, p):
    spec = gc.specs.lookup(gpu)
    if p not in spec.peak_tflops:
        return 0.0
    return percent_of_peak(m, n, k, s, gpu, p)


@pytest.mark.parametrize("fn,match", [
    (lambda m, n, k, s, g, p: percent_of_peak(m, n, k, s, g, p) / 2, "2 FLOPs"),
    (lambda m, n, k, s, g, p: percent_of_peak(m, n, k, s, g, p) / 100, "percentage"),
    (_fp32_peak, "fp32 one"),
    (lambda m, n, k, s, g, p: percent_of_peak(m, n, k, s, g, p) / 1.024 ** 4, "1e12"),
    (lambda m, n, k, s, g, p: 100 * 2 * n ** 3 / s / gc.specs.lookup(g).peak_flops(p), "expected"),
    (_no_raise, "PrecisionError"),
    (lambda m, n, k, s, g, p: 100 * 2 * m * n * k / s / (gc.specs.lookup(g).peak_tflops[p] * 1e12),
     "raised KeyError"),
    (lambda m, n, k, s, g, p: percent_of_peak(m, n, k, s / 1000, g, p), "already in seconds"),
    (lambda m, n, k, s, g, p: percent_of_peak(m, n, k, s * 1000, g, p), "milliseconds"),
    (lambda m, n, k, s, g, p: percent_of_peak(m, n, k, s, g, p) / 1e12, "not in TFLOP/s"),
    (lambda m, n, k, s, g, p: percent_of_peak(m, n, k, s, g, p) * 1e12, "not TFLOP/s"),
], ids=["n^3 not 2mnk", "fraction", "fp32 peak for all", "2**40", "square only", "no error for T4 bf16",
        "peak by hand", "seconds as ms", "seconds to ms", "rate in TFLOP/s", "peak in TFLOP/s"])
def test_percent_of_peak_wrong_answers_fail(fn, match):
    with expect_failure(match):
        c5.check_percent_of_peak(fn)


def test_checker_helpers_agree_with_the_experiments():
    x = gc.check.random_array(101, seed=3)
    np.testing.assert_allclose(c5.chain_reference(x), kernel_fusion.chain_numpy(x))
    assert c5.chain_bytes(1000) == tuple(kernel_fusion.fusion_bytes(1000).values())
    pct = tensor_cores.percent_of_peak(2 * 4096 ** 3, 2.9e-3, "H100-SXM", "bf16")
    assert pct == pytest.approx(c5.percent_of_peak_reference(4096, 4096, 4096, 2.9e-3, "H100-SXM", "bf16"))
