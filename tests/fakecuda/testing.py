"""The fake ``cupy`` reports an NVIDIA H200, runs the real ``.cu`` kernels on the course's CPU
emulator (so the code's own correctness checks run on real results) and refuses host/device
mix-ups as CuPy does; PyTorch is a CPU build here, so the experiments that need PyTorch on the
GPU skip themselves and the tests check that the results say so. Only shapes are asserted:
keys, lengths, finite numbers, threshold records; the fake's timings are host times of an
emulator and mean nothing. Problem sizes are shrunk (below), never the code paths.

What the smoke tests of GPU code share (on the fake GPU, and on the CPU stand-ins of the
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


# --------------------------------------------------------------------------- chapters at small sizes
# The tests' tiny problem sizes (the real ones are many times the H200's 60 MiB L2); the code
# paths stay the real ones. Chapters 1 and 4 share one set, chapters 2 and 5 another (each
# set caps device.bandwidth_buffer_bytes its own way).

CH1_BUFFER_BYTES = 1 << 18
CH1_MATMUL_N = 96
CH4_SWEEP_N = 1 << 15
CH4_HISTOGRAM_N = 1 << 15
CH4_DIVERGENCE_N = 1 << 13
CH4_STREAMS_BYTES = 1 << 17  # 32 chunks of 1024 floats
CH4_REDUCTION_N = 1 << 16
CH2_TRANSPOSE_SIDE = 256
CH2_ALLOC_N = 1 << 15
CH2_POOL_MIB = 4
CH5_SGEMM_N = 128  # one 128 x 128 tile of v5/v6, two column blocks of the tuned 128 x 64 tile
CH5_FUSION_N = 1 << 14
CH5_SPARSE_N = 256
CH5_PRECISION_N = 64


def small_ch1_ch4(mp) -> None:
    """Chapters 1 and 4 at the tests' tiny sizes."""
    from gpucourse import device
    from gpucourse.experiments import ch4
    from gpucourse.experiments.ch1 import rooflines as ch1_rooflines
    from gpucourse.experiments.ch4 import block_size

    capped(mp, device, "bandwidth_buffer_bytes", CH1_BUFFER_BYTES)
    shrink_defaults(mp, ch1_rooflines.gpu_roofline, matmul_n=CH1_MATMUL_N)
    capped(mp, block_size, "default_sweep_n", CH4_SWEEP_N)
    shrink_defaults(mp, ch4.histogram, n=CH4_HISTOGRAM_N)
    shrink_defaults(mp, ch4.divergence, n=CH4_DIVERGENCE_N)
    shrink_defaults(mp, ch4.streams, nbytes=CH4_STREAMS_BYTES)
    shrink_defaults(mp, ch4.reduction, n=CH4_REDUCTION_N)


def small_ch2_ch5(mp) -> None:
    """Chapters 2 and 5 at the tests' tiny sizes."""
    from gpucourse import device
    from gpucourse.experiments import ch2, ch5
    from gpucourse.experiments.ch2 import allocation as ch2_allocation
    from gpucourse.experiments.ch2 import transpose as ch2_transpose

    capped(mp, ch2_transpose, "transpose_side", CH2_TRANSPOSE_SIDE)
    mp.setattr(ch2_allocation, "ALLOC_N_GPU", CH2_ALLOC_N)
    shrink_defaults(mp, ch2.pool_demo, mib=CH2_POOL_MIB)
    capped(mp, ch5.sgemm, "default_sgemm_n", CH5_SGEMM_N)
    real_sgemm = ch5.sgemm.sgemm_ladder

    def sgemm_at_most(n=None, *args, **kwargs):
        # gpu_check asks for 4096³ by a literal argument: the real ladder runs, smaller.
        return real_sgemm(min(n or ch5.sgemm.default_sgemm_n(), CH5_SGEMM_N), *args, **kwargs)

    # where gpu_check and the size widget look it up
    mp.setattr(ch5.sgemm, "sgemm_ladder", sgemm_at_most)
    # The fusion's CuPy rows run on the (fake) GPU, so it takes the GPU size rule; PyTorch
    # is on the CPU here, so the sparse sweep takes the CPU sizes.
    capped(mp, device, "bandwidth_buffer_bytes", 4 * CH5_FUSION_N)
    mp.setitem(ch5.sparse.SPARSE_CPU, "n", CH5_SPARSE_N)
    mp.setitem(ch5.sparse.SPARSE_GPU, "n", CH5_SPARSE_N)
    shrink_defaults(mp, ch5.precision_sweep, n=CH5_PRECISION_N)


@contextlib.contextmanager
def small_fake_gpu(shrink):
    """The fake GPU with ``shrink`` (small_ch1_ch4 or small_ch2_ch5) applied; yields cupy."""
    with installed() as (cp, mp):
        shrink(mp)
        yield cp


# --------------------------------------------------------------------------- results' shapes

def drawn(fig) -> None:
    """Render a figure (as a notebook would show it)."""
    import io

    fig.savefig(io.BytesIO(), format="png", dpi=30)


def timings_ok(timings, labels) -> None:
    """Timing dicts (or Timings) with these labels, every one with finite samples."""
    from gpucourse import bench

    ts = [bench.Timing.from_dict(t) if isinstance(t, dict) else t for t in timings]
    assert [t.label for t in ts] == list(labels)
    for t in ts:
        assert t.count >= 1 and all_finite(t.samples_s), t.label


def as_reference_data(mp, tmp_path, section: str, result: dict):
    """Write ``result`` as reference data of the fake H200 (as make gpu-check does, into a
    temporary folder), and make it the only reference data the course sees."""
    from gpucourse import reference

    path = reference.write({section: result}, gpu="NVIDIA H200",
                           command="python tools/gpu_check.py (fake GPU)", folder=tmp_path)
    real_load = reference.load
    mp.setattr(reference, "available", lambda folder=None: [real_load(path)])
    return path


def gpu_check_as_reference_data(chapter, shrink, assert_result, thresholds: int, capsys, mp,
                                tmp_path) -> dict:
    """``chapter.gpu_check()`` on the fake GPU: its result's shape, make gpu-check's one line
    per threshold, then the result made the only reference data the course sees."""
    with small_fake_gpu(shrink):
        r = chapter.gpu_check()
    assert_result(r)
    n = chapter.__name__.rsplit("ch", 1)[1]
    lines = thresholds_printed(capsys, {n: r})
    assert len(lines) == thresholds and all(" PASS " in l or " FAIL " in l for l in lines), lines
    as_reference_data(mp, tmp_path, f"ch{n}", r)
    return r
