"""Chapter 4's lab checkers accept the solutions and reject plausible wrong answers."""
import math
import time

import numpy as np
import pytest

import gpucourse as gc
from gpucourse.check import ch4 as c4
from gpucourse.check import expect_failure

# --------------------------------------------------------------------------- 4.1


def choose_launch(n, regs_per_thread, smem_per_block, gpu):
    cc = gc.specs.lookup(gpu).cc
    best_block, best_occ = None, -1.0
    for block in range(32, 1025, 32):
        try:
            occ = gc.models.occupancy(cc, block, regs_per_thread, smem_per_block).occupancy
        except gc.errors.SpecError:
            continue
        if occ > best_occ:
            best_block, best_occ = block, occ
    return math.ceil(n / best_block), best_block


def test_launch_config_accepts_the_solution(capsys):
    c4.check_launch_config(choose_launch)
    assert capsys.readouterr().out.strip() == (
        "Exercise 4.1 passed: a launch configuration from registers and shared memory.")


@pytest.mark.parametrize("wrong, match", [
    (lambda n, r, s, g: (math.ceil(n / 256), 256), "occupancy"),
    (lambda n, r, s, g: (math.ceil(n / 100), 100), "multiple of 32"),
    (lambda n, r, s, g: (n // choose_launch(n, r, s, g)[1], choose_launch(n, r, s, g)[1]),
     "do not cover"),
    (lambda n, r, s, g: choose_launch(n, r, 0, g), "shared"),       # ignores shared memory
    (lambda n, r, s, g: choose_launch(n, 32, s, g), "occupancy"),  # ignores registers
    (lambda n, r, s, g: (math.ceil(n / 1024), 1024), "cannot launch"),
    (lambda n, r, s, g: (math.ceil(n / 128) + 1, 128), "nothing to do"),
    # n // block + 1: one idle block whenever n is a multiple of the block
    (lambda n, r, s, g: (n // choose_launch(n, r, s, g)[1] + 1, choose_launch(n, r, s, g)[1]),
     "nothing to do"),
])
def test_launch_config_rejects(wrong, match):
    with expect_failure(match):
        c4.check_launch_config(wrong)


# --------------------------------------------------------------------------- 4.2

NO_DIVERGENCE = r"""
extern "C" __global__ void no_divergence(const float* x, float* y, int n, int k) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    int parity = (g / 32) % 2;
    int i = 64 * (g / 64) + 2 * (g % 32) + parity;
    if (i >= n) return;
    if (parity == 0) y[i] = branch_a(x[i], k);
    else             y[i] = branch_b(x[i], k);
}
"""


def test_no_divergence_accepts_the_solution(capsys):
    c4.check_no_divergence(NO_DIVERGENCE)
    assert "Exercise 4.2 passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, match", [
    (c4.DIVERGENT_KERNEL, "still run both branches"),
    # a wrong index: odd warps step past their elements
    (NO_DIVERGENCE.replace("int i = 64 * (g / 64) + 2 * (g % 32) + parity;",
                           "int i = 2 * g + parity;"), "elements are wrong"),
    # both branches for every lane, then a select: no divergence, twice the work
    (r"""
extern "C" __global__ void no_divergence(const float* x, float* y, int n, int k) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = branch_a(x[i], k), b = branch_b(x[i], k);
    y[i] = (i % 2 == 0) ? a : b;
}""", "called"),
    # the element loaded before the bounds test: right values, a read past the end of x
    (NO_DIVERGENCE.replace("    if (i >= n) return;\n    if (parity == 0) y[i] = branch_a(x[i], k);\n"
                           "    else             y[i] = branch_b(x[i], k);",
                           "    float v = x[i];\n    if (i >= n) return;\n"
                           "    y[i] = parity == 0 ? branch_a(v, k) : branch_b(v, k);"),
     "out of bounds"),
    # the loops copied into the kernel instead of calling the branches
    (r"""
extern "C" __global__ void no_divergence(const float* x, float* y, int n, int k) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}""", "call branch_a"),
])
def test_no_divergence_rejects(wrong, match):
    with expect_failure(match):
        c4.check_no_divergence(wrong)


# --------------------------------------------------------------------------- 4.3

WARP_REDUCE = r"""
extern "C" __global__ void warp_reduce(const float* x, float* out, int n) {
    __shared__ float warp_totals[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float v = i < n ? x[i] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    if (lane == 0) warp_totals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < blockDim.x / 32 ? warp_totals[lane] : 0.0f;
        for (int offset = 16; offset > 0; offset /= 2)
            v += __shfl_down_sync(0xffffffffu, v, offset);
        if (lane == 0) atomicAdd(out, v);
    }
}
"""


def test_warp_reduce_accepts_the_solution(capsys):
    c4.check_warp_reduce(WARP_REDUCE)
    assert "Exercise 4.3 passed" in capsys.readouterr().out


@pytest.mark.parametrize("other_shuffle", [
    # a butterfly with __shfl_xor_sync: every lane ends with the warp's total
    WARP_REDUCE.replace("__shfl_down_sync(0xffffffffu, v, offset)",
                        "__shfl_xor_sync(0xffffffffu, v, offset)"),
    # the same butterfly through __shfl_sync and an explicit source lane
    WARP_REDUCE.replace("__shfl_down_sync(0xffffffffu, v, offset)",
                        "__shfl_sync(0xffffffffu, v, lane ^ offset)"),
    # __shfl_up_sync gathers the total in lane 31 instead of lane 0
    WARP_REDUCE.replace("__shfl_down_sync(0xffffffffu, v, offset)",
                        "__shfl_up_sync(0xffffffffu, v, offset)")
               .replace("if (lane == 0) warp_totals[warp] = v;",
                        "if (lane == 31) warp_totals[warp] = v;")
               .replace("if (lane == 0) atomicAdd(out, v);", "if (lane == 31) atomicAdd(out, v);"),
])
def test_warp_reduce_accepts_other_shuffle_forms(other_shuffle, capsys):
    c4.check_warp_reduce(other_shuffle)
    assert "Exercise 4.3 passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, match", [
    # __shfl_up_sync with the total still taken from lane 0, which only ever sums itself
    (WARP_REDUCE.replace("__shfl_down_sync(0xffffffffu, v, offset)",
                         "__shfl_up_sync(0xffffffffu, v, offset)"), "n="),
    (WARP_REDUCE.replace("    __syncthreads();\n", ""), "race"),          # missing barrier
    (WARP_REDUCE.replace("float v = i < n ? x[i] : 0.0f;",
                         "if (i >= n) return;\n    float v = x[i];"), "n="),  # early return
    (WARP_REDUCE.replace("int offset = 16", "int offset = 8"), "n="),       # one step short
    (WARP_REDUCE.replace("lane < blockDim.x / 32 ? warp_totals[lane] : 0.0f",
                         "warp_totals[lane]"),                               # reads unset totals
     "reads the __shared__ array `warp_totals`"),
    (WARP_REDUCE.replace("if (lane == 0) atomicAdd(out, v);",
                         "if (lane == 0 && blockIdx.x == 0) atomicAdd(out, v);"), "n="),
    (WARP_REDUCE.replace("if (lane == 0) atomicAdd(out, v);",
                         "if (lane == 0) *out += v;"), "hazard in global memory"),  # blocks race
    (r"""
extern "C" __global__ void warp_reduce(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, x[i]);
}""", "__shfl_down_sync"),                                                   # no shuffle at all
    # the last element lost: one term of 65 537, far inside the mixed data's rounding bound,
    # and exactly one off on the +1/-1 data
    (WARP_REDUCE.replace("float v = i < n ? x[i] : 0.0f;", "float v = i < n - 1 ? x[i] : 0.0f;"),
     "n=1, block 32"),
    # summed as int: right on +1/-1 data, wrong on any other
    (WARP_REDUCE.replace("float v = i < n ? x[i] : 0.0f;", "int v = i < n ? (int)x[i] : 0;"),
     "sum the values as float"),
])
def test_warp_reduce_rejects(wrong, match):
    with expect_failure(match):
        c4.check_warp_reduce(wrong)


