"""Learners' code in real kernels under the grader's limits: what a kernel can see, and a
fork bomb, a CPU hog, a kernel that ignores interrupts and a slow notebook each costing only
their own submission, with the reason recorded."""
import json
import os
import pathlib
import platform
import shutil
import sys
import tempfile

import pytest

import grade_class as G
from gpucourse.grade import Limits, grade
from gpucourse.grade.execute import run_notebook
from gpucourse.grade.sandbox import Cgroup

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")]


def _rows(book):
    return {s["learner"]: [(r["status"], r["message"]) for r in s["exercises"]]
            for s in book["submissions"]}


def test_a_kernel_sees_no_secrets_and_works_in_a_folder_that_is_removed(monkeypatch):
    for name in ("GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "MY_API_KEY", "SOME_SETTING"):
        monkeypatch.setenv(name, "do-not-leak")
    cell = ("import json, os\n"
            "open('scratch.txt', 'w').write('x')\n"
            "print(json.dumps({'env': sorted(os.environ), 'cwd': os.getcwd(),\n"
            "                  'home': os.environ['HOME'], 'tmp': os.environ['TMPDIR']}))")
    nb = {"cells": [{"cell_type": "code", "id": "a", "metadata": {}, "outputs": [],
                     "execution_count": None, "source": cell}],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                      "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    run = run_notebook(nb, Limits(cell_seconds=30))
    [cell_run] = run.cells
    assert cell_run.status == "ok", cell_run
    seen = json.loads(cell_run.stdout)
    leaked = [k for k in seen["env"] if "TOKEN" in k or "SECRET" in k or "KEY" in k
              or k == "SOME_SETTING"]
    assert leaked == []
    assert seen["home"] == seen["cwd"] and seen["tmp"].startswith(seen["cwd"])
    assert not os.path.exists(seen["cwd"])  # the submission's folder is gone


def test_runaway_submissions_cost_only_their_own_grade(tmp_path):
    ok = G.right_answers()
    measure = ok["0.2"][0]
    stubborn = ("import time\nwhile True:\n    try:\n        time.sleep(1)\n"
                "    except KeyboardInterrupt:\n        pass")
    G.write(tmp_path / "in", "spin.ipynb", G.learner({"0.1": G.ENDLESS, "0.2": measure}))
    G.write(tmp_path / "in", "stubborn.ipynb", G.learner({"0.1": stubborn, "0.2": measure}))
    G.write(tmp_path / "in", "right.ipynb", G.right())
    limits = Limits(cell_seconds=8, cpu_seconds=3, notebook_seconds=120, memory_bytes=1 << 30)
    book = grade([tmp_path / "in"], tmp_path / "out", lab="0", solutions=G.ROOT / "solutions",
                 limits=limits, jobs=2, progress=lambda line: None)
    rows = _rows(book)
    cpu = "the kernel used more than 3 s of CPU time and was stopped"
    assert rows["spin"] == [("failed", cpu), ("not run", f"not run: {cpu}")]
    assert rows["stubborn"][0] == ("timed out", "did not finish within the 8 s a cell may take")
    assert rows["stubborn"][1][0] == "not run" and "did not stop" in rows["stubborn"][1][1]
    # The saved notebook shows the cell that ran out of time, with the limit as its error.
    saved = next(s["notebook"] for s in book["submissions"] if s["learner"] == "stubborn")
    cells = json.loads((tmp_path / "out" / saved).read_text())["cells"]
    [check] = [c for c in cells if "".join(c["source"]).startswith('with Exercise("0.1"')]
    assert [o.get("ename") for o in check["outputs"] if o["output_type"] == "error"] == \
        ["GradingTimeLimit"]
    assert [s for s, _ in rows["right"]] == ["passed", "passed"]


def test_the_notebook_time_limit(tmp_path):
    G.write(tmp_path / "in", "slow.ipynb", G.learner({"0.1": "import time\ntime.sleep(60)"}))
    book = grade([tmp_path / "in"], tmp_path / "out", lab="0", solutions=G.ROOT / "solutions",
                 limits=Limits(cell_seconds=60, notebook_seconds=6), jobs=1,
                 progress=lambda line: None)
    stop = "the notebook ran past its 6 s limit and was stopped"
    assert _rows(book)["slow"] == [("timed out", stop), ("not run", f"not run: {stop}")]


def test_a_fork_bomb_is_stopped(tmp_path):
    probe, why = Cgroup.create(f"gpucourse-grade-{os.getpid()}-probe", 10)
    if probe is None:
        pytest.skip(f"no pids cgroup to cap a real fork bomb here ({why}); "
                    "test_grade_sandbox checks the polled limit")
    probe.remove()
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    G.write(tmp_path / "in", "bomb.ipynb", G.learner({"0.1": bomb}))
    G.write(tmp_path / "in", "right.ipynb", G.right())
    book = grade([tmp_path / "in"], tmp_path / "out", lab="0", solutions=G.ROOT / "solutions",
                 limits=Limits(cell_seconds=20, processes=16), jobs=2,
                 progress=lambda line: None)
    rows = _rows(book)
    # Stopped at the 17th process, or at the cgroup's cap if the bomb got there first.
    [(status, stop), after] = rows["bomb"]
    assert status == "failed" and after == ("not run", f"not run: {stop}")
    assert stop in ("the code started more than 16 processes and was stopped",
                    "the code started more than the 144 processes and threads allowed and was "
                    "stopped")
    assert [s for s, _ in rows["right"]] == ["passed", "passed"]


SYS_TGKILL = 234  # x86-64 Linux: send a signal to one thread of another process


@pytest.mark.skipif(platform.machine() != "x86_64", reason="tgkill's number is x86-64's")
def test_ctrl_c_ends_every_kernel_at_once(tmp_path):
    import ctypes
    import signal
    import subprocess
    import time

    for name in ("a", "b"):
        G.write(tmp_path / "in", f"{name}.ipynb",
                G.learner({"0.1": "import time\ntime.sleep(600)"}))
    # The kernels' IPC sockets live in TMPDIR, and a socket path has at most 107 bytes: a
    # short folder, not one under pytest's (deeper with pytest-xdist, longer each run).
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="gc-"))
    # -X faulthandler: a grader still running a minute after Ctrl-C is stopped with SIGABRT,
    # which prints where each of its threads waits (below).
    proc = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-m", "gpucourse", "grade", str(tmp_path / "in"),
         "--out", str(tmp_path / "out"), "--lab", "0", "--jobs", "2", "--cell-timeout", "600",
         "--solutions", str(G.ROOT / "solutions")],
        env=dict(os.environ, TMPDIR=str(scratch)), stderr=subprocess.PIPE, text=True)

    def kernels():
        """The learners' kernels of this run (not their supervisors)."""
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if argv[1:3] == [b"-m", b"ipykernel_launcher"] and str(scratch).encode() in \
                    b" ".join(argv):
                found.append(pid)
        return found

    try:
        deadline = time.monotonic() + 300  # a loaded machine imports nbformat slowly
        while len(kernels()) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(kernels()) == 2, "the two kernels did not start"
        time.sleep(3)  # into the sleeping cell
        t0 = time.monotonic()
        # Ctrl-C's signal, delivered to one of the grader's other threads, as Linux may: the
        # grader must still stop at once (its main thread waits in short steps to notice).
        others = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task") if int(t) != proc.pid]
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.syscall(SYS_TGKILL, proc.pid, others[0], signal.SIGINT) == 0
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=60)
            pytest.fail(f"the grader still ran 60 s after Ctrl-C; where it waited:\n{err[-8000:]}")
        assert proc.returncode == 130 and "stopped; every kernel was ended" in err, err
        assert time.monotonic() - t0 < 30
        assert kernels() == [] and list(scratch.iterdir()) == []
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(scratch, ignore_errors=True)
    assert not (tmp_path / "out" / "gradebook.csv").exists()
