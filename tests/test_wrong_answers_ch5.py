"""Lab 5's wrong-answer tables: for each exercise, plausible wrong answers of a learner who
half-understood the chapter, each rejected with a message that names the real mistake."""

from gpucourse.check import ch5 as c5
from gpucourse.check import ch5_wmma
from test_ch5_checkers import FUSED, TILED
from test_ch5_wmma import SOLUTION as WMMA_SOLUTION
from wrong_answer_table import table_tests

# The references are the checker tests' own (chapter 5 and its WMMA exercise): one copy each.
WMMA = WMMA_SOLUTION


def _swap(text, old, new):
    assert old in text, old  # the wrong answer must really differ from the solution
    return text.replace(old, new)


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


def _from_the_dense_end(densities, sparse_ms, dense_ms):
    """Scans down from the densest point: the last crossing, which is the first only when the
    sweep is monotone."""
    for i in reversed(range(len(densities) - 1)):
        s0, s1 = sparse_ms[i], sparse_ms[i + 1]
        if s0 < dense_ms <= s1:
            d0, d1 = densities[i], densities[i + 1]
            return d0 + (dense_ms - s0) * (d1 - d0) / (s1 - s0)
    return None


def _first_slower(densities, sparse_ms, dense_ms):
    """The first measured density where sparse is slower: no interpolation."""
    return next((d for d, s in zip(densities, sparse_ms) if s >= dense_ms), None)


def smallest_size(sizes, gflops, half_of=max, at_least=True):
    half = half_of(gflops) / 2
    answer = None
    for n, g in zip(reversed(sizes), reversed(gflops)):
        if (g < half) if at_least else (g <= half):
            break
        answer = n
    return answer


CHECKS = {"5.1": c5.check_tiled_matmul, "5.2": lambda answer: c5.check_fused_chain(*answer),
          "5.3": lambda answer: c5.check_crossover(*answer), "5.4": lambda answer: c5.check_efficient_size(*answer),
          "5.5": ch5_wmma.check_wmma_matmul}
REFERENCES = {"5.1": TILED, "5.2": (FUSED, traffic), "5.3": (crossover, choose),
              "5.4": (128, smallest_size), "5.5": WMMA}

WRONG_ANSWERS = {
    "5.1": [
        ("no barrier at all", TILED.replace("__syncthreads();", ""), "__syncthreads"),
        ("no barrier after using a tile",
         _swap(TILED, "acc += As[ty][k] * Bs[k][tx];\n        __syncthreads();",
               "acc += As[ty][k] * Bs[k][tx];"), "race"),
        ("loads without bounds",
         _swap(_swap(TILED, "(row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f",
                     "A[row * K + k0 + tx]"),
               "(k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f", "B[(k0 + ty) * N + col]"),
         "out of bounds"),
        ("a store without bounds", _swap(TILED, "if (row < M && col < N) C[", "C["), "writes `C` out of bounds"),
        ("the tile of A read down a column", _swap(TILED, "As[ty][k] * Bs[k][tx]", "As[k][ty] * Bs[k][tx]"),
         "differ"),
        ("no shared memory", r"""
extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    __syncthreads();
    if (row < M && col < N) { float s = 0; for (int k = 0; k < K; ++k) s += A[row * K + k] * B[k * N + col]; C[row * N + col] = s; }
}""", "__shared__"),
    ],
    "5.2": [
        ("reads only in the traffic", (FUSED, lambda n: (5 * 4 * n, 4 * n)), "reads AND writes"),
        ("elements, not bytes", (FUSED, lambda n: (5 * 2 * n, 2 * n)), "Count bytes"),
        ("the fused pass counted like one of five", (FUSED, lambda n: (5 * 2 * 4 * n, 5 * 2 * 4 * n // 5 * 2)),
         "one fused pass"),
        ("no bounds test", (_swap(FUSED, "if (i < n) {", "{"), traffic), "i >= n"),
        ("the index without the block", (_swap(FUSED, "int i = blockIdx.x * blockDim.x + threadIdx.x;",
                                               "int i = threadIdx.x;"), traffic), "never written"),
        ("no relu", (_swap(FUSED, "t = t > 0.0f ? t : 0.0f;", ""), traffic), "differ"),
    ],
    "5.3": [
        ("a scan from the dense end", (_from_the_dense_end, choose), "the last crossing"),
        ("the first slower density, not interpolated", (_first_slower, choose),
         "interpolate between the two densities"),
        ("a rule of thumb", (lambda d, s, dense: 0.05, choose), "rule of thumb"),
        ("a crossing outside the range", (lambda d, s, dense: crossover(d, s, dense) or d[-1], choose),
         "return None"),
        ("dense at or below the crossover", (crossover, lambda d, c: "sparse" if d <= c else "dense"),
         "at or above it"),
        ("the words swapped", (crossover, lambda d, c: "dense" if d < c else "sparse"), "below the crossover"),
    ],
    "5.4": [
        ("the first size that reaches half, ignoring a later dip",
         (128, lambda s, g: next(n for n, x in zip(s, g) if x >= max(g) / 2)), "falls to"),
        ("more than half, where exactly half counts", (128, lambda s, g: smallest_size(s, g, at_least=False)),
         "at least half counts"),
        ("half of the largest size's rate, not of the best",
         (128, lambda s, g: smallest_size(s, g, half_of=lambda v: v[-1])), "not of the largest size's"),
        ("the fastest size", (128, lambda s, g: s[g.index(max(g))]), "That is the fastest size"),
        ("the largest size when none qualifies", (128, lambda s, g: smallest_size(s, g) or s[-1]),
         "return None"),
        ("the position in the list",
         (128, lambda s, g: None if smallest_size(s, g) is None else s.index(smallest_size(s, g))),
         "return the size itself"),
        ("a rule of thumb", (128, lambda s, g: 128), "a fixed rule of thumb"),
        ("the rate, not the size", (128, lambda s, g: max(g)), "Return one of the measured sizes"),
        ("the guess as a fraction", (0.5, smallest_size), "my_guess_size is 0.5"),
    ],
    "5.5": [
        ("B loaded column-major", _swap(WMMA, "half, wmma::row_major> b;", "half, wmma::col_major> b;"),
         "B is row-major"),
        ("the accumulator refilled in the loop",
         _swap(WMMA, "    for (int k = 0; k < K; k += 16) {\n",
               "    for (int k = 0; k < K; k += 16) {\n        wmma::fill_fragment(acc, 0.0f);\n"),
         "fill the accumulator with 0 once"),
        ("C stored column-major", _swap(WMMA, "wmma::mem_row_major", "wmma::mem_col_major"),
         "each 16×16 tile of C is transposed"),
        ("the warp index without blockIdx",
         _swap(WMMA, "(blockIdx.x * blockDim.x + threadIdx.x) / 32", "threadIdx.x / 32"),
         "write-after-write hazard"),
        ("only the first k-step", _swap(WMMA, "k < K; k += 16", "k < 16; k += 16"),
         "the first 16 columns of A only"),
        ("A loaded with ldm = N", _swap(WMMA, "A + row * K + k, K);", "A + row * K + k, N);"),
         "reads `A` out of bounds"),
    ],
}


test_the_reference_passes, test_a_wrong_answer_is_rejected_and_named = \
    table_tests(CHECKS, REFERENCES, WRONG_ANSWERS)
