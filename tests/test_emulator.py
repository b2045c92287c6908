"""The CPU emulator: CUDA built-ins, barriers that really interleave threads, and faithfulness."""
from __future__ import annotations

import platform
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import gpucourse.emulator as emu
import gpucourse.kernels as gk
from gpucourse.emulator import KernelError
from gpucourse.paths import KERNEL_DIR

ROOT = KERNEL_DIR.parents[2]


def build(code: str, name: str = "test"):
    return gk.from_source(textwrap.dedent(code), name=name, backend="cpu")


# --------------------------------------------------------------------------- built-ins

BUILTINS = build(r"""
extern "C" __global__ void where(int* out) {
  const int bid = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  int* o = out + 13 * (bid * blockDim.x * blockDim.y * blockDim.z + tid);
  o[0] = threadIdx.x; o[1] = threadIdx.y; o[2] = threadIdx.z;
  o[3] = blockIdx.x; o[4] = blockIdx.y; o[5] = blockIdx.z;
  o[6] = blockDim.x; o[7] = blockDim.y; o[8] = blockDim.z;
  o[9] = gridDim.x; o[10] = gridDim.y; o[11] = gridDim.z; o[12] = warpSize;
}

extern "C" __global__ void shuffles(const float* in, float* out, int arg, int width) {
  const int t = threadIdx.x;
  const float v = in[t];
  out[0 * blockDim.x + t] = __shfl_sync(0xffffffff, v, arg, width);
  out[1 * blockDim.x + t] = __shfl_up_sync(0xffffffff, v, arg, width);
  out[2 * blockDim.x + t] = __shfl_down_sync(0xffffffff, v, arg, width);
  out[3 * blockDim.x + t] = __shfl_xor_sync(0xffffffff, v, arg, width);
}

extern "C" __global__ void shuffle_types(const double* d, const long long* ll, double* dout,
                                         long long* llout, int* iout) {
  const int t = threadIdx.x;
  dout[t] = __shfl_xor_sync(0xffffffff, d[t], 1);
  llout[t] = __shfl_down_sync(0xffffffff, ll[t], 2);
  iout[t] = __shfl_sync(0xffffffff, t * 10, 31 - t % 32);
}

extern "C" __global__ void votes(const int* pred, unsigned* ballot, int* any, int* all) {
  const int t = threadIdx.x;
  ballot[t] = __ballot_sync(0xffffffff, pred[t]);
  any[t] = __any_sync(0xffffffff, pred[t]);
  all[t] = __all_sync(0xffffffff, pred[t]);
}

extern "C" __global__ void barrier_votes(const int* pred, int* out) {
  const int t = threadIdx.x, p = pred[t];
  const int count = __syncthreads_count(p);
  const int all = __syncthreads_and(p);
  const int any = __syncthreads_or(p);
  out[3 * t] = count; out[3 * t + 1] = all; out[3 * t + 2] = any;
}

extern "C" __global__ void atomics(int* i, unsigned* u, unsigned long long* ull, float* f,
                                   double* d, long long* ll) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(&i[0], t); atomicSub(&i[1], t); atomicMax(&i[2], t); atomicMin(&i[3], -t);
  atomicAnd(&i[4], ~(1 << (t % 31))); atomicOr(&i[5], 1 << (t % 31)); atomicXor(&i[6], t);
  atomicExch(&i[7], 42);
  atomicAdd(&u[0], 2u); atomicSub(&u[1], 1u); atomicMax(&u[2], (unsigned)t);
  atomicMin(&u[3], (unsigned)t + 5u); atomicInc(&u[4], 9u); atomicDec(&u[5], 9u);
  atomicExch(&u[6], 7u); atomicCAS(&u[7], 0u, (unsigned)t + 1u);
  atomicAnd(&u[8], 0xffu); atomicOr(&u[9], 1u << (t % 32)); atomicXor(&u[10], 1u);
  atomicAdd(&ull[0], 3ull); atomicMax(&ull[1], (unsigned long long)t);
  atomicMin(&ull[2], (unsigned long long)t + 1); atomicExch(&ull[3], 9ull);
  atomicCAS(&ull[4], 5ull, 6ull);
  atomicAdd(&f[0], 0.5f); atomicExch(&f[1], 2.5f);
  atomicAdd(&d[0], 0.25);
  atomicMax(&ll[0], (long long)t - 100); atomicMin(&ll[1], (long long)t - 100);
  // A float maximum built from atomicCAS, the usual idiom.
  const float val = (float)((t * 37) % 101);
  int* bits = (int*)&f[2];
  int old = *bits, assumed;
  do {
    assumed = old;
    old = atomicCAS(bits, assumed, __float_as_int(fmaxf(val, __int_as_float(assumed))));
  } while (assumed != old);
}

extern "C" __global__ void vectors(const float4* in, float4* out, const int4* iin, int4* iout,
                                   float2* f2, int* sizes) {
  const int t = threadIdx.x;
  const float4 v = __ldg(&in[t]);
  out[t] = make_float4(v.w, v.z, v.y, v.x);
  const int4 w = iin[t];
  iout[t] = make_int4(w.x + 1, w.y + 2, w.z + 3, w.w + 4);
  f2[t] = make_float2(v.x * 2.0f, v.y - 1.0f);
  if (t == 0) {
    sizes[0] = sizeof(float2); sizes[1] = sizeof(float3); sizes[2] = sizeof(float4);
    sizes[3] = sizeof(int4); sizes[4] = sizeof(double2); sizes[5] = sizeof(uchar4);
    sizes[6] = alignof(float2); sizes[7] = alignof(float4); sizes[8] = alignof(int4);
    sizes[9] = sizeof(dim3);
  }
}

extern "C" __global__ void math(const float* x, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  float* o = out + 8 * i;
  o[0] = __expf(v);
  o[1] = __fdividef(v, 3.0f);
  o[2] = rsqrtf(fabsf(v) + 1.0f);
  o[3] = __saturatef(v);
  o[4] = fminf(v, 0.5f) + max(v, -0.5f) + (float)min(3, (int)(v * 4));
  o[5] = __sinf(v) + __cosf(v) + __powf(fabsf(v), 1.5f);
  o[6] = __logf(fabsf(v) + 1.0f) + sqrtf(fabsf(v));
  o[7] = (float)__popc(__float_as_uint(v)) + (float)(__brev(1u) >> 28) + (float)__clz(1);
}
""", "builtins")


def test_thread_and_block_indices_in_three_dimensions():
    grid, block = (3, 2, 2), (4, 3, 2)
    out = emu.empty(13 * 12 * 24, np.int32)
    BUILTINS.where(grid, block, (out,))
    got = out.reshape(grid[2], grid[1], grid[0], block[2], block[1], block[0], 13)
    bz, by, bx, tz, ty, tx = np.indices(got.shape[:-1])
    for k, want in enumerate([tx, ty, tz, bx, by, bz]):
        np.testing.assert_array_equal(got[..., k], want)
    np.testing.assert_array_equal(got[..., 6:9], np.broadcast_to(block, got.shape[:-1] + (3,)))
    np.testing.assert_array_equal(got[..., 9:12], np.broadcast_to(grid, got.shape[:-1] + (3,)))
    assert (got[..., 12] == 32).all()


def shuffle_reference(values, mode, arg, width):
    """CUDA's rules: lanes in groups of `width`; reading outside the group keeps one's value."""
    out = []
    for lane in range(len(values)):
        warp, lane32 = divmod(lane, 32)
        base = lane32 & ~(width - 1)
        src = {"idx": base + (arg & (width - 1)), "up": lane32 - arg,
               "down": lane32 + arg, "xor": lane32 ^ arg}[mode]
        if (mode == "up" and src < base) or (mode in ("down", "xor") and src >= base + width):
            src = lane32
        out.append(values[32 * warp + src])
    return np.array(out, dtype=np.float32)


@pytest.mark.parametrize("arg,width", [(3, 32), (1, 32), (16, 32), (5, 8), (2, 4), (0, 1)])
def test_warp_shuffles_follow_cuda_rules(arg, width):
    x = np.random.default_rng(arg * 33 + width).standard_normal(64, dtype=np.float32)
    out = emu.empty(4 * 64)
    BUILTINS.shuffles(1, 64, (x, out, np.int32(arg), np.int32(width)))
    for k, mode in enumerate(("idx", "up", "down", "xor")):
        np.testing.assert_array_equal(out[64 * k:64 * (k + 1)],
                                      shuffle_reference(x, mode, arg, width), err_msg=mode)


