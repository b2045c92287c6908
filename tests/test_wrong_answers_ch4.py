"""Lab 4's wrong-answer tables: for each exercise, plausible wrong answers of a learner who
half-understood the chapter, each rejected with a message that names the real mistake."""
import math


import gpucourse as gc
from gpucourse.check import ch4 as c4
from test_ch4_checkers import NO_DIVERGENCE, PRIVATE, WARP_REDUCE  # the one copy of each
from wrong_answer_table import table_tests


def choose_launch(n, regs_per_thread, smem_per_block, gpu, blocks=range(32, 1025, 32)):
    cc = gc.specs.lookup(gpu).cc
    best_block, best_occ = None, -1.0
    for block in blocks:
        try:
            occ = gc.models.occupancy(cc, block, regs_per_thread, smem_per_block).occupancy
        except gc.errors.SpecError:
            continue
        if occ > best_occ:
            best_block, best_occ = block, occ
    return math.ceil(n / best_block), best_block


def _launch(blocks=range(32, 1025, 32), grid=lambda n, b: math.ceil(n / b), **fixed):
    def choose(n, r, s, g):
        args = dict(dict(r=r, s=s), **fixed)
        block = choose_launch(n, args["r"], args["s"], g, blocks)[1]
        return grid(n, block), block
    return choose


def choose_chunks(chunks, seconds, noise=0.05, strictly=False, scale=None):
    fastest = min(seconds)
    near = (lambda t: t < (1 + noise) * fastest) if strictly else \
        (lambda t: t - fastest <= noise * (scale or fastest))
    return min(c for c, t in zip(chunks, seconds) if near(t))


def _swap(text, old, new):
    assert old in text, old  # the wrong answer must really differ from the solution
    return text.replace(old, new)


#: exercise -> its checker, called with one answer
CHECKS = {"4.1": c4.check_launch_config, "4.2": c4.check_no_divergence,
          "4.3": c4.check_warp_reduce, "4.4": c4.check_private_histogram,
          "4.5": lambda answer: c4.check_chunks(*answer)}
#: exercise -> the reference answer
REFERENCES = {"4.1": choose_launch, "4.2": NO_DIVERGENCE, "4.3": WARP_REDUCE, "4.4": PRIVATE,
              "4.5": (16, choose_chunks)}