# --------------------------------------------------------------------------- 4.4

PRIVATE = r"""
extern "C" __global__ void histogram_private(const int* data, unsigned int* bins, int n) {
    __shared__ unsigned int local[NBINS];
    for (int b = threadIdx.x; b < NBINS; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[data[i]], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < NBINS; b += blockDim.x)
        if (local[b]) atomicAdd(&bins[b], local[b]);
}
"""


def test_private_histogram_accepts_the_solution(capsys):
    c4.check_private_histogram(PRIVATE)
    assert "Exercise 4.4 passed" in capsys.readouterr().out


FIRST_SYNC = "local[b] = 0;\n    __syncthreads();"
SECOND_SYNC = "atomicAdd(&local[data[i]], 1u);\n    __syncthreads();"


@pytest.mark.parametrize("wrong, match", [
    (PRIVATE.replace("for (int b = threadIdx.x; b < NBINS; b += blockDim.x) local[b] = 0;", ""),
     "updates the __shared__ array `local`"),                             # never cleared
    (PRIVATE.replace(FIRST_SYNC, "local[b] = 0;"), "race"),               # no barrier after clear
    (PRIVATE.replace(SECOND_SYNC, "atomicAdd(&local[data[i]], 1u);"), "race"),  # nor before flush
    (PRIVATE.replace("atomicAdd(&local[data[i]], 1u);", "local[data[i]] += 1;"), "atomicAdd"),
    (PRIVATE.replace("unsigned int local[NBINS]", "unsigned short local[NBINS]")
            .replace("atomicAdd(&local[data[i]], 1u);", "atomicAdd((unsigned int*)&local[data[i] & ~1], "
                     "(data[i] & 1) ? 65536u : 1u);"), "overflow"),       # 16-bit counters
    (PRIVATE.replace("for (int b = threadIdx.x; b < NBINS; b += blockDim.x)\n        if",
                     "for (int b = threadIdx.x; b < NBINS && b < 64; b += blockDim.x)\n        if"),
     "bins wrong"),                                                       # flushes part of the bins
    (PRIVATE.replace("for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)",
                     "int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n)"),
     "grid stride"),                                                      # one element per thread
    ("extern \"C\" __global__ void histogram_private(const int* data, unsigned int* bins, int n) {\n"
     "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
     "    if (i < n) atomicAdd(&bins[data[i]], 1u);\n}\n", "__shared__"),      # not privatized
])
def test_private_histogram_rejects(wrong, match):
    with expect_failure(match):
        c4.check_private_histogram(wrong)


