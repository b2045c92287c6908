"""Lab checkers of chapter 5 (accelerated libraries): a shared-memory tiled matmul, a fused
elementwise kernel, choosing sparse or dense from a measured crossover, and how large a matmul
must be for the library to run near its best (measured).

Learner kernels run on the CPU emulator: first in a child process with the race check
(a crash, an endless loop or a race becomes a failure, not a dead notebook), then once more
with the outputs placed in a larger buffer whose tail must stay untouched (a missing bounds
check shows up there). Each checker prints one line when the answer is right.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .. import precision
from ..emulator.source import strip_comments
from ..emulator.launch import ceil_div
from ..kernels import matmul
from .compare import assert_close, random_array
from .lab import (Exercise, answer_error, callable_answer, choice_answer, learner_kernel, number_answer,
                  run_learner_kernel, text_answer, whole_answer)
from .predict import prediction, same_for_all

# A value no correct kernel writes: the padding after an output must still hold it.
SENTINEL = np.float32(-12345.5)


def _padded(shape, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """(buffer, view): a contiguous view of ``shape`` at the start of a buffer with ``pad``
    SENTINEL values after it, and NaN in the view (never-written outputs stay NaN)."""
    size = int(np.prod(shape))
    buf = np.full(size + pad, SENTINEL, dtype=np.float32)
    buf[:size] = np.nan
    return buf, buf[:size].reshape(shape)


def _nan_tailed(a: np.ndarray, pad: int) -> np.ndarray:
    """A copy of ``a`` at the start of a buffer whose ``pad`` further values are NaN."""
    buf = np.full(a.size + pad, np.nan, dtype=a.dtype)
    buf[:a.size] = a.reshape(-1)
    return buf[:a.size].reshape(a.shape)


# --------------------------------------------------------------------------- 5.1 tiled matmul

TILED_KERNEL = "matmul_tiled"
TILED_SHAPES = ((1, 1, 1), (16, 16, 16), (17, 33, 15), (5, 70, 3), (47, 31, 65), (33, 16, 40))


def tiled_launch(M: int, N: int, tile: int):
    """The launch the exercise asks for: one TILE×TILE block per TILE×TILE tile of C, as
    ``matmul_v3_shared`` is launched."""
    return matmul.launch_config("matmul_v3_shared", M, N, {"TILE": tile})


def _right_at_whole_tiles(kern, tile: int, seed: int, shape=None) -> bool:
    """True when the kernel is right at a shape made of whole tiles (M, N, K; 2·TILE in every
    dimension by default)."""
    M, N, K = shape or (2 * tile,) * 3
    pad = tile * (max(M, N, K) + tile) + 64
    A = _nan_tailed(random_array((M, K), seed=seed), pad)
    B = _nan_tailed(random_array((K, N), seed=seed + 1), pad)
    C = _padded((M, N), pad)[1]
    grid, block = tiled_launch(M, N, tile)
    try:
        run_learner_kernel(kern, grid, block, (A, B, C, np.int32(M), np.int32(N), np.int32(K)),
                           f"M={M}, N={N}, K={K}")
    except AssertionError:
        return False
    return bool(np.all(np.abs(C - matmul.reference(A, B)) <= matmul.tolerance(A, B)[1]))  # NaN fails


BOUNDS_FIX = ("load 0.0 for tile elements outside A or B (check row < M and k < K for A, "
              "k < K and col < N for B) and store only when row < M and col < N.")
BOUNDS_HINT = ("the kernel is right when M, N and K are whole multiples of TILE and wrong here: "
               + BOUNDS_FIX)
#: The fused chain's hints after the emulator names an access out of bounds: in the first
#: launch, and in the last (under the hazard detector, which sees a read whose value is unused).
FUSED_BOUNDS_HINT = ("The last block has threads with i >= n, which would read past the end of x "
                     "and write past the end of y: guard with `if (i < n)`.")
FUSED_READ_HINT = ("y is right, but a thread reads x where i >= n: load x[i] only inside "
                   "`if (i < n)` (with vector loads, the last, partial group one element at a "
                   "time).")
SHAPE_HINT = ("the kernel is right when M = N = K and wrong when they differ, even at whole "
              "multiples of TILE: check the dimension each index and each bound uses (A is M×K: "
              "A[row * K + k] when row < M and k < K; B is K×N: B[k * N + col] when k < K and "
              "col < N; C is M×N: C[row * N + col]) and that row comes from blockIdx.y and col "
              "from blockIdx.x, as the launch grid (ceil(N / TILE), ceil(M / TILE)) expects.")
NAN_HINT = ("some elements of C are NaN: they were never written (launch enough blocks and let "
            "every thread with row < M and col < N store its result), or they were computed from "
            "shared memory read before it was written (a missing __syncthreads() after loading "
            "the tiles).")


def _out_of_bounds_hint(run, hint) -> None:
    """``run()``; where the emulator stops it at an index out of bounds, its line is kept and
    the checker's hint (``hint()``: the text) follows."""
    try:
        run()
    except AssertionError as exc:
        if "out of bounds" not in str(exc):
            raise
        raise AssertionError(f"{exc}\n{hint()}") from None


