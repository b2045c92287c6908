import os
import pathlib
import sys

import pytest

from matrix_scope import emulator_only, gpu_path, tooling

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
# Test the package beside these tests, also where the environment's editable install points at
# another checkout (a second git worktree sharing one .venv); child processes see it too.
sys.path.insert(0, str(ROOT / "src"))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])

# Figures render off-screen in tests.
os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.suffix == ".py" and emulator_only(item.path):
            item.add_marker(pytest.mark.emulator_only)
        if item.path.suffix == ".py" and tooling(item.path):
            item.add_marker(pytest.mark.tooling)
        if item.path.suffix == ".py" and gpu_path(item.path):
            item.add_marker(pytest.mark.gpu_path)


@pytest.fixture
def root() -> pathlib.Path:
    return ROOT


@pytest.fixture
def reference_folder(tmp_path, monkeypatch) -> pathlib.Path:
    """An empty folder that every reference lookup reads instead of the shipped data."""
    import functools

    from gpucourse import reference

    monkeypatch.setattr(reference, "find", functools.partial(reference.find, folder=tmp_path))
    return tmp_path
