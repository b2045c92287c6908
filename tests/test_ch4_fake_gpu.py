"""Chapter 4's GPU-only code paths on a FAKE CUDA device (tests/fakecuda):
a SMOKE TEST, not a measurement.

What the fake is and what its tests assert (shapes only, never timings): fakecuda/testing.py.

gpu_check() of chapters 1 and 4 runs in test_fake_gpu.py, through tools/gpu_check.py.
"""
from __future__ import annotations

import sys

import pytest

import fakecuda
from fakecuda.testing import finite, small_ch1_ch4, small_fake_gpu
from gpucourse import device
from gpucourse.experiments import ch4
from gpucourse.kernels import reduce as reduce_cu


@pytest.fixture
def fake_gpu():
    """The fake CUDA GPU (chapters 1 and 4 at small sizes), for one test."""
    with small_fake_gpu(small_ch1_ch4) as cp:
        yield cp


def test_other_ch4_gpu_branches_run_on_the_fake_gpu(fake_gpu):
    sweep = ch4.block_size_sweep(block_sizes=(64, 256), min_time_s=0.01)
    assert sweep["measured"]["method"] == "CUDA events" and sweep["regs_source"] == "compiled kernel"
    assert len(sweep["measured"]["gbps"]) == 2 and finite(sweep["measured"]["copy_gbps"])
    point = ch4.block_size_point(256, sweep, min_time_s=0.01)
    assert finite(point["point"]["measured"]["gbps"])
    hp = ch4.histogram_point(0.5, n=1 << 12, min_time_s=0.01)
    assert hp["n"] == 1 << 12 and len(hp["measured"]["speedup"]) == 1
    st = ch4.streams(n_streams=2, chunks=8, nbytes=1 << 15)
    assert st["kind"] == "measured" and st["gpu"] == "NVIDIA H200"
    assert len(st["multi"]["ops"]) == 3 * 8
    x = fake_gpu.random.random(1000, dtype=fake_gpu.float32)
    for v in reduce_cu.VERSIONS:
        got = float(reduce_cu.run(v, x, 1000, sm_count=132).get()[0])
        assert got == pytest.approx(float(fake_gpu.sum(x, dtype=fake_gpu.float64)), rel=1e-4), v


def test_the_reduction_ladder_needs_cupy_only_on_a_gpu(fake_gpu, monkeypatch):
    """A machine with CuPy and no PyTorch at all: the ladder and cupy.sum are timed, torch.sum
    is left out (as where PyTorch has no CUDA)."""
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    device.torch_cuda_works.cache_clear()
    try:
        red = ch4.reduction(n=1 << 12, min_time_s=0.01)
    finally:
        device.torch_cuda_works.cache_clear()
    assert [t["label"] for t in red["measured"]] == [*reduce_cu.VERSIONS, "ref: cupy.sum"]


def test_with_one_copy_engine_the_streams_bound_is_both_copies_in_turn(fake_gpu, monkeypatch):
    monkeypatch.setitem(fakecuda.PROPERTIES, "asyncEngineCount", 1)
    st = ch4.streams(n_streams=2, chunks=4, nbytes=1 << 15)
    assert st["copy_engines"] == 1 and st["duplex_s"] is None  # nothing to measure together
    assert st["copy_s"] == st["h2d_s"] + st["d2h_s"]
    assert st["bound_s"] == max(st["copy_s"], st["compute_s"])
