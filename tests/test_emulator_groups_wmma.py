"""Cooperative groups (<cooperative_groups.h>) and WMMA (<mma.h>) on the emulator."""
from __future__ import annotations

import numpy as np
import pytest

import gpucourse.emulator as emu
import gpucourse.kernels as gk
from gpucourse.errors import CompileError, KernelError

GROUPS = gk.from_source(r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

struct absmax { __device__ float operator()(float a, float b) const { return fabsf(a) > fabsf(b) ? a : b; } };

// Per tile of N lanes: sum, max (cg::greater), a functor of one's own; per block: cg::sync.
template <int N> __device__ void tile_reductions(const float* x, float* out) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<N> tile = cg::tiled_partition<N>(block);
  const float v = x[block.thread_rank()];
  const int r = block.thread_rank();
  out[4 * r + 0] = cg::reduce(tile, v, cg::plus<float>());
  out[4 * r + 1] = cg::reduce(tile, v, cg::greater<float>());
  out[4 * r + 2] = cg::reduce(tile, v, absmax());
  out[4 * r + 3] = tile.meta_group_rank() * 100 + tile.thread_rank() + 0.5f * (tile.meta_group_size() == (block.size() + N - 1) / N);
  cg::sync(block);
}
extern "C" __global__ void reduce32(const float* x, float* out) { tile_reductions<32>(x, out); }
extern "C" __global__ void reduce16(const float* x, float* out) { tile_reductions<16>(x, out); }
extern "C" __global__ void reduce8(const float* x, float* out) { tile_reductions<8>(x, out); }
extern "C" __global__ void reduce4(const float* x, float* out) { tile_reductions<4>(x, out); }

extern "C" __global__ void tile_ops(const int* x, int* out) {
  auto block = cg::this_thread_block();
  auto warp = cg::tiled_partition<32>(block);
  auto tile = cg::tiled_partition<8>(warp);
  const int v = x[block.thread_rank()], r = block.thread_rank();
  out[8 * r + 0] = tile.shfl(v, 3);
  out[8 * r + 1] = tile.shfl_up(v, 2);
  out[8 * r + 2] = tile.shfl_down(v, 2);
  out[8 * r + 3] = tile.shfl_xor(v, 5);
  out[8 * r + 4] = tile.any(v > 90) + 2 * tile.all(v > 5);
  out[8 * r + 5] = tile.ballot(v % 2 == 0);
  out[8 * r + 6] = cg::inclusive_scan(tile, v);
  out[8 * r + 7] = cg::exclusive_scan(tile, v, cg::plus<int>());
  tile.sync();
}

// A block sum: warp tiles reduce, their sums meet in shared memory after block.sync().
extern "C" __global__ void block_sum(const float* x, float* out, int n) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  __shared__ float partial[32];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = cg::reduce(warp, i < n ? x[i] : 0.0f, cg::plus<float>());
  if (warp.thread_rank() == 0) partial[warp.meta_group_rank()] = v;
  block.sync();
  if (warp.meta_group_rank() == 0) {
    v = cg::reduce(warp, warp.thread_rank() < warp.meta_group_size() ? partial[warp.thread_rank()] : 0.0f,
                   cg::plus<float>());
    if (warp.thread_rank() == 0) out[blockIdx.x] = v;
  }
}

extern "C" __global__ void dynamic_tiles(int* out) {
  cg::thread_group tile = cg::tiled_partition(cg::this_thread_block(), 4);
  out[threadIdx.x] = (int)(tile.thread_rank() * 10 + tile.size());
  tile.sync();
}

extern "C" __global__ void branch_sync(float* x) {
  cg::thread_block block = cg::this_thread_block();
  if (threadIdx.x < 16) block.sync();
  x[threadIdx.x] = 1.0f;
}
""", name="groups", backend="cpu")

RNG = np.random.default_rng(23)


def _line(module, text: str) -> int:
    """The line of ``module``'s source that holds ``text``."""
    return 1 + next(i for i, row in enumerate(module.source.splitlines()) if text in row)


