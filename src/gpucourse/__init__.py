"""gpucourse: the helper package of the course "Making GPU code fast for deep learning".

A notebook starts with ``import gpucourse as gc`` and ``gc.banner()``. Submodules load on
first use, so importing the package stays fast and never needs a GPU.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_SUBMODULES = ("device", "errors", "bench", "check", "specs", "models", "kernels", "emulator",
               "experiments", "plot", "widgets", "reference", "profiler", "draw")


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name == "banner":
        from .device import banner

        return banner
    if name == "benchmark":
        from .bench import benchmark

        return benchmark
    if name == "profile":
        from .profiler import profile

        return profile
    raise AttributeError(f"module 'gpucourse' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_SUBMODULES) + ["banner", "benchmark", "profile"])
