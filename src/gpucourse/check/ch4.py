"""Lab checkers of chapter 4: launch configuration, divergence, warp-shuffle reduction,
privatized histogram, and how many chunks a copy/compute pipeline wants (measured).

Learner kernels run on the CPU emulator in a child process (a crash or an endless loop
becomes a failure, not a dead notebook) and, where threads share memory, in three thread
orders to expose races. Each checker prints one line when the answer is right.
"""
from __future__ import annotations

import re

import numpy as np

from .. import kernels, models, specs
from ..emulator import racecheck
from ..emulator.source import strip_comments
from ..kernels import divergence as divergence_cu
from ..kernels import histogram as histogram_cu
from ..kernels import reduce as reduce_cu
from ..models import WARP_SIZE
from .compare import random_array, rng
from .lab import (Exercise, answer_error, callable_answer, learner_kernel, learner_module, run_learner_kernel,
                  text_answer, whole_answer)
from .predict import prediction, same_for_all

#: The launch a learner's kernel gets: that of the course's version it rewrites (one thread
#: per element for the block sum, per value for the histogram, whole warp pairs for branches).
BRANCH_LIKE = "divergence_v2_per_warp"
REDUCE_LIKE = "reduce_v3_warp_shuffle"
HISTOGRAM_LIKE = "histogram_v2_shared_privatized"


def _code(source: str) -> str:
    """The learner's kernel source without comments and string contents (one sentence when it
    is not a string)."""
    text_answer(source, "the source you passed is", "pass your kernel's CUDA C source as a string")
    return strip_comments(source, blank_strings=True)


# --------------------------------------------------------------------------- 4.1 launch config

LAUNCH_CASES = (
    # (elements, registers per thread, static shared memory per block, GPU)
    (10_000_019, 32, 0, "H100-SXM"),
    (1_000_003, 128, 0, "A100-SXM4-80GB"),
    (5_000, 64, 48 * 1024, "A100-SXM4-80GB"),
    (777, 40, 16 * 1024, "T4"),
    (2**20 + 1, 96, 8 * 1024, "RTX-4090"),
    (123_457, 255, 0, "H100-SXM"),
    # a multiple of every power-of-two block: n // block + 1 would launch an idle block
    (2**20, 32, 0, "L4"),
    # 1024 the only best block (the range's top end: range(32, 1024, 32) never tries it), on an
    # exact multiple of 1024 elements
    (3 * 2**20, 32, 48 * 1024, "A100-SXM4-80GB"),
    (65_536, 16, 64 * 1024, "H100-SXM"),
)


def best_occupancy(gpu, regs_per_thread: int, smem_per_block: int) -> tuple[float, list[int]]:
    """The best occupancy over block sizes 32, 64, ..., 1024 and the blocks that reach it (model)."""
    occ = models.occupancy_by_block(specs.lookup(gpu).cc, range(32, 1025, 32), regs_per_thread,
                                    smem_per_block)
    best = max(occ.values())
    return best, [b for b, o in occ.items() if abs(o - best) < 1e-12]