def check_tiled_matmul(source: str, tile: int = 16, number: str = "5.1",
                       title: str = "a shared-memory tiled matmul", seed: int = 50) -> None:
    """``matmul_tiled(A, B, C, M, N, K)`` with TILE×TILE shared tiles, at sizes off the tile.

    Runs on the emulator with ``#define TILE tile``, race-checked (a missing
    ``__syncthreads`` is a race), and with C inside a larger buffer (stray stores show).
    """
    with Exercise(number, title):
        text_answer(source, "the source you passed is", "pass your kernel's CUDA C source as a string")
        code = strip_comments(source, blank_strings=True)
        if "__shared__" not in code:
            raise AssertionError("stage the tiles of A and B in `__shared__` arrays: this "
                                 "exercise is about reusing each loaded value TILE times.")
        if "__syncthreads" not in code:
            raise AssertionError("threads read tile elements that other threads loaded: put a "
                                 "`__syncthreads()` after loading a tile and another after using it.")
        kern = learner_kernel(source, "matmul_tiled.cu", TILED_KERNEL, {"TILE": tile})

        def bounds_hint() -> str:
            """After an access out of bounds: the bounds hint where the kernel is right at whole
            tiles (what it says), else just the fix."""
            if _right_at_whole_tiles(kern, tile, seed + 99):
                return BOUNDS_HINT
            return BOUNDS_FIX[0].upper() + BOUNDS_FIX[1:]

        for i, (M, N, K) in enumerate(TILED_SHAPES):
            A = random_array((M, K), seed=seed + 2 * i)
            B = random_array((K, N), seed=seed + 2 * i + 1)
            ref = matmul.reference(A, B)
            # Each element is a float32 dot of K terms, added in whatever order the tiles give:
            # gamma_K * max(|A| @ |B|) (matmul.tolerance) holds for any of them.
            rtol, atol = matmul.tolerance(A, B)
            grid, block = tiled_launch(M, N, tile)
            what = f"M={M}, N={N}, K={K} with TILE={tile}"
            # Every array sits at the start of a longer buffer, so that a stray access lands
            # in memory the checker owns (and can inspect) instead of crashing the process.
            pad = tile * (max(N, K) + tile) + 64
            A, B = _nan_tailed(A, pad), _nan_tailed(B, pad)
            C = _padded((M, N), pad)[1]
            args = (A, B, C, np.int32(M), np.int32(N), np.int32(K))
            _out_of_bounds_hint(lambda: run_learner_kernel(kern, grid, block, args, what),
                                bounds_hint)
            ok = np.abs(C - ref) <= atol
            if not ok.all():
                ragged = any(v % tile for v in (M, N, K))
                if ragged and _right_at_whole_tiles(kern, tile, seed + 99):
                    # Square whole tiles hide a swapped dimension; a non-square shape shows it.
                    oblong = (tile, 3 * tile, 2 * tile)
                    hint = (BOUNDS_HINT if _right_at_whole_tiles(kern, tile, seed + 98, oblong)
                            else SHAPE_HINT)
                else:  # wrong at whole tiles too: a race is the usual cause
                    C3 = _padded((M, N), pad)[1]
                    run_learner_kernel(kern, grid, block,
                                       (A, B, C3, np.int32(M), np.int32(N), np.int32(K)), what,
                                       race_check=True)
                    hint = NAN_HINT if np.isnan(C).any() else ""
                try:
                    assert_close(C, ref, rtol=rtol, atol=atol, name=f"C at {what}")
                except AssertionError as exc:
                    raise AssertionError(f"{exc}\n{hint}".rstrip()) from None
            # Right in one thread order; the same in reversed and shuffled orders, with no
            # hazard and no index out of bounds (a stray read that feeds only outputs never
            # stored leaves C right, so only the detector sees it)?
            _out_of_bounds_hint(
                lambda: run_learner_kernel(kern, grid, block, args, what, race_check=True),
                bounds_hint)
            # Once more in this process, with A, B and C at the start of longer buffers: NaN
            # after A and B poisons a read past their ends that reaches C (the check where the
            # detector cannot be built), C's tail must stay untouched.
            buf, C2 = _padded((M, N), pad)
            run_learner_kernel(kern, grid, block, (A, B, C2, np.int32(M), np.int32(N), np.int32(K)),
                               what, isolate=False)
            if not (buf[M * N:] == SENTINEL).all():
                raise AssertionError(f"at {what} the kernel wrote past the end of C: store only "
                                     "when row < M and col < N.")
            if np.isnan(C2).any():
                raise AssertionError(f"at {what} the kernel read past the end of A or B (the values "
                                     "there are NaN in this run): load a tile element only when it "
                                     "is inside the matrix (row < M and k < K for A, k < K and "
                                     "col < N for B), else 0.0f.")
            assert_close(C2, ref, rtol=rtol, atol=atol, name=f"C at {what} (second run)")


