"""tools/gpu_check.py on a machine without a GPU: it says so, and its summary reads every chapter's checks."""
import subprocess
import sys

import gpu_check
from gpucourse import check


def test_threshold_summary_prints_figures_and_yes_no_checks(capsys):
    gpu_check.print_thresholds({
        "1": {"status": "ok", "result": {"checks": {
            "copy": check.threshold(59.4, 80, False, "coalesced copy % of library copy")}}},
        "3": {"status": "ok", "result": {"checks": {
            "nccl_selected": check.threshold(None, None, True, "NCCL chosen")}}},
        "4": {"status": "ok", "result": {"checks": {
            "crossover": check.threshold(0.12, None, True, "density found")}}},
        "5": {"status": "skipped", "reason": "time budget spent"}})
    out = capsys.readouterr().out
    assert "ch1 FAIL copy: 59.4 (limit 80) coalesced copy" in out
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
