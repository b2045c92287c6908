"""A class of fake learners graded end to end by ``python -m gpucourse grade``: right, wrong,
unanswered, a tampered check cell, an endless loop, an unbounded allocation, a corrupt file
and one learner's lab 1 (CUDA C on the emulator under the memory limit), two at a time."""
import csv
import json
import os
import subprocess
import sys
import time

import pytest

import grade_class as G

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")]
BUDGET_SECONDS = 120  # the whole class on a 2-core machine


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("class")
    expected = G.lab0_class(tmp / "submissions")
    scratch = tmp / "tmp"
    scratch.mkdir()
    env = dict(os.environ, TMPDIR=str(scratch))
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "gpucourse", "grade", str(tmp / "submissions"), "--out",
         str(tmp / "out"), "--jobs", "2", "--cell-timeout", "30", "--memory", "1G"],
        capture_output=True, text=True, env=env, timeout=4 * BUDGET_SECONDS)
    seconds = time.monotonic() - t0
    print(proc.stdout, proc.stderr, f"graded in {seconds:.1f} s", sep="\n")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp, expected, seconds, proc


def test_the_gradebook_is_the_expected_one(graded):
    tmp, expected, _, _ = graded
    with open(tmp / "out" / "gradebook.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    got = {(r["learner"], r["exercise"]): r for r in rows}
    want = {(who, e): v for who, marks in expected.items() for e, v in marks.items()}
    assert set(got) == set(want)
    for key, (status, start) in want.items():
        row = got[key]
        assert (row["status"], row["passed"]) == (status, str(status == "passed").lower()), row
        assert row["message"].startswith(start), row
        assert float(row["seconds"]) >= 0.0


def test_the_tampered_check_cell_does_not_change_the_grade(graded):
    tmp, _, _, _ = graded
    book = json.loads((tmp / "out" / "gradebook.json").read_text())
    ken = next(s for s in book["submissions"] if s["learner"] == "ken")
    alan = next(s for s in book["submissions"] if s["learner"] == "alan")
    assert [(r["status"], r["message"]) for r in ken["exercises"]] == \
        [(r["status"], r["message"]) for r in alan["exercises"]]
    assert ken["exercises"][0]["notes"] == ("the check cell of Exercise 0.1 was edited; the "
                                            "course's check ran instead")


def test_the_summary_counts_and_misconceptions(graded):
    tmp, _, _, _ = graded
    book = json.loads((tmp / "out" / "gradebook.json").read_text())
    lab0 = book["summary"][G.LAB0]["exercises"]
    assert (lab0["0.1"]["passed"], lab0["0.1"]["graded"]) == (3, 9)
    assert (lab0["0.2"]["passed"], lab0["0.2"]["graded"]) == (7, 9)
    [(message, count), _] = lab0["0.1"]["failures"]
    assert message.startswith("rms at n=") and count == 3  # alan, barbara and ken
    assert lab0["0.1"]["statuses"] == {"passed": 3, "failed": 4, "not answered": 1,
                                       "timed out": 1}
    lab1 = book["summary"][G.LAB1]["exercises"]
    assert all((s["passed"], s["graded"]) == (1, 1) for s in lab1.values())
    page = (tmp / "out" / "index.html").read_text()
    for text in ("3 of 9", "7 of 9", "× 3", "Could not be graded", "dennis", "not a notebook",
                 "Lab 1 · GPU architecture"):
        assert text in page


def test_each_submission_left_a_graded_notebook_and_nothing_else(graded):
    tmp, _, _, proc = graded
    book = json.loads((tmp / "out" / "gradebook.json").read_text())
    for s in book["submissions"]:
        assert bool(s["notebook"]) == s["graded"]
        if s["graded"]:
            nb = json.loads((tmp / "out" / s["notebook"]).read_text())
            assert nb["cells"] and s["supervisor"]["event"] == "terminated"
    assert list((tmp / "tmp").iterdir()) == []  # every submission's folder was removed
    leftovers = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if str(tmp / "tmp").encode() in f.read():
                    leftovers.append(pid)
        except OSError:
            pass
    assert leftovers == []


def test_the_class_is_graded_within_budget(graded):
    _, _, seconds, _ = graded
    assert seconds < BUDGET_SECONDS, f"grading the class took {seconds:.0f} s"