# --------------------------------------------------------------------------- 5.2 fused kernel

FUSED_KERNEL = "fused_chain"
FUSED_BLOCK = 256
FUSED_SIZES = (1, 7, 255, 256, 257, 1000 + 3, 4099)


def chain_reference(x: np.ndarray) -> np.ndarray:
    """y = relu(x·1.5 + 0.25)² − 1 in float64."""
    y = np.maximum(x.astype(np.float64) * 1.5 + 0.25, 0.0)
    return y * y - 1.0


def chain_tolerance() -> tuple[float, float]:
    """(rtol, atol) of a float32 ``fused_chain`` against ``chain_reference``, in any compiled
    form (multiply-adds fused or not).

    t = relu(x*1.5 + 0.25) rounds at most twice, so it is off by at most gamma_2 * T with
    T = 1.5|x| + 0.25; t*t and the - 1 round once each (or once together): the result is off by
    at most 5u*T^2 + u*|y| to first order. Where t > 0, T^2 <= |y| + 1 (T = t for x >= 0,
    T <= 0.5 for x < 0); elsewhere y = -1 to within u. So gamma_6*|y| + gamma_6 covers every
    element; atol's second gamma_6 leaves room for second-order terms and the float64
    reference's own rounding.
    """
    g = precision.gamma(6)
    return g, 2 * g


def chain_bytes(n: int) -> tuple[int, int]:
    """(unfused, fused) bytes of float32 traffic: 5 passes that read and write n values, or one."""
    return 5 * 2 * 4 * n, 2 * 4 * n


def fused_launch(n: int, block: int = FUSED_BLOCK):
    """The launch the exercise asks for: one thread per element, 256 threads per block."""
    return (ceil_div(n, block),), (block,)


