"""Colab set-up cells and launch badges: written from pyproject.toml, idempotent, checked."""
import shutil
import subprocess
import sys
import types

import pytest

import launch_badges as lb
from nbtools import read, source

URL = "https://github.com/example-org/gpu-course"


@pytest.fixture
def course(tmp_path, root):
    """A copy of the files the tool manages."""
    for folder in ("notebooks", "solutions", "labs"):
        shutil.copytree(root / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("*.new.ipynb", ".ipynb_checkpoints"))
    for name in ("README.md", "pyproject.toml"):
        shutil.copy(root / name, tmp_path / name)
    return tmp_path


def _cell(path):
    cells = read(path)["cells"]
    first_code = next(c for c in cells if c["cell_type"] == "code")
    return first_code, [c for c in cells if c.get("id") == lb.CELL_ID]


def test_the_repository_is_consistent(root):
    assert lb.stale(root) == [], "run python tools/launch_badges.py and commit"


def test_write_puts_one_pinned_cell_first_and_badges(course):
    assert lb.main(["--root", str(course), "--repo", URL + ".git"]) == 0
    version, repo = lb.project(course)
    assert repo == "example-org/gpu-course"
    paths = lb.notebook_paths(course) + sorted((course / "labs").glob("*.ipynb"))
    assert len(paths) >= 14
    for path in paths:
        first, tagged = _cell(path)
        assert len(tagged) == 1 and first is tagged[0], path.name
        assert f"git+{URL}@v{version}" in source(first)
    readme = (course / "README.md").read_text()
    for nb in (course / "notebooks").glob("*.ipynb"):
        assert (f"colab.research.google.com/github/example-org/gpu-course/blob/v{version}/"
                f"notebooks/{nb.name})") in readme
    assert f"mybinder.org/v2/gh/example-org/gpu-course/v{version}" in readme
    assert "labs/01_architecture_and_bottlenecks_lab.ipynb)" in readme
    # Idempotent: a second run changes nothing, and the check passes.
    before = {p: p.read_bytes() for p in paths + [course / "README.md"]}
    assert lb.main(["--root", str(course)]) == 0
    assert {p: p.read_bytes() for p in before} == before
    assert lb.main(["--root", str(course), "--check"]) == 0


def test_check_fails_after_a_version_bump(course, capsys):
    lb.main(["--root", str(course), "--repo", URL])
    py = course / "pyproject.toml"
    py.write_text(py.read_text().replace('version = "', 'version = "9', 1))
    assert lb.main(["--root", str(course), "--check"]) == 1
    assert "README.md" in capsys.readouterr().err
    assert lb.main(["--root", str(course)]) == 0
    assert lb.main(["--root", str(course), "--check"]) == 0


def test_a_bad_url_is_one_clear_sentence(course, capsys):
    assert lb.main(["--root", str(course), "--repo", "https://gitlab.com/a/b"]) == 2
    err = capsys.readouterr().err.strip()
    assert "https://github.com/OWNER/REPO" in err and err.count("\n") == 0
    assert lb.project(course)[1] is None  # nothing written


def test_setting_the_url_twice_replaces_it(course):
    lb.set_repository(course, URL)
    lb.set_repository(course, "https://github.com/other/course/")
    text = (course / "pyproject.toml").read_text()
    assert text.count("Repository =") == 1 and lb.project(course)[1] == "other/course"
    import tomllib

    assert tomllib.loads(text)["project"]["urls"]["Repository"] == "https://github.com/other/course"


def _run_cell(monkeypatch, on_colab: bool) -> list:
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append((cmd, kw)))
    if on_colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(lb.setup_cell_source("example-org/gpu-course", "1.2.3"), {})
    return calls


def test_the_cell_does_nothing_off_colab(monkeypatch):
    assert _run_cell(monkeypatch, on_colab=False) == []


def test_on_colab_the_cell_installs_the_pinned_version(monkeypatch):
    [(cmd, kw)] = _run_cell(monkeypatch, on_colab=True)
    assert cmd[:4] == [sys.executable, "-m", "pip", "install"]
    assert cmd[-1] == "gpucourse @ git+https://github.com/example-org/gpu-course@v1.2.3"
    assert kw["check"] is True
