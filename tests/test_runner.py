import json
import subprocess
import sys
import types

from gpucourse import runner


def test_runner_writes_report_figures_and_html(tmp_path):
    r = subprocess.run([sys.executable, "-m", "gpucourse", "run", "--chapter", "0",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    ch0 = report["chapters"]["0"]
    assert report["device"]["backend"] in ("cpu", "cuda") and report["date"]
    assert ch0["results"]["loop_vs_vectorized"][0]["median_s"] > 0
    for fig in ch0["figures"]:
        assert (tmp_path / fig).read_bytes()[:4] == b"\x89PNG"
    html = (tmp_path / "index.html").read_text()
    assert "Chapter 0" in html and ch0["figures"][0] in html


def test_a_failing_chapter_is_reported_not_fatal(tmp_path, monkeypatch):
    bad = types.SimpleNamespace(run_all=lambda quick=True: 1 / 0)
    monkeypatch.setattr(runner, "_chapter_modules", lambda n: (bad, None))
    report = runner.run(chapters=[0], out=tmp_path)
    assert "ZeroDivisionError" in report["chapters"]["0"]["error"]
    assert runner.main(chapters=[0], out=str(tmp_path)) == 1
