"""Chapter 1's GPU-only code paths on a FAKE CUDA device (tests/fakecuda):
a SMOKE TEST, not a measurement.

What the fake is and what its tests assert (shapes only, never timings): fakecuda/testing.py.

gpu_check() of chapters 1 and 4 runs in test_fake_gpu.py, through tools/gpu_check.py.
"""
from __future__ import annotations

import pytest

from fakecuda.testing import finite, small_ch1_ch4, small_fake_gpu
from gpucourse.experiments import ch1
from gpucourse.experiments.ch1 import strided as ch1_strided


@pytest.fixture
def fake_gpu():
    """The fake CUDA GPU (chapters 1 and 4 at small sizes), for one test."""
    with small_fake_gpu(small_ch1_ch4) as cp:
        yield cp


def test_other_ch1_gpu_branches_run_on_the_fake_gpu(fake_gpu):
    kc = ch1.check_copy_kernels()
    assert kc["where"] == "GPU" and kc["cases"] == 7 * 5
    launch = ch1_strided.copy_at_block_size(stride=2, block_size=128)
    assert launch["where"] == "GPU" and finite(launch["gbps"])
    explorer = ch1.copy_explorer(stride=4, block_size=64)
    assert explorer["gpu"] == "H200" and finite(explorer["launch"]["gbps"])
    prec = ch1.precision_bandwidth("bf16", stride=4, min_time_s=0.01)
    assert prec["device"] == "NVIDIA H200"
    assert [(row["precision"], row["stride"]) for row in prec["rows"]] == [
        ("fp32", 1), ("fp32", 4), ("bf16", 1), ("bf16", 4)]
    assert all(finite(row["gbps"]) for row in prec["rows"])
    seen = []
    sweep = ch1.stride_sweep(progress=seen.append)  # dispatches to gpu_stride_sweep
    assert "coalesced_versions" in sweep and seen[-1] == 1.0
    assert ch1.roofline()["kind"] == "measured"  # dispatches to gpu_roofline
