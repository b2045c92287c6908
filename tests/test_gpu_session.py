"""tools/gpu_session.sh, the GPU evidence run in steps: its wiring, checked where there is no
GPU (each step says so and fails alone; the summary names every step and its time)."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "gpu_session.sh"


def _session(tmp_path, *steps):
    env = {**os.environ, "PYTHON": sys.executable, "GPU_SESSION_OUT": str(tmp_path),
           "GPUCOURSE_DEVICE": "cpu", "STEP_TIMEOUT_S": "120"}
    return subprocess.run(["bash", str(SCRIPT), *steps], capture_output=True, text=True,
                          env=env, timeout=300)


def test_an_unknown_step_is_named_with_the_steps_there_are(tmp_path):
    r = _session(tmp_path, "ch9")
    assert r.returncode == 2
    assert "unknown step ch9; the steps are: tests ch1 ch2 ch3 ch4 ch5 ch6 ch7 kernels" in r.stderr


def test_without_a_gpu_each_step_fails_alone_and_the_summary_names_it(tmp_path):
    r = _session(tmp_path, "tests", "ch5", "kernels")
    assert r.returncode == 1, r.stdout + r.stderr
    summary = (tmp_path / "summary.txt").read_text()
    for step in ("tests", "ch5", "kernels"):
        assert f"{step}: rc=1, " in summary
        assert "no CUDA GPU works here" in (tmp_path / f"{step}.log").read_text()
    assert "failed steps: tests ch5 kernels" in summary


def test_gpu_check_takes_the_step_flags():
    """The chapter steps skip the kernel timings, the kernel step skips the chapters."""
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu_check.py"), "--help"],
                         capture_output=True, text=True, timeout=120).stdout
    for flag in ("--skip-tests", "--skip-chapters", "--skip-kernels", "--chapters", "--budget-s"):
        assert flag in out
