"""Smoke tests of the GPU path of each CUDA feature the emulator covers, on the fake CuPy
(tests/fakecuda: a RawModule built and run by the emulator, device arrays kept apart from
NumPy's): templates with shared memory, cooperative groups, 16-bit types, WMMA, structs and
vector types by value, typedef'd parameters, get_global / set_global, warps that exit before
a barrier. They check that the course's CuPy code path takes these kernels as a GPU would:
device arrays in, results out, no NumPy array where CuPy wants a device one."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fakecuda.testing import installed

CORPUS = Path(__file__).resolve().parent / "emulator_corpus"


@pytest.fixture
def cuda():
    """(cupy, gpucourse.kernels) with the fake GPU installed for one test."""
    with installed() as (cp, _):
        import gpucourse.kernels as gk

        yield cp, gk


def _module(gk, name):
    mod = gk.from_source((CORPUS / f"{name}.cu").read_text(), name=f"{name}.cu")
    assert mod.backend == "cuda"
    return mod


def test_a_template_with_shared_memory_and_typedefs_on_the_gpu_path(cuda):
    cp, gk = cuda
    mod = _module(gk, "matmul_template_tile")
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((19, 19)).astype(np.float32), rng.standard_normal((19, 19)).astype(np.float32)
    C = cp.zeros((19, 19), np.float32)
    mod.matmul_tile8((3, 3), (8, 8), (cp.asarray(A), cp.asarray(B), C, np.int32(19)))
    np.testing.assert_allclose(C.get(), A @ B, rtol=1e-4, atol=1e-5)
    saxpy = _module(gk, "saxpy_grid_stride")
    assert [p.dtype for p in saxpy.saxpy_grid_stride.params] == [np.uint32, np.float32, np.float32, np.float32]
    x, y = cp.asarray(np.ones(50, np.float32)), cp.asarray(np.arange(50, dtype=np.float32))
    saxpy.saxpy_grid_stride(1, 64, (np.uint32(50), np.float32(2), x, y))
    np.testing.assert_array_equal(y.get(), np.arange(50) + 2)
    with pytest.raises(Exception, match=r"a NumPy array in host memory"):
        saxpy.saxpy_grid_stride(1, 64, (np.uint32(50), np.float32(2), np.ones(50, np.float32), y))


def test_cooperative_groups_on_the_gpu_path(cuda):
    cp, gk = cuda
    mod = _module(gk, "reduce_cg")
    x = np.random.default_rng(1).random(777).astype(np.float32)
    total = cp.zeros(1, np.float32)
    mod.reduce_cg(3, 96, (cp.asarray(x), total, np.int32(777)))
    np.testing.assert_allclose(total.get()[0], x.sum(), rtol=1e-5)


def test_half_and_bfloat16_on_the_gpu_path(cuda):
    cp, gk = cuda
    from gpucourse import emulator as emu

    gelu = _module(gk, "gelu_half2")
    x = np.linspace(-3, 3, 11).astype(np.float16)
    y = cp.zeros(11, np.float16)
    gelu.gelu_half2(1, 64, (cp.asarray(x), y, np.int32(11)))
    v = x.astype(np.float64)
    np.testing.assert_allclose(y.get(), 0.5 * v * (1 + np.tanh(0.7978845608 * (v + 0.044715 * v ** 3))),
                               rtol=2 ** -10, atol=1e-6)
    norm = _module(gk, "bf16_rmsnorm")
    xb, wb = emu.bfloat16(np.arange(1, 9, dtype=np.float32)), emu.bfloat16(np.ones(8))
    out = cp.zeros(8, np.uint16)
    norm.bf16_rmsnorm(1, 32, (cp.asarray(xb), cp.asarray(wb), out, np.int32(8)))
    want = np.arange(1, 9) / np.sqrt((np.arange(1, 9) ** 2).mean() + 1e-6)
    np.testing.assert_allclose(emu.bfloat16_to_float(out.get()), want, rtol=2 ** -7)


def test_wmma_on_the_gpu_path(cuda):
    cp, gk = cuda
    mod = _module(gk, "wmma_gemm")
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((32, 16)).astype(np.float16), rng.standard_normal((16, 48)).astype(np.float16)
    C = cp.zeros((32, 48), np.float32)
    mod.wmma_gemm((2, 1), 128, (cp.asarray(A), cp.asarray(B), C, np.int32(32), np.int32(48), np.int32(16)))
    np.testing.assert_allclose(C.get(), A.astype(np.float64) @ B.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_structs_and_vector_types_by_value_on_the_gpu_path(cuda):
    cp, gk = cuda
    spmv = _module(gk, "spmv_csr_struct")
    dense = np.array([[1, 0, 2], [0, 0, 3], [4, 5, 0]], np.float32)
    row_ptr = cp.asarray(np.array([0, 2, 3, 5], np.int32))
    cols = cp.asarray(np.array([0, 2, 2, 0, 1], np.int32))
    vals = cp.asarray(np.array([1, 2, 3, 4, 5], np.float32))
    dt = np.dtype([("row_ptr", np.uintp), ("col_idx", np.uintp), ("values", np.uintp),
                   ("rows", np.int32), ("cols", np.int32)], align=True)
    A = np.array((gk.pointer(row_ptr), gk.pointer(cols), gk.pointer(vals), 3, 3), dtype=dt)[()]
    x, y = cp.asarray(np.array([1, 2, 3], np.float32)), cp.zeros(3, np.float32)
    spmv.spmv_csr_struct(1, 96, (A, x, y))
    np.testing.assert_array_equal(y.get(), dense @ np.array([1, 2, 3], np.float32))
    vec = _module(gk, "vector_float4")
    f2 = np.dtype([("x", "f4"), ("y", "f4")])
    xs, ys = cp.asarray(np.ones(9, np.float32)), cp.zeros(9, np.float32)
    vec.vector_float4(1, 32, (xs, ys, np.array((2, 3), f2)[()], np.array((0, 1), f2)[()], np.int32(9)))
    np.testing.assert_array_equal(ys.get(), [2, 2, 2, 2, 4, 4, 4, 4, 4])


def test_get_global_and_set_global_on_the_gpu_path(cuda):
    cp, gk = cuda
    mod = _module(gk, "stencil_constant")
    taps = mod.get_global("c_taps")
    assert type(taps).__module__ == "cupy" and taps.shape == (7,) and taps.dtype == np.float32
    with pytest.raises(ValueError, match="non-scalar numpy.ndarray cannot be used for fill"):
        taps[...] = np.ones(7, np.float32)  # as CuPy: no implicit host-to-device copy
    taps.set(np.array([0, 0, 0, 1, 0, 0, 0], np.float32))
    x = np.arange(20, dtype=np.float32)
    y = cp.zeros(20, np.float32)
    mod.stencil_constant(1, 128, (cp.asarray(x), y, np.int32(20)))
    np.testing.assert_array_equal(y.get(), x)
    mod.set_global("c_taps", np.array([0, 0, 0, 0, 2, 0, 0], np.float32))
    mod.stencil_constant(1, 128, (cp.asarray(x), y, np.int32(20)))
    np.testing.assert_array_equal(y.get(), 2 * np.append(x[1:], 0))
    counter = _module(gk, "device_counter_global")
    counter.set_global("d_count", 0)
    counter.set_global("c_threshold", 0.5)
    out = cp.zeros(10, np.int32)
    counter.device_counter_global(1, 32, (cp.asarray(np.linspace(0, 1, 10).astype(np.float32)), out,
                                          np.int32(10)))
    assert int(counter.get_global("d_count").get()) == 5


def test_warps_that_exit_before_a_barrier_on_the_gpu_path(cuda):
    cp, gk = cuda
    mod = _module(gk, "layernorm_warp_row")
    rows, C = 5, 40
    x = np.random.default_rng(3).standard_normal((rows, C)).astype(np.float32)
    y, mean, rstd = (cp.zeros(s, np.float32) for s in ((rows, C), rows, rows))
    mod.layernorm_warp_row(2, 128, (cp.asarray(x), cp.asarray(np.ones(C, np.float32)),
                                    cp.asarray(np.zeros(C, np.float32)), y, mean, rstd,
                                    np.int32(rows), np.int32(C)), shared_mem=2 * C * 4)
    np.testing.assert_allclose(mean.get(), x.mean(1), rtol=1e-5, atol=1e-6)