@pytest.mark.parametrize("size", [32, 16, 8, 4])
def test_tile_reductions_with_plus_greater_and_a_functor(size):
    block = 96
    x = RNG.standard_normal(block).astype(np.float32)
    out = np.zeros(4 * block, np.float32)
    GROUPS[f"reduce{size}"](1, block, (x, out))
    out = out.reshape(block, 4)
    tiles = x.reshape(-1, size)
    np.testing.assert_allclose(out[:, 0], np.repeat(tiles.sum(1), size), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out[:, 1], np.repeat(tiles.max(1), size))
    np.testing.assert_array_equal(out[:, 2], np.repeat(tiles[np.arange(len(tiles)),
                                                             np.abs(tiles).argmax(1)], size))
    ranks = np.arange(block)
    np.testing.assert_array_equal(out[:, 3], (ranks // size) * 100 + ranks % size + 0.5)


def test_tile_shuffles_votes_ballot_and_scans():
    block = 64
    x = RNG.integers(0, 100, block).astype(np.int32)
    out = np.zeros(8 * block, np.int32)
    GROUPS.tile_ops(1, block, (x, out))
    out = out.reshape(block, 8)
    r = np.arange(block)
    base = r - r % 8
    np.testing.assert_array_equal(out[:, 0], x[base + 3])
    np.testing.assert_array_equal(out[:, 1], np.where(r % 8 >= 2, x[r - 2], x))
    np.testing.assert_array_equal(out[:, 2], np.where(r % 8 < 6, x[np.minimum(r + 2, block - 1)], x))
    np.testing.assert_array_equal(out[:, 3], x[base + (r % 8) ^ 5])
    t = x.reshape(-1, 8)
    votes = (t > 90).any(1).astype(int) + 2 * (t > 5).all(1).astype(int)
    np.testing.assert_array_equal(out[:, 4], np.repeat(votes, 8))
    ballots = ((t % 2 == 0) * (1 << np.arange(8))).sum(1)
    np.testing.assert_array_equal(out[:, 5], np.repeat(ballots, 8))
    np.testing.assert_array_equal(out[:, 6], np.cumsum(t, 1).reshape(-1))
    np.testing.assert_array_equal(out[:, 7], (np.cumsum(t, 1) - t).reshape(-1))


@pytest.mark.parametrize("n,block", [(1000, 256), (33, 64), (4097, 128)])
def test_a_block_sum_of_warp_reductions(n, block):
    x = RNG.random(n).astype(np.float32)
    grid = (n + block - 1) // block
    out = emu.empty(grid)
    GROUPS.block_sum(grid, block, (x, out, np.int32(n)))
    want = np.add.reduceat(np.pad(x, (0, grid * block - n)), np.arange(0, grid * block, block))
    np.testing.assert_allclose(out, want, rtol=1e-5)


def test_a_runtime_sized_partition_and_a_block_sync_in_a_branch():
    out = np.zeros(32, np.int32)
    GROUPS.dynamic_tiles(1, 32, (out,))
    np.testing.assert_array_equal(out, (np.arange(32) % 4) * 10 + 4)
    line = _line(GROUPS, "if (threadIdx.x < 16) block.sync();")
    with pytest.raises(KernelError, match=rf"kernel branch_sync: __syncthreads\(\) is reached by only "
                                          rf"some threads.*16 threads wait at the one on line {line}"):
        GROUPS.branch_sync(1, 32, (np.zeros(32, np.float32),))


@pytest.mark.parametrize("code,match", [
    ("cooperative_groups::this_grid().sync();",
     r"line 2: the CPU emulator cannot run grid-wide synchronization \(this_grid\(\)\.sync\(\)\)"),
    ("auto g = cooperative_groups::coalesced_threads(); (void)g;",
     r"line 2: the CPU emulator does not support the cooperative group coalesced_threads"),
    ("auto t = cooperative_groups::tiled_partition<64>(cooperative_groups::this_thread_block());",
     r"tiled_partition<N> takes N a power of 2 from 1 to 32"),
])
def test_groups_the_emulator_cannot_run_are_named(code, match):
    src = f'#include <cooperative_groups.h>\nextern "C" __global__ void k(float* x) {{ {code} }}\n'
    with pytest.raises(CompileError, match=match):
        gk.from_source(src, name="nogroup", backend="cpu")


WMMA = gk.from_source(r"""
#include <mma.h>
using namespace nvcuda;

// C (M x N, float, row-major) = A (M x K, row-major) B (K x N); one warp per 16 x 16 tile of C.
// LAYOUT_B: B stored row-major (ldb = N) or column-major (ldb = K).
template <class T, class LayoutB>
__device__ void gemm(const T* A, const T* B, float* C, int M, int N, int K) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int tm = warp / (N / 16), tn = warp % (N / 16);
  if (tm * 16 >= M) return;  // a whole warp returns
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LayoutB> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k = 0; k < K; k += 16) {
    wmma::load_matrix_sync(a, A + tm * 16 * K + k, K);
    if (std::is_same<LayoutB, wmma::row_major>::value) wmma::load_matrix_sync(b, B + k * N + tn * 16, N);
    else wmma::load_matrix_sync(b, B + tn * 16 * K + k, K);
    wmma::mma_sync(acc, a, b, acc);
  }
  wmma::store_matrix_sync(C + tm * 16 * N + tn * 16, acc, N, wmma::mem_row_major);
}
extern "C" __global__ void gemm_half_row(const half* A, const half* B, float* C, int M, int N, int K) {
  gemm<half, wmma::row_major>(A, B, C, M, N, K);
}
extern "C" __global__ void gemm_half_col(const half* A, const half* B, float* C, int M, int N, int K) {
  gemm<half, wmma::col_major>(A, B, C, M, N, K);
}
extern "C" __global__ void gemm_bf16_row(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int M, int N, int K) {
  gemm<__nv_bfloat16, wmma::row_major>(A, B, C, M, N, K);
}

// C = A B + C0 with a half accumulator loaded column-major, then scaled element by element.
extern "C" __global__ void half_acc(const half* A, const half* B, const half* C0, half* D) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::col_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, half> c;
  wmma::load_matrix_sync(a, A, 16);
  wmma::load_matrix_sync(b, B, 16);
  wmma::load_matrix_sync(c, C0, 16, wmma::mem_col_major);
  wmma::mma_sync(c, a, b, c);
  for (int i = 0; i < c.num_elements; i++) c.x[i] = c.x[i] * __float2half(2.0f);
  wmma::store_matrix_sync(D, c, 16, wmma::mem_row_major);
}

extern "C" __global__ void misuse(const half* A, float* C, int kind) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  if (kind == 0 && threadIdx.x >= 8) return;
  if (kind == 1 && threadIdx.x < 16) wmma::load_matrix_sync(a, A, 16);
  if (kind == 1 && threadIdx.x >= 16) wmma::load_matrix_sync(a, A, 16);
  if (kind == 2) wmma::load_matrix_sync(a, A + (threadIdx.x % 2) * 16, 16);
  if (kind == 3) wmma::load_matrix_sync(a, A + 1, 16);
  if (kind == 4) wmma::load_matrix_sync(a, A, 12);
  if (kind == 0 || kind == 6) wmma::load_matrix_sync(a, A, 16);
  if (kind == 5) { __shared__ float s[16 * 16]; wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::fill_fragment(c, 1.0f); wmma::store_matrix_sync(s, c, 16, wmma::mem_row_major);
    C[threadIdx.x] = s[255 - threadIdx.x]; }
}
""", name="wmma", backend="cpu")


@pytest.mark.parametrize("kernel,M,N,K", [("gemm_half_row", 48, 32, 64), ("gemm_half_col", 16, 64, 32),
                                          ("gemm_bf16_row", 32, 16, 48)])
def test_wmma_gemm_matches_numpy(kernel, M, N, K):
    a = RNG.standard_normal((M, K)).astype(np.float32)
    b = RNG.standard_normal((K, N)).astype(np.float32)
    if "bf16" in kernel:
        A, B = emu.bfloat16(a), emu.bfloat16(b)
        fa, fb = emu.bfloat16_to_float(A), emu.bfloat16_to_float(B)
    else:
        A, B = a.astype(np.float16), b.astype(np.float16)
        fa, fb = A.astype(np.float32), B.astype(np.float32)
        if kernel.endswith("col"):
            B = np.ascontiguousarray(B.T)
    C = emu.empty((M, N))
    warps = (M // 16) * (N // 16)
    WMMA[kernel]((warps * 32 + 63) // 64, 64, (A, B, C, np.int32(M), np.int32(N), np.int32(K)))
    ref = fa.astype(np.float64) @ fb.astype(np.float64)
    # K products of 16-bit values are exact in float; K float additions round.
    bound = K * 2.0 ** -24 * (np.abs(fa) @ np.abs(fb))
    assert (np.abs(C - ref) <= bound).all()


def test_a_half_accumulator_loaded_column_major_and_scaled_element_by_element():
    A, B, C0 = (RNG.standard_normal((16, 16)).astype(np.float16) for _ in range(3))
    D = np.zeros((16, 16), np.float16)
    WMMA.half_acc(1, 32, (A, B, C0, D))
    want = 2 * (A.T.astype(np.float64) @ B.astype(np.float64) + C0.T.astype(np.float64))
    np.testing.assert_allclose(D.astype(np.float64), want, rtol=2e-3, atol=2e-2)


def _misuse_line(text):
    return _line(WMMA, text)


@pytest.mark.parametrize("kind,match", [
    (0, r"wmma::load_matrix_sync is called by lanes of warp 0 in block \(0,0,0\) while lanes 8-31 "
        r"returned first; every lane of the warp must make the call"),
    (1, r"lanes of warp 0 in block \(0,0,0\) called wmma::load_matrix_sync at lines {0} and "
        r"{4}; a fragment belongs to the whole warp, so all 32 lanes must make the same call"),
    (2, r"lanes 0 and 1 of warp 0 in block \(0,0,0\) passed different pointers to "
        r"wmma::load_matrix_sync on line {1}; every lane must pass the same pointer"),
    (3, r"wmma::load_matrix_sync on line {2} got a pointer that is not aligned to 16 bytes, but a "
        r"GPU needs 32 \(256 bits\)"),
    (4, r"wmma::load_matrix_sync on line {3} got ldm = 12, but ldm must be a multiple of 8 elements"),
])
def test_wmma_calls_that_are_not_the_whole_warps_are_named(kind, match):
    lines = [_misuse_line(t) for t in ("if (kind == 1 && threadIdx.x < 16)", "if (kind == 2)",
                                       "if (kind == 3)", "if (kind == 4)",
                                       "if (kind == 1 && threadIdx.x >= 16)")]
    match = match.format(*lines)
    A = np.zeros(512, np.float16)
    with pytest.raises(KernelError, match=rf"^kernel misuse: {match}"):
        WMMA.misuse(1, 32, (A, np.zeros(32, np.float32), np.int32(kind)))


def test_a_partial_warp_cannot_hold_a_fragment():
    with pytest.raises(KernelError, match=r"wmma::load_matrix_sync needs a whole warp of 32 threads, "
                                          r"but warp 0 of block \(0,0,0\) has only lanes 0-23"):
        WMMA.misuse(1, 24, (np.zeros(512, np.float16), np.zeros(32, np.float32), np.int32(6)))


def test_reading_a_stored_tile_without_a_barrier_is_a_race():
    """store_matrix_sync writes the warp's tile together; other lanes' elements need a
    __syncwarp() before a lane reads them (which lane stores which element is unspecified)."""
    with pytest.raises(KernelError, match=r"kernel misuse has a race \(read-after-write hazard in "
                                          r"shared memory\)"):
        WMMA.misuse(1, 32, (np.zeros(512, np.float16), np.zeros(32, np.float32), np.int32(5)),
                    race_check=True)


def test_a_shape_or_type_wmma_lacks_is_one_sentence():
    src = ('#include <mma.h>\nextern "C" __global__ void k(float* x) {\n'
           '  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 8, 32, 16, half, nvcuda::wmma::row_major> f; }\n')
    with pytest.raises(CompileError, match=r"line 3: the CPU emulator's wmma has the m16n16k16 shape only"):
        gk.from_source(src, name="shape", backend="cpu")
    with pytest.raises(CompileError, match=r"line 3: the CPU emulator's wmma takes half or __nv_bfloat16"):
        gk.from_source(src.replace("8, 32, 16, half", "16, 16, 16, float"), name="shape", backend="cpu")
