"""A corpus of CUDA C kernels in the styles learners copy (templated tiles, cooperative
groups, half and bfloat16, constant memory, WMMA, warps that exit early, structs and
typedefs by value), each run on the emulator at awkward sizes and checked against NumPy,
then once under race_check (thread orders and the hazard detector) at its smallest size.

The kernels are in tests/emulator_corpus/, one file each, written for this course.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import gpucourse.emulator as emu
import gpucourse.kernels as gk

CORPUS = Path(__file__).resolve().parent / "emulator_corpus"
F32 = np.float32
U = 2.0 ** -24  # float32's unit roundoff


def module(name: str):
    return gk.from_source((CORPUS / f"{name}.cu").read_text(), name=f"{name}.cu", backend="cpu")


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def sum_bound(terms) -> float:
    """|error| of a float32 sum of ``terms`` in any order: n u sum|terms| (to first order)."""
    terms = np.abs(np.asarray(terms, np.float64))
    return 1.01 * terms.size * U * terms.sum() + 1e-30


# --------------------------------------------------------------------------- the cases
# Each takes (call, n, rng): call(kernel, grid, block, args, shared_mem=0) launches, plainly
# or under race_check; the case checks the result against NumPy.

def saxpy_grid_stride(call, n, rng):
    k = module("saxpy_grid_stride").saxpy_grid_stride
    x, y = rng.standard_normal(n).astype(F32), rng.standard_normal(n).astype(F32)
    want = F32(2.5) * x + y
    call(k, min(cdiv(n, 128), 7), 128, (np.uint32(n), F32(2.5), x, y))
    np.testing.assert_array_equal(y, want)


def reduce_cg(call, n, rng):
    k = module("reduce_cg").reduce_cg
    x = rng.random(n).astype(F32)
    total = np.zeros(1, F32)
    call(k, min(cdiv(n, 96), 5), 96, (x, total, np.int32(n)))
    assert abs(total[0] - x.astype(np.float64).sum()) <= sum_bound(x)


def reduce_template_shared(call, n, rng):
    mod = module("reduce_template_shared")
    x = rng.standard_normal(n).astype(F32)
    xi = rng.integers(-1000, 1000, n).astype(np.int32)
    total, totali = np.zeros(1, F32), np.zeros(1, np.int32)
    call(mod.sum_float_128, cdiv(n, 128), 128, (x, total, np.int32(n)))
    call(mod.sum_int_64, cdiv(n, 64), 64, (xi, totali, np.int32(n)))
    assert abs(total[0] - x.astype(np.float64).sum()) <= sum_bound(x)
    assert totali[0] == xi.sum()


def shared_memory_struct(call, n, rng):
    mod = module("shared_memory_struct")
    block = 64
    grid = cdiv(n, 2 * block)
    x = rng.random(n).astype(F32)
    partial = emu.empty(grid)
    call(mod.reduce_dynamic_float, grid, block, (x, partial, np.int32(n)), block * 4)
    pad = np.pad(x.astype(np.float64), (0, grid * 2 * block - n)).reshape(grid, 2 * block)
    assert (np.abs(partial - pad.sum(1)) <= [sum_bound(r) for r in pad]).all()
    xd = rng.random(n)
    partial_d = emu.empty(grid, np.float64)
    call(mod.reduce_dynamic_double, grid, block, (xd, partial_d, np.int32(n)), block * 8)
    np.testing.assert_allclose(partial_d, np.pad(xd, (0, grid * 2 * block - n)).reshape(grid, -1).sum(1),
                               rtol=1e-12)


def transpose_tile_template(call, n, rng):
    mod = module("transpose_tile_template")
    rows, cols = n, max(1, (3 * n) // 5 + 1)
    a = rng.standard_normal((rows, cols)).astype(F32)
    for kernel, tile, block in (("transpose_32x8", 32, (32, 8)), ("transpose_16x16", 16, (16, 16))):
        out = emu.empty((cols, rows))
        call(mod[kernel], (cdiv(cols, tile), cdiv(rows, tile)), block,
             (a, out, np.int32(rows), np.int32(cols)))
        np.testing.assert_array_equal(out, a.T)


def matmul_template_tile(call, n, rng):
    mod = module("matmul_template_tile")
    A, B = rng.standard_normal((n, n)).astype(F32), rng.standard_normal((n, n)).astype(F32)
    ref, bound = A.astype(np.float64) @ B.astype(np.float64), n * 1.01 * U * (np.abs(A) @ np.abs(B))
    for kernel, tile in (("matmul_tile8", 8), ("matmul_tile16", 16)):
        C = emu.empty((n, n))
        call(mod[kernel], (cdiv(n, tile), cdiv(n, tile)), (tile, tile), (A, B, C, np.int32(n)))
        assert (np.abs(C - ref) <= bound).all(), kernel


def matmul_register_blocked(call, n, rng):
    k = module("matmul_register_blocked").matmul_32x32_tm8
    M, N, K = n, n + 7, max(1, n // 2 + 3)
    A, B = rng.standard_normal((M, K)).astype(F32), rng.standard_normal((K, N)).astype(F32)
    C = emu.empty((M, N))
    call(k, (cdiv(N, 32), cdiv(M, 32)), 128, (A, B, C, np.int32(M), np.int32(N), np.int32(K)))
    bound = K * 1.01 * U * (np.abs(A) @ np.abs(B))
    assert (np.abs(C - A.astype(np.float64) @ B.astype(np.float64)) <= bound + 1e-30).all()


def stencil_constant(call, n, rng):
    mod = module("stencil_constant")
    taps = rng.standard_normal(7).astype(F32)
    mod.get_global("c_taps")[...] = taps
    x, y = rng.standard_normal(n).astype(F32), emu.empty(n)
    call(mod.stencil_constant, cdiv(n, 128), 128, (x, y, np.int32(n)))
    padded = np.pad(x.astype(np.float64), 3)
    terms = np.stack([taps[k] * padded[k:k + n] for k in range(7)])
    assert (np.abs(y - terms.sum(0)) <= 7 * 1.01 * U * np.abs(terms).sum(0) + 1e-30).all()


def conv2d_constant(call, n, rng):
    mod = module("conv2d_constant")
    mask = rng.standard_normal((5, 5)).astype(F32)
    mod.set_global("c_mask", mask)
    rows, cols = n, max(1, n // 3 + 2)
    a, out = rng.standard_normal((rows, cols)).astype(F32), emu.empty((rows, cols))
    call(mod.conv2d_constant, (cdiv(cols, 16), cdiv(rows, 8)), (16, 8),
         (a, out, np.int32(rows), np.int32(cols)))
    padded = np.pad(a.astype(np.float64), 2)
    terms = np.stack([mask[dy, dx] * padded[dy:dy + rows, dx:dx + cols]
                      for dy in range(5) for dx in range(5)])
    assert (np.abs(out - terms.sum(0)) <= 25 * 1.01 * U * np.abs(terms).sum(0) + 1e-30).all()


def histogram_privatized(call, n, rng):
    k = module("histogram_privatized").histogram_privatized
    data = (rng.standard_normal(n) * 40 + 128).clip(0, 255).astype(np.uint8)
    bins = np.zeros(256, np.uint32)
    call(k, min(cdiv(n, 256), 6), 256, (data, bins, np.int32(n)))
    np.testing.assert_array_equal(bins, np.bincount(data, minlength=256))


def scan_blelloch(call, n, rng):
    k = module("scan_blelloch").scan_blelloch
    block = 1 << max(0, math.ceil(math.log2(cdiv(n, 2))))
    x = rng.integers(-4, 5, n).astype(F32)  # small integers: every partial sum exact
    y = emu.empty(n)
    call(k, 1, block, (x, y, np.int32(n)), 2 * block * 4)
    np.testing.assert_array_equal(y, np.concatenate([[0], np.cumsum(x)[:-1]]))


def layernorm_warp_row(call, n, rng):
    k = module("layernorm_warp_row").layernorm_warp_row
    rows, C = n, 67
    x = rng.standard_normal((rows, C)).astype(F32)
    w, b = rng.standard_normal(C).astype(F32), rng.standard_normal(C).astype(F32)
    y, mean, rstd = emu.empty((rows, C)), emu.empty(rows), emu.empty(rows)
    call(k, cdiv(rows, 4), 128, (x, w, b, y, mean, rstd, np.int32(rows), np.int32(C)), 2 * C * 4)
    x64 = x.astype(np.float64)
    m = x64.mean(1)
    r = 1 / np.sqrt(x64.var(1) + 1e-5)
    np.testing.assert_allclose(mean, m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd, r, rtol=1e-5)
    np.testing.assert_allclose(y, (x64 - m[:, None]) * r[:, None] * w + b, rtol=1e-4, atol=1e-5)


def softmax_online(call, n, rng):
    k = module("softmax_online").softmax_online
    rows, cols = 3, n
    x = (rng.standard_normal((rows, cols)) * 5).astype(F32)
    y = emu.empty((rows, cols))
    call(k, rows, 96, (x, y, np.int32(cols)))
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def _gelu(v):
    return 0.5 * v * (1 + np.tanh(0.7978845608 * (v + 0.044715 * v ** 3)))


def gelu_half2(call, n, rng):
    k = module("gelu_half2").gelu_half2
    x = (rng.standard_normal(n) * 3).astype(np.float16)
    y = np.zeros(n, np.float16)
    call(k, max(1, cdiv(n // 2, 64)), 64, (x, y, np.int32(n)))
    want = _gelu(x.astype(np.float64))
    # float arithmetic, then one rounding to half: within one half ulp and a little
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=2 ** -10, atol=2 ** -20)


def adamw_bf16(call, n, rng):
    k = module("adamw_bf16").adamw_bf16
    w = rng.standard_normal(n).astype(F32)
    g = emu.bfloat16(rng.standard_normal(n) * 0.1)
    m, v = rng.standard_normal(n).astype(F32) * 0.01, rng.random(n).astype(F32) * 0.01
    m0 = m.astype(np.float64)
    p = np.array((1e-3, 0.9, 0.999, 1e-8, 0.01, 3), dtype=np.dtype(
        [("lr", "f4"), ("beta1", "f4"), ("beta2", "f4"), ("eps", "f4"), ("wd", "f4"), ("step", "i4")]))[()]
    gf = emu.bfloat16_to_float(g).astype(np.float64)
    b1, b2 = (float(F32(b)) for b in (0.9, 0.999))  # the kernel's float constants
    c1, c2 = float(F32(1) - F32(0.9)), float(F32(1) - F32(0.999))
    m2 = b1 * m + c1 * gf
    v2 = b2 * v + c2 * gf * gf
    w2 = w - 1e-3 * ((m2 / (1 - b1 ** 3)) / (np.sqrt(v2 / (1 - b2 ** 3)) + 1e-8) + 0.01 * w)
    wb = np.zeros(n, np.uint16)
    call(k, cdiv(n, 128), 128, (w, wb, g, m, v, p, np.int32(n)))
    np.testing.assert_allclose(w, w2, rtol=1e-6, atol=1e-7)
    # two products and a sum in float: within 3 u of the terms' magnitudes
    assert (np.abs(m - m2) <= 3.01 * U * (b1 * np.abs(m0) + c1 * np.abs(gf))).all()
    np.testing.assert_array_equal(wb, emu.bfloat16(w))


def dot_half_accumulate(call, n, rng):
    k = module("dot_half_accumulate").dot_half_accumulate
    a, b = rng.standard_normal(n).astype(np.float16), rng.standard_normal(n).astype(np.float16)
    out = np.zeros(1, F32)
    call(k, min(cdiv(n, 64), 4), 64, (a, b, out, np.int32(n)))
    prods = a.astype(np.float64) * b.astype(np.float64)  # exact in float too
    assert abs(out[0] - prods.sum()) <= sum_bound(prods)


def wmma_gemm(call, n, rng):
    k = module("wmma_gemm").wmma_gemm
    M, N, K = 16 * n, 16 * (n + 2), 16 * (n + 1)
    A, B = rng.standard_normal((M, K)).astype(np.float16), rng.standard_normal((K, N)).astype(np.float16)
    C = emu.empty((M, N))
    call(k, (cdiv(N, 32), cdiv(M, 32)), 128, (A, B, C, np.int32(M), np.int32(N), np.int32(K)))
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    assert (np.abs(C - A64 @ B64) <= K * 1.01 * U * (np.abs(A64) @ np.abs(B64))).all()


def wmma_bf16_bias_relu(call, n, rng):
    k = module("wmma_bf16_bias_relu").wmma_bf16_bias_relu
    M, N, K = 16 * n, 48, 32
    X, W = emu.bfloat16(rng.standard_normal((M, K))), emu.bfloat16(rng.standard_normal((N, K)))
    bias = rng.standard_normal(N).astype(F32)
    Y = emu.empty((M, N))
    tiles = (M // 16) * (N // 16)
    call(k, cdiv(tiles, 4), 128, (X, W, bias, Y, np.int32(M), np.int32(N), np.int32(K)))
    X64, W64 = (emu.bfloat16_to_float(t).astype(np.float64) for t in (X, W))
    ref = np.maximum(X64 @ W64.T + bias, 0)
    assert (np.abs(Y - ref) <= (K + 1) * 1.01 * U * (np.abs(X64) @ np.abs(W64).T + np.abs(bias))).all()


CSR = np.dtype([("row_ptr", np.uintp), ("col_idx", np.uintp), ("values", np.uintp),
                ("rows", np.int32), ("cols", np.int32)], align=True)


def spmv_csr_struct(call, n, rng):
    k = module("spmv_csr_struct").spmv_csr_struct
    dense = ((rng.random((n, 75)) < 0.3) * rng.standard_normal((n, 75))).astype(F32)
    row_ptr = np.concatenate([[0], np.cumsum((dense != 0).sum(1))]).astype(np.int32)
    nz = np.nonzero(dense)
    col_idx, values = nz[1].astype(np.int32), dense[nz].astype(F32)
    A = np.array((gk.pointer(row_ptr), gk.pointer(col_idx), gk.pointer(values), n, 75), dtype=CSR)[()]
    x, y = rng.standard_normal(75).astype(F32), emu.empty(n)
    call(k, cdiv(32 * n, 128), 128, (A, x, y))
    terms = dense.astype(np.float64) * x
    assert (np.abs(y - terms.sum(1)) <= [sum_bound(t) for t in terms]).all()


GRAPH = np.dtype([("row_ptr", np.uintp), ("adj", np.uintp), ("vertices", np.int32)], align=True)
FRONTIER = np.dtype([("vertices", np.uintp), ("size", np.int32), ("level", np.int32)], align=True)


def bfs_frontier_struct(call, n, rng):
    k = module("bfs_frontier_struct").bfs_frontier_struct
    edges = rng.integers(0, n, (3 * n, 2))
    adj_lists = [sorted({int(b) for a, b in edges if a == v} | {int(a) for a, b in edges if b == v})
                 for v in range(n)]
    row_ptr = np.concatenate([[0], np.cumsum([len(a) for a in adj_lists])]).astype(np.int32)
    adj = np.array([u for a in adj_lists for u in a] or [0], np.int32)
    depth = np.full(n, -1, np.int32)
    depth[0] = 0
    g = np.array((gk.pointer(row_ptr), gk.pointer(adj), n), dtype=GRAPH)[()]
    current, level = np.array([0], np.int32), 0
    while current.size:
        nxt, size = np.zeros(n, np.int32), np.zeros(1, np.int32)
        f = np.array((gk.pointer(current), current.size, level), dtype=FRONTIER)[()]
        call(k, cdiv(current.size, 64), 64, (g, f, depth, nxt, size))
        current, level = nxt[:size[0]].copy(), level + 1
    want = np.full(n, -1)  # breadth-first search in Python
    want[0], queue = 0, [0]
    for v in queue:
        for u in adj_lists[v]:
            if want[u] < 0:
                want[u] = want[v] + 1
                queue.append(u)
    np.testing.assert_array_equal(depth, want)


def early_exit_rows(call, n, rng):
    k = module("early_exit_rows").early_exit_rows
    x = rng.standard_normal((n, 45)).astype(F32)
    out = emu.empty(n)
    call(k, cdiv(32 * n, 96), 96, (x, out, np.int32(n), np.int32(45)))
    np.testing.assert_array_equal(out, x.max(1))


def tile_partitions(call, n, rng):
    k = module("tile_partitions").tile_partitions
    x = rng.integers(-9, 10, n).astype(np.int32)
    s16, s8, s4, p8 = (np.zeros(cdiv(n, t), np.int32) for t in (16, 8, 4, 8))
    call(k, cdiv(n, 64), 64, (x, s16, s8, s4, p8, np.int32(n)))
    for t, got in ((16, s16), (8, s8), (4, s4)):
        np.testing.assert_array_equal(got, np.add.reduceat(x, np.arange(0, n, t)))
    np.testing.assert_array_equal(p8, np.add.reduceat((x > 0).astype(int), np.arange(0, n, 8)))


FLOAT2 = np.dtype([("x", "f4"), ("y", "f4")])


def vector_float4(call, n, rng):
    k = module("vector_float4").vector_float4
    x, y = rng.standard_normal(n).astype(F32), emu.empty(n)
    scale, shift = np.array((2.0, -1.0), FLOAT2)[()], np.array((0.5, 3.0), FLOAT2)[()]
    call(k, max(1, cdiv(n // 4, 64)), 64, (x, y, scale, shift, np.int32(n)))
    i = np.arange(n)
    first = np.where(n // 4 > i // 4, 4 * (i // 4) < n // 2, i < n // 2)
    np.testing.assert_array_equal(y, np.where(first, x * F32(2) + F32(0.5), x * F32(-1) + F32(3)))


def matvec_constant_struct(call, n, rng):
    mod = module("matvec_constant_struct")
    rows, cols = n, n // 2 + 5
    p = mod.get_global("c_params").view(np.dtype([("rows", "i4"), ("cols", "i4"), ("alpha", "f4"),
                                                   ("beta", "f4")]))
    p["rows"], p["cols"], p["alpha"], p["beta"] = rows, cols, 1.5, -0.5
    A, x = rng.standard_normal((rows, cols)).astype(F32), rng.standard_normal(cols).astype(F32)
    y = rng.standard_normal(rows).astype(F32)
    want = 1.5 * (A.astype(np.float64) @ x) - 0.5 * y
    call(mod.matvec_constant_struct, cdiv(rows, 64), 64, (A, x, y))
    assert (np.abs(y - want) <= (cols + 2) * 1.01 * U * (1.5 * np.abs(A) @ np.abs(x) + 0.5 * 4)).all()


def cross_entropy(call, n, rng):
    k = module("cross_entropy").cross_entropy
    rows, classes = n, 101
    z = (rng.standard_normal((rows, classes)) * 3).astype(F32)
    labels = rng.integers(0, classes, rows).astype(np.int32)
    loss = emu.empty(rows)
    call(k, cdiv(32 * rows, 128), 128, (z, labels, loss, np.int32(rows), np.int32(classes)))
    z64 = z.astype(np.float64)
    m = z64.max(1)
    want = np.log(np.exp(z64 - m[:, None]).sum(1)) + m - z64[np.arange(rows), labels]
    np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-5)


def block_scan_cg(call, n, rng):
    k = module("block_scan_cg").block_scan_cg
    x = rng.integers(-50, 50, n).astype(np.int32)
    y = np.zeros(n, np.int32)
    call(k, cdiv(n, 160), 160, (x, y, np.int32(n)))
    blocks = [np.cumsum(x[s:s + 160]) for s in range(0, n, 160)]
    np.testing.assert_array_equal(y, np.concatenate(blocks))


def device_counter_global(call, n, rng):
    mod = module("device_counter_global")
    mod.set_global("d_count", 0)
    mod.set_global("c_threshold", 0.75)
    x, out = rng.random(n).astype(F32), np.full(n, -1, np.int32)
    call(mod.device_counter_global, cdiv(n, 128), 128, (x, out, np.int32(n)))
    count = int(mod.get_global("d_count"))
    want = np.flatnonzero(x > 0.75)
    assert count == want.size
    np.testing.assert_array_equal(np.sort(out[:count]), want)


def half_matmul_naive(call, n, rng):
    k = module("half_matmul_naive").half_matmul_naive
    M, N, K = n, n + 3, 2 * n + 1
    A, B = rng.standard_normal((M, K)).astype(np.float16), rng.standard_normal((K, N)).astype(np.float16)
    C = np.zeros((M, N), np.float16)
    call(k, (cdiv(N, 16), cdiv(M, 16)), (16, 16), (A, B, C, np.int32(M), np.int32(N), np.int32(K)))
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    exact = A64 @ B64
    # float accumulation, then one rounding to half (half an ulp of half: 2^-11 relative)
    bound = K * 1.01 * U * (np.abs(A64) @ np.abs(B64)) + 2.0 ** -11 * np.abs(exact) + 2.0 ** -25
    assert (np.abs(C.astype(np.float64) - exact) <= bound * 1.0001).all()


def bf16_rmsnorm(call, n, rng):
    k = module("bf16_rmsnorm").bf16_rmsnorm
    rows, C = 3, n
    x, w = emu.bfloat16(rng.standard_normal((rows, C))), emu.bfloat16(rng.standard_normal(C))
    y = np.zeros((rows, C), np.uint16)
    call(k, rows, 128, (x, w, y, np.int32(C)))
    xf, wf = emu.bfloat16_to_float(x).astype(np.float64), emu.bfloat16_to_float(w).astype(np.float64)
    want = xf / np.sqrt((xf ** 2).mean(1, keepdims=True) + 1e-6) * wf
    np.testing.assert_allclose(emu.bfloat16_to_float(y), want, rtol=2 ** -7, atol=1e-6)


def atomic_cas_max(call, n, rng):
    k = module("atomic_cas_max").atomic_cas_max
    x = rng.standard_normal(n).astype(F32)
    result = np.array([-np.inf], F32)
    call(k, cdiv(n, 128), 128, (x, result, np.int32(n)))
    assert result[0] == x.max()


# (case, sizes): awkward sizes first (not multiples of a warp or a tile), the smallest first
CASES = [
    (saxpy_grid_stride, [1, 1000, 4099]),
    (reduce_cg, [1, 33, 3001]),
    (reduce_template_shared, [1, 129, 2000]),
    (shared_memory_struct, [1, 129, 1001]),
    (transpose_tile_template, [1, 17, 67]),
    (matmul_template_tile, [1, 17, 33]),
    (matmul_register_blocked, [1, 31, 70]),
    (stencil_constant, [1, 6, 300]),
    (conv2d_constant, [1, 9, 37]),
    (histogram_privatized, [1, 255, 5000]),
    (scan_blelloch, [1, 3, 300]),
    (layernorm_warp_row, [1, 5, 18]),
    (softmax_online, [1, 31, 1000]),
    (gelu_half2, [1, 2, 999]),
    (adamw_bf16, [1, 130, 1000]),
    (dot_half_accumulate, [1, 63, 2049]),
    (wmma_gemm, [1, 3]),
    (wmma_bf16_bias_relu, [1, 5]),
    (spmv_csr_struct, [1, 13, 70]),
    (bfs_frontier_struct, [1, 9, 60]),
    (early_exit_rows, [1, 4, 37]),
    (tile_partitions, [1, 13, 150]),
    (vector_float4, [1, 7, 258]),
    (matvec_constant_struct, [1, 33, 100]),
    (cross_entropy, [1, 5, 33]),
    (block_scan_cg, [1, 161, 500]),
    (device_counter_global, [1, 100, 1000]),
    (half_matmul_naive, [1, 9, 20]),
    (bf16_rmsnorm, [1, 31, 300]),
    (atomic_cas_max, [1, 257, 2000]),
]


def _plain(kernel, grid, block, args, shared_mem=0):
    kernel(grid, block, args, shared_mem)


def _race_checked(kernel, grid, block, args, shared_mem=0):
    kernel(grid, block, args, shared_mem, race_check=True)


def test_the_corpus_holds_a_kernel_file_for_every_case():
    files = sorted(p.stem for p in CORPUS.glob("*.cu"))
    assert files == sorted(case.__name__ for case, _ in CASES) and len(files) >= 25


@pytest.mark.parametrize("case,n", [(c, n) for c, sizes in CASES for n in sizes],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_corpus_kernel_matches_numpy(case, n):
    case(_plain, n, np.random.default_rng(1000 + n))


#: Kernels whose output lists items in the order threads claim them (an atomic ticket):
#: correct, but different in each thread order, which race_check compares bit for bit; they
#: run under it where one thread claims everything.
ORDER_DEPENDENT = {bfs_frontier_struct, device_counter_global}


@pytest.mark.parametrize("case,sizes", CASES, ids=[c.__name__ for c, _ in CASES])
def test_corpus_kernel_passes_race_check(case, sizes):
    n = sizes[1] if sizes[1] <= 64 and case not in ORDER_DEPENDENT else sizes[0]
    case(_race_checked, n, np.random.default_rng(2000 + n))
