"""Chapter 1 on a real GPU: the copy kernels, the timing demonstration, the issue's two
thresholds (gpu_check), the measured roofline and the lab checker, all through CuPy."""
import numpy as np
import pytest

from gpucourse import device

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy", reason="CuPy is not installed (pip install -e .[gpu])")

if not device.cupy_works():
    pytest.skip("no usable CUDA device for CuPy", allow_module_level=True)

from gpucourse.check import ch1 as check1  # noqa: E402
from gpucourse.experiments import ch1  # noqa: E402
from gpucourse.experiments.ch1 import strided  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _cuda():
    mp = pytest.MonkeyPatch()
    mp.setenv("GPUCOURSE_DEVICE", "cuda")
    yield
    mp.undo()


@pytest.fixture(scope="module")
def result():
    return ch1.gpu_check()


@pytest.mark.full_gpu_check
def test_gpu_check_meets_the_issue_thresholds(result):
    checks = result["checks"]
    assert checks["coalesced_pct_of_copy"]["value"] >= 80, checks
    assert checks["stride32_slowdown"]["value"] >= 5, checks
    assert result["passed"]
    sweep = result["stride_sweep"]
    assert sweep["nbytes"] >= 8 * (sweep["l2_bytes"] or 0)  # far larger than L2


@pytest.mark.full_gpu_check
def test_timing_without_sync_is_visibly_wrong(result):
    rows = {r["method"]: r["seconds"] for r in result["timing"]["rows"]
            if r["group"].startswith("copy kernel on the GPU")}
    events = rows["gc.bench: warm-up, CUDA events, median"]
    assert rows["host timer, no synchronize"] < 0.5 * events
    assert rows["one cold call + synchronize"] > events


@pytest.mark.full_gpu_check
def test_measured_roofline_points_under_the_roof(result):
    r = result["roofline"]
    roof = r["ceilings"]
    for p in r["points"]:
        assert p["rate"] <= 1.05 * min(roof["peak_flops"], p["intensity"] * roof["bandwidth_Bps"])
    add = r["points"][0]
    assert add["bytes"] / add["seconds"] > 0.5 * roof["bandwidth_Bps"]  # memory-bound, near the roof


@pytest.mark.full_gpu_check
def test_transfer_measured_when_torch_has_cuda(result):
    if "transfer" not in result:
        pytest.skip("PyTorch has no CUDA here")
    add = result["transfer"]["rows"][0]["measured"]
    assert add["h2d_pinned_s"] > 10 * add["compute_s"]  # the host link is the bottleneck


def test_copy_kernels_on_the_gpu_at_awkward_sizes():
    r = ch1.check_copy_kernels(sizes=(1, 31, 33, 257, 4099, (1 << 20) + 3), block=96)
    assert r["where"] == "GPU" and r["cases"] == 30


def test_lab_checker_runs_the_kernel_on_the_gpu():
    good = check1.CHUNKED_ELEMENT.replace(
        "return t * per_thread + k;", "return t + (long long)k * T; //")
    check1.check_coalesced_scale(good)
    with pytest.raises(AssertionError, match="not coalesced"):
        check1.check_coalesced_scale(check1.CHUNKED_ELEMENT)


def test_widget_back_ends_measure_on_the_gpu():
    r = strided.copy_at_block_size(stride=32, block_size=1024)
    assert r["where"] == "GPU" and r["gbps"] > 0
    p = ch1.precision_bandwidth("bf16", stride=8, min_time_s=0.02)
    fp32, bf16 = p["rows"][0], p["rows"][2]
    assert bf16["gelems"] > 1.3 * fp32["gelems"]  # same bytes, twice the elements
    assert np.isfinite([row["gbps"] for row in p["rows"]]).all()
