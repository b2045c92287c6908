import shutil
import subprocess
import sys

from gpucourse import doctor


def test_doctor_passes_on_this_machine():
    r = subprocess.run([sys.executable, "-m", "gpucourse", "doctor"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "All essential checks passed" in r.stdout
    assert "C++ compiler" in r.stdout and "torch" in r.stdout
    assert "] reference data" not in r.stdout, "the shipped reference files are all valid"


def test_doctor_fails_when_something_essential_is_missing(monkeypatch, capsys):
    real = doctor.findings
    monkeypatch.setattr(doctor, "findings", lambda: real() + [
        doctor.Finding(doctor.FAIL, "C++ compiler", "none found", "install g++")])
    assert doctor.main() == 1
    out = capsys.readouterr().out
    assert "fix: install g++" in out and "1 essential check(s) failed" in out


def test_missing_compiler_is_reported(monkeypatch):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None)
    f = doctor._cxx_compiler()
    assert f.status == doctor.FAIL and "g++" in f.fix


def test_doctor_reports_the_compiler_the_emulator_uses(monkeypatch, tmp_path):
    """$CXX wins, as in the emulator: a broken $CXX fails even when g++ is on PATH."""
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    f = doctor._cxx_compiler()
    assert f.status == doctor.FAIL and "no-such-compiler" in f.detail and "CXX" in f.fix
    gxx = shutil.which("g++") or shutil.which("c++")
    if gxx:
        from gpucourse.emulator.build import compiler

        monkeypatch.setenv("CXX", gxx)
        f = doctor._cxx_compiler()
        assert f.status == doctor.OK and gxx in f.detail
        assert compiler()[0] == gxx  # what the emulator uses from now on, not a stale cache
    monkeypatch.delenv("CXX")
    doctor._cxx_compiler()  # leave the emulator's cache as the test found it


def test_doctor_checks_every_runtime_dependency_of_the_package():
    """A dependency left out of the doctor lets it say "all passed" while the course cannot run."""
    import pathlib
    import re
    import tomllib

    project = tomllib.loads((pathlib.Path(__file__).parent.parent / "pyproject.toml").read_text())
    needed = {re.split(r"[<>=!~ \[]", d)[0] for d in project["project"]["dependencies"]}
    checked = {f.what for f in doctor.findings()}
    assert needed <= checked, f"the doctor does not check {sorted(needed - checked)}"


def test_doctor_names_each_rejected_reference_file_and_is_silent_when_all_are_fine(tmp_path,
                                                                                     monkeypatch):
    from gpucourse import paths, reference

    monkeypatch.setattr(paths, "REFERENCE_DIR", tmp_path)
    assert doctor._reference_files() == []
    reference.write({"ch4": {"block_sweep": {"regs_per_thread": 11}}}, gpu="NVIDIA L4",
                    command="make gpu-check", folder=tmp_path, date="2026-11-02")
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "nan.json").write_text('{"format": "gpucourse-reference", "version": 1, "gpu": "G",'
                                       ' "date": "2026-01-01", "command": "c",'
                                       ' "results": {"ch4": {"block_sweep": {"n": NaN}}}}')
    found = doctor._reference_files()
    assert [f.status for f in found] == [doctor.WARN, doctor.WARN]
    assert [f.detail for f in found] == reference.problems(tmp_path)
    assert found[0].detail.startswith("broken.json is not valid JSON")
    assert found[1].detail.startswith("nan.json")
    assert all("figures leave this file out" in f.fix and str(tmp_path) in f.fix for f in found)


def test_doctor_prints_one_line_per_rejected_reference_file(tmp_path):
    """The command itself, with the shipped folder pointed elsewhere: a bad file is a warning,
    so the essential checks still pass."""
    (tmp_path / "broken.json").write_text("{")
    code = ("import pathlib, sys; from gpucourse import doctor, paths; "
            f"paths.REFERENCE_DIR = pathlib.Path({str(tmp_path)!r}); sys.exit(doctor.main())")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [line for line in r.stdout.splitlines() if "] reference data" in line]
    assert len(lines) == 1 and lines[0].startswith("[warn] reference data")
    assert "broken.json is not valid JSON" in lines[0]
    assert "All essential checks passed" in r.stdout
