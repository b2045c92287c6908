"""Chapter 4 on a real GPU: every chapter-4 kernel through CuPy against the references, and
the experiments' GPU paths at small sizes (gpu_check() measures the full-size figures)."""
import pytest

import gpucourse as gc

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy", reason="CuPy is not installed (pip install -e .[gpu])")
if not gc.device.is_cuda() or not gc.device.cupy_works():
    pytest.skip("needs a CUDA GPU with CuPy", allow_module_level=True)

from gpucourse.experiments import ch4  # noqa: E402
from gpucourse.experiments.ch4 import (atomics, block_size, reduce_ladder,  # noqa: E402
                                       stream_overlap, warp_divergence)
from gpucourse.kernels import BLOCK_SIZES  # noqa: E402
from gpucourse.kernels import reduce as reduce_cu  # noqa: E402
from gpucourse.plot import ch4 as plot4  # noqa: E402


def test_kernels_on_the_gpu_match_the_references():
    assert block_size.check_saxpy(block_sizes=BLOCK_SIZES) == 3 * 2 * len(BLOCK_SIZES)
    assert warp_divergence.check_divergence() > 0
    assert atomics.check_histogram() > 0
    assert reduce_ladder.check_reduce() == 5 * len(reduce_cu.VERSIONS)
    stream_overlap.check_streams_kernel()


def test_block_size_sweep_measures():
    res = ch4.block_size_sweep(block_sizes=(32, 100, 256), n=1 << 22, min_time_s=0.02)
    assert res["measured"] and len(res["measured"]["gbps"]) == 3
    assert res["regs_source"] == "compiled kernel"
    assert all(g > 0 for g in res["measured"]["gbps"])
    point = ch4.block_size_point(100, res, min_time_s=0.02)
    assert point["point"]["measured"]["gbps"] > 0
    assert len(plot4.block_size_figure(point).axes) == 3


def test_divergence_measured():
    res = ch4.divergence(n=1 << 23, k=256, min_time_s=0.02)
    t1, t2, t3 = res["measured"]["median_s"]
    assert t1 > 1.2 * t2  # the divergent version pays for both branches


def test_streams_measured():
    res = ch4.streams(n_streams=4, chunks=8, nbytes=32 * 2**20)
    assert res["kind"] == "measured"
    assert res["multi"]["total_s"] < res["serial"]["total_s"]
    assert len(res["multi"]["ops"]) == 3 * 8
    # Both directions at once take at least as long as either alone, and at most both in a row.
    assert max(res["h2d_s"], res["d2h_s"]) * 0.95 <= res["duplex_s"] <= (res["h2d_s"] + res["d2h_s"]) * 1.05
    assert res["bound_s"] >= res["bound_isolated_s"] * 0.95
    plot4.streams_figure(res)


def test_histogram_measured():
    res = ch4.histogram(n=1 << 22, min_time_s=0.02, check_first=False)
    assert len(res["measured"]["speedup"]) == 2
    assert res["measured"]["speedup"][1] > 1.0  # privatization wins on skewed data


def test_reduction_measured():
    res = ch4.reduction(n=1 << 24, min_time_s=0.02)
    labels = [t["label"] for t in res["measured"]]
    assert labels[-2:] == ["ref: cupy.sum", "ref: torch.sum"]
    assert res["copy"]["gbps"] > 0
    plot4.reduction_figure(res)