def check_fused_chain(source: str, traffic: Callable, number: str = "5.2",
                      title: str = "a fused elementwise kernel", seed: int = 60) -> None:
    """``fused_chain(x, y, n)`` computes y = relu(x·1.5 + 0.25)² − 1 in one pass, and
    ``traffic(n)`` returns the (unfused, fused) bytes moved for n float32 values."""
    with Exercise(number, title):
        text_answer(source, "the source you passed is", "pass your kernel's CUDA C source as a string")
        callable_answer(traffic, "traffic is", "def traffic(n): ...")
        for n in (1, 1000, 2**20 + 3):
            got = traffic(n)
            want = chain_bytes(n)
            if not (isinstance(got, (tuple, list)) and len(got) == 2):
                raise AssertionError(f"traffic(n) must return a pair (unfused_bytes, fused_bytes), "
                                     f"got {got!r}.")
            got = tuple(whole_answer(v, f"traffic({n}) returned {which} bytes that are", "bytes")
                        for v, which in zip(got, ("unfused", "fused")))
            if got != want:
                hint = ""
                if got[0] == want[0] // 2 or got[1] == want[1] // 2:
                    # Half the count: reads alone, or 2 bytes a value; name both.
                    hint = (" Half of the right count is what reads alone, or 2 bytes a value, "
                            "give: each pass reads AND writes every value, and a float32 is 4 bytes.")
                elif got[0] == want[0] // 4 or got[1] == want[1] // 4:
                    hint = " Count bytes, not elements: a float32 is 4 bytes."
                raise AssertionError(f"traffic({n}) = {tuple(got)}, but five separate passes move "
                                     f"{want[0]} bytes and one fused pass {want[1]}.{hint}")
        kern = learner_kernel(source, "fused_chain.cu", FUSED_KERNEL)
        for i, n in enumerate(FUSED_SIZES):
            pad = FUSED_BLOCK + 64  # stray accesses land in buffers the checker owns
            x = _nan_tailed(random_array(n, seed=seed + i, kind="normal"), pad)  # both signs
            ref = chain_reference(x)
            grid, block = fused_launch(n)
            what = f"n={n} (grid {grid[0]}, block {block[0]})"
            y = _padded((n,), pad)[1]
            _out_of_bounds_hint(lambda: run_learner_kernel(kern, grid, block, (x, y, np.int32(n)), what),
                                lambda: FUSED_BOUNDS_HINT)
            if np.isnan(y).any():
                raise AssertionError(f"at {what}, {int(np.isnan(y).sum())} of {n} outputs were never "
                                     "written: compute i = blockIdx.x * blockDim.x + threadIdx.x.")
            assert_close(y, ref, *chain_tolerance(), name=f"y at {what}")
            buf, y2 = _padded((n,), pad)
            run_learner_kernel(kern, grid, block, (x, y2, np.int32(n)), what, isolate=False)
            if not (buf[n:] == SENTINEL).all():
                raise AssertionError(f"at {what} the kernel wrote past the end of y: the last block "
                                     "has threads with i >= n; guard with `if (i < n)`.")
            # Last, under the hazard detector: a read past the end of x (e.g. a float4 load of
            # the last, partial group) leaves y right, and only the detector names it.
            _out_of_bounds_hint(
                lambda: run_learner_kernel(kern, grid, block, (x, _padded((n,), pad)[1], np.int32(n)),
                                           what, race_check=True),
                lambda: FUSED_READ_HINT)


# --------------------------------------------------------------------------- 5.3 sparse or dense

def _synthetic_sweep(crossover: float, densities, overhead: float, dense_ms: float):
    """Sparse times linear in density (a fixed cost plus a cost per non-zero) meeting dense at ``crossover``."""
    d = np.asarray(densities, dtype=float)
    slope = (dense_ms - overhead) / crossover
    return list(overhead + slope * d)


CROSSOVER_CASES = (
    # (densities, true crossover, fixed cost ms, dense ms)
    ((0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5), 0.075, 0.05, 7.0),
    ((0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0), 0.013, 0.2, 1.4),
    ((0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512), 0.31, 0.01, 40.0),
    ((0.01, 0.02, 0.04, 0.08), 0.055, 1.0, 12.0),
)


# Noisy measured sweeps (densities, sparse ms, dense ms) where sparse crosses dense more than
# once: the crossover is the first crossing (scanning from the dense end finds the last).
NOISY_CROSSOVER_CASES = (
    ((0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1), (0.3, 0.5, 0.9, 1.2, 0.95, 1.6, 3.0), 1.0),
    ((0.01, 0.02, 0.04, 0.08, 0.16, 0.32), (0.2, 0.4, 2.1, 1.9, 2.6, 4.0), 2.0),
)


def _last_crossover(d, s, dense):
    """The last upward crossing: what a scan from the dense end finds."""
    for i in reversed(range(len(d) - 1)):
        if s[i] < dense <= s[i + 1]:
            return d[i] + (dense - s[i]) * (d[i + 1] - d[i]) / (s[i + 1] - s[i])
    return None


def _linear_crossover(d, s, dense):
    for i in range(len(d) - 1):
        if s[i] < dense <= s[i + 1]:
            return d[i] + (dense - s[i]) * (d[i + 1] - d[i]) / (s[i + 1] - s[i])
    return None


