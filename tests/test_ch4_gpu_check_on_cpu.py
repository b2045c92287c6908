"""Chapter 4's GPU-only code on the CPU: gpu_check() says it needs a GPU, and the block-size
sweep's GPU path runs on the fake CUDA device (tests/fakecuda), where its timings mean nothing.
The full gpu_check() on the fake GPU is in test_fake_gpu.py."""
import pytest

import gpucourse as gc
from gpucourse.experiments import ch4
from gpucourse.experiments.ch4 import block_size

pytestmark = pytest.mark.skipif(gc.device.is_cuda(), reason="the CPU path (models, emulator)")


def test_gpu_check_says_it_needs_a_gpu():
    with pytest.raises(gc.errors.DeviceError, match="CUDA GPU"):
        ch4.gpu_check()


def test_on_a_gpu_only_block_sizes_that_launch_are_checked_and_timed():
    """The fake H200's compiler reports 128 registers: 768 and 1024 threads are neither
    launched for the check nor timed, and the measured series lines up with the sizes kept."""
    from fakecuda.testing import installed

    checked, timed = [], []
    with installed() as (_, mp):
        mp.setattr(block_size, "_saxpy_regs_on_gpu", lambda: 128)
        real_check, real_measure = block_size.check_saxpy, block_size.measure_saxpy

        def check(block_sizes=gc.kernels.BLOCK_SIZES, **kw):
            checked.extend(block_sizes)
            return real_check(block_sizes, sizes=(33,))

        def measure(b, n, arrays=None, min_time_s=0.1):
            timed.append(b)
            return real_measure(b, n, arrays, min_time_s=0.01)

        mp.setattr(block_size, "check_saxpy", check)
        mp.setattr(block_size, "measure_saxpy", measure)
        sweep = ch4.block_size_sweep(block_sizes=(256, 512, 768, 1024), n=1 << 14, min_time_s=0.01)
        point = ch4.block_size_point(1024, sweep, min_time_s=0.01)["point"]
    assert sweep["regs_source"] == "compiled kernel"
    assert checked == timed == sweep["block_sizes"] == [256, 512]
    assert len(sweep["measured"]["gbps"]) == 2
    assert [s["block_size"] for s in sweep["skipped"]] == [768, 1024]
    assert "measured" not in point and point["skipped"].startswith("too many registers")
    assert timed == [256, 512], "the slider at 1024 times nothing"
