import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

# Figures render off-screen in tests.
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def root() -> pathlib.Path:
    return ROOT