def check_crossover(crossover: Callable, choose: Callable, number: str = "5.3",
                    title: str = "sparse or dense from a measured crossover") -> None:
    """``crossover(densities, sparse_ms, dense_ms)`` interpolates where sparse meets dense (None
    when it does not in the range); ``choose(density, crossover)`` says "sparse" or "dense"."""
    with Exercise(number, title):
        callable_answer(crossover, "crossover is", "def crossover(densities, sparse_ms, dense_ms): ...")
        callable_answer(choose, "choose is", "def choose(density, crossover): ...")

        def found(densities, sparse, dense):
            got = crossover(list(densities), list(sparse), dense)
            return None if got is None else number_answer(
                got, "crossover(densities, sparse_ms, dense_ms) returned",
                "a density, or None when sparse and dense do not cross")

        answers = []
        for densities, true, overhead, dense in CROSSOVER_CASES:
            sparse = _synthetic_sweep(true, densities, overhead, dense)
            answers.append(found(densities, sparse, dense))
        if len(set(map(repr, answers))) == 1 and answers[0] is not None:
            raise AssertionError(f"crossover(...) returned {answers[0]!r} for every data set, though "
                                 "their crossovers differ: a fixed rule of thumb? Compute it from "
                                 "the measured times.")
        for (densities, true, overhead, dense), got in zip(CROSSOVER_CASES, answers):
            sparse = _synthetic_sweep(true, densities, overhead, dense)
            want = _linear_crossover(densities, sparse, dense)
            if got is None:
                raise AssertionError(f"crossover(...) returned None, but sparse ({sparse[0]:.3g} ms at "
                                     f"{densities[0]}) is faster than dense ({dense} ms) at low "
                                     f"density and slower at {densities[-1]}: they cross in between.")
            if not abs(float(got) - want) <= 0.05 * want:
                lo = max(x for x in densities if x <= want)
                hi = min(x for x in densities if x >= want)
                hint = (" That is a measured density, not the interpolated crossing: interpolate "
                        "between the two densities that bracket it." if float(got) in densities
                        else "")
                times = ", ".join(f"{v:.3g}" for v in sparse)
                raise AssertionError(f"for dense = {dense} ms and sparse times [{times}] ms at "
                                     f"densities {list(densities)}, "
                                     f"the crossover is {want:.4g} (between {lo} and {hi}); "
                                     f"you returned {got!r}.{hint}")
        for densities, sparse, dense in NOISY_CROSSOVER_CASES:
            got = found(densities, sparse, dense)
            want = _linear_crossover(densities, sparse, dense)
            if got is not None and abs(float(got) - want) <= 0.05 * want:
                continue
            last = _last_crossover(densities, sparse, dense)
            hint = (" That is the last crossing: noisy measurements can cross dense more than once; "
                    "return the first, scanning up from the lowest density." if got is not None
                    and abs(float(got) - last) <= 1e-9 * last else "")
            raise AssertionError(f"for dense = {dense} ms and noisy sparse times {list(sparse)} ms "
                                 f"at densities {list(densities)}, the crossover is {want:.4g} "
                                 f"(sparse first becomes slower there); you returned {got!r}.{hint}")
        d = (0.001, 0.01, 0.1)
        for sparse, dense, why in (((2.0, 3.0, 9.0), 1.0, "sparse is slower everywhere"),
                                   ((0.1, 0.2, 0.5), 1.0, "sparse is faster everywhere")):
            got = found(d, sparse, dense)
            if got is not None:
                raise AssertionError(f"when {why} in the measured range (sparse {sparse} ms, dense "
                                     f"{dense} ms), there is no crossover in it: return None, not {got!r}.")
        for density, cross, want in ((0.001, 0.075, "sparse"), (0.07, 0.075, "sparse"),
                                     (0.08, 0.075, "dense"), (0.5, 0.075, "dense"),
                                     (0.2, 0.31, "sparse"), (0.013, 0.013, "dense")):
            got = choose(density, cross)
            if not isinstance(got, str):  # a wrong word gets the hint below
                choice_answer(got, f"choose({density}, {cross}) returned", ("sparse", "dense"))
            if got != want:
                raise AssertionError(f"choose({density}, crossover={cross}) returned {got!r}; below "
                                     f"the crossover sparse is faster (\"sparse\"), at or above it "
                                     f"dense is (\"dense\").")


# --------------------------------------------------------------------------- 5.4 size for the library

#: The matmul sizes the lab measures (n×n×n).
MATMUL_SIZES = (8, 16, 32, 64, 128, 256, 512)


def smallest_efficient_size_reference(sizes, gflops):
    """The smallest size from which every larger measured size reaches at least half of the
    best measured rate; None when the largest does not."""
    half = max(gflops) / 2
    found = None
    for n, g in reversed(list(zip(sizes, gflops))):
        if g < half:
            break
        found = n
    return found