def check_launch_config(choose, number: str = "4.1",
                        title: str = "a launch configuration from registers and shared memory") -> None:
    """``choose(n, regs_per_thread, smem_per_block, gpu) -> (grid, block)`` must cover n with the best occupancy."""
    with Exercise(number, title):
        callable_answer(choose, "choose is", "def choose(n, regs_per_thread, smem_per_block, gpu): ...")
        for n, regs, smem, gpu in LAUNCH_CASES:
            case = f"n={n:,}, {regs} registers/thread, {smem:,} B shared/block on {gpu}"
            got = choose(n, regs, smem, gpu)
            assert isinstance(got, tuple) and len(got) == 2, \
                f"return a tuple (grid, block); got {got!r} for {case}."
            # the launch style ((grid,), (block,)) means the same in one dimension
            grid, block = (whole_answer(v[0] if isinstance(v, tuple) and len(v) == 1 else v,
                                        f"choose(...) for {case} returned a {what} that is",
                                        f"{what} size")
                           for v, what in zip(got, ("grid", "block")))
            assert block % WARP_SIZE == 0 and 32 <= block <= 1024, (
                f"block {block} for {case}: use a multiple of 32 between 32 and 1024, or the "
                f"last warp of every block runs with {WARP_SIZE - block % WARP_SIZE} of its lanes "
                "idle.")
            cc = specs.lookup(gpu).cc
            try:
                occ = models.occupancy(cc, block, regs, smem)
            except Exception as exc:
                raise AssertionError(f"block {block} cannot launch for {case}: {exc}") from None
            best, blocks = best_occupancy(gpu, regs, smem)
            if blocks == [1024] and occ.occupancy < best - 1e-12:
                raise AssertionError(
                    f"block {block} for {case} reaches {occ.occupancy:.0%} occupancy; only 1024, "
                    f"the largest block, reaches {best:.0%}. Try every multiple of 32 up to and "
                    "including 1024 (range(32, 1025, 32): a range's end is not included).")
            assert occ.occupancy >= best - 1e-12, (
                f"block {block} for {case} reaches {occ.occupancy:.0%} occupancy "
                f"(limited by {occ.limited_by}); {', '.join(map(str, blocks[:4]))} reach "
                f"{best:.0%}. Did you pass the registers and shared memory to the model?")
            assert grid * block >= n, (f"grid {grid} x block {block} = {grid * block:,} threads "
                                       f"do not cover {n:,} elements: round the grid up.")
            assert (grid - 1) * block < n, (f"grid {grid} for {case} launches whole blocks with "
                                             "nothing to do: use ceil(n / block).")


# --------------------------------------------------------------------------- 4.2 divergence

BRANCHES = r"""
// Branch A (even elements) and branch B (odd elements): k steps of v <- a*v + b each.
__device__ float branch_a(float v, int k) { for (int s = 0; s < k; ++s) v = fmaf(v, 0.75f, 0.25f); return v; }
__device__ float branch_b(float v, int k) { for (int s = 0; s < k; ++s) v = fmaf(v, -0.5f, 1.0f); return v; }
"""

# The same functions, instrumented: each returns the global index of the thread that called it
# (+ for branch A, - for branch B) and counts its calls, so the checker sees which warp took
# which branch.
TRACED_BRANCHES = r"""
__device__ unsigned int gc_branch_calls[2];
__device__ float branch_a(float v, int k) { atomicAdd(&gc_branch_calls[0], 1u); return (float)(blockIdx.x * blockDim.x + threadIdx.x + 1); }
__device__ float branch_b(float v, int k) { atomicAdd(&gc_branch_calls[1], 1u); return -(float)(blockIdx.x * blockDim.x + threadIdx.x + 1); }
"""
TRACE_READER = r"""
extern "C" __global__ void gc_read_branch_calls(unsigned int* out) {
  if (threadIdx.x < 2) { out[threadIdx.x] = gc_branch_calls[threadIdx.x]; gc_branch_calls[threadIdx.x] = 0; }
}
"""

DIVERGENT_KERNEL = r"""
extern "C" __global__ void no_divergence(const float* x, float* y, int n, int k) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (i % 2 == 0) y[i] = branch_a(x[i], k);   // even lanes
    else            y[i] = branch_b(x[i], k);   // odd lanes: every warp runs both branches
}
"""


