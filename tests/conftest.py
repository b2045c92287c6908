import fnmatch
import functools
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
# Test the package beside these tests, also where the environment's editable install points at
# another checkout (a second git worktree sharing one .venv); child processes see it too.
sys.path.insert(0, str(ROOT / "src"))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])

# Figures render off-screen in tests.
os.environ.setdefault("MPLBACKEND", "Agg")


#: Test files of the CUDA C emulator, the course's kernels on it, its profiler and its drawings.
#: They run code the host's C++ compiler built, one emulated thread at a time, with no PyTorch
#: and so no oneDNN: neither an ISA cap nor the number of cores changes what they compute.
#: `make test-matrix` runs them once (all cores, no cap) and every other test in every cell. A
#: file named here that uses PyTorch is not marked; tests/test_matrix_split.py checks that
#: the modules these files test never import PyTorch.
EMULATOR_ONLY = ("test_emulator*.py", "test_kernels*.py", "test_profiler.py", "test_draw.py",
                 "test_puzzle*.py")


@functools.lru_cache(maxsize=None)
def emulator_only(path: pathlib.Path) -> bool:
    """Whether the test file at ``path`` is one of :data:`EMULATOR_ONLY` without PyTorch."""
    return (any(fnmatch.fnmatch(path.name, pattern) for pattern in EMULATOR_ONLY)
            and "torch" not in path.read_text(encoding="utf-8"))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.suffix == ".py" and emulator_only(item.path):
            item.add_marker(pytest.mark.emulator_only)


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