PLUS_PLUS = PRIVATE.replace("atomicAdd(&local[data[i]], 1u);", "local[data[i]]++;")


def test_private_histogram_names_a_lost_update_by_line():
    """Exact on the emulator (no thread runs between the load and the store), wrong on a GPU."""
    line = next(i + 1 for i, t in enumerate(PLUS_PLUS.splitlines()) if "local[data[i]]++;" in t)
    with pytest.raises(AssertionError) as info:
        c4.check_private_histogram(PLUS_PLUS)
    message = str(info.value)
    assert "has a race (read-after-write hazard in shared memory)" in message, message
    assert f"histogram_private.cu line {line} (`local[data[i]]++;`)" in message, message


def test_private_histogram_accepts_atomics_inside_a_helper_function(capsys):
    helper = ("__device__ void count(unsigned int* where, unsigned int v) { atomicAdd(where, v); }\n"
              + PRIVATE.replace("atomicAdd(&local[data[i]], 1u);", "count(&local[data[i]], 1u);")
                       .replace("atomicAdd(&bins[b], local[b]);", "count(&bins[b], local[b]);"))
    c4.check_private_histogram(helper)
    assert "Exercise 4.4 passed" in capsys.readouterr().out


def test_private_histogram_without_the_race_detector_falls_back_to_a_rule(monkeypatch):
    from gpucourse.emulator import racecheck

    monkeypatch.setattr(racecheck, "toolchain_problem", lambda: "it needs Linux")
    monkeypatch.setattr(racecheck, "_detectors", {})
    monkeypatch.setattr(racecheck, "_warned", True)  # the warning has its own test
    with expect_failure("use atomicAdd both for the shared bins"):
        c4.check_private_histogram(PLUS_PLUS)


# --------------------------------------------------------------------------- 4.5

def choose_chunks(chunks, seconds):
    fastest = min(seconds)
    return min(c for c, t in zip(chunks, seconds) if t <= 1.05 * fastest)


