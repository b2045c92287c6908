"""tools/gpu_check.py on a machine without a GPU: it says so, and its summary reads every chapter's checks."""
import subprocess
import sys

import pytest

import gpu_check
from gpucourse import check


def test_threshold_summary_prints_figures_and_yes_no_checks(capsys):
    gpu_check.print_thresholds({
        "1": {"status": "ok", "result": {"checks": {
            "copy": check.at_least(59.4, 80, "coalesced copy % of library copy"),
            "streams": check.at_most(1.27, 1.2, "total / bound"),
            "old": {"value": 2.0, "threshold": 3.0, "passed": False, "what": "saved before rules"}}}},
        "3": {"status": "ok", "result": {"checks": {
            "nccl_selected": check.threshold(None, None, True, "NCCL chosen")}}},
        "4": {"status": "ok", "result": {"checks": {
            "crossover": check.threshold(0.12, None, True, "density found")}}},
        "5": {"status": "skipped", "reason": "time budget spent"}})
    out = capsys.readouterr().out
    assert "ch1 FAIL copy: 59.4 (limit at least 80) coalesced copy" in out
    assert "ch1 FAIL streams: 1.27 (limit at most 1.2) total / bound" in out
    assert "ch1 FAIL old: 2 (limit 3) saved before rules" in out
    assert "ch3 PASS nccl_selected: NCCL chosen" in out
    assert "ch4 PASS crossover: 0.12 (limit -) density found" in out  # a value without a limit
    assert "ch5: skipped: time budget spent" in out


def test_without_a_gpu_it_exits_non_zero_with_one_line(root):
    proc = subprocess.run([sys.executable, "tools/gpu_check.py", "--no-reference"], cwd=root,
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "GPUCOURSE_DEVICE": "cpu",
                               "PYTHONPATH": str(root / "src")})
    assert proc.returncode == 1
    assert "no CUDA GPU" in proc.stdout


def test_threshold_records_judge_by_their_rule():
    assert check.at_least(80, 80, "x")["passed"] and not check.more_than(1.0, 1.0, "x")["passed"]
    assert check.at_most(1.2, 1.2, "x")["passed"] and not check.at_most(1.27, 1.2, "x")["passed"]
    assert check.at_least(59.4, 80, "x") == {"value": 59.4, "threshold": 80.0, "passed": False,
                                             "what": "x", "rule": "at least"}
    assert check.limit_text(check.more_than(2, 1, "x")) == "more than 1"
    assert check.limit_text(check.threshold(None, None, True, "yes/no")) == "-"
    with pytest.raises(ValueError, match="at least"):
        check.threshold(1, 2, True, "x", rule=">=")


def test_the_recorded_command_keeps_the_options_but_not_the_output_folder():
    assert gpu_check.recorded_command(["--skip-tests", "--chapters", "1,4", "--out", "/tmp/x/y"]) \
        == "python tools/gpu_check.py --skip-tests --chapters 1,4 --out DIR"
    assert gpu_check.recorded_command(["--out=/data/run", "--no-reference"]) \
        == "python tools/gpu_check.py --out=DIR --no-reference"
    assert gpu_check.recorded_command([]) == "python tools/gpu_check.py"


def _h200_file(folder):
    """A reference file as an earlier H200 run left it: kernel rows and chapter 4."""
    from gpucourse import reference

    return reference.write(
        {"kernels": {"sizes": {"n": 1 << 28}, "rows": [
            {"file": "copy", "kernel": "copy_v1_coalesced", "correct": True, "gbps": 4000.0,
             "median_s": 5e-4, "size": 1 << 28}]},
         "ch4": {"checks": {}, "passed": True, "block_sweep": {"gbps": [1.0]}}},
        gpu="NVIDIA H200", command="python tools/gpu_check.py (earlier run)", folder=folder,
        date="2026-11-29")


def test_a_failed_step_leaves_the_reference_data_it_did_not_measure(tmp_path, monkeypatch):
    """Chapter 4 raised and no kernel gave a correct result (as after a sticky CUDA error): the
    reference file keeps its earlier kernel rows and chapter 4, and gains chapter 1."""
    import functools
    import json

    from gpucourse import reference

    path = _h200_file(tmp_path)
    monkeypatch.setattr(reference, "write", functools.partial(reference.write, folder=tmp_path))
    ch1 = {"checks": {"copy": check.at_least(85.0, 80, "copy %")}, "passed": True}
    record = {"gpu": "NVIDIA H200", "driver": "580.1", "date": "2026-12-01T10:00:00+00:00",
              "command": "python tools/gpu_check.py --skip-tests --chapters 1,4 --out DIR",
              "kernel_sizes": {"n": 1 << 28},
              "kernels": [{"file": "copy", "kernel": "copy_v1_coalesced", "correct": False,
                           "error": "CUDARuntimeError: cudaErrorIllegalAddress"}],
              "chapters": {"1": {"status": "ok", "result": ch1},
                           "4": {"status": "error", "error": "CUDARuntimeError: ..."}}}
    assert gpu_check.write_reference(record) == path
    results = json.loads(path.read_text())["results"]
    assert results["kernels"]["rows"][0]["gbps"] == 4000.0
    assert results["kernels"]["_provenance"]["date"] == "2026-11-29"
    assert results["ch4"]["block_sweep"] == {"gbps": [1.0]}
    assert results["ch4"]["_provenance"]["date"] == "2026-11-29"
    assert results["ch1"]["checks"]["copy"]["value"] == 85.0
    assert results["ch1"]["_provenance"]["date"] == "2026-12-01"
    assert results["ch1"]["_provenance"]["command"] == record["command"]


def test_the_threshold_summary_names_gpu_date_and_command(capsys):
    record = {"gpu": "NVIDIA H200", "date": "2026-12-01T10:00:00+00:00",
              "command": "python tools/gpu_check.py --skip-tests --chapters 1,4 --out DIR"}
    gpu_check.print_thresholds({"1": {"status": "ok", "result": {"checks": {
        "copy": check.at_least(85.0, 80, "copy %")}}}}, record)
    out = capsys.readouterr().out
    assert ("NVIDIA H200, 2026-12-01T10:00:00+00:00, measured with "
            "`python tools/gpu_check.py --skip-tests --chapters 1,4 --out DIR`") in out
    assert "ch1 PASS copy: 85 (limit at least 80) copy %" in out
