"""The course's kernels through CuPy on a real GPU, against the same NumPy references as the
emulator tests, and the launch checks with this GPU's limits."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy", reason="the GPU kernel tests run kernels through CuPy")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kernel_cases import CASES, Backend  # noqa: E402

import gpucourse.kernels as gk  # noqa: E402
from gpucourse.emulator import KernelError  # noqa: E402
from gpucourse.errors import CompileError, LaunchError  # noqa: E402


@pytest.fixture(scope="module")
def gpu():
    try:
        cupy.arange(1).sum().item()
    except Exception as exc:  # CuPy installed but no working GPU
        pytest.skip(f"CuPy cannot use a GPU here: {exc}")
    return Backend("cuda")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_kernel_matches_numpy_on_the_gpu(gpu, case):
    case.run(gpu)


def test_large_arrays_on_the_gpu(gpu):
    n = (1 << 24) + 3
    for kernel in ("vector_add_v1_naive", "vector_add_v2_grid_stride", "vector_add_v3_float4"):
        from kernel_cases import check_vector_add

        k = gpu.load("vector_add")[kernel]
        check_vector_add(gpu, k, n, 256, None if kernel.endswith("naive") else 1024)
    from kernel_cases import check_reduce

    for kernel in ("reduce_v2_shared_tree", "reduce_v3_warp_shuffle", "reduce_v4_grid_stride"):
        k = gpu.load("reduce")[kernel]
        check_reduce(gpu, k, 1 << 20, 512, 264 if "stride" in kernel else None)


def test_launch_checks_use_this_gpus_limits(gpu):
    k = gpu.load("transpose").transpose_v1_naive
    x = cupy.asarray(np.random.default_rng(0).standard_normal((5, 7), dtype=np.float32))
    out = cupy.empty((7, 5), np.float32)
    with pytest.raises(LaunchError, match=r"block 2048 has 2048 threads, but a block may hold at "
                                          r"most 1024 for transpose_v1_naive on this GPU"):
        k(1, 2048, (x, out, np.int32(5), np.int32(7)))
    with pytest.raises(LaunchError, match=r"argument 3 `rows` of transpose_v1_naive is `int`: pass "
                                          r"np\.int32\(rows\), not a Python int"):
        k(1, (32, 8), (x, out, 5, np.int32(7)))
    with pytest.raises(LaunchError, match="not a NumPy array in host memory"):
        k(1, (32, 8), (x.get(), out, np.int32(5), np.int32(7)))
    with pytest.raises(LaunchError, match="pass a float32 array, not a float64 array"):
        k(1, (32, 8), (x.astype(np.float64), out, np.int32(5), np.int32(7)))
    optin = cupy.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"]
    with pytest.raises(LaunchError, match=rf"over the {optin} bytes"):
        k(1, (32, 8), (x, out, np.int32(5), np.int32(7)), shared_mem=optin + 1)
    k(1, (32, 8), (x, out, np.int32(5), np.int32(7)))
    np.testing.assert_array_equal(out.get(), x.get().T)


def test_dynamic_shared_memory_beyond_48_kb_opts_in(gpu):
    code = r"""
    extern "C" __global__ void big(float* out, int n) {
      extern __shared__ float s[];
      for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = (float)(i % 7);
      __syncthreads();
      if (threadIdx.x == 0) { float t = 0; for (int i = 0; i < n; i++) t += s[i]; out[0] = t; }
    }
    """
    k = gk.from_source(code, name="big_shared", backend="cuda").big
    n = 24 * 1024  # 96 KB of floats
    out = cupy.zeros(1, np.float32)
    k(1, 256, (out, np.int32(n)), shared_mem=4 * n)
    assert out.get()[0] == sum(i % 7 for i in range(n))  # small integers: exact in float32


def test_compile_errors_point_at_the_files_own_lines(gpu):
    code = 'extern "C" __global__ void k(float* x) {\n  x[0] = TILE * undefined_name;\n}\n'
    with pytest.raises(CompileError, match=r"^lab\.cu line 2: .*undefined_name"):
        gk.from_source(code, {"TILE": 2}, name="lab", backend="cuda")


def test_race_check_and_isolation_of_a_gpu_kernel_run_on_the_emulator(gpu):
    code = r"""
    extern "C" __global__ void neighbour(const float* in, float* out) {
      __shared__ float s[128];
      s[threadIdx.x] = in[threadIdx.x];
      out[threadIdx.x] = s[(threadIdx.x + 127) % 128];
    }
    """
    k = gk.from_source(code, name="race_gpu", backend="cuda").neighbour
    x = cupy.arange(128, dtype=np.float32)
    out = cupy.zeros(128, np.float32)
    with pytest.raises(KernelError, match="has a race"):
        k(1, 128, (x, out), race_check=True)
    good = gk.load("vector_add", backend="cuda").vector_add_v1_naive
    a = cupy.arange(50, dtype=np.float32)
    c = cupy.full(50, np.nan, np.float32)
    good(1, 64, (a, a, c, np.int32(50)), isolate=True, race_check=True, timeout=60)
    np.testing.assert_array_equal(c.get(), 2 * np.arange(50, dtype=np.float32))
