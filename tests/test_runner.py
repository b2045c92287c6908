import json
import pathlib
import subprocess
import sys
import types

import pytest

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


def _run_cli(out):
    return subprocess.run([sys.executable, "-m", "gpucourse", "run", "--chapter", "0", "--out",
                           str(out)], capture_output=True, text=True, timeout=300)


def _one_sentence_and_no_traceback(r):
    assert r.returncode != 0 and r.stdout == ""
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.rstrip().endswith("choose a folder you can write to with --out (e.g. --out "
                                      "results).")


def test_out_that_is_a_file_is_one_sentence_not_a_traceback(tmp_path):
    afile = tmp_path / "results"
    afile.write_text("not a folder")
    r = _run_cli(afile)
    _one_sentence_and_no_traceback(r)
    assert f"cannot write the report into {afile}: it is a file, not a folder" in r.stderr
    r = _run_cli(afile / "inside")
    _one_sentence_and_no_traceback(r)
    assert f"{afile} is a file, so no folder can be made inside it" in r.stderr
    assert afile.read_text() == "not a folder"


def _unwritable_folder(tmp_path):
    """A folder this user cannot write to: a read-only one, or (for root, who may write
    anywhere on disk) /sys, which refuses new files to everyone."""
    import os
    import tempfile

    if hasattr(os, "geteuid") and os.geteuid() != 0:
        folder = tmp_path / "read-only"
        folder.mkdir()
        folder.chmod(0o500)
        return folder
    try:
        tempfile.NamedTemporaryFile(dir="/sys").close()
    except OSError:
        return pathlib.Path("/sys")
    pytest.skip("no folder here refuses new files to this user")


def test_unwritable_out_is_one_sentence_and_fails_before_any_chapter_runs(tmp_path):
    folder = _unwritable_folder(tmp_path)
    for out in (folder, folder / "results"):
        r = _run_cli(out)
        _one_sentence_and_no_traceback(r)
        assert f"cannot write the report into {out}: no permission to write there" in r.stderr
        assert "chapters" not in r.stderr  # no progress bar: nothing ran


def test_a_report_that_cannot_be_written_at_the_end_is_one_sentence(tmp_path, monkeypatch, capsys):
    """The folder took the test file, then the disk filled up while the chapters ran."""
    import errno

    from gpucourse import __main__ as cli

    monkeypatch.setattr(runner, "_chapter_modules",
                        lambda n: (types.SimpleNamespace(run_all=lambda quick=True: {}), None))

    def disk_full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(runner.pathlib.Path, "write_text", disk_full)
    assert cli.main(["run", "--chapter", "0", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"cannot write the report into {tmp_path}: no space left on device; choose" in err
    assert "Traceback" not in err
