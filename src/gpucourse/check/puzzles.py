"""Checkers of the kernel puzzles (lab 0b), and the pictures of their answers.

``check_puzzle(k, source)`` builds the learner's CUDA C for puzzle ``k``
(``kernels.puzzles``), launches it on the emulator at every size of the puzzle, in a child
process, in three thread orders and under the hazard detector (a crash, an index out of
bounds, a missing barrier or a lost update is named with its line), compares each result
with a float64 NumPy reference on fresh random data (an element never written shows as
NaN; a wrong result whose values give its mistake away, such as an exclusive scan or a matmul
in the wrong order, is named by ``likely_mistake``), then runs the largest size once more
under the profiler's tracer and counts every thread's global reads and writes against the
puzzle's budget. Each failure is one sentence and a hint. ``your_run(k, source)`` and
``intended(k)`` trace the learner's run and the reference's for ``gc.draw`` (which sits above
this layer).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import precision
from ..kernels import load, puzzles as P
from ..profiler.trace import trace
from .compare import compare_report, random_array
from .lab import Exercise, learner_kernel, run_learner_kernel

__all__ = ["check_puzzle", "your_run", "intended", "run_case", "exercise_number",
           "likely_mistake"]


def exercise_number(k: int) -> str:
    """The exercise number of puzzle ``k`` in the lab's check lines: lab 0b continues lab 0's
    numbering (0.1 and 0.2), so puzzle 1 is Exercise 0.3 and no two labs share a number."""
    return f"0.{k + 2}"


def _case_text(p, case) -> str:
    grid, block = P.launch(p, case)
    size = f"n={case}" if np.isscalar(case) else f"rows={case[0]}, cols={case[1]}"
    return f"at {size} (grid {grid}, block {block})"


def _inputs(p, case, seed: int = 0) -> dict:
    """The random inputs of puzzle ``p`` at size ``case``: the same for the same seed."""
    ins = P.shapes(p, case)[0]
    return {name: random_array(shape, seed=seed + i) for i, (name, shape) in enumerate(ins.items())}


def run_case(p, kernel, case, seed: int = 0, *, race_check: bool = True, traced: bool = False):
    """Launch ``kernel`` as puzzle ``p`` at size ``case``: (output, expected, atol, trace or None)."""
    inputs = _inputs(p, case, seed)
    _, out_shape, scalars = P.shapes(p, case)
    # NaN shows an element nobody wrote; the dot product adds to a zero.
    out = np.zeros(out_shape, np.float32) if p.number == 10 else np.full(out_shape, np.nan, np.float32)
    args = (*inputs.values(), out, *(np.int32(s) for s in scalars))
    grid, block = P.launch(p, case)
    tr = None
    if traced:
        tr = trace(kernel, grid, block, args)
    else:
        run_learner_kernel(kernel, grid, block, args, _case_text(p, case),
                           race_check=race_check)
    depth, mags = P.terms(p, inputs, case)
    atol = precision.gamma(depth + 1) * mags + 1e-6 * (depth == 1)
    return out, P.reference(p, inputs, case).reshape(out_shape), atol, tr


def check_puzzle(k: int, source) -> None:
    """Puzzle ``k`` must give the reference's result at every size, race-free, in bounds, within
    its budget of global reads and writes per thread; prints one line when it does."""
    p = P.puzzle(k)
    with Exercise(exercise_number(k), p.title):
        kernel = learner_kernel(source, f"puzzle{k}.cu", p.kernel, defines=P.DEFINES,
                                builds=("race", "profile"))
        for seed, case in enumerate(p.cases):
            where = _case_text(p, case)
            try:
                out, want, atol, _ = run_case(p, kernel, case, seed)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\nHint: {p.hint}") from None
            report = compare_report(out, want, 1e-5, atol, "out")
            if report:
                why = likely_mistake(p, out, _inputs(p, case, seed), case)
                raise AssertionError(f"wrong result {where}" + (f": {why} " if why else ". ")
                                     + f"{report}\nHint: {p.hint}")
        _check_budget(p, kernel, p.cases[-1])


# Which exercise a check cell's `check_puzzle(3, PUZZLE_3)` checks, for the lab's "not done
# yet" line when PUZZLE_3 is not defined: the number comes from k, not from a default.
check_puzzle.exercise_of_call = lambda k=None, *_: exercise_number(k) if type(k) is int else None


#: The float a warp shuffle returns on the emulator when it reads a lane that returned or is
#: not in its mask (CUDA leaves that value undefined); a sum keeps it, so it shows in out.
SHUFFLE_POISON = 0x7FFBADBD


def _matmul_mistakes(x: dict, n: int) -> list:
    a, b = x["A"], x["B"]
    full = n // P.TILE * P.TILE          # the k a loop over whole tiles only gets to
    return [
        (b @ a, "C equals B A, the product in the wrong order: the sum is As[ty][k] * Bs[k][tx], "
                "row ty of A's tile times column tx of B's."),
        (a @ b.T, "C equals A B^T: B's tile is read along a row (Bs[tx][k]) where the sum needs "
                  "its column, Bs[k][tx]."),
        (a.T @ b, "C equals A^T B: A's tile is read down a column (As[k][ty]) where the sum "
                  "needs its row, As[ty][k]."),
        ((a @ b).T, "C is the transpose of A B: the row comes from the y parts (blockIdx.y, "
                    "threadIdx.y) and the column from the x parts."),
        (a[:, :full] @ b[:full], f"C lacks the products of the last, partial tile (k from {full} "
                                 f"on): loop while k0 < n and load 0 past the matrix instead of "
                                 f"stopping at the last whole tile."),
    ]


def likely_mistake(p, out, inputs: dict, case) -> str | None:
    """One sentence naming the mistake behind a wrong ``out`` where its values give it away
    (a shuffle's poison, an exclusive scan, a matmul's swapped or missing terms), else None."""
    out = np.asarray(out, np.float32)
    poisoned = np.flatnonzero(out.view(np.uint32) == SHUFFLE_POISON)
    if poisoned.size:
        return (f"out[{int(poisoned[0])}] is NaN because a warp shuffle read a lane that had "
                f"returned (or was not in its mask), which gives no value: keep every lane in "
                f"the shuffles (those past the end with 0) and guard only the write.")
    x = {k: v.astype(np.float64) for k, v in inputs.items()}
    want = P.reference(p, inputs, case).reshape(out.shape)
    if p.number == 11:
        candidates = [(want - x["a"], "out[i] leaves out a[i], as an exclusive scan does: this "
                                      "puzzle asks for an inclusive one, a[s] + ... + a[i].")]
    elif p.number == 12:
        candidates = _matmul_mistakes(x, case)
    else:
        return None
    for value, sentence in candidates:
        scale = max(1.0, float(np.abs(value).max(initial=0.0)))
        if not np.allclose(value, want, rtol=1e-4, atol=1e-4 * scale) and \
                np.allclose(out, value, rtol=1e-4, atol=1e-4 * scale):
            return sentence
    return None


def _who(tr, t: int) -> str:
    per = tr.threads_per_block
    b, r = divmod(int(t), per)
    bx, by, _ = tr.block
    idx = f"threadIdx.x = {r}" if by == 1 else f"threadIdx = ({r % bx}, {r // bx})"
    return f"thread {idx} of block {b}"


def _check_budget(p, kernel, case) -> None:
    out, want, atol, tr = run_case(p, kernel, case, traced=True)
    where = _case_text(p, case)
    if tr.error:
        raise AssertionError(f"{where} the traced run stopped: {tr.oob_sentence() or tr.error}")
    reads, writes = tr.per_thread("global")
    allowed = p.reads(case)
    if reads.max() > allowed:
        t = int(np.argmax(reads))
        raise AssertionError(
            f"{where}, {_who(tr, t)} reads global memory {int(reads[t])} times where this puzzle "
            f"allows {allowed} per thread: {p.budget_hint}")
    if writes.max() > p.write_budget(case):
        t = int(np.argmax(writes))
        raise AssertionError(
            f"{where}, {_who(tr, t)} writes global memory {int(writes[t])} times where this "
            f"puzzle allows {p.write_budget(case)} per thread: keep partial results in a register or in "
            f"shared memory and write the result once.")
    shared = [a.name for a in tr.arrays if a.space == "shared"]
    if p.number == 9 and shared:
        raise AssertionError(f"{where} the kernel uses the __shared__ array {shared[0]}: this "
                             f"puzzle sums with warp shuffles only ({p.hint})")
    if p.number == 10:
        atomics = tr.records[tr.records["kind"] == 2]
        per_block = np.bincount(atomics["block"], minlength=tr.blocks)
        if per_block.min() != 1 or per_block.max() != 1:
            b = int(np.argmax(per_block != 1))
            raise AssertionError(
                f"{where} block {b} makes {int(per_block[b])} atomicAdd calls on *out where each "
                f"block should make exactly one: sum the block's products in shared memory "
                f"first, then let thread 0 add the block's sum.")
    if p.number in (4, 5, 6):
        ref = getattr(load("puzzles", defines=P.DEFINES, backend="cpu"), p.kernel)
        intended = run_case(p, ref, case, traced=True)[3]
        for name in p.inputs + ("out",):
            got, want = _sectors(tr, name), _sectors(intended, name)
            if got > want:
                raise AssertionError(
                    f"{where} the warps' requests to {name} touch {got} 32-byte sectors where the "
                    f"intended pattern touches {want}: {COALESCE_HINT[p.number]}")


COALESCE_HINT = {
    4: "let threadIdx.x run along a row (consecutive columns), so that a warp's lanes touch "
       "consecutive addresses.",
    5: "let threadIdx.x run along a row (consecutive columns), so that a warp's lanes touch "
       "consecutive addresses.",
    6: "on each pass neighbouring threads should take neighbouring elements (i starts at the "
       "global index and steps by gridDim.x * blockDim.x).",
}


def _sectors(tr, name: str) -> int:
    """32-byte sectors the warps' requests to array ``name`` touched, summed over requests."""
    try:
        r = tr.records[tr.records["array"] == tr.array(name)]
    except KeyError:
        return 0
    _, first = np.unique(r["request"], return_index=True)
    return int(r["sectors"][first].sum())


def your_run(k: int, source, case=None):
    """The trace of the learner's kernel for puzzle ``k`` at the lab's example size: draw it
    with ``gc.draw(your_run(k, source))``."""
    p = P.puzzle(k)
    kernel = learner_kernel(source, f"puzzle{k}.cu", p.kernel, defines=P.DEFINES,
                            builds=("profile",))
    tr = run_case(p, kernel, p.example if case is None else case, traced=True)[3]
    return replace(tr, label=f"Puzzle {k} ({p.title}), your kernel")


def intended(k: int):
    """The trace of the reference answer of puzzle ``k``: the intended access pattern."""
    p = P.puzzle(k)
    kernel = getattr(load("puzzles", defines=P.DEFINES, backend="cpu"), p.kernel)
    tr = run_case(p, kernel, p.example, traced=True)[3]
    return replace(tr, label=f"Puzzle {k} ({p.title}), the intended pattern")
