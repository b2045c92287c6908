"""Tests in this folder need a CUDA GPU: each is marked `gpu` and skipped where none works."""
from __future__ import annotations

import functools
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=None)
def _no_gpu_reason() -> str:
    from gpucourse import device

    if device.cuda_available():
        return ""
    return "no CUDA GPU works here (neither CuPy nor PyTorch sees one)"


# tryfirst: the marker must be there before `-m gpu` selects tests.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE not in Path(str(item.fspath)).resolve().parents:
            continue
        item.add_marker(pytest.mark.gpu)
        reason = _no_gpu_reason()
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
