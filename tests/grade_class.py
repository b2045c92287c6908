"""A class of fake learners for the grader's tests, made from the course's own lab notebooks.

A learner's notebook is ``labs/<lab>.ipynb`` (what learners are handed) with each
``raise NotImplementedError("Exercise N.M")`` line replaced by an answer: the solution's own
code (``right``), a plausible mistake, or something hostile.
"""
from __future__ import annotations

import copy
import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
LAB0 = "00_start_here_lab.ipynb"
LAB1 = "01_architecture_and_bottlenecks_lab.ipynb"
STUB = re.compile(r'^(\s*)raise NotImplementedError\("Exercise (\d+\.\d+)"\)\s*$')


def _text(cell) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def right_answers(lab: str = LAB0) -> dict[str, list[str]]:
    """Exercise → the solution's code of each of its answer cells, in order."""
    nb = json.loads((ROOT / "solutions" / lab).read_text())
    out: dict[str, list[str]] = {}
    for cell in nb["cells"]:
        text = _text(cell)
        if "### BEGIN SOLUTION" not in text:
            continue
        lines = text.split("\n")
        b = next(i for i, x in enumerate(lines) if "### BEGIN SOLUTION" in x)
        e = next(i for i, x in enumerate(lines) if "### END SOLUTION" in x)
        number = re.findall(r"#\s*Exercise\s+(\d+\.\d+)", "\n".join(lines[:b]))[-1]
        indent = lines[b][: len(lines[b]) - len(lines[b].lstrip())]
        body = "\n".join(x[len(indent):] if x.startswith(indent) else x for x in lines[b + 1:e])
        out.setdefault(number, []).append(body)
    return out


def learner(answers: dict[str, str | list[str]], lab: str = LAB0, handout: dict | None = None) \
        -> dict:
    """The lab handed out (``labs/<lab>``, or ``handout``), with ``answers`` (exercise → code,
    or a list per answer cell) written in place of the stubs; the others left unanswered."""
    nb = copy.deepcopy(handout or json.loads((ROOT / "labs" / lab).read_text()))
    seen: dict[str, int] = {}
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        out = []
        for line in _text(cell).split("\n"):
            m = STUB.match(line)
            if not m or m.group(2) not in answers:
                out.append(line)
                continue
            indent, number = m.groups()
            given = answers[number]
            k = seen.get(number, 0)
            seen[number] = k + 1
            code = given[k] if isinstance(given, list) else given
            out += [indent + x if x else x for x in code.split("\n")]
        cell["source"] = _lines("\n".join(out))
    return nb


def right(lab: str = LAB0) -> dict:
    return learner(right_answers(lab), lab)


def edit_cell(nb: dict, containing: str, new_source: str) -> dict:
    """``nb`` with the first code cell whose source contains ``containing`` replaced."""
    nb = copy.deepcopy(nb)
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code" and containing in _text(c))
    cell["source"] = _lines(new_source)
    return nb


# Plausible mistakes and hostile answers for lab 0.
RMS_NO_MEAN = "x = np.asarray(x, dtype=np.float64)\nreturn float(np.sqrt(np.dot(x, x)))"
MEASURE_NO_SYNC = """samples = []
for _ in range(repeats):
    t0 = time.perf_counter()
    launch()
    samples.append(time.perf_counter() - t0)
return float(statistics.median(samples))"""
ENDLESS = "while True:\n    pass"
UNBOUNDED = "hoard = []\nwhile True:\n    hoard.append(bytearray(64 << 20))"
FAKE_PASS = 'print("Exercise 0.1 passed: vectorized root mean square.")'


def write(folder: pathlib.Path, name: str, nb: dict) -> pathlib.Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    return path


def lab0_class(folder: pathlib.Path) -> dict[str, dict[str, tuple[str, str]]]:
    """Write the fake class of lab 0 (and one learner's lab 1) into ``folder``; return the
    expected gradebook: learner → exercise → (status, the start of the message)."""
    ok = right_answers()
    measure = ok["0.2"][0]
    write(folder, "ada.ipynb", right())
    write(folder, "grace.ipynb", right())
    write(folder, "alan.ipynb", learner({"0.1": RMS_NO_MEAN, "0.2": measure}))
    write(folder, "barbara.ipynb", learner({"0.1": RMS_NO_MEAN, "0.2": measure}))
    write(folder, "edsger.ipynb", learner({"0.1": ok["0.1"][0], "0.2": MEASURE_NO_SYNC}))
    write(folder, "donald.ipynb", learner({}))
    tampered = edit_cell(learner({"0.1": RMS_NO_MEAN, "0.2": measure}),
                         'with Exercise("0.1"', FAKE_PASS)
    write(folder, "ken.ipynb", tampered)
    write(folder, "linus.ipynb", learner({"0.1": ENDLESS, "0.2": measure}))
    write(folder, "margaret.ipynb", learner({"0.1": UNBOUNDED, "0.2": measure}))
    (folder / "dennis.ipynb").write_bytes(b'{"cells": [\x00\xff garbage')
    # Lab 1's exercise 1.1 runs the learner's CUDA C on the emulator under the memory limit.
    write(folder, "niklaus.ipynb", right(LAB1))
    passed1 = ("passed", "Exercise 0.1 passed")
    passed2 = ("passed", "Exercise 0.2 passed")
    no_mean = ("failed", "rms at n=")
    return {
        "ada": {"0.1": passed1, "0.2": passed2},
        "grace": {"0.1": passed1, "0.2": passed2},
        "alan": {"0.1": no_mean, "0.2": passed2},
        "barbara": {"0.1": no_mean, "0.2": passed2},
        "edsger": {"0.1": passed1, "0.2": ("failed", "")},
        "donald": {"0.1": ("not answered", "not answered"),
                   "0.2": ("not answered", "not answered")},
        "ken": {"0.1": no_mean, "0.2": passed2},
        "linus": {"0.1": ("timed out", "did not finish within"), "0.2": passed2},
        "margaret": {"0.1": ("failed", "MemoryError"), "0.2": passed2},
        # Unreadable, so its lab is unknown: one row without an exercise.
        "dennis": {"": ("not graded", "not a notebook")},
        "niklaus": {e: ("passed", f"Exercise {e} passed") for e in ("1.1", "1.2", "1.3", "1.4",
                                                                     "1.5")},
    }
