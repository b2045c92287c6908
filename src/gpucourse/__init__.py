"""gpucourse: the helper package of the course "Making GPU code fast for deep learning".

A notebook starts with ``import gpucourse as gc`` and ``gc.banner()``. Submodules load on
first use, so importing the package stays fast and never needs a GPU.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_SUBMODULES = ("device", "errors", "bench", "check", "specs", "models", "kernels", "emulator",
               "experiments", "plot", "widgets", "reference", "profiler", "precision", "draw")
# Functions a notebook calls as gc.<name>, by the submodule that holds them.
_FUNCTIONS = {"banner": "device", "benchmark": "bench", "profile": "profiler"}


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _FUNCTIONS:
        return getattr(importlib.import_module(f".{_FUNCTIONS[name]}", __name__), name)
    raise AttributeError(f"module 'gpucourse' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_SUBMODULES) + list(_FUNCTIONS))