def test_chunks_accepts_the_solution_on_every_sweep_and_a_measured_one(capsys):
    measured = {"chunks": [1, 4, 16], "seconds": [0.03, 0.012, 0.0125], "device": "a test CPU"}
    c4.check_chunks(16, choose_chunks, measured)
    assert capsys.readouterr().out.strip() == (
        "Exercise 4.5 passed: how many chunks, from measured times.")


def test_chunks_answer_comes_from_the_data_not_a_constant():
    """Every sweep's answer is computed from its times, and the sweeps disagree (a formula or a
    constant cannot pass), with both ends of the range among them."""
    wants = [c4.fewest_chunks_near_best(ch, s) for _, ch, s in c4.CHUNK_CASES]
    assert len(set(wants)) >= 4
    assert 1 in wants and c4.CHUNK_COUNTS[-1] in wants
    # the chapter's formula (no cost per chunk) always says: the most chunks
    assert sum(w == ch[-1] for w, (_, ch, _) in zip(wants, c4.CHUNK_CASES)) == 1


def test_chunks_decides_on_the_measured_sweep_too():
    """A rule that happens to fit the fixed sweeps but not the learner's own measurement fails,
    naming the measurement."""
    measured = {"chunks": [1, 4, 16], "seconds": [0.01, 0.02, 0.03], "device": "a test CPU"}

    def fits_the_fixed_sweeps_only(chunks, seconds):
        return 4 if len(chunks) == 3 else choose_chunks(chunks, seconds)

    with expect_failure("measured now on a test CPU"):
        c4.check_chunks(16, fits_the_fixed_sweeps_only, measured)


@pytest.mark.parametrize("guess", [1, 64, 10**6, np.int64(16)])
def test_chunks_takes_any_whole_guess(guess, capsys):
    c4.check_chunks(guess, choose_chunks)
    assert "Exercise 4.5 passed" in capsys.readouterr().out


@pytest.mark.parametrize("guess", [None, "16", 16.5, True, [16]])
def test_chunks_wants_a_whole_number_as_the_guess(guess):
    with expect_failure("my_guess_chunks is"):
        c4.check_chunks(guess, choose_chunks)


def test_chunks_unanswered_is_not_done_yet():
    def unanswered(chunks, seconds):
        raise NotImplementedError("Exercise 4.5")

    with expect_failure("Exercise 4.5 is not done yet"):
        c4.check_chunks(16, unanswered)


def test_chunks_check_is_fast():
    start = time.perf_counter()
    c4.check_chunks(16, choose_chunks, {"chunks": [1, 2], "seconds": [1.0, 0.5]})
    assert time.perf_counter() - start < 2.0


def test_warp_reduce_race_checks_every_block_on_the_small_sizes_only(monkeypatch, capsys):
    """The check's cost: the hazard detector on the 65 537-element launch took most of its time;
    every block size is still race-checked on every size up to 4099."""
    seen = []
    real = c4.run_learner_kernel

    def record(kern, grid, block, args, **kw):
        seen.append((int(args[2]), block[0], kw.get("race_check", False), kw.get("isolate", True)))
        real(kern, grid, block, args, **kw)

    monkeypatch.setattr(c4, "run_learner_kernel", record)
    c4.check_warp_reduce(WARP_REDUCE)
    assert "Exercise 4.3 passed" in capsys.readouterr().out
    raced = {(n, b) for n, b, race, _ in seen if race}
    assert raced == {(n, b) for n in c4.REDUCE_SIZES if n <= 4099 for b in c4.REDUCE_BLOCKS}
    large = [(b, iso) for n, b, race, iso in seen if n > 4099 and not race]
    assert (1024, True) in large and (256, True) in large  # still run, in a child process


def test_launch_config_takes_the_launch_style_tuples_too(capsys):
    c4.check_launch_config(lambda n, r, s, g: tuple((v,) for v in choose_launch(n, r, s, g)))
    assert "Exercise 4.1 passed" in capsys.readouterr().out


def test_a_function_without_return_is_named_as_such():
    with expect_failure("does your function end with `return"):
        c4.check_chunks(16, lambda *args: None)