def check_no_divergence(source: str, number: str = "4.2",
                        title: str = "every warp takes one branch") -> None:
    """Kernel ``no_divergence(x, y, n, k)`` calling ``branch_a``/``branch_b``: right results, each warp on one branch, each element computed once."""
    with Exercise(number, title):
        code = _code(source)
        assert "branch_a" in code and "branch_b" in code, (
            "call branch_a(v, k) for the even elements and branch_b(v, k) for the odd ones "
            "(the checker defines them); do not copy their loops into your kernel.")
        assert not re.search(r"__device__[^;{]*\bbranch_[ab]\s*\(", code), \
            "do not define branch_a or branch_b yourself: the checker provides them."
        k = 5
        traced_source = TRACED_BRANCHES + source + TRACE_READER
        real = learner_kernel(BRANCHES + source, "no_divergence.cu", "no_divergence",
                              builds=("race", lambda: kernels.from_source(
                                  traced_source, name="no_divergence_traced.cu", backend="cpu")))
        for n in (1, 63, 64, 65, 1000 + 3, 4099):
            x = random_array(n, np.float32, seed=n, kind="uniform")
            want, tol = divergence_cu.reference(x, k), divergence_cu.tolerance(x, k)
            for block in (64, 128, 256):
                y = np.full(n, np.nan, np.float32)
                shape = divergence_cu.launch(BRANCH_LIKE, n, block)
                # race_check: a load before the bounds test reads past x (named by line)
                run_learner_kernel(real, (shape.grid,), (block,), divergence_cu.args(x, y, n, k),
                                   what=f"n={n}, block {block}", race_check=True)
                bad = np.flatnonzero(~(np.abs(y - want) <= tol))  # NaN too
                if bad.size:
                    i = int(bad[0])
                    raise AssertionError(
                        f"n={n}, block {block}: {bad.size} of {n} elements are wrong; y[{i}] = "
                        f"{y[i]!r}, expected {want[i]:.6g} (branch {'a' if i % 2 == 0 else 'b'})"
                        + (" and was never written" if np.isnan(y[i]) else "") + ".")
        traced_mod = learner_module(traced_source, "no_divergence_traced.cu", "no_divergence",
                                    builds=())
        traced = traced_mod.no_divergence
        calls = np.zeros(2, np.uint32)
        traced_mod.gc_read_branch_calls((1,), (32,), (calls,))  # clear the counters
        n, block = 1000 + 3, 128
        y = np.full(n, np.nan, np.float32)
        x = random_array(n, np.float32, seed=1, kind="uniform")
        divergence_cu.launch(BRANCH_LIKE, n, block).run(traced, divergence_cu.args(x, y, n, k))
        traced_mod.gc_read_branch_calls((1,), (32,), (calls,))
        assert calls.sum() == n, (
            f"branch_a and branch_b were called {int(calls.sum())} times for {n} elements: "
            "compute each element's branch once (running both and picking one doubles the work).")
        thread = np.abs(y).astype(np.int64) - 1
        branch = np.where(y > 0, 0, 1)
        warps: dict[int, list[int]] = {}
        for t, b in zip(thread, branch):
            warps.setdefault(int(t) // WARP_SIZE, [0, 0])[b] += 1
        diverged = {w: c for w, c in warps.items() if c[0] and c[1]}
        if diverged:
            w, c = next(iter(diverged.items()))
            eff = models.warp_efficiency(c)
            raise AssertionError(
                f"{len(diverged)} of {len(warps)} warps still run both branches; warp {w} has "
                f"{c[0]} lanes on branch_a and {c[1]} on branch_b ({eff}). Give each warp "
                "elements of one parity: lanes of warp 2m take the even elements of a run of 64, "
                "lanes of warp 2m+1 the odd ones.")


# --------------------------------------------------------------------------- 4.3 reduction

REDUCE_SIZES = (1, 31, 32, 33, 100, 1000 + 1, 65_537)
REDUCE_BLOCKS = (32, 96, 256, 1024)
#: The sizes whose launches the hazard detector watches (each in three thread orders too).
RACE_CHECKED_UP_TO = 4099


def _check_block_sum(kern, x: np.ndarray, block: int, race_check: bool,
                     isolate: bool | None = None) -> None:
    """One launch of the learner's warp_reduce on ``x``: its sum within kernels.reduce.tolerance
    (any order). In a child process with the race check, or (``isolate``) without it; otherwise
    in this process, as a later launch of a kernel that already ran in child processes on data
    of this size (an index out of bounds still stops it, named)."""
    n = x.size
    out = np.zeros(1, np.float32)
    shape = reduce_cu.launch(REDUCE_LIKE, n, block=block)
    run_learner_kernel(kern, (shape.grid,), (block,), (x, out, np.int32(n)),
                       race_check=race_check, isolate=race_check if isolate is None else isolate,
                       what=f"n={n}, block {block}")
    got = float(out[0])
    assert np.isfinite(got), (
        f"n={n}, block {block}: the sum is {got}: something was read that was never "
        "written, e.g. warp_totals entries of warps the block does not have (read "
        "them only for lane < blockDim.x / 32), or a lane outside the shuffle's mask.")
    want = reduce_cu.reference(x)
    tol = reduce_cu.tolerance(x)
    data = ("+1 and -1 values, whose float32 sum is exact in any order" if tol == 0 else
            f"mixed values: tolerance {tol:.3g}, the float32 rounding of {n} terms in any order")
    if abs(got - want) <= tol:
        return
    if tol > 0:  # it ran right on +1/-1 data of this size just before
        hint = ("The kernel is right on +1 and -1 data: sum the values as float, whatever they "
                "are (a float value in the shuffles and in warp_totals).")
    else:
        hint = _diagnose_block_sum(kern, n, block)
    assert abs(got - want) <= tol, (
        f"n={n}, block {block}: got {got!r}, expected {want!r} (off by {abs(got - want):.3g}; "
        f"{data}). {hint}")


def _block_sum_of(kern, x: np.ndarray, block: int) -> float:
    """The learner's sum of ``x`` at ``block`` threads, run in this process (the kernel already
    ran in child processes on data of this size)."""
    out = np.zeros(1, np.float32)
    shape = reduce_cu.launch(REDUCE_LIKE, x.size, block=block)
    run_learner_kernel(kern, (shape.grid,), (block,), (x, out, np.int32(x.size)), isolate=False,
                       what=f"n={x.size}, block {block}")
    return float(out[0])


def _diagnose_block_sum(kern, n: int, block: int) -> str:
    """Which known mistake a wrong block sum is, from runs on ones placed where each mistake
    loses them (one full block of ``block`` elements): one warp of the block (warp 0 not reading
    every warp's total), the upper lanes of every warp (shuffle offsets that start below 16),
    the elements of the last, partial warp (an early return before the shuffles). Otherwise
    what those runs count, in neutral words."""
    warps = block // WARP_SIZE
    counts = [_block_sum_of(kern, (np.arange(block) // WARP_SIZE == w).astype(np.float32), block)
              for w in range(warps)]
    lost = [w for w, c in enumerate(counts) if c == 0]
    if lost and all(c in (0, WARP_SIZE) for c in counts):
        which = ", ".join(map(str, lost))
        return (f"Warp {which}'s total {'is' if len(lost) == 1 else 'are'} lost (ones in one "
                f"warp of a {block}-thread block, zeros elsewhere): warp 0 must read "
                f"warp_totals[lane] for every lane < blockDim.x / 32 ({warps} here), count the "
                "other lanes as 0, and shuffle from offset 16 down.")
    lanes = np.arange(block) % WARP_SIZE
    upper = _block_sum_of(kern, (lanes >= 16).astype(np.float32), block)
    lower = _block_sum_of(kern, (lanes < 16).astype(np.float32), block)
    if upper < block // 2 and lower == block // 2:
        return (f"Lanes 16-31 of each warp add {upper:g} instead of {block // 2} (with ones there "
                "and zeros elsewhere), lanes 0-15 are right: start the shuffle offsets at 16 "
                "(warpSize / 2), then 8, 4, 2, 1, so that every lane's value reaches lane 0.")
    if any(c != WARP_SIZE for c in counts):
        shown = ", ".join(f"{c:g}" for c in counts[:8])
        return (f"With ones in one warp and zeros elsewhere the block sums to {shown} (warp 0, "
                f"1, ...) instead of {WARP_SIZE}: some values are "
                f"{'counted more than once' if max(counts) > WARP_SIZE else 'never counted'}; "
                "check that each warp's total is written once and warp 0 adds each once.")
    if n % WARP_SIZE:
        m = block - WARP_SIZE // 2  # the last warp half full
        part = _block_sum_of(kern, np.ones(m, np.float32), block)
        if part != m:
            return (f"With {m} elements (the last warp half full) it counts {part:g}: elements "
                    "past n must count as 0, not be skipped by an early return (a shuffle needs "
                    "every lane of the warp).")
    ones = _block_sum_of(kern, np.ones(n, np.float32), block)
    if ones != n:
        return (f"On {n} ones it counts {ones:g}: some elements are "
                f"{'counted more than once' if ones > n else 'never counted'}; check which "
                "element each thread reads and that each block's total is added to *out once.")
    return "Check the shuffle offsets (16, 8, 4, 2, 1) and that warp 0 sums every warp's total."


def check_warp_reduce(source: str, number: str = "4.3",
                      title: str = "block sum with warp shuffles") -> None:
    """Kernel ``warp_reduce(x, out, n)``: *out += sum of x, one element per thread, with warp shuffles.

    Every size and block runs on +1/-1 data, whose sum is exact in any order (a lost or doubled
    element shows, however large n is), race-checked; each size also runs once on mixed
    non-uniform values, within the float32 rounding bound of its order-free sum.
    """
    with Exercise(number, title):
        code = _code(source)
        # Any shuffle form will do (the text shows __shfl_down_sync): what must not pass is a sum
        # without one, through shared memory or atomics alone. The runs below judge the sums.
        assert re.search(r"__shfl(_up|_down|_xor)?_sync\s*\(", code), (
            "sum inside each warp with __shfl_down_sync (or another warp shuffle): that is the "
            "point of the exercise.")
        kern = learner_kernel(source, "warp_reduce.cu", "warp_reduce")
        for n in REDUCE_SIZES:
            signs = random_array(n, np.float32, seed=3 * n, kind="signs")
            for block in REDUCE_BLOCKS:
                if n > RACE_CHECKED_UP_TO and block < 256:
                    continue  # large sizes at the big blocks only: the emulator is not a GPU
                # Every block size is race-checked on the sizes up to 4099, where partial
                # warps, partial blocks and many blocks all occur; the large size adds no
                # new pattern of accesses, and the detector's shadow memory made its race
                # check the slowest part of the check by far: it runs in a child process
                # unchecked.
                _check_block_sum(kern, signs, block, race_check=n <= RACE_CHECKED_UP_TO,
                                 isolate=True)
            # The same kernel on values that are not all +-1 (a kernel that rounds them to
            # integers passes the signs): its threads already ran in three orders above.
            _check_block_sum(kern, random_array(n, np.float32, seed=3 * n), 256, race_check=False)


# --------------------------------------------------------------------------- 4.4 histogram

def _histogram_hint(data: np.ndarray, bins: np.ndarray, want: np.ndarray, grid: int,
                    block: int) -> str:
    """The known mistake whose counts ``bins`` are: compared with what each mistake counts."""
    n, nbins = data.size, histogram_cu.NBINS
    hist = lambda d: np.bincount(d, minlength=nbins).astype(np.int64)  # noqa: E731
    # a loop that strides by blockDim.x: block b counts every element from b * blockDim.x on
    block_stride = sum(hist(data[b * block:]) for b in range(grid))
    if np.array_equal(bins, block_stride) or np.array_equal(bins, grid * want):
        return ("each block counts elements that other blocks count too: stride the loop by the "
                "whole grid, gridDim.x * blockDim.x, not by blockDim.x")
    if grid * block < n and np.array_equal(bins, hist(data[:grid * block])):
        return ("a block handles more elements than it has threads: loop with a grid stride "
                "(i += gridDim.x * blockDim.x)")
    if block < nbins and np.array_equal(bins[:block], want[:block]) and not bins[block:].any():
        return (f"only bins 0..{block - 1} reach the global histogram: a block of {block} "
                f"threads must flush all {nbins} bins, b = threadIdx.x, threadIdx.x + "
                "blockDim.x, ...")
    if bins.sum() == want.sum():
        return ("every element is counted once, but into the wrong bin: count data[i] into "
                "bin data[i]")
    return ("clear every shared bin, __syncthreads() before counting and before flushing, and "
            "let each thread flush bins b = threadIdx.x, threadIdx.x + blockDim.x, ... (a block "
            "may have fewer threads than bins)")


def check_private_histogram(source: str, number: str = "4.4",
                            title: str = "a privatized histogram") -> None:
    """Kernel ``histogram_private(data, bins, n)``: exact counts into NBINS bins, any grid and block."""
    with Exercise(number, title):
        code = _code(source)
        assert "__shared__" in code, "count into a __shared__ array of NBINS bins first."
        kern = learner_kernel(source, "histogram_private.cu", "histogram_private",
                              defines={"NBINS": histogram_cu.NBINS})
        cases = [(1, 1.0), (33, 0.0), (4099, 1.0), (4099, 0.0), (300_007, 1.0)]
        for n, skew in cases:
            g = rng(n)
            skewed = random_array(n, np.int32, seed=n, kind="skewed")
            uniform = g.integers(0, histogram_cu.NBINS, n).astype(np.int32)
            data = np.where(g.random(n) < skew, skewed, uniform).astype(np.int32)
            want = histogram_cu.reference(data)
            # few blocks that loop, blocks that are not whole warps, one thread per value
            one_each = histogram_cu.launch(HISTOGRAM_LIKE, n, 256).grid
            launches = [(2, 64), (3, 100), (one_each, 256)] if n < 10_000 else [(2, 256)]
            for grid, block in launches:
                bins = np.zeros(histogram_cu.NBINS, np.uint32)
                run_learner_kernel(kern, (grid,), (block,), (data, bins, np.int32(n)),
                                   race_check=True, what=f"{'skewed' if skew else 'uniform'} "
                                                         f"n={n}, grid {grid}, block {block}")
                bad = np.flatnonzero(bins != want)
                if bad.size:
                    b = int(bad[0])
                    hint = _histogram_hint(data, bins, want, grid, block)
                    if want.max() > 65535 and bins.max() < want.max():
                        hint = "a bin's count overflows: keep 32-bit unsigned int counters"
                    raise AssertionError(
                        f"{'skewed' if skew else 'uniform'} data, n={n:,}, grid {grid}, block "
                        f"{block}: {bad.size} bin{'s' * (bad.size != 1)} wrong, bin {b} holds {int(bins[b])}, expected "
                        f"{int(want[b])}. Hint: {hint}.")
        # The race check names a plain += line by line; only where it has no hazard detector
        # (see gpucourse.emulator) is this rule of thumb, which a helper function fools, used.
        assert racecheck.detector(kern) is not None or \
            len(re.findall(r"\batomicAdd\s*\(", code)) >= 2, (
            "use atomicAdd both for the shared bins (several threads of a block hit the same "
            "bin at once) and when adding a block's bins to the global ones (blocks run at once); "
            "a plain += loses counts on a GPU even when it happens to work here.")


# --------------------------------------------------------------------------- 4.5 chunks

#: The chunk counts the lab measures, and the noise allowed: two measured times closer than
#: this (relative to the faster) are the same time on a shared machine.
CHUNK_COUNTS = (1, 4, 16, 64, 256, 1024)
NOISE = 0.05


def fewest_chunks_near_best(chunks, seconds, noise: float = NOISE) -> int:
    """The fewest chunks whose measured time is within ``noise`` of the fastest."""
    best = min(seconds)
    # a hair of slack: t <= 1.05 * best and t / best <= 1.05 round differently at the edge
    return min(c for c, t in zip(chunks, seconds) if t <= (1 + noise) * best * (1 + 1e-12))


#: (what the sweep shows, chunks, seconds): each decides differently from the chapter's
#: formula, which has no cost per chunk and so always says "more chunks".
CHUNK_CASES = (
    ("fixed costs win past 64 chunks", CHUNK_COUNTS, (10.0, 4.0, 2.5, 2.2, 3.0, 8.0)),
    ("64 chunks fastest by 2 %, 16 within the noise", CHUNK_COUNTS, (9.0, 3.6, 2.04, 2.0, 2.06, 5.5)),
    ("a noisy, non-monotone sweep", CHUNK_COUNTS, (6.0, 3.3, 4.1, 3.1, 3.2, 3.9)),
    ("one chunk fastest: the fixed costs outweigh any overlap", CHUNK_COUNTS,
     (1.0, 1.2, 1.5, 2.4, 6.0, 20.0)),
    ("still faster at the most chunks measured", CHUNK_COUNTS, (12.0, 6.0, 4.5, 3.9, 3.5, 3.0)),
    ("other counts, unevenly spaced", (1, 2, 3, 8, 24), (5.0, 2.9, 2.8, 2.75, 3.5)),
    ("times in seconds, as measured", CHUNK_COUNTS, (0.031, 0.012, 0.0071, 0.0068, 0.009, 0.021)),
)


def _chunks_hint(got, chunks, seconds, want) -> str:
    """Which known mistake ``got`` is, from what each mistake returns on this data."""
    best_i = int(np.argmin(seconds))
    if got == chunks[-1] and want != chunks[-1]:
        return ("That is the most chunks measured: the chapter's formula has no cost per chunk, "
                "so it always says more chunks; the measured times rise again. Decide from them.")
    if got == chunks[best_i]:
        near = [c for c, t in zip(chunks, seconds) if t <= (1 + NOISE) * seconds[best_i] * (1 + 1e-12)]
        return (f"That is the fastest measurement, but {', '.join(map(str, near))} chunks are all "
                "within 5 % of it, which is noise on a shared machine: take the fewest of them, "
                "since each chunk adds fixed costs.")
    if got in range(len(chunks)) and chunks[got] == want and got != want:
        return f"That is the position of {want} in the list: return the chunk count itself."
    if got not in chunks:
        return f"Return one of the measured chunk counts {list(chunks)}."
    t = seconds[chunks.index(got)]
    if t > (1 + NOISE) * seconds[best_i] * (1 + 1e-12):
        return (f"{got} chunk{'s' * (got != 1)} took {t:.3g}, more than 5 % above the fastest "
                f"({seconds[best_i]:.3g} at {chunks[best_i]} chunk{'s' * (chunks[best_i] != 1)}): "
                "compare each time with the fastest one.")
    return ("Fewer chunks are also within 5 % of the fastest: take the fewest.")


def check_chunks(guess, choose_chunks, measured: dict | None = None, number: str = "4.5",
                 title: str = "how many chunks, from measured times") -> None:
    """``guess``: the chunk count predicted fastest (only its type is checked: a prediction may
    be wrong). ``choose_chunks(chunks, seconds)``: the fewest chunks whose time is within 5 % of
    the fastest, on the checker's sweeps and on ``measured`` (an
    ``experiments.ch4.pipeline_sweep``)."""
    with Exercise(number, title):
        prediction(guess, "my_guess_chunks", whole=True, example=16)
        callable_answer(choose_chunks, "choose_chunks is", "def choose_chunks(chunks, seconds): ...")
        cases = list(CHUNK_CASES)
        if measured is not None:
            cases.append((f"measured now on {measured.get('device', 'this machine')}",
                          tuple(measured["chunks"]), tuple(measured["seconds"])))
        answers = [whole_answer(choose_chunks(list(chunks), list(seconds)),
                                "choose_chunks(chunks, seconds) returned", "a chunk count")
                   for _, chunks, seconds in cases]
        wants = [fewest_chunks_near_best(chunks, seconds) for _, chunks, seconds in cases]
        same_for_all("choose_chunks(chunks, seconds)", answers, wants, "times")
        for (what, chunks, seconds), got, want in zip(cases, answers, wants):
            if got != want:
                times = ", ".join(f"{c}: {t:.3g}" for c, t in zip(chunks, seconds))
                raise AssertionError(
                    f"{what} (chunks: seconds {times}): you chose {got}, these times say {want} "
                    "(the fewest chunks within 5 % of the fastest). "
                    + _chunks_hint(got, list(chunks), list(seconds), want))