def test_shuffles_move_8_byte_and_integer_values():
    rng = np.random.default_rng(5)
    d = rng.standard_normal(32)
    ll = rng.integers(-2**62, 2**62, 32)
    dout, llout, iout = np.empty(32), np.empty(32, np.int64), np.empty(32, np.int32)
    BUILTINS.shuffle_types(1, 32, (d, ll, dout, llout, iout))
    np.testing.assert_array_equal(dout, d[np.arange(32) ^ 1])
    lanes = np.arange(32)
    np.testing.assert_array_equal(llout, ll[np.where(lanes + 2 < 32, lanes + 2, lanes)])
    np.testing.assert_array_equal(iout, (31 - lanes) * 10)


def test_votes_over_full_and_partial_warps():
    n = 48  # the second warp has 16 lanes
    pred = np.random.default_rng(6).integers(0, 2, n).astype(np.int32)
    pred[32:] = 1
    ballot = np.empty(n, np.uint32)
    anyv, allv = np.empty(n, np.int32), np.empty(n, np.int32)
    BUILTINS.votes(1, n, (pred, ballot, anyv, allv))
    for w, lanes in ((0, 32), (1, 16)):
        p = pred[32 * w:32 * w + lanes]
        want = sum(int(b) << i for i, b in enumerate(p))
        assert (ballot[32 * w:32 * w + lanes] == want).all()
        assert (anyv[32 * w:32 * w + lanes] == int(p.any())).all()
        assert (allv[32 * w:32 * w + lanes] == int(p.all())).all()


MIXED_MASKS = build(r"""
// Partial-mask warp functions between full-warp ones: each must see exactly its own lanes.
extern "C" __global__ void mixed(const int* x, int* out) {
  const int lane = threadIdx.x & 31;
  int* o = out + 6 * threadIdx.x;
  int v = x[threadIdx.x];
  if (lane < 16) v = __shfl_down_sync(0x0000ffffu, v, 1, 16);
  v = __shfl_sync(0xffffffffu, v, (lane + 7) & 31);
  o[0] = v;
  if (lane & 1) o[1] = __ballot_sync(0xaaaaaaaau, v > 40);
  else o[1] = __ballot_sync(0x55555555u, v > 60);
  o[2] = __ballot_sync(0xffffffffu, v & 1);
  if (lane >= 16) v += __shfl_up_sync(0xffff0000u, v, 3, 16);
  else if (lane < 4) v += __shfl_xor_sync(0x0000000fu, v, 2);
  v = __shfl_xor_sync(0xffffffffu, v, 31);
  o[3] = v;
  if (lane < 24) o[4] = __all_sync(0x00ffffffu, v > 0) + 2 * __any_sync(0x00ffffffu, v > 150);
  else o[4] = __all_sync(0xff000000u, v > 0) + 2 * __any_sync(0xff000000u, v > 150);
  __syncwarp(lane < 8 ? 0x000000ffu : 0xffffff00u);
  o[5] = __shfl_sync(0xffffffffu, v, 0);
}

// NVIDIA's warp-aggregated atomics in a grid-stride loop: the ballot of one pass meets
// lanes that skipped the previous pass's partial-mask shuffle.
extern "C" __global__ void filter_positive(const int* x, int* out, int* count, int n) {
  const int lane = threadIdx.x & 31;
  for (int base = blockIdx.x * blockDim.x; base < n; base += blockDim.x * gridDim.x) {
    const int i = base + threadIdx.x;
    const int pred = i < n && x[i] > 0;
    const unsigned active = __ballot_sync(0xffffffffu, pred);
    if (pred) {
      const int leader = __ffs(active) - 1;
      int first = 0;
      if (lane == leader) first = atomicAdd(count, __popc(active));
      first = __shfl_sync(active, first, leader);
      out[first + __popc(active & ((1u << lane) - 1))] = x[i];
    }
  }
}
""", "mixed_masks")