# exercise -> [(what the learner did, the answer, words the message must have)]
WRONG_ANSWERS = {
    "4.1": [
        ("blocks up to 992: range(32, 1024, 32) misses 1024", _launch(range(32, 1024, 32)),
         "only 1024, the largest block"),
        ("n // block + 1 blocks", _launch(grid=lambda n, b: n // b + 1), "nothing to do"),
        ("n // block blocks", _launch(grid=lambda n, b: n // b), "do not cover"),
        ("shared memory left out", _launch(s=0), "occupancy"),
        ("registers left out", _launch(r=32), "occupancy"),
        ("always 256 threads", lambda n, r, s, g: (math.ceil(n / 256), 256), "occupancy"),
        ("a block of 100 threads", lambda n, r, s, g: (math.ceil(n / 100), 100), "multiple of 32"),
        ("always 1024 threads", lambda n, r, s, g: (math.ceil(n / 1024), 1024), "cannot launch"),
    ],
    "4.2": [
        ("the divergent kernel as given", c4.DIVERGENT_KERNEL, "still run both branches"),
        ("the parity left out of the index: two warps write each even element",
         _swap(NO_DIVERGENCE, "2 * (g % 32) + parity;", "2 * (g % 32);"),
         "two threads write the same element"),
        ("both branches run, one kept",
         _swap(NO_DIVERGENCE, "if (parity == 0) y[i] = branch_a(x[i], k);\n    else             "
               "y[i] = branch_b(x[i], k);", "float a = branch_a(x[i], k), b = branch_b(x[i], k);"
               "\n    y[i] = parity ? b : a;"), "doubles the work"),
        ("the bounds test after the load",
         _swap(NO_DIVERGENCE, "if (i >= n) return;\n    if (parity == 0)",
               "float xi = x[i];\n    if (i >= n) return;\n    if (parity == 0)"),
         "x"),
        ("the branches swapped",
         _swap(NO_DIVERGENCE, "if (parity == 0)", "if (parity == 1)"), "elements are wrong"),
        ("the parity of the lane, not of the warp",
         _swap(NO_DIVERGENCE, "int parity = (g / 32) % 2;", "int parity = g % 2;"),
         "two threads write the same element"),
    ],
    "4.3": [
        ("shuffle offsets from 8", _swap(WARP_REDUCE, "for (int offset = 16; offset > 0; offset /= 2)"
                                         "\n        v += __shfl_down_sync(0xffffffffu, v, offset);"
                                         "\n    if (lane == 0)",
                                         "for (int offset = 8; offset > 0; offset /= 2)"
                                         "\n        v += __shfl_down_sync(0xffffffffu, v, offset);"
                                         "\n    if (lane == 0)"), "start the shuffle offsets at 16"),
        ("the third warp of a 96-thread block dropped",
         _swap(WARP_REDUCE, "        for (int offset = 16; offset > 0; offset /= 2)\n"
                            "            v += __shfl_down_sync(0xffffffffu, v, offset);\n"
                            "        if (lane == 0) atomicAdd",
               "        for (int offset = blockDim.x / 64; offset > 0; offset /= 2)\n"
               "            v += __shfl_down_sync(0xffffffffu, v, offset);\n"
               "        if (lane == 0) atomicAdd"), "Warp 2's total is lost"),
        ("an early return past n",
         _swap(WARP_REDUCE, "float v = i < n ? x[i] : 0.0f;", "if (i >= n) return;\n    float v = x[i];"),
         "instead of returning early"),
        ("no barrier before warp 0 reads the totals",
         _swap(WARP_REDUCE, "    __syncthreads();\n", ""), "race"),
        ("integer values in the shuffles",
         _swap(WARP_REDUCE, "float v = i < n ? x[i] : 0.0f;", "int v = i < n ? (int)x[i] : 0;"),
         "sum the values as float"),
        ("no shuffle at all", _swap(WARP_REDUCE, "__shfl_down_sync(0xffffffffu, v, offset)", "0.0f"),
         "__shfl_down_sync"),
        ("every lane of warp 0 reads a total",
         _swap(WARP_REDUCE, "v = lane < blockDim.x / 32 ? warp_totals[lane] : 0.0f;", "v = warp_totals[lane];"),
         "before any thread of its block wrote it"),
        ("every warp adds its own total too",
         _swap(WARP_REDUCE, "if (lane == 0) warp_totals[warp] = v;",
               "if (lane == 0) { warp_totals[warp] = v; atomicAdd(out, v); }"),
         "counted more than once"),
    ],
    "4.4": [
        ("a loop strided by blockDim.x",
         _swap(PRIVATE, "i += gridDim.x * blockDim.x", "i += blockDim.x"), "the whole grid"),
        ("one element per thread, no loop",
         _swap(PRIVATE, "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)",
               "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i = n)"), "grid stride"),
        ("each thread flushes one bin",
         _swap(PRIVATE, "for (int b = threadIdx.x; b < NBINS; b += blockDim.x)\n        if (local[b])",
               "for (int b = threadIdx.x; b < blockDim.x && b < NBINS; b += NBINS)\n        if (local[b])"),
         "must flush all 256 bins"),
        ("the shared bins never cleared",
         _swap(PRIVATE, "for (int b = threadIdx.x; b < NBINS; b += blockDim.x) local[b] = 0;", ""),
         "before any thread of its block wrote it"),
        ("a plain ++ on the shared bins",
         _swap(PRIVATE, "atomicAdd(&local[data[i]], 1u);", "local[data[i]]++;"), "race"),
        ("no barrier before the flush",
         _swap(PRIVATE, "atomicAdd(&local[data[i]], 1u);\n    __syncthreads();",
               "atomicAdd(&local[data[i]], 1u);"), "race"),
        ("counted straight into global memory",
         _swap(_swap(PRIVATE, "__shared__ unsigned int local[NBINS];", ""), "&local[data[i]]", "&bins[data[i]]")
         .replace("for (int b = threadIdx.x; b < NBINS; b += blockDim.x) local[b] = 0;", "")
         .replace("if (local[b]) atomicAdd(&bins[b], local[b]);", ";"), "__shared__"),
    ],
    "4.5": [
        ("the most chunks measured: the formula says more is always better",
         (16, lambda c, s: c[-1]), "the chapter's formula has no cost per chunk"),
        ("the fastest measurement, ignoring the noise", (16, lambda c, s: c[s.index(min(s))]),
         "take the fewest of them"),
        ("within 5 % of the one-chunk time", (16, lambda c, s: choose_chunks(c, s, scale=s[0])),
         "compare each time with the fastest one"),
        ("within 0.05 seconds, not 5 %", (16, lambda c, s: choose_chunks(c, s, noise=0.05, scale=1.0)),
         "more than 5 % above the fastest"),
        ("the first time that rises again ends the search",
         (16, lambda c, s: next((c[i] for i in range(len(s) - 1) if s[i + 1] > s[i]), c[-1])),
         "these times say"),
        ("the position in the list", (16, lambda c, s: c.index(choose_chunks(c, s))),
         "return the chunk count itself"),
        ("a rule of thumb", (16, lambda c, s: 16), "a fixed rule of thumb"),
        ("the time, not the chunk count", (16, lambda c, s: min(s)), "a whole number"),
        ("the guess as text", ("16", choose_chunks), "my_guess_chunks is the text"),
    ],
}


test_the_reference_passes, test_a_wrong_answer_is_rejected_and_named = \
    table_tests(CHECKS, REFERENCES, WRONG_ANSWERS)
