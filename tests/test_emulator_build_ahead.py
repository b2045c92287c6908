"""A kernel check compiles every build it needs side by side before its first step, and
`make lab` (`python -m gpucourse prepare`) compiles what every build links once per machine,
so that no check waits for compiles one after another (each check: 2 s at most on 2 cores)."""
from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gpucourse import doctor
from gpucourse.check import ch2, lab, puzzles as cp
from gpucourse.emulator import build
from gpucourse.kernels import source_of
from gpucourse.kernels import puzzles as P
from puzzle_answers import reference

ROOT = Path(__file__).resolve().parent.parent
#: Exercise 2.2's answer: the course's own padded transpose.
TRANSPOSE = str(source_of("transpose", "transpose_v3_padded")).replace("transpose_v3_padded",
                                                                     "transpose_padded")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCOURSE_CACHE", str(tmp_path / "cache"))
    return build.cache_dir()


def entries(folder: Path, suffix: str) -> set[str]:
    return {p.name for p in folder.glob(f"*{suffix}")}


def test_builds_run_side_by_side_and_hand_back_their_errors():
    meet = threading.Barrier(3, timeout=10)  # passes only if all three wait at once

    def build_ok(i):
        return lambda: (meet.wait(), i)[1]

    def build_bad():
        meet.wait()
        raise ValueError("no such compiler")

    results = build.build_together(build_ok(0), build_bad, build_ok(2))
    assert results[0] == 0 and results[2] == 2
    assert isinstance(results[1], ValueError) and "no such compiler" in str(results[1])
    assert build.build_together() == []


def _steps_compile_nothing(cache, monkeypatch, check):
    """Run ``check`` and assert that after its build_ahead nothing new entered the cache: no
    step of the check (nor its child processes) waited for a compile of its own."""
    made = {}
    real = lab.build_ahead

    def ahead(*args, **kwargs):
        module = real(*args, **kwargs)
        made.setdefault("so", entries(cache, ".so"))
        made.setdefault("o", entries(cache, ".o"))
        return module

    monkeypatch.setattr(lab, "build_ahead", ahead)
    check()
    assert made, "the check never called build_ahead"
    assert entries(cache, ".so") == made["so"], "a step compiled a build that was not made ahead"
    assert entries(cache, ".o") == made["o"]
    return made


def test_check_2_2_builds_its_four_builds_ahead(cache, monkeypatch, capsys):
    # A source no other test built, so that nothing comes from this process's loaded builds.
    made = _steps_compile_nothing(cache, monkeypatch, lambda: ch2.check_padded_transpose(
        TRANSPOSE + "\n// check 2.2 builds ahead\n"))
    assert "passed" in capsys.readouterr().out
    assert len(made["so"]) == 4  # plain, race-checked, profiled, shared tile traced


@pytest.mark.parametrize("number", [1, 12])
def test_a_puzzle_check_builds_its_three_builds_ahead(cache, monkeypatch, capsys, number):
    p = P.puzzle(number)
    made = _steps_compile_nothing(cache, monkeypatch, lambda: cp.check_puzzle(
        number, reference(p.kernel) + f"\n// puzzle {number} builds ahead\n"))
    assert "passed" in capsys.readouterr().out
    assert len(made["so"]) == 3  # plain, race-checked, profiled


def test_a_compile_error_is_still_named_where_the_check_launches(cache, capsys):
    broken = TRANSPOSE.replace("__syncthreads();", "__syncthreads()")
    with pytest.raises(AssertionError, match=r"transpose_padded\.cu line \d+: expected ';'") as e:
        ch2.check_padded_transpose(broken)
    assert str(e.value).count("expected ';'") == 1  # the plain build's error, said once


def test_prepare_builds_what_every_build_links(cache):
    r = subprocess.run([sys.executable, "-m", "gpucourse", "prepare"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    objects = entries(cache, ".o")
    assert any(n.startswith("runtime-") for n in objects)
    assert sum(n.startswith("extra-") for n in objects) == 2  # race detector and profiler hooks
    # After it, a learner's check links against them instead of compiling them.
    made = {}
    real = lab.build_ahead
    lab.build_ahead = lambda *a, **k: (real(*a, **k), made.update(o=entries(cache, ".o")))[0]
    try:
        cp.check_puzzle(1, reference(P.puzzle(1).kernel) + "\n// after prepare\n")
    finally:
        lab.build_ahead = real
    assert made["o"] == objects


def test_prepare_and_doctor_name_a_part_that_does_not_build(monkeypatch, capsys):
    from gpucourse import __main__ as cli

    monkeypatch.setattr(lab, "build_shared_parts",
                        lambda: ["the emulator's runtime did not build: cc1plus: out of memory"])
    assert cli.main(["prepare"]) == 1
    assert "out of memory" in capsys.readouterr().err
    f = doctor._emulator_builds()
    assert f.status == doctor.FAIL and "runtime" in f.detail and "compiler" in f.fix


def test_make_lab_prepares_the_emulator_before_jupyter_starts(tmp_path):
    plan = subprocess.run(["make", "-n", "lab", f"VENV={tmp_path / 'venv'}", "ALLOW_ROOT="],
                          cwd=ROOT, capture_output=True, text=True, check=True).stdout
    prepare = re.search(r"^\S*python -m gpucourse prepare$", plan, re.M)
    jupyter = re.search(r"^\S*jupyter lab ", plan, re.M)
    assert prepare and jupyter and prepare.start() < jupyter.start()