def mixed_masks_reference(x):
    """What CUDA defines for MIXED_MASKS.mixed, warp by warp."""
    out = np.zeros((x.size, 6), np.int64)
    lanes = np.arange(32)
    for w in range(x.size // 32):
        v = x[32 * w:32 * w + 32].astype(np.int64).copy()
        v[:16] = np.where(lanes[:16] + 1 < 16, v[(lanes[:16] + 1) % 16], v[:16])
        v = v[(lanes + 7) & 31]
        o = out[32 * w:32 * w + 32]
        o[:, 0] = v
        for parity, limit in ((1, 40), (0, 60)):
            group = lanes[lanes % 2 == parity]
            o[group, 1] = sum(1 << int(g) for g in group if v[g] > limit)
        o[:, 2] = sum(1 << int(g) for g in lanes if v[g] & 1)
        new = v.copy()
        for lane in range(16, 32):
            if lane - 3 >= 16:
                new[lane] += v[lane - 3]
            else:
                new[lane] += v[lane]
        for lane in range(4):
            new[lane] += v[lane ^ 2]
        v = new[lanes ^ 31]
        o[:, 3] = v
        for group in (lanes[:24], lanes[24:]):
            o[group, 4] = int((v[group] > 0).all()) + 2 * int((v[group] > 150).any())
        o[:, 5] = v[0]
    return out.astype(np.int32)


def test_partial_mask_warp_functions_do_not_disturb_the_next_full_warp_call():
    x = np.random.default_rng(12).integers(1, 100, 96).astype(np.int32)
    out = np.zeros(6 * 96, np.int32)
    MIXED_MASKS.mixed(1, 96, (x, out), race_check=True)  # three thread orders agree
    np.testing.assert_array_equal(out.reshape(96, 6), mixed_masks_reference(x))


def test_warp_aggregated_atomics_in_a_grid_stride_loop():
    x = np.random.default_rng(13).integers(-5, 5, 300).astype(np.int32)
    out = np.full(300, -99, np.int32)
    count = np.zeros(1, np.int32)
    MIXED_MASKS.filter_positive(2, 64, (x, out, count, np.int32(x.size)))
    assert count[0] == (x > 0).sum()
    np.testing.assert_array_equal(np.sort(out[:count[0]]), np.sort(x[x > 0]))


RETURNED_LANES = build(r"""
extern "C" __global__ void after_return(const int* x, unsigned* ballot, int* votes, int* shfl,
                                        float* fshfl, double* dshfl, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;                          // the tail of the last warp returns
  const int lane = threadIdx.x & 31;
  ballot[i] = __ballot_sync(0xffffffffu, x[i] > 0);
  votes[i] = __all_sync(0xffffffffu, x[i] > 0) + 2 * __any_sync(0xffffffffu, x[i] > 5);
  __syncwarp();
  shfl[i] = __shfl_down_sync(0xffffffffu, x[i], 4);
  fshfl[i] = __shfl_xor_sync(0xffffffffu, (float)x[i], 16);
  dshfl[i] = __shfl_sync(0xffffffffu, (double)x[i], lane + 1);
}
""", "returned_lanes")


@pytest.mark.parametrize("block", [64, 48])  # the tail of a warp returns, or does not exist
def test_warp_functions_skip_returned_lanes_and_poison_reads_from_them(block):
    n = 40
    x = np.random.default_rng(14).integers(0, 10, block).astype(np.int32)
    ballot = np.zeros(block, np.uint32)
    votes, shfl = np.zeros(block, np.int32), np.zeros(block, np.int32)
    fshfl, dshfl = np.zeros(block, np.float32), np.zeros(block)
    RETURNED_LANES.after_return(1, block, (x, ballot, votes, shfl, fshfl, dshfl, np.int32(n)))
    for w in range(2):
        lanes = np.arange(32 * w, min(n, 32 * w + 32))  # the lanes that did not return
        p = x[lanes]
        assert (ballot[lanes] == sum(1 << (int(k) % 32) for k in lanes[p > 0])).all()
        assert (votes[lanes] == int((p > 0).all()) + 2 * int((p > 5).any())).all()
    lanes = np.arange(n)
    down, xor, idx = lanes + 4, lanes ^ 16, lanes + 1
    down = np.where(down % 32 < lanes % 32, lanes, down)   # past the warp: one's own value
    ok = down < n
    np.testing.assert_array_equal(shfl[:n][ok], x[down[ok]])
    assert (shfl[:n][~ok] > 2**30).all(), "an int read from a returned lane is poison"
    ok = xor < n
    np.testing.assert_array_equal(fshfl[:n][ok], x[xor[ok]])
    assert np.isnan(fshfl[:n][~ok]).all() and (~ok).sum() == 8
    idx = 32 * (lanes // 32) + idx % 32
    ok = idx < n
    np.testing.assert_array_equal(dshfl[:n][ok], x[idx[ok]])
    assert np.isnan(dshfl[:n][~ok]).all()


# --------------------------------------------------------------------------- matches and reductions

# One kernel per type CUDA's matches take (the suffix names the type), all calling matches().
MATCH_C_TYPES = {"i": "int", "u": "unsigned", "l": "long", "ul": "unsigned long",
                 "ll": "long long", "ull": "unsigned long long", "f": "float", "d": "double"}
MATCH_KERNELS = "".join(
    f'extern "C" __global__ void match_{s}(const {t}* x, unsigned* a, unsigned* b, int* p, '
    f'unsigned m) {{\n  matches(x, a, b, p, m);\n}}\n' for s, t in MATCH_C_TYPES.items())

COLLECTIVES = build(r"""
// Every reduction over the lanes of `mask`; the other lanes skip the calls.
extern "C" __global__ void reductions(const int* x, int* out, unsigned mask) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
  if ((mask >> lane) & 1u) {
    const int v = x[t];
    const unsigned u = (unsigned)v;
    int* o = out + 9 * t;
    o[0] = __reduce_add_sync(mask, v);
    o[1] = (int)__reduce_add_sync(mask, u);
    o[2] = __reduce_min_sync(mask, v);
    o[3] = (int)__reduce_min_sync(mask, u);
    o[4] = __reduce_max_sync(mask, v);
    o[5] = (int)__reduce_max_sync(mask, u);
    o[6] = (int)__reduce_and_sync(mask, u);
    o[7] = (int)__reduce_or_sync(mask, u);
    o[8] = (int)__reduce_xor_sync(mask, u);
  }
}

// A reduction after the tail of the last warp has returned: only the others take part.
extern "C" __global__ void sum_after_return(const int* x, int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = __reduce_add_sync(0xffffffffu, x[i]);
}

template <class T>
__device__ void matches(const T* x, unsigned* any, unsigned* all, int* pred, unsigned mask) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
  if ((mask >> lane) & 1u) {
    any[t] = __match_any_sync(mask, x[t]);
    int p = -1;
    all[t] = __match_all_sync(mask, x[t], &p);
    pred[t] = p;
  }
}
""" + MATCH_KERNELS + r"""
// Warp-aggregated atomics: the lanes with the same bin elect a leader, which adds their count.
extern "C" __global__ void aggregated_histogram(const int* d, unsigned* bins, int n) {
  const int lane = threadIdx.x & 31;
  for (int base = blockIdx.x * blockDim.x; base < n; base += blockDim.x * gridDim.x) {
    const int i = base + threadIdx.x;
    const unsigned active = __ballot_sync(0xffffffffu, i < n);
    if (i < n) {
      const int bin = d[i];
      const unsigned peers = __match_any_sync(active, bin);
      if (lane == __ffs(peers) - 1) atomicAdd(&bins[bin], (unsigned)__popc(peers));
    }
  }
}

// Lanes of one mask in two different reductions: CUDA leaves it undefined.
extern "C" __global__ void mixed_reductions(const int* x, int* out) {
  const int t = threadIdx.x;
  out[t] = t < 8 ? __reduce_add_sync(0xffffffffu, x[t]) : __reduce_max_sync(0xffffffffu, x[t]);
}

extern "C" __global__ void scoped_atomics(int* i, unsigned* u, unsigned long long* ull, float* f,
                                          double* d, long long* ll) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd_block(&i[0], t); atomicSub_system(&i[1], t); atomicMax_block(&i[2], t);
  atomicMin_system(&i[3], -t); atomicAnd_block(&i[4], ~(1 << (t % 31)));
  atomicOr_system(&i[5], 1 << (t % 31)); atomicXor_block(&i[6], t); atomicExch_system(&i[7], 42);
  atomicAdd_system(&u[0], 2u); atomicSub_block(&u[1], 1u); atomicInc_block(&u[2], 9u);
  atomicDec_system(&u[3], 9u); atomicCAS_block(&u[4], 0u, (unsigned)t + 1u);
  atomicCAS_system(&u[5], 0u, (unsigned)t + 1u); atomicExch_block(&u[6], 7u);
  atomicAdd_block(&ull[0], 3ull); atomicMax_system(&ull[1], (unsigned long long)t);
  atomicMin_block(&ull[2], (unsigned long long)t + 1); atomicCAS_block(&ull[3], 5ull, 6ull);
  atomicAdd_system(&f[0], 0.5f); atomicExch_block(&f[1], 2.5f);
  atomicAdd_block(&d[0], 0.25);
  atomicMax_block(&ll[0], (long long)t - 100); atomicMin_system(&ll[1], (long long)t - 100);
}
""", "collectives")

MASKS = [0xFFFFFFFF, 0x0000FFFF, 0x5555AAAA]


def lane_groups(block: int, grid: int, mask: int):
    """The global indices of the lanes of each warp that take part: in ``mask`` and present
    (the last warp of a block may be partial)."""
    for b in range(grid):
        for w in range((block + 31) // 32):
            lanes = [l for l in range(32) if (mask >> l) & 1 and 32 * w + l < block]
            if lanes:
                yield [b * block + 32 * w + l for l in lanes]


def reductions_reference(x: np.ndarray, block: int, grid: int, mask: int) -> np.ndarray:
    want = np.full((x.size, 9), -7, np.int64)
    for g in lane_groups(block, grid, mask):
        v = x[g].astype(np.int64)
        u = x[g].view(np.uint32).astype(np.int64)
        row = [v.sum(), u.sum(), v.min(), u.min(), v.max(), u.max(),
               np.bitwise_and.reduce(u), np.bitwise_or.reduce(u), np.bitwise_xor.reduce(u)]
        want[g] = row
    return (want & 0xFFFFFFFF).astype(np.uint32).view(np.int32)  # results are 32-bit, wrapped


@pytest.mark.parametrize("mask", MASKS, ids=hex)
@pytest.mark.parametrize("block", [32, 48, 100])
@pytest.mark.parametrize("values", ["full range", "small signed"])
def test_warp_reductions_match_numpy(values, block, mask):
    grid = 2
    rng = np.random.default_rng()
    n = grid * block
    if values == "full range":  # sums overflow 32 bits; the signs split signed from unsigned
        x = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    else:
        x = rng.integers(-9, 10, n).astype(np.int32)
    out = np.full(9 * n, -7, np.int32)
    COLLECTIVES.reductions(grid, block, (x, out, np.uint32(mask)))
    want = reductions_reference(x, block, grid, mask)
    names = ["add int", "add unsigned", "min int", "min unsigned", "max int", "max unsigned",
             "and", "or", "xor"]
    for k, name in enumerate(names):
        np.testing.assert_array_equal(out.reshape(n, 9)[:, k], want[:, k],
                                      err_msg=f"{name}, x={x.tolist()}")


def test_reductions_wrap_and_compare_by_signedness():
    x = np.full(32, 2**30, np.int32)
    x[0], x[1] = -1, -2**31
    out = np.zeros(9 * 32, np.int32)
    COLLECTIVES.reductions(1, 32, (x, out, np.uint32(0xFFFFFFFF)))
    row = out.reshape(32, 9)[5]
    total = (30 * 2**30 - 1 - 2**31) % 2**32
    assert row[0] == np.uint32(total).view(np.int32) and row[1] == row[0]
    assert row[2] == -2**31 and np.uint32(row[3]) == 2**30  # signed min; unsigned min
    assert row[4] == 2**30 and row[5] == -1                  # signed max; unsigned max (0xffffffff)


def test_a_reduction_skips_returned_lanes():
    x = np.random.default_rng().integers(-100, 100, 64).astype(np.int32)
    out = np.full(64, -7, np.int32)
    COLLECTIVES.sum_after_return(1, 64, (x, out, np.int32(40)))
    assert (out[:32] == x[:32].sum()).all() and (out[32:40] == x[32:40].sum()).all()
    assert (out[40:] == -7).all()


def match_reference(bits: np.ndarray, block: int, grid: int, mask: int):
    """(any, all, pred) as CUDA defines them, from each element's bit pattern."""
    any_ = np.full(bits.size, 7, np.uint32)
    all_ = np.full(bits.size, 7, np.uint32)
    pred = np.full(bits.size, 7, np.int32)
    for g in lane_groups(block, grid, mask):
        for i in g:
            any_[i] = sum(1 << (j % block % 32) for j in g if bits[j] == bits[i])
        same = len(set(bits[g].tolist())) == 1
        all_[g] = mask if same else 0
        pred[g] = int(same)
    return any_, all_, pred


def match_values(dtype, n: int, rng) -> np.ndarray:
    """Values with many repeats: a few choices, negative ones for signed types, 64-bit ones
    that differ only in their high half, and -0.0 beside 0.0 (different bits) for floats."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        choices = np.array([0.0, -0.0, 1.5, -1.5, np.nan, 3.0], dtype)
    elif dtype.kind == "i":
        choices = np.array([0, -1, 5, -2**(8 * dtype.itemsize - 1)], dtype)
    else:
        choices = np.array([0, 1, 2**(8 * dtype.itemsize) - 1, 7], dtype)
    if dtype.itemsize == 8 and dtype.kind in "iu":
        choices = np.concatenate([choices, np.array([1 + 2**32, 1], dtype)])
    return choices[rng.integers(0, choices.size, n)]


MATCH_TYPES = {"i": np.int32, "u": np.uint32, "l": np.int64, "ul": np.uint64, "ll": np.int64,
               "ull": np.uint64, "f": np.float32, "d": np.float64}


@pytest.mark.parametrize("mask", MASKS, ids=hex)
@pytest.mark.parametrize("block", [32, 100])
@pytest.mark.parametrize("suffix", list(MATCH_TYPES))
def test_warp_matches_compare_bit_patterns(suffix, block, mask):
    grid, dtype = 2, MATCH_TYPES[suffix]
    rng = np.random.default_rng()
    n = grid * block
    kernel = getattr(COLLECTIVES, f"match_{suffix}")
    for same in (False, True):
        x = match_values(dtype, n, rng)
        if same:  # every lane of the mask holds one value; the lanes outside it do not count
            for g in lane_groups(block, grid, mask):
                x[g] = x[g[0]]
        bits = x.view(np.uint32 if x.itemsize == 4 else np.uint64)
        any_, all_ = np.full(n, 7, np.uint32), np.full(n, 7, np.uint32)
        pred = np.full(n, 7, np.int32)
        kernel(grid, block, (x, any_, all_, pred, np.uint32(mask)))
        want = match_reference(bits, block, grid, mask)
        for got, exp, what in zip((any_, all_, pred), want, ("any", "all", "pred")):
            np.testing.assert_array_equal(got, exp, err_msg=f"{what}, x={x.tolist()}")
        if not same:
            assert (all_ == 0).any()  # both outcomes are seen
        else:
            assert (pred[all_ != 7] == 1).all()


def test_match_any_tells_minus_zero_from_zero():
    x = np.zeros(32, np.float32)
    x[1::2] = -0.0
    any_, all_ = np.zeros(32, np.uint32), np.zeros(32, np.uint32)
    pred = np.zeros(32, np.int32)
    COLLECTIVES.match_f(1, 32, (x, any_, all_, pred, np.uint32(0xFFFFFFFF)))
    assert (any_[0::2] == 0x55555555).all() and (any_[1::2] == 0xAAAAAAAA).all()
    assert (all_ == 0).all() and (pred == 0).all()


@pytest.mark.parametrize("block", [64, 100])
def test_warp_aggregated_histogram_with_match_any_is_exact_and_race_free(block):
    rng = np.random.default_rng()
    n, nbins = 3001, 16
    d = np.where(rng.random(n) < 0.8, 3, rng.integers(0, nbins, n)).astype(np.int32)
    bins = np.zeros(nbins, np.uint32)
    COLLECTIVES.aggregated_histogram(5, block, (d, bins, np.int32(n)), race_check=True)
    np.testing.assert_array_equal(bins, np.bincount(d, minlength=nbins))


def test_lanes_in_different_reductions_are_reported():
    with pytest.raises(KernelError, match=r"8 lanes of warp 0 .* wait in __reduce_add_sync for "
                                          r"lanes 8-31, which wait in another call"):
        COLLECTIVES.mixed_reductions(1, 32, (np.ones(32, np.int32), np.zeros(32, np.int32)))


def test_scoped_atomics_behave_as_the_plain_ones():
    blocks, threads = 3, 70
    t = np.arange(blocks * threads)
    i = np.array([0, 0, -5, 5, -1, 0, 0, 0], np.int32)
    u = np.array([0, 1000, 0, 0, 0, 0, 0], np.uint32)
    ull = np.array([0, 0, 2**40, 5], np.uint64)
    f = np.zeros(2, np.float32)
    d = np.zeros(1)
    ll = np.array([-10**12, 10**12], np.int64)
    COLLECTIVES.scoped_atomics(blocks, threads, (i, u, ull, f, d, ll))
    n = t.size
    xor = np.bitwise_xor.reduce(t)
    assert i.tolist() == [t.sum(), -t.sum(), t.max(), -t.max(),
                          -1 & ~sum(1 << b for b in set(t % 31)), sum(1 << b for b in set(t % 31)),
                          xor, 42]
    inc = 0
    for _ in range(n):
        inc = 0 if inc >= 9 else inc + 1
    dec = 0
    for _ in range(n):
        dec = 9 if dec == 0 or dec > 9 else dec - 1
    assert u.tolist() == [2 * n, 1000 - n, inc, dec, 1, 1, 7]
    assert ull.tolist() == [3 * n, t.max(), 1, 6]
    assert f.tolist() == [0.5 * n, 2.5] and d[0] == 0.25 * n
    assert ll.tolist() == [t.max() - 100, -100]


@pytest.mark.parametrize("fill", ["random", "ones"])
def test_syncthreads_count_and_or(fill):
    n = 100
    pred = (np.random.default_rng(7).integers(0, 2, n) if fill == "random"
            else np.ones(n)).astype(np.int32)
    out = emu.empty(3 * n, np.int32)
    BUILTINS.barrier_votes(1, n, (pred, out))
    got = out.reshape(n, 3)
    assert (got[:, 0] == pred.sum()).all()
    assert (got[:, 1] == int(pred.all())).all()
    assert (got[:, 2] == int(pred.any())).all()


def test_atomics_on_every_type():
    blocks, threads = 3, 70
    t = np.arange(blocks * threads)
    i = np.array([0, 0, -5, 5, -1, 0, 0, 0], np.int32)
    u = np.array([0, 1000, 0, 10**6, 0, 0, 0, 0, 0xFFFF, 0, 0], np.uint32)
    ull = np.array([0, 0, 2**40, 0, 5], np.uint64)
    f = np.array([0, 0, -1], np.float32)
    d = np.zeros(1)
    ll = np.array([-10**12, 10**12], np.int64)
    BUILTINS.atomics(blocks, threads, (i, u, ull, f, d, ll))
    n = t.size
    assert list(i) == [t.sum(), -t.sum(), t.max(), -t.max(), -2**31, 2**31 - 1,
                       np.bitwise_xor.reduce(t), 42]
    assert list(u) == [2 * n, 1000 - n, t.max(), 5, n % 10, (-n) % 10, 7, 1, 0xFF,
                       0xFFFFFFFF, n % 2]
    assert list(ull) == [3 * n, t.max(), 1, 9, 6]
    assert list(f) == [0.5 * n, 2.5, max((k * 37) % 101 for k in t)]
    assert d[0] == 0.25 * n
    assert list(ll) == [t.max() - 100, -100]


def test_vector_types_ldg_and_their_layout():
    n = 40
    rng = np.random.default_rng(8)
    x = rng.standard_normal(4 * n, dtype=np.float32)
    xi = rng.integers(-1000, 1000, 4 * n).astype(np.int32)
    out, outi = emu.empty(4 * n), emu.empty(4 * n, np.int32)
    f2, sizes = emu.empty(2 * n), emu.empty(10, np.int32)
    BUILTINS.vectors(1, n, (x, out, xi, outi, f2, sizes))
    np.testing.assert_array_equal(out.reshape(n, 4), x.reshape(n, 4)[:, ::-1])
    np.testing.assert_array_equal(outi.reshape(n, 4), xi.reshape(n, 4) + [1, 2, 3, 4])
    np.testing.assert_array_equal(f2.reshape(n, 2),
                                  np.stack([x[0::4] * 2, x[1::4] - 1], axis=1))
    # As CUDA lays them out: float4/int4 16-byte aligned, float3 unaligned, dim3 12 bytes.
    assert list(sizes) == [8, 12, 16, 16, 16, 4, 8, 16, 16, 12]


def test_math_functions_and_fast_intrinsics():
    n = 257
    x = np.random.default_rng(9).uniform(-3, 3, n).astype(np.float32)
    out = emu.empty(8 * n)
    BUILTINS.math(3, 96, (x, out, np.int32(n)))
    got = out.reshape(n, 8).astype(np.float64)
    v = x.astype(np.float64)
    bits = x.view(np.uint32)
    want = np.stack([
        np.exp(v), v / 3, 1 / np.sqrt(np.abs(v) + 1), np.clip(v, 0, 1),
        np.minimum(v, 0.5) + np.maximum(v, -0.5) + np.minimum(3, np.trunc(v * 4)),
        np.sin(v) + np.cos(v) + np.abs(v) ** 1.5, np.log(np.abs(v) + 1) + np.sqrt(np.abs(v)),
        np.array([bin(b).count("1") for b in bits]) + 8 + 31], axis=1)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


MORE_MATH = build(r"""
extern "C" __global__ void float_math(const float* x, const float* y, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float a = x[i], b = y[i];
  float* o = out + 16 * i;
  o[0] = sinpif(a); o[1] = cospif(a);
  sincospif(a, &o[2], &o[3]);
  o[4] = norm3df(a, b, 3.0f); o[5] = rnorm3df(a, b, 3.0f); o[6] = rhypotf(a, b);
  o[7] = normcdff(a); o[8] = erfinvf(b / 8.0f);
  o[9] = __fadd_rz(a, b); o[10] = __fadd_rd(a, b); o[11] = __fadd_ru(a, b);
  o[12] = __fmul_rz(a, b); o[13] = __fmul_rd(a, b); o[14] = __fmul_ru(a, b);
  o[15] = a + b;  // round to nearest again afterwards
}

extern "C" __global__ void inverse_erfc(const float* y, float* out) {
  out[2 * threadIdx.x] = erfcinvf(y[threadIdx.x]);
  out[2 * threadIdx.x + 1] = normcdfinvf(y[threadIdx.x] / 2.0f);
}

extern "C" __global__ void double_and_integer(const double* d, const long long* ll,
                                              double* dout, long long* iout) {
  const int i = threadIdx.x;
  const double v = d[i];
  const long long w = ll[i];
  const unsigned u = (unsigned)w, u2 = (unsigned)(w >> 32);
  dout[4 * i] = __ddiv_rn(v, 3.0); dout[4 * i + 1] = __dsqrt_rn(fabs(v));
  dout[4 * i + 2] = __double2float_rn(v); dout[4 * i + 3] = __int2double_rn((int)u);
  long long* o = iout + 16 * i;
  o[0] = __float2ll_rn((float)v * 1e6f); o[1] = (long long)__brevll((unsigned long long)w);
  o[2] = __byte_perm(u, u2, 0x5173u); o[3] = __funnelshift_l(u, u2, i);
  o[4] = __funnelshift_r(u, u2, i); o[5] = __dp4a((int)u, (int)u2, 7);
  o[6] = __hadd((int)u, (int)u2); o[7] = __rhadd((int)u, (int)u2);
  o[8] = umin(u, u2); o[9] = llmin(w, -w); o[10] = (long long)ullmax((unsigned long long)w, 5ull);
  o[11] = __double2hiint(v); o[12] = __double2loint(v);
  o[13] = (long long)min(w, (unsigned long long)u2); o[14] = (long long)max((unsigned long long)u, w);
  o[15] = __float2ll_rn(1e30f);  // out of range: the largest long long, as on a GPU
}
""", "more_math")


def _directed(exact, mode):
    """``exact`` (a Fraction) rounded to float32 toward zero, down or up."""
    from fractions import Fraction
    f = np.float32(float(exact))
    while Fraction(float(f)) > exact:
        f = np.nextafter(f, np.float32(-np.inf))
    while Fraction(float(np.nextafter(f, np.float32(np.inf)))) <= exact:
        f = np.nextafter(f, np.float32(np.inf))
    up = f if Fraction(float(f)) == exact else np.nextafter(f, np.float32(np.inf))
    return {"rd": f, "ru": up, "rz": f if exact >= 0 else up}[mode]


def test_cuda_math_functions_the_c_library_lacks():
    import math
    from fractions import Fraction
    rng = np.random.default_rng(15)
    x = np.concatenate([np.float32([0, 0.5, 1, -1, 1.5, 2, -2.5, 1e7, 3.25]),
                        rng.uniform(-6, 6, 55).astype(np.float32)])
    y = rng.uniform(-7.99, 7.99, x.size).astype(np.float32)
    y[:4] = [1e-30, -3e-8, 7.9999995, 0]
    out = emu.empty(16 * x.size)
    MORE_MATH.float_math(1, x.size, (x, y, out, np.int32(x.size)))
    got = out.reshape(-1, 16)
    ulp = lambda v: np.spacing(np.abs(np.float32(v)))  # noqa: E731
    for k, (a, b) in enumerate(zip(x.astype(float), y.astype(float))):
        r = math.remainder(a, 2.0)
        sinpi = math.sin(math.pi * (1 - r if r > 0.5 else -1 - r if r < -0.5 else r))
        cospi = math.sin(math.pi * (0.5 - abs(r)))
        norm = math.sqrt(a * a + b * b + 9)
        want = [sinpi, cospi, sinpi, cospi, norm, 1 / norm, 1 / math.hypot(a, b),
                0.5 * math.erfc(-a / math.sqrt(2))]
        for j, w in enumerate(want):
            assert abs(got[k, j] - w) <= ulp(w), (k, j, a, b, got[k, j], w)
        if a == round(a):
            assert got[k, 0] == 0 and abs(got[k, 1]) == 1
        # erfinv: one Newton step from the result lands on the true value; within an ulp.
        e, t = float(got[k, 8]), float(np.float32(b / 8))
        true = e - (math.erf(e) - t) / (2 / math.sqrt(math.pi) * math.exp(-e * e))
        assert abs(e - true) <= ulp(true), (t, e, true)
        fa, fb = Fraction(a), Fraction(b)
        for j, mode in enumerate(("rz", "rd", "ru")):
            assert got[k, 9 + j] == _directed(fa + fb, mode), (mode, a, b)
            assert got[k, 12 + j] == _directed(fa * fb, mode), (mode, a, b)
        assert got[k, 15] == np.float32(a) + np.float32(b)


def test_inverse_erfc_in_its_tails():
    import math
    y = np.float32([1e-38, 1e-20, 1e-8, 0.01, 0.5, 1.0, 1.5, 1.99, 1.9999999, 1.4e-45])
    out = emu.empty(2 * y.size)
    MORE_MATH.inverse_erfc(1, y.size, (y, out))
    for t, (x, q) in zip(y.astype(float), out.reshape(-1, 2).astype(float)):
        # erfc changes by about 2x|erfc| (plus a little) per unit of x near its tails
        slope = 2 * abs(x) + 2
        assert abs(math.erfc(x) / t - 1) <= slope * np.spacing(np.float32(abs(x) or 1)), (t, x)
        if t / 2 >= 1.2e-38:  # a normal float: normcdfinv(p) = -sqrt(2) erfcinv(2p)
            assert abs(q + math.sqrt(2) * x) <= 2 * np.spacing(np.float32(abs(q) or 1)), (t, q, x)


def test_cuda_double_and_integer_intrinsics():
    rng = np.random.default_rng(16)
    d = rng.uniform(-1e3, 1e3, 32)
    ll = rng.integers(-2**63, 2**63 - 1, 32, dtype=np.int64)
    dout, iout = np.zeros(4 * 32), np.zeros(16 * 32, np.int64)
    MORE_MATH.double_and_integer(1, 32, (d, ll, dout, iout))
    np.testing.assert_array_equal(dout.reshape(32, 4),
                                  np.stack([d / 3, np.sqrt(np.abs(d)),
                                            d.astype(np.float32).astype(float),
                                            ll.astype(np.uint32).view(np.int32)], axis=1))
    got = iout.reshape(32, 16)
    s32 = lambda v: ((v + 2**31) % 2**32) - 2**31  # noqa: E731
    for i, (v, w) in enumerate(zip(d, ll.tolist())):
        u, u2 = w % 2**32, (w >> 32) % 2**32
        both = (u2 << 32) | u
        bits = int(np.float64(v).view(np.uint64))
        sbytes = lambda z: [s32(((z >> (8 * k)) & 0xFF) << 24) >> 24 for k in range(4)]  # noqa: E731
        want = [
            int(np.rint(np.float32(v) * np.float32(1e6))),
            int(f"{w % 2**64:064b}"[::-1], 2),
            sum(((both >> (8 * ((0x5173 >> (4 * k)) & 7))) & 0xFF) << (8 * k) for k in range(4)),
            ((both << i) >> 32) % 2**32,
            (both >> i) % 2**32,
            s32(7 + sum(p * q for p, q in zip(sbytes(u), sbytes(u2)))),
            (s32(u) + s32(u2)) >> 1, (s32(u) + s32(u2) + 1) >> 1,
            min(u, u2), min(w, -w) if w != -2**63 else w, max(w % 2**64, 5),
            s32(bits >> 32), s32(bits % 2**32),
            min(w % 2**64, u2), max(u, w % 2**64), 2**63 - 1]
        want = [z - 2**64 if z >= 2**63 else z for z in want]
        assert list(got[i]) == want, (i, list(got[i]), want)


# --------------------------------------------------------------------------- shared memory

SHARED = build(r"""
extern __shared__ float file_scope[];

extern "C" __global__ void reverse_file_scope(const float* in, float* out) {
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  file_scope[threadIdx.x] = in[g];
  __syncthreads();
  out[g] = file_scope[blockDim.x - 1 - threadIdx.x];
}

extern "C" __global__ void reverse_function_scope(const int* in, int* out) {
  extern __shared__ __align__(16) int ints[];
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  ints[threadIdx.x] = in[g];
  __syncthreads();
  out[g] = ints[blockDim.x - 1 - threadIdx.x];
}

extern "C" __global__ void stale(float* out) {
  __shared__ float s[64];
  if (blockIdx.x == 0) s[threadIdx.x] = 1.0f;  // only the first block writes
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x];
}

extern "C" __global__ void stale_dynamic(int* out) {
  extern __shared__ int d[];
  if (blockIdx.x == 0) d[threadIdx.x] = 7;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = d[threadIdx.x];
}
""", "shared")


def test_dynamic_shared_memory_declared_at_file_and_function_scope():
    x = np.random.default_rng(10).standard_normal(3 * 50, dtype=np.float32)
    out = emu.empty(150)
    SHARED.reverse_file_scope(3, 50, (x, out), shared_mem=50 * 4)
    np.testing.assert_array_equal(out.reshape(3, 50), x.reshape(3, 50)[:, ::-1])
    xi = np.arange(150, dtype=np.int32) * 3 - 7
    outi = emu.empty(150, np.int32)
    SHARED.reverse_function_scope(3, 50, (xi, outi), shared_mem=50 * 4)
    np.testing.assert_array_equal(outi.reshape(3, 50), xi.reshape(3, 50)[:, ::-1])


def test_shared_memory_is_poisoned_before_every_block():
    out = np.zeros(128, np.float32)
    SHARED.stale(2, 64, (out,))
    assert (out[:64] == 1).all()
    assert np.isnan(out[64:]).all(), "block 1 must not see block 0's shared data"
    outi = np.zeros(128, np.int32)
    SHARED.stale_dynamic(2, 64, (outi,), shared_mem=256)
    assert (outi[:64] == 7).all() and (outi[64:] == -1).all()


def test_fresh_emulator_arrays_are_poisoned():
    assert np.isnan(emu.empty((3, 5))).all()
    assert (emu.empty(4, np.int32) == -1).all()
    like = emu.empty_like(np.zeros((2, 2), np.float64))
    assert like.dtype == np.float64 and np.isnan(like).all()


# --------------------------------------------------------------------------- barriers


FAULTY = build(r"""
extern "C" __global__ void early_return(float* x, int n) {
  if (threadIdx.x >= n) return;          // threads past n never reach the barrier
  __syncthreads();
  x[threadIdx.x] = 1.0f;
}

extern "C" __global__ void shuffle_after_return(float* x, int n) {
  if (threadIdx.x >= n) return;
  x[threadIdx.x] = __shfl_down_sync(0xffffffff, x[threadIdx.x], 1);
}

extern "C" __global__ void shuffle_against_syncwarp(float* x, int n) {
  if ((threadIdx.x & 31) < n) x[threadIdx.x] = __shfl_down_sync(0xffffffff, x[threadIdx.x], 1);
  else __syncwarp();
}

extern "C" __global__ void divergent_barrier(float* x, int n) {
  if (threadIdx.x < 16) __syncthreads(); else __syncwarp();
  x[threadIdx.x] = 2.0f;
}

extern "C" __global__ void uniform_branch_barrier(float* x, int n) {
  if (n > 0) __syncthreads();            // every thread takes it: fine
  x[threadIdx.x] = 3.0f;
}

extern "C" __global__ void null_write(float* x, int n) {
  float* p = 0;
  p[threadIdx.x + n] = 1.0f;
}

__device__ int deep(int d) { volatile char pad[512]; pad[0] = (char)d; return d ? deep(d - 1) + pad[0] : 0; }
extern "C" __global__ void recursion(int* x, int n) { x[0] = deep(n); }

extern "C" __global__ void divide(int* x, int n) { x[threadIdx.x] = 100 / n; }

extern "C" __global__ void misaligned(int* x, int n) {
  const float4 v = reinterpret_cast<const float4*>(x + n)[threadIdx.x];
  int* o = x + 16 + 4 * threadIdx.x;
  o[0] = (int)v.x; o[1] = (int)v.y; o[2] = (int)v.z; o[3] = (int)v.w;
}

extern "C" __global__ void checked(int* x, int n) { assert(threadIdx.x < n); x[threadIdx.x] = 1; }

extern "C" __global__ void trap(int* x, int n) { if (threadIdx.x == n) __trap(); }

extern "C" __global__ void spin(int* x, int n) { volatile int* v = x; while (v[0] == 0) {} }

extern "C" __global__ void talk(int* x, int n) {
  printf("block %d thread %d says %d\n", blockIdx.x, threadIdx.x, n);
  if (threadIdx.x == 1) { float* p = 0; *p = 1.0f; }
}
""", "faulty")


def test_a_barrier_that_returned_threads_never_reach_is_reported():
    x = np.zeros(64, np.float32)
    with pytest.raises(KernelError, match=r"kernel early_return: 40 threads of block \(0,0,0\) "
                                          r"wait at __syncthreads\(\) on line 4 that 24 threads "
                                          r"never reached \(they returned first, while other "
                                          r"lanes of their warps wait there\); a warp that "
                                          r"returns as a whole holds no barrier"):
        FAULTY.early_return(1, 64, (x, np.int32(40)))


def test_a_barrier_after_whole_warps_returned_completes_as_on_compute_capability_7():
    """Exited threads hold no barrier on sm_70 and later: warps that return as a whole (the
    llm.c pattern `if (warp >= n) return;` then a __syncthreads()) let the others go on."""
    x = np.zeros(96, np.float32)
    FAULTY.early_return(1, 96, (x, np.int32(64)))  # warp 2 returns as a whole
    assert (x[:64] == 1).all() and (x[64:] == 0).all()
    y = np.zeros(64, np.float32)
    BRANCHED_BARRIERS.warp_uniform_branch(1, 64, (y,))  # warp 1 skips the barrier and ends
    np.testing.assert_array_equal(y[:32], 31 - np.arange(32))


BRANCHED_BARRIERS = build(r"""
extern "C" __global__ void in_a_branch(float* x) {
  __shared__ float s[64];
  s[threadIdx.x] = threadIdx.x;
  if (threadIdx.x < 48) __syncthreads();
  x[threadIdx.x] = s[63 - threadIdx.x];
}

extern "C" __global__ void in_a_loop(float* x) {
  for (int k = 0; k < (int)threadIdx.x % 2 + 1; k++) __syncthreads();
  x[threadIdx.x] = 1.0f;
}

extern "C" __global__ void in_both_arms(float* x) {
  __shared__ float s[64];
  const int t = threadIdx.x;
  if (t < 32) { s[t] = 1.0f; __syncthreads(); x[t] = s[t + 32]; }
  else        { s[t] = 2.0f; __syncthreads(); x[t] = s[t - 32]; }
}

extern "C" __global__ void warp_uniform_branch(float* x) {
  __shared__ float s[32];
  if (threadIdx.x < 32) { s[threadIdx.x] = threadIdx.x; __syncthreads(); x[threadIdx.x] = s[31 - threadIdx.x]; }
}
""", "branched_barriers")


@pytest.mark.parametrize("kernel,match", [
    ("in_a_branch", r"48 threads wait at the one on line 5 while 16 threads of their warps have "
                    r"finished the kernel"),
    ("in_a_loop", r"32 threads wait at the one on line 10 while 32 threads of their warps have "
                  r"finished the kernel"),
    ("in_both_arms", r"thread \(32,0,0\) reached the one on line 18 while 32 threads wait at "
                     r"the one on line 17"),
])
def test_a_barrier_that_only_some_threads_reach_is_reported(kernel, match):
    with pytest.raises(KernelError, match=rf"kernel {kernel}: __syncthreads\(\) is reached by "
                                          rf"only some threads of block \(0,0,0\) \(a barrier "
                                          rf"inside a branch or loop that differs per thread\): "
                                          rf"{match}.*every thread must reach the same barrier"):
        getattr(BRANCHED_BARRIERS, kernel)(1, 64, (np.zeros(64, np.float32),))


def test_a_warp_shuffle_needs_only_the_lanes_that_have_not_returned():
    # As in CUDA: returned lanes are not waited for; reading one gives an undefined value.
    x = np.ones(64, np.float32)
    FAULTY.shuffle_after_return(1, 64, (x, np.int32(40)))
    assert (x[:39] == 1).all() and (x[40:] == 1).all()
    assert np.isnan(x[39]), "lane 7 of warp 1 read lane 8, which had returned"


def test_a_warp_shuffle_missing_lanes_is_reported():
    x = np.ones(64, np.float32)
    with pytest.raises(KernelError, match=r"8 lanes of warp 0 .* __shfl_down_sync for lanes "
                                          r"8-31, which wait in another call"):
        FAULTY.shuffle_against_syncwarp(1, 64, (x, np.int32(8)))


def test_a_barrier_in_a_divergent_branch_is_reported():
    with pytest.raises(KernelError, match=r"16 threads wait at __syncthreads\(\) while 16 wait "
                                          r"in __syncwarp\(\)"):
        FAULTY.divergent_barrier(1, 64, (np.zeros(64, np.float32), np.int32(1)))
    x = np.zeros(64, np.float32)
    FAULTY.uniform_branch_barrier(1, 64, (x, np.int32(1)))
    assert (x == 3).all()


def test_crashes_in_a_kernel_become_errors_and_the_emulator_goes_on():
    x = np.zeros(4, np.float32)
    with pytest.raises(KernelError, match=r"null_write crashed: thread \(0,0,0\) of block "
                                          r"\(0,0,0\) accessed invalid memory"):
        FAULTY.null_write(1, 4, (x, np.int32(0)))
    with pytest.raises(KernelError, match="overflowed its 32 KB stack"):
        FAULTY.recursion(1, 1, (np.zeros(1, np.int32), np.int32(100_000)))
    with pytest.raises(KernelError, match="divided an integer by zero"):
        FAULTY.divide(1, 2, (np.zeros(2, np.int32), np.int32(0)))
    y = np.zeros(2, np.int32)
    FAULTY.divide(1, 2, (y, np.int32(7)))
    assert list(y) == [14, 14]


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                    reason="other CPUs may load a misaligned float4")
def test_a_misaligned_float4_is_named():
    with pytest.raises(KernelError, match=r"misaligned crashed: thread \(0,0,0\) of block "
                                          r"\(0,0,0\) made a misaligned vector access \(a "
                                          r"float4 or double2 needs a 16-byte aligned address"):
        FAULTY.misaligned(1, 4, (np.zeros(32, np.int32), np.int32(1)))
    x = np.zeros(32, np.int32)
    FAULTY.misaligned(1, 4, (x, np.int32(0)))  # aligned: fine


def test_device_assert_and_trap_stop_the_kernel_with_a_message():
    line = 1 + next(i for i, text in enumerate(FAULTY.source.splitlines()) if "assert(" in text)
    with pytest.raises(KernelError, match=rf"assertion `threadIdx.x < n` failed \(faulty.cu line "
                                          rf"{line}\) in thread \(5,0,0\)"):
        FAULTY.checked(1, 8, (np.zeros(8, np.int32), np.int32(5)))
    with pytest.raises(KernelError, match=r"__trap\(\) was called in thread \(3,0,0\)"):
        FAULTY.trap(1, 8, (np.zeros(8, np.int32), np.int32(3)))


def test_printf_output_reaches_python_even_before_a_crash(capsys):
    with pytest.raises(KernelError, match="crashed"):
        FAULTY.talk(1, 3, (np.zeros(1, np.int32), np.int32(5)))
    out = capsys.readouterr().out
    assert "block 0 thread 0 says 5\nblock 0 thread 1 says 5\n" in out


@pytest.mark.parametrize("header", ["cstdio", "stdio.h", "cstdlib", "cmath", "cuda_runtime.h"])
def test_printf_output_is_collected_whatever_the_kernel_includes(header, capsys):
    mod = build(f"#include <{header}>\n" + r"""
    extern "C" __global__ void hello(int* x) { printf("hello %d;", (int)threadIdx.x); }
    """, "hello_" + header.replace(".", "_"))
    mod.hello(1, 2, (np.zeros(1, np.int32),))
    assert capsys.readouterr().out == "hello 0;hello 1;"


def test_missing_syncwarp_in_warp_synchronous_code_is_caught():
    # The pre-Volta idiom: the last warp of a tree reduction without __syncwarp.
    mod = build(r"""
    extern "C" __global__ void last_warp(const float* in, float* out) {
      volatile __shared__ float s[64];
      const int t = threadIdx.x;
      s[t] = in[t] + in[t + 32];
      if (t < 16) { s[t] += s[t + 16]; s[t] += s[t + 8]; s[t] += s[t + 4];
                    s[t] += s[t + 2]; s[t] += s[t + 1]; }
      if (t == 0) out[0] = s[0];
    }
    """, "warp_sync")
    x = np.random.default_rng(11).integers(1, 9, 64).astype(np.float32)
    out = np.zeros(1, np.float32)
    mod.last_warp(1, 32, (x, out))
    assert out[0] != x.sum(), "lanes must not run in lockstep without __syncwarp"


# --------------------------------------------------------------------------- race check


def test_race_check_flags_a_read_of_another_threads_write():
    mod = build(r"""
    extern "C" __global__ void neighbour(const float* in, float* out) {
      __shared__ float s[256];
      s[threadIdx.x] = in[threadIdx.x];
      out[threadIdx.x] = s[(threadIdx.x + blockDim.x - 1) % blockDim.x];  // no barrier
    }
    """, "race")
    x = np.random.default_rng(12).standard_normal(256, dtype=np.float32)
    out = np.zeros(256, np.float32)
    mod.neighbour(1, 256, (x, out))  # forward order: thread i reads i-1, already written
    assert np.array_equal(out[1:], x[:-1]), "forward order hides this race"
    with pytest.raises(KernelError, match=r"kernel neighbour has a race: argument `out` comes out "
                                          r"different when the threads run in reverse order"):
        mod.neighbour(1, 256, (x, out), race_check=True)


def test_race_check_accepts_float_atomics_in_any_order():
    k = gk.load("reduce", backend="cpu").reduce_v1_atomic
    x = np.random.default_rng(13).standard_normal(5000, dtype=np.float32)
    out = np.zeros(1, np.float32)
    emu.race_check(k, 20, 256, (x, out, np.int32(x.size)))
    assert abs(out[0] - x.sum(dtype=np.float64)) < 1e-3 * np.abs(x).sum()


# --------------------------------------------------------------------------- isolation


def test_isolated_run_returns_results():
    k = gk.load("vector_add", backend="cpu").vector_add_v1_naive
    a, b = np.arange(10, dtype=np.float32), np.full(10, 0.5, np.float32)
    out = emu.empty(10)
    emu.run_isolated(k, 1, 32, (a, b, out, np.int32(10)), timeout=30)
    np.testing.assert_array_equal(out, a + b)


def test_isolated_run_stops_an_endless_loop():
    t0 = time.perf_counter()
    with pytest.raises(KernelError, match=r"kernel spin did not finish within 1 s"):
        FAULTY.spin(1, 1, (np.zeros(1, np.int32), np.int32(0)), isolate=True, timeout=1)
    assert time.perf_counter() - t0 < 15


def test_isolated_run_reports_kernel_errors_and_crashes(capsys):
    with pytest.raises(KernelError, match="wait at __syncthreads"):
        FAULTY.early_return(1, 64, (np.zeros(64, np.float32), np.int32(40)), isolate=True,
                            timeout=30)
    with pytest.raises(KernelError, match="accessed invalid memory"):
        FAULTY.talk(1, 2, (np.zeros(1, np.int32), np.int32(9)), isolate=True, timeout=30)
    assert "block 0 thread 0 says 9" in capsys.readouterr().out
    mod = build(r"""
    extern "C" __global__ void quit(int* x) { abort(); }
    """, "abort")
    with pytest.raises(KernelError, match=r"crashed the process that ran it \(SIGABRT\)"):
        mod.quit(1, 1, (np.zeros(1, np.int32),), isolate=True, timeout=30)


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or sys.platform == "win32", reason="POSIX only")
def test_an_interrupt_stops_a_running_launch():
    script = textwrap.dedent("""
        import sys, numpy as np, gpucourse.kernels as gk
        mod = gk.from_source('extern "C" __global__ void spin(int* x) '
                             '{ volatile int* v = x; while (v[0] == 0) {} }', backend="cpu")
        print("ready", flush=True)
        try:
            mod.spin(1, 1, (np.zeros(1, np.int32),))
        except KeyboardInterrupt as exc:
            print("stopped:", exc, flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert "stopped: kernel spin was interrupted" in out


# --------------------------------------------------------------------------- toolchain


def test_the_portable_context_switch_runs_kernels_correctly(monkeypatch):
    monkeypatch.setenv("GPUCOURSE_EMU_SWITCH", "ucontext")
    source = (KERNEL_DIR / "reduce.cu").read_text() + "\n// built with ucontext\n"
    lib = emu.build_library(source, filename="reduce.cu")
    assert lib.switch_kind == "ucontext"
    x = (np.random.default_rng(14).integers(-64, 65, 3001) / 8).astype(np.float32)
    for name, shared in (("reduce_v2_shared_tree", 96 * 4), ("reduce_v3_warp_shuffle", 0)):
        out = np.zeros(1, np.float32)
        lib.launch(name, (32, 1, 1), (96, 1, 1), (x, out, np.int32(x.size)), shared)
        assert out[0] == x.sum(dtype=np.float64), name
    faulty = emu.build_library(FAULTY.source + "\n// ucontext\n", filename="faulty.cu")
    with pytest.raises(KernelError, match="wait at __syncthreads"):
        faulty.launch("early_return", (1, 1, 1), (64, 1, 1), (np.zeros(64, np.float32), np.int32(3)))


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86-64 only")
def test_the_fast_switch_is_the_default_on_x86_64(monkeypatch):
    monkeypatch.delenv("GPUCOURSE_EMU_SWITCH", raising=False)
    assert emu.switch_kind() == "x86-64 assembly"


def test_libraries_are_cached_by_source_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCOURSE_CACHE", str(tmp_path))
    source = 'extern "C" __global__ void cached(int* x) { x[0] = 1; }  // cache test\n'
    lib = emu.build_library(source, filename="cached.cu")
    built = sorted(p.name for p in (tmp_path / "emulator").glob("cached-*.so"))
    assert len(built) == 1 and lib.path.name == built[0]
    assert emu.build_library(source, filename="cached.cu") is lib
    other = emu.build_library(source, filename="cached.cu", defines={"X": 1})
    assert other.path != lib.path


def test_device_and_constant_globals_live_across_blocks():
    mod = build(r"""
    __device__ int counter;
    __constant__ float weights[3] = {0.5f, 0.25f, 2.0f};
    extern "C" __global__ void count(float* out) {
      static __shared__ float scale[1];
      if (threadIdx.x == 0) scale[0] = weights[blockIdx.x % 3];
      __syncthreads();
      atomicAdd(&counter, 1);
      out[blockIdx.x * blockDim.x + threadIdx.x] = scale[0];
    }
    extern "C" __global__ void read(int* x) { x[0] = counter; }
    """, "globals")
    out = emu.empty(4 * 10)
    mod.count(4, 10, (out,))
    x = np.zeros(1, np.int32)
    mod.read(1, 1, (x,))
    assert x[0] == 40
    np.testing.assert_array_equal(out.reshape(4, 10)[:, 0], [0.5, 0.25, 2.0, 0.5])


def test_extra_flags_and_extra_sources_are_linked_in(tmp_path):
    # What an instrumented build (the profiler) needs: flags for the kernel only, and
    # C++ sources of its own linked into the same library.
    hooks = tmp_path / "hooks.cpp"
    hooks.write_text('extern "C" int gc_test_hook(int v) { return v + HOOK_ADD; }\n')
    source = ('extern "C" int gc_test_hook(int v);\n'
              'extern "C" __global__ void k(int* x) { x[threadIdx.x] = gc_test_hook(KERNEL_ADD); }\n')
    lib = emu.build_library(source, filename="hooked.cu", extra_flags=["-DKERNEL_ADD=40"],
                            extra_sources=[hooks], extra_source_flags=["-DHOOK_ADD=2"])
    x = np.zeros(3, np.int32)
    lib.launch("k", (1, 1, 1), (3, 1, 1), (x,))
    assert list(x) == [42, 42, 42]


def test_shared_arrays_in_device_functions_and_kernels_coexist():
    """A __forceinline__ helper with its own __shared__ array beside a kernel's shared array."""
    import numpy as np
    import gpucourse as gc
    src = r'''
    __device__ __forceinline__ float block_total(float v) {
      __shared__ float partial[64];
      partial[threadIdx.x] = v;
      __syncthreads();
      float s = 0.0f;
      for (int i = 0; i < blockDim.x; ++i) s += partial[i];
      __syncthreads();
      return s;
    }
    extern "C" __global__ void twice(const float* in, float* out) {
      __shared__ float tile[64];
      tile[threadIdx.x] = in[threadIdx.x];
      __syncthreads();
      out[threadIdx.x] = block_total(tile[63 - threadIdx.x]);
    }
    '''
    k = gc.kernels.from_source(src, backend="cpu").twice
    x = gc.check.random_array(64)
    out = gc.emulator.empty(64)
    k(1, 64, (x, out))
    np.testing.assert_allclose(out, np.full(64, x.sum()), rtol=1e-5)