#: (what the sweep shows, sizes, GFLOP/s): each is decided by the data, not by a rule.
SIZE_CASES = (
    ("rising to a plateau", MATMUL_SIZES, (0.5, 2.0, 6.0, 15.0, 30.0, 40.0, 42.0)),
    ("half reached at 32, lost at 64", MATMUL_SIZES, (1.0, 4.0, 26.0, 18.0, 40.0, 50.0, 48.0)),
    ("exactly half at 64", MATMUL_SIZES, (1.0, 3.0, 10.0, 20.0, 32.0, 40.0, 36.0)),
    ("fastest in the middle, where the matrices fit in cache", MATMUL_SIZES,
     (2.0, 8.0, 30.0, 60.0, 64.0, 40.0, 35.0)),
    ("every size at least half of the best", MATMUL_SIZES, (20.0, 25.0, 30.0, 32.0, 33.0, 34.0, 35.0)),
    ("only the largest size", MATMUL_SIZES, (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 20.0)),
    ("below half again at the largest size", MATMUL_SIZES, (1.0, 2.0, 40.0, 30.0, 25.0, 22.0, 10.0)),
    ("other sizes", (100, 300, 1000, 3000), (3.0, 9.0, 14.0, 13.0)),
)


def _size_hint(got, sizes, gflops, want) -> str:
    """Which known mistake ``got`` is, from what each mistake returns on this data."""
    best = max(gflops)
    pct = {n: 100 * g / best for n, g in zip(sizes, gflops)}
    if want is None and got is not None:
        last = sizes[-1]
        return (f"The largest size, {last}, reaches only {pct[last]:.0f} % of the best: no size "
                "keeps the library at half its best from there on, so return None.")
    if got is None:
        return f"From {want} on every size reaches at least half of the best: return {want}."
    if got in range(len(sizes)) and sizes[got] == want and got != want:
        return f"That is the position of {want} in the list: return the size itself."
    if got not in sizes:
        return f"Return one of the measured sizes {list(sizes)}, or None."
    if got == sizes[int(np.argmax(gflops))] and got != want:
        return ("That is the fastest size; the question is the smallest size from which the "
                "rate stays at half the best or more.")
    if got < (want if want is not None else sizes[-1] + 1):
        later = [n for n in sizes if n > got and pct[n] < 50]
        if pct[got] >= 50 and later:
            return (f"{got} reaches {pct[got]:.0f} % of the best, but {later[0]} falls to "
                    f"{pct[later[0]]:.0f} % again: every larger size must stay at half or more.")
        return (f"{got} reaches only {pct[got]:.0f} % of the best ({best:g} GFLOP/s at "
                f"{sizes[int(np.argmax(gflops))]}): compare with half of the best measured rate, "
                "not of the largest size's.")
    prev = max(n for n in sizes if n < got)
    if pct[prev] == 50:
        return (f"{prev} reaches exactly 50 % of the best: at least half counts, so {prev} is "
                "the answer.")
    return f"{prev} and every larger size already reach half of the best."


def check_efficient_size(guess, smallest_size, measured: dict | None = None, number: str = "5.4",
                         title: str = "how large a matmul must be, from measured GFLOP/s") -> None:
    """``guess``: the size predicted (only its type is checked: a prediction may be wrong).
    ``smallest_size(sizes, gflops)``: the smallest size from which every larger one reaches
    half of the best rate, or None; on the checker's sweeps and on ``measured`` ({"sizes",
    "gflops"}, measured in the lab)."""
    with Exercise(number, title):
        prediction(guess, "my_guess_size", whole=True, example=64)
        callable_answer(smallest_size, "smallest_size is", "def smallest_size(sizes, gflops): ...")
        cases = list(SIZE_CASES)
        if measured is not None:
            cases.append((f"measured now on {measured.get('device', 'this machine')}",
                          tuple(measured["sizes"]), tuple(measured["gflops"])))

        def answer(sizes, gflops):
            got = smallest_size(list(sizes), list(gflops))
            return None if got is None else whole_answer(
                got, "smallest_size(sizes, gflops) returned", "a size, or None when there is none")

        answers = [answer(sizes, gflops) for _, sizes, gflops in cases]
        wants = [smallest_efficient_size_reference(sizes, gflops) for _, sizes, gflops in cases]
        same_for_all("smallest_size(sizes, gflops)", answers, wants, "rates")
        for (what, sizes, gflops), got, want in zip(cases, answers, wants):
            if got != want:
                rates = ", ".join(f"{n}: {g:.3g}" for n, g in zip(sizes, gflops))
                raise AssertionError(
                    f"{what} (size: GFLOP/s {rates}): you returned {got}, these rates say "
                    f"{want}. " + _size_hint(got, list(sizes), list(gflops), want))
