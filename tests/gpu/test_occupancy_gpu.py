"""On a real GPU: the occupancy model against the CUDA driver's own occupancy query, and the
spec table's row against the properties the device reports."""
import pathlib
import re

import pytest

from gpucourse import device, models, specs
from gpucourse.errors import SpecError

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy", reason="CuPy is not installed (pip install -e .[gpu])")

KERNEL_DIR = pathlib.Path(specs.__file__).parent / "kernels"

# Small kernels whose register and shared-memory use span the occupancy limits.
PROBE_SOURCE = r"""
extern "C" __global__ void occ_few_regs(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}

// Many values live at once, so the register count follows -maxrregcount.
extern "C" __global__ void occ_many_regs(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float acc[48];
#pragma unroll
    for (int k = 0; k < 48; ++k) acc[k] = x[(i + k) % n] * (k + 1);
#pragma unroll
    for (int r = 0; r < 8; ++r) {
#pragma unroll
        for (int k = 0; k < 48; ++k) acc[k] = acc[k] * acc[(k + 7) % 48] + 1.0f;
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < 48; ++k) s += acc[k];
    if (i < n) y[i] = s;
}

extern "C" __global__ void occ_static_smem(const float* x, float* y, int n) {
    __shared__ float tile[3000];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = threadIdx.x; k < 3000; k += blockDim.x) tile[k] = (i < n) ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) y[i] = tile[(threadIdx.x * 7) % 3000];
}

extern "C" __global__ void occ_dynamic_smem(const float* x, float* y, int n) {
    extern __shared__ float buf[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = (i < n) ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) y[i] = buf[blockDim.x - 1 - threadIdx.x];
}
"""

BLOCK_SIZES = (32, 64, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1024)
# 20096 B sits where a 128-byte and a 256-byte allocation unit give different answers.
DYNAMIC_SMEM = (0, 1, 1000, 20096, 32768, 49152, 100000, 200000)


if not (device.cupy_works()
        and hasattr(cupy.cuda.driver, "occupancyMaxActiveBlocksPerMultiprocessor")):
    pytest.skip("no usable CUDA device (or this CuPy lacks the driver occupancy query)",
                allow_module_level=True)


def _device():
    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    return dev, props


def _cc():
    _, props = _device()
    return (int(props["major"]), int(props["minor"]))


def _runtime_blocks(kernel, block: int, dyn: int) -> int:
    return cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, block, dyn)


def _model_blocks(cc, block: int, regs: int, smem: int) -> int:
    try:
        return models.occupancy(cc, block, regs, smem).active_blocks
    except SpecError:
        return 0  # the model refuses a launch that cannot run; the runtime answers 0 blocks


def _compare(kernel, cc, blocks, dyn=0):
    """(block, dyn, regs, model, runtime) for every mismatch."""
    bad = []
    regs, static = kernel.num_regs, kernel.shared_size_bytes
    for b in blocks:
        if b > kernel.max_threads_per_block:  # __launch_bounds__ or register pressure
            continue
        want = _runtime_blocks(kernel, b, dyn)
        got = _model_blocks(cc, b, regs, static + dyn)
        if want != got:
            bad.append((b, dyn, regs, got, want))
    return bad


@pytest.fixture(scope="module")
def cc():
    cc = _cc()
    try:
        specs.occupancy_limits(cc)
    except SpecError:
        pytest.skip(f"compute capability {cc} is not in the occupancy table")
    return cc


@pytest.mark.parametrize("maxrreg", [None, 24, 40, 64, 96, 168, 255])
def test_model_matches_runtime_across_register_counts(cc, maxrreg):
    """The model's blocks per SM equal cuOccupancyMaxActiveBlocksPerMultiprocessor for every block size."""
    options = () if maxrreg is None else (f"--maxrregcount={maxrreg}",)
    for name in ("occ_few_regs", "occ_many_regs"):
        kernel = cupy.RawKernel(PROBE_SOURCE, name, options=options)
        assert _compare(kernel, cc, BLOCK_SIZES) == [], f"{name} {options}: (block, dyn, regs, model, runtime)"


def test_model_matches_runtime_with_shared_memory(cc):
    """Static and dynamic shared memory: allocation unit, per-block reserve and opt-in sizes."""
    _, props = _device()
    optin = int(props.get("sharedMemPerBlockOptin", 48 * 1024))
    static = cupy.RawKernel(PROBE_SOURCE, "occ_static_smem")
    assert static.shared_size_bytes == 12000
    assert _compare(static, cc, BLOCK_SIZES) == []
    dynamic = cupy.RawKernel(PROBE_SOURCE, "occ_dynamic_smem")
    bad = []
    for dyn in DYNAMIC_SMEM:
        if dyn + dynamic.shared_size_bytes > optin:
            continue
        if dyn > 48 * 1024:
            dynamic.max_dynamic_shared_size_bytes = dyn  # opt in, as a real launch must
        bad += _compare(dynamic, cc, (64, 128, 256, 1024), dyn)
    assert bad == [], "(block, dyn, regs, model, runtime)"


def _course_kernels():
    for path in sorted(KERNEL_DIR.glob("*.cu")):
        names = re.findall(r'extern\s+"C"\s+__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(\w+)',
                           path.read_text())
        for name in names:
            yield pytest.param(path, name, id=f"{path.stem}:{name}")


COURSE_KERNELS = list(_course_kernels())


@pytest.mark.skipif(not COURSE_KERNELS, reason="no kernels in src/gpucourse/kernels yet")
@pytest.mark.parametrize("path,name", COURSE_KERNELS)
def test_model_matches_runtime_for_course_kernels(cc, path, name):
    """Every kernel the course ships: model and runtime agree at the usual block sizes."""
    kernel = cupy.RawKernel(path.read_text(), name, options=(f"-I{KERNEL_DIR}",))
    assert _compare(kernel, cc, (32, 64, 128, 256, 512, 1024)) == []


def test_table_row_matches_the_device():
    """When the table knows this GPU, its SM count, L2 and bandwidth agree with what the device reports."""
    _, props = _device()
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    try:
        row = specs.lookup(name)
    except SpecError:
        pytest.skip(f"{name} is not in the table")
    assert row.compute_capability == _cc()
    assert row.sm_count == int(props["multiProcessorCount"])
    assert row.l2_bytes == int(props["l2CacheSize"])
    dev = cupy.cuda.Device()
    clock = cupy.cuda.runtime.deviceGetAttribute(cupy.cuda.runtime.cudaDevAttrMemoryClockRate, dev.id)
    bus = cupy.cuda.runtime.deviceGetAttribute(cupy.cuda.runtime.cudaDevAttrGlobalMemoryBusWidth, dev.id)
    estimate = 2.0 * clock * 1e3 * bus / 8
    assert estimate == pytest.approx(row.bandwidth_Bps, rel=0.05)
