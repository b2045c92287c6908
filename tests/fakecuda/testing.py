"""What the smoke tests of GPU code share (on the fake GPU, and on the CPU stand-ins of the
PyTorch steps): installing and removing the fake, shrinking problem sizes, the checks of a
result's shape (keys, finite numbers, threshold records) and make gpu-check's printout of them.

``installed()`` puts the fake in place for a ``with`` block and takes every trace of it away
afterwards; a test file builds its fixture on it and adds its own size patches with
``shrink_defaults``, ``capped`` and ``with_arguments``. Nothing here looks at a timing's size or
at whether a GPU threshold passed: on the fake both mean nothing.
"""
from __future__ import annotations

import contextlib
import inspect
import json
import math

import pytest

from . import install, uninstall_caches

THRESHOLD_KEYS = {"value", "threshold", "passed", "what", "rule"}

#: bench's warm-up on the fake (timings mean nothing here: keep it short).
WARMUP_S = 0.01


@contextlib.contextmanager
def installed():
    """The fake CUDA GPU for a ``with`` block: yields ``(cupy, monkeypatch)``; everything the
    monkeypatch did, the fake itself and the caches that saw it are undone on the way out."""
    from gpucourse import bench

    mp = pytest.MonkeyPatch()
    try:
        cp = install(mp)
        mp.setitem(bench.DEFAULT_WARMUP_S, "cuda", WARMUP_S)
        yield cp, mp
    finally:
        mp.undo()
        uninstall_caches()


def shrink_defaults(mp, fn, **values) -> None:
    """Replace some positional defaults of ``fn`` (e.g. a problem size) for the test's duration."""
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.default is not p.empty
              and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    unknown = set(values) - {p.name for p in params}
    assert not unknown, f"{fn.__qualname__} has no positional default {unknown}"
    mp.setattr(fn, "__defaults__", tuple(values.get(p.name, p.default) for p in params))


def capped(mp, module, name, cap) -> None:
    """Wrap a size helper: it still runs (on the fake H200's figures), its answer is capped."""
    real = getattr(module, name)

    def small(*args, **kwargs):
        got = real(*args, **kwargs)
        assert got > 0
        return min(got, cap)

    mp.setattr(module, name, small)


def with_arguments(mp, module, name, calls: list | None = None, **overrides) -> None:
    """Wrap ``module.name`` so that every call passes ``overrides`` (e.g. smaller sizes) for
    the test's duration; ``calls``, a list, receives the keyword arguments of each call as
    the caller made it."""
    real = getattr(module, name)

    def wrapped(*args, **kwargs):
        if calls is not None:
            calls.append(dict(kwargs))
        return real(*args, **{**kwargs, **overrides})

    mp.setattr(module, name, wrapped)


def thresholds_printed(capsys, chapters: dict) -> list[str]:
    """tools/gpu_check.py's one line per threshold for these chapter results ({"2": result})."""
    import gpu_check

    capsys.readouterr()
    gpu_check.print_thresholds({n: {"status": "ok", "result": r} for n, r in chapters.items()})
    return [l for l in capsys.readouterr().out.splitlines() if l.startswith("  ch")]


def finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def all_finite(xs) -> bool:
    return len(xs) > 0 and all(finite(x) for x in xs)


def assert_threshold(name, c, yes_no: bool = False) -> None:
    """A ``check.threshold`` record; ``yes_no``: a check without a limit, whose value may be
    None (nothing found)."""
    from gpucourse import check

    assert set(c) == THRESHOLD_KEYS, (name, c)
    if yes_no:
        assert c["threshold"] is None and (c["value"] is None or finite(c["value"])), (name, c)
    else:
        assert finite(c["value"]) and finite(c["threshold"]), (name, c)
    assert isinstance(c["passed"], bool) and isinstance(c["what"], str) and c["what"], (name, c)
    if not yes_no:  # a figure with a limit says which way it must lie
        assert c["rule"] in check.THRESHOLD_RULES, (name, c)


def assert_jsonable(result) -> None:
    from gpucourse import reference

    json.dumps(reference.jsonable(result))  # what tools/gpu_check.py writes
