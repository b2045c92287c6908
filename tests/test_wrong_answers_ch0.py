"""Lab 0's wrong-answer tables: for each exercise, plausible wrong answers of a learner who
half-understood the chapter, each rejected with a message that names the real mistake. The
check of 0.1 is the solution notebook's own check cell, run on each answer. The kernel
puzzles of lab 0b (0.3 to 0.14) keep their tables in puzzle_answers.py, run by
test_puzzles_checkers.py; they are listed here, not run twice."""
import functools
import json
import pathlib
import statistics
import time

import numpy as np

from gpucourse.check import puzzles as cp
from gpucourse.check.timing import check_timer
from gpucourse.kernels import puzzles as P
from puzzle_answers import TABLES, reference
from wrong_answer_table import table_tests

LAB = pathlib.Path(__file__).resolve().parent.parent / "solutions" / "00_start_here_lab.ipynb"


def _cells():
    cells = json.loads(LAB.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def check_rms(rms_fast):
    """Runs the lab's setup cell, rms_loop and the check cell of 0.1 on ``rms_fast``."""
    setup, exercise, check = next((c, e, k) for c, e, k in zip(_cells(), _cells()[1:], _cells()[2:])
                                  if "def rms_loop" in e and 'Exercise("0.1"' in k)
    namespace = {}
    exec(setup, namespace)  # noqa: S102 (the lab's own cells)
    exec(exercise, namespace)  # noqa: S102
    namespace["rms_fast"] = rms_fast
    exec(check, namespace)  # noqa: S102


def rms_fast(x):
    x = np.asarray(x, dtype=np.float64)
    return float(np.sqrt(np.dot(x, x) / x.size))


def measure(launch, synchronize, warmup=10, repeats=9, sync=True, unit=1.0, stat=statistics.median):
    for _ in range(warmup):
        launch()
    if sync:
        synchronize()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        launch()
        if sync:
            synchronize()
        samples.append(time.perf_counter() - t0)
    if not sync:
        synchronize()
    return stat(samples) * unit


def _timer(**how):
    return lambda launch, synchronize: measure(launch, synchronize, **how)


def _never_synchronizes(launch, synchronize):
    t0 = time.perf_counter()
    launch()
    return time.perf_counter() - t0


CHECKS = {"0.1": check_rms, "0.2": check_timer}
REFERENCES = {"0.1": rms_fast, "0.2": measure}

WRONG_ANSWERS = {
    "0.1": [
        ("the mean, not the mean square", lambda x: float(np.sqrt(abs(np.mean(x)))), "rms at n="),
        ("no square root", lambda x: float(np.mean(np.square(x))), "rms at n="),
        ("the standard deviation", lambda x: float(np.std(x)), "rms at n="),
        ("divided by n - 1", lambda x: float(np.sqrt(np.dot(x, x) / max(len(x) - 1, 1))), "rms at n="),
        ("float16 arithmetic", lambda x: float(np.sqrt(np.mean(np.square(np.asarray(x, np.float16))))),
         "rms at n="),
    ],
    "0.2": [
        ("no synchronize at all", _never_synchronizes, "never called synchronize"),
        ("synchronize only after the loop", _timer(sync=False), "synchronize before you stop the clock"),
        ("no warm-up", _timer(warmup=0), "warm up first"),
        ("milliseconds", _timer(unit=1e3), "not milliseconds"),
        ("the mean of a cold start", _timer(warmup=0, stat=statistics.mean, repeats=20), "warm up first"),
        ("one timed call", _timer(repeats=1, warmup=0), "warm up first"),
    ],
}


# 0.1 and 0.2 run here; the puzzles' rows run in test_puzzles_checkers.py and only join the table.
RUN_HERE = sorted(REFERENCES)
PUZZLES = {cp.exercise_number(p.number): p for p in P.PUZZLES}
CHECKS.update({e: functools.partial(cp.check_puzzle, p.number) for e, p in PUZZLES.items()})
REFERENCES.update({e: reference(p.kernel) for e, p in PUZZLES.items()})
WRONG_ANSWERS.update(TABLES)


# 0.1 and 0.2 run here; the puzzles' rows run in test_puzzles_checkers.py, once.
test_the_reference_passes, test_a_wrong_answer_is_rejected_and_named = \
    table_tests(CHECKS, REFERENCES, WRONG_ANSWERS, exercises=RUN_HERE)
