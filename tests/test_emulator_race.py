"""race_check's hazard detector: lost updates and missing barriers named by line, and no
false alarms where a barrier, a warp-level sync or an atomic orders the accesses; its thread
orders: float sums that differ only by rounding pass, within a bound derived from the launch."""
from __future__ import annotations

import re
import textwrap
import warnings

import numpy as np
import pytest

import gpucourse.emulator as emu
import gpucourse.kernels as gk
from gpucourse import precision
from gpucourse.emulator import KernelError, racecheck

SOURCE = textwrap.dedent(r"""
#define NB 16
#define T 8

extern "C" __global__ void global_sum(const float* x, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[0] += x[i];  // GLOBAL SUM
}

extern "C" __global__ void global_sum_atomic(const float* x, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(out, x[i]);
}

extern "C" __global__ void block_totals(const float* x, float* out, int n) {
  __shared__ float total;
  if (threadIdx.x == 0) total = 0.0f;
  __syncthreads();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&total, x[i]);
  __syncthreads();
  if (threadIdx.x == 0) out[0] += total;  // BLOCK TOTAL
}

extern "C" __global__ void shared_hist(const int* d, unsigned* bins, int n) {
  __shared__ unsigned s_bins[NB];
  for (int b = threadIdx.x; b < NB; b += blockDim.x) s_bins[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    s_bins[d[i]]++;  // SHARED COUNT
  __syncthreads();
  for (int b = threadIdx.x; b < NB; b += blockDim.x) atomicAdd(&bins[b], s_bins[b]);
}

extern "C" __global__ void atomic_hist(const int* d, unsigned* bins, int n, int first_sync) {
  __shared__ unsigned s_bins[NB];
  for (int b = threadIdx.x; b < NB; b += blockDim.x) s_bins[b] = 0;  // CLEAR
  if (first_sync) __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    atomicAdd(&s_bins[d[i]], 1u);  // ATOMIC COUNT
  __syncthreads();
  for (int b = threadIdx.x; b < NB; b += blockDim.x) atomicAdd(&bins[b], s_bins[b]);
}

extern "C" __global__ void tiled(const float* A, const float* B, float* C, int n, int second_sync) {
  __shared__ float As[T][T], Bs[T][T];
  const int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += T) {
    As[threadIdx.y][threadIdx.x] = A[row * n + k0 + threadIdx.x];  // LOAD A
    Bs[threadIdx.y][threadIdx.x] = B[(k0 + threadIdx.y) * n + col];  // LOAD B
    __syncthreads();
    for (int k = 0; k < T; k++) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];  // USE
    if (second_sync) __syncthreads();
  }
  C[row * n + col] = acc;
}

extern "C" __global__ void warp_swap(const float* in, float* out, int how) {
  __shared__ float s[64];
  const int t = threadIdx.x;
  s[t] = in[t];  // SWAP WRITE
  float one = 1.0f;
  if (how == 1) __syncwarp();
  if (how == 2) one = __shfl_xor_sync(0xffffffffu, one, 1);  // a shuffle orders no memory
  out[t] = one * s[t ^ 1];  // SWAP READ
}

extern "C" __global__ void across_warps(const float* in, float* out) {
  __shared__ float s[64];
  const int t = threadIdx.x;
  s[t] = in[t];  // ACROSS WRITE
  __syncwarp();
  out[t] = s[(t + 32) % 64];  // ACROSS READ
}

extern "C" __global__ void reverse(const float* in, float* out) {
  extern __shared__ float buf[];
  buf[threadIdx.x] = in[threadIdx.x];  // DYNAMIC WRITE
  __syncthreads();
  out[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}

extern "C" __global__ void shifted(const float* in, float* out, int n, int by) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i + by];  // SHIFTED READ
}

extern "C" __global__ void spill(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) out[i] = in[i < n ? i : 0];  // SPILL WRITE
}

extern "C" __global__ void cas_max(const float* x, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int* a = (int*)out;
  int old = *a, assumed;  // CAS FIRST READ
  do {
    assumed = old;
    old = atomicCAS(a, assumed, __float_as_int(fmaxf(x[i], __int_as_float(assumed))));
  } while (assumed != old);
}

extern "C" __global__ void read_while_counting(const int* d, unsigned* bins, int n) {
  __shared__ unsigned s_bins[NB];
  for (int b = threadIdx.x; b < NB; b += blockDim.x) s_bins[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    atomicAdd(&s_bins[d[i]], 1u);  // COUNTED
  for (int b = threadIdx.x; b < NB; b += blockDim.x) bins[blockIdx.x * NB + b] = s_bins[b];  // NO BARRIER
}

extern "C" __global__ void quads(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (4 * i < n) {  // wrong for n % 4 != 0: the last float4 runs past the end of in
    const float4 v = reinterpret_cast<const float4*>(in)[i];  // QUAD READ
    out[i] = v.x + v.y + v.z + v.w;
  }
}

extern "C" __global__ void totals(const float* x, float* out, int n) {
  __shared__ float warp_totals[8];  // room for 256 threads only
  __shared__ float after[32];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (threadIdx.x < 32) after[threadIdx.x] = 0.0f;
  if (threadIdx.x % 32 == 0) warp_totals[threadIdx.x / 32] = i < n ? x[i] : 0.0f;  // TOTALS
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = after[0];
    for (int w = 0; w < blockDim.x / 32; w++) s += warp_totals[w];
    out[blockIdx.x] = s;
  }
}

extern "C" __global__ void bytes(unsigned char* out) {
  out[threadIdx.x] = (unsigned char)threadIdx.x;  // neighbours share a word, not a byte
}

extern "C" __global__ void block_scoped_counts(const int* d, unsigned* out, int n) {
  __shared__ unsigned count;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && d[i] > 7) atomicAdd_block(&count, 1u);
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = count;
}

extern "C" __global__ void block_scoped_cas_max(const float* x, float* out, int n) {
  __shared__ int best;
  if (threadIdx.x == 0) best = __float_as_int(-INFINITY);
  __syncthreads();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int old = best, assumed;  // a plain first read, then compare-and-swap in the block
    do {
      assumed = old;
      old = atomicCAS_block(&best, assumed, __float_as_int(fmaxf(x[i], __int_as_float(assumed))));
    } while (assumed != old);
  }
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = __int_as_float(best);
}

extern "C" __global__ void block_scoped_total(const int* d, unsigned* total, int n, int scope) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (scope == 0) atomicAdd_block(total, (unsigned)d[i]);  // BLOCK SCOPED
  if (scope == 1) atomicAdd_system(total, (unsigned)d[i]);
  if (scope == 2) {  // block 0 adds with device scope, the others with block scope
    if (blockIdx.x == 0) atomicAdd(total, (unsigned)d[i]);  // DEVICE SCOPED
    else atomicAdd_block(total, (unsigned)d[i]);  // OTHER BLOCKS
  }
  if (scope == 3 && blockIdx.x == 0) atomicAdd_block(total, (unsigned)d[i]);  // BLOCK ZERO
  if (scope == 3 && blockIdx.x == 1 && threadIdx.x == 0) total[0] = 0;  // PLAIN STORE
}
""")
LINES = {m.group(1): i + 1 for i, text in enumerate(SOURCE.splitlines())
         for m in [re.search(r"// ([A-Z][A-Z ]+)$", text)] if m}

F32, I32 = np.float32, np.int32


@pytest.fixture(scope="module")
def mod():
    return gk.from_source(SOURCE, name="races.cu", backend="cpu")


def names(message: str, *markers: str) -> None:
    for marker in markers:
        assert f"line {LINES[marker]}" in message, (marker, message)
    assert "races.cu line" in message, message


def data(n=1000, seed=0):
    return np.random.default_rng(seed).integers(0, 16, n).astype(I32)


# --------------------------------------------------------------------------- lost updates

def test_a_plain_sum_into_one_global_element_is_a_race(mod):
    x = np.ones(1000, F32)
    out = np.zeros(1, F32)
    mod.global_sum(4, 256, (x, out, I32(1000)))
    assert out[0] == 1000, "the emulator runs each += whole: no order loses an update"
    out[0] = 0
    with pytest.raises(KernelError, match=r"kernel global_sum has a race \(read-after-write hazard "
                                          r"in global memory, `out\[0\]`\): thread \(1,0,0\) of "
                                          r"block \(0,0,0\) reads it") as info:
        mod.global_sum(4, 256, (x, out, I32(1000)), race_check=True)
    names(str(info.value), "GLOBAL SUM")
    assert "atomicAdd" in str(info.value)


def test_atomics_are_no_race(mod):
    x = np.ones(1000, F32)
    out = np.zeros(1, F32)
    mod.global_sum_atomic(4, 256, (x, out, I32(1000)), race_check=True)
    assert out[0] == 1000


def test_one_plain_add_per_block_races_across_blocks(mod):
    x = np.ones(1000, F32)
    out = np.zeros(1, F32)
    with pytest.raises(KernelError, match=r"thread \(0,0,0\) of block \(1,0,0\) reads it .* after "
                                          r"thread \(0,0,0\) of block \(0,0,0\) wrote it") as info:
        mod.block_totals(4, 256, (x, out, I32(1000)), race_check=True)
    names(str(info.value), "BLOCK TOTAL")
    assert "threads of different blocks are not ordered" in str(info.value)
    mod.block_totals(1, 256, (x, out, I32(256)), race_check=True)  # one block: no race


def test_a_shared_histogram_with_plus_plus_is_a_race(mod):
    d = data()
    bins = np.zeros(16, np.uint32)
    mod.shared_hist(2, 128, (d, bins, I32(d.size)))
    np.testing.assert_array_equal(bins, np.bincount(d, minlength=16))  # exact on the emulator
    bins[:] = 0
    with pytest.raises(KernelError, match=r"kernel shared_hist has a race \(read-after-write hazard "
                                          r"in shared memory\)") as info:
        mod.shared_hist(2, 128, (d, bins, I32(d.size)), race_check=True)
    names(str(info.value), "SHARED COUNT")
    assert "use an atomic (atomicAdd)" in str(info.value)


# --------------------------------------------------------------------------- missing barriers

def test_clearing_shared_bins_needs_a_barrier_before_the_atomics(mod):
    d = data(seed=1)
    bins = np.zeros(16, np.uint32)
    mod.atomic_hist(2, 128, (d, bins, I32(d.size), I32(1)), race_check=True)
    np.testing.assert_array_equal(bins, np.bincount(d, minlength=16))
    bins[:] = 0
    with pytest.raises(KernelError, match="has a race") as info:
        mod.atomic_hist(2, 128, (d, bins, I32(d.size), I32(0)), race_check=True)
    names(str(info.value), "CLEAR", "ATOMIC COUNT")
    assert "put a __syncthreads() between the plain access and the atomics" in str(info.value)


def test_a_tile_overwritten_while_others_still_read_it(mod):
    n = 16
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((n, n), dtype=F32), rng.standard_normal((n, n), dtype=F32)
    C = np.full((n, n), np.nan, F32)
    mod.tiled((2, 2), (8, 8), (A, B, C, I32(n), I32(1)), race_check=True)
    np.testing.assert_allclose(C, A @ B, rtol=1e-4, atol=1e-4)
    with pytest.raises(KernelError, match=r"has a race.* hazard in shared memory") as info:
        mod.tiled((2, 2), (8, 8), (A, B, C, I32(n), I32(0)), race_check=True)
    names(str(info.value), "USE")
    assert re.search(rf"line ({LINES['LOAD A']}|{LINES['LOAD B']})", str(info.value))


# --------------------------------------------------------------------------- warps

def test_lanes_of_a_warp_exchange_through_shared_memory_after_a_warp_sync(mod):
    x = np.arange(64, dtype=F32)
    out = np.zeros(64, F32)
    mod.warp_swap(1, 64, (x, out, I32(1)), race_check=True)
    np.testing.assert_array_equal(out, x.reshape(-1, 2)[:, ::-1].reshape(-1))
    # Without a __syncwarp(), or with only a shuffle: CUDA orders no memory among the lanes
    # of a shuffle, so it is flagged even though every thread order gives the right answer.
    for how in (0, 2):
        with pytest.raises(KernelError, match="has a race") as info:
            mod.warp_swap(1, 64, (x, out, I32(how)), race_check=True)
        names(str(info.value), "SWAP WRITE", "SWAP READ")
        assert "__syncwarp()" in str(info.value)


def test_a_warp_sync_does_not_order_two_warps(mod):
    x = np.arange(64, dtype=F32)
    with pytest.raises(KernelError, match="has a race") as info:
        mod.across_warps(1, 64, (x, np.zeros(64, F32)), race_check=True)
    names(str(info.value), "ACROSS WRITE", "ACROSS READ")


def test_neighbouring_bytes_are_no_race(mod):
    out = np.zeros(64, np.uint8)
    mod.bytes(1, 64, (out,), race_check=True)
    np.testing.assert_array_equal(out, np.arange(64))


def test_dynamic_shared_memory_past_the_launch_request_is_reported(mod):
    x = np.arange(64, dtype=F32)
    out = np.zeros(64, F32)
    mod.reverse(1, 64, (x, out), shared_mem=64 * 4, race_check=True)
    np.testing.assert_array_equal(out, x[::-1])
    mod.reverse(1, 64, (x, out), shared_mem=32 * 4)  # unchecked, it runs (the buffer is 48 KB)
    with pytest.raises(KernelError, match=r"kernel reverse: thread \(32,0,0\) of block \(0,0,0\) "
                                          r"writes dynamic shared memory \(extern __shared__\) at "
                                          r"byte 128, past the 128 bytes the launch asked for") as info:
        mod.reverse(1, 64, (x, out), shared_mem=32 * 4, race_check=True)
    names(str(info.value), "DYNAMIC WRITE")


@pytest.mark.parametrize("by, element, side", [(1, 100, "past its end"), (-1, -1, "before its start")])
def test_a_read_out_of_bounds_names_the_array_and_element(mod, by, element, side):
    x = np.random.default_rng(1).standard_normal(100).astype(F32)
    out = np.zeros(100, F32)
    with pytest.raises(KernelError, match=rf"kernel shifted: thread \(\d+,0,0\) of block \(\d,0,0\) "
                                          rf"reads `in` out of bounds .*element {element} of 100 "
                                          rf"\({side}\)") as info:
        mod.shifted(4, 32, (x, out, I32(100), I32(by)), race_check=True)
    names(str(info.value), "SHIFTED READ")
    mod.shifted(4, 32, (x, out, I32(100), I32(0)), race_check=True)  # in bounds: no complaint
    np.testing.assert_array_equal(out, x)


def test_a_wide_load_that_starts_inside_and_ends_past_the_array_is_out_of_bounds(mod):
    x = np.random.default_rng(4).standard_normal(64).astype(F32)
    buf = np.zeros(16, F32)
    mod.quads(1, 32, (x, buf, I32(64)), race_check=True)  # 64 = 16 whole float4s: fine
    with pytest.raises(KernelError, match=r"reads `in` out of bounds .*element 3 of 1 \(past its end\)") as info:
        mod.quads(1, 32, (x[:1].copy(), buf, I32(1)), race_check=True)
    names(str(info.value), "QUAD READ")


def test_an_index_past_a_static_shared_array_is_named_even_where_another_array_follows(mod):
    """The detector's build puts guard bytes after each static __shared__ array: without them
    warp_totals[8..31] would land in `after` and go unseen."""
    x = np.random.default_rng(5).standard_normal(1024).astype(F32)
    out = np.zeros(4, F32)
    mod.totals(4, 256, (x, out, I32(1024)), race_check=True)  # 8 warps: fits
    with pytest.raises(KernelError, match=r"writes the __shared__ array `warp_totals` past its end "
                                          r"\(byte 0 beyond it\)") as info:
        mod.totals(1, 1024, (x, out, I32(1024)), race_check=True)
    names(str(info.value), "TOTALS")


def test_a_write_one_past_the_end_is_out_of_bounds(mod):
    x = np.random.default_rng(2).standard_normal(64).astype(F32)
    buf = np.zeros(65, F32)  # the checker owns the element after out
    with pytest.raises(KernelError, match=r"writes `out` out of bounds .*element 64 of 64") as info:
        mod.spill(1, 96, (x, buf[:64], I32(64)), race_check=True)
    names(str(info.value), "SPILL WRITE")


def test_a_compare_and_swap_loop_is_no_race(mod):
    """The Programming Guide's pattern: a plain first read, then atomicCAS until no other thread
    got in between. A stale first read costs one more trip, never a wrong result."""
    x = np.random.default_rng(3).standard_normal(300).astype(F32)
    out = np.full(1, -np.inf, F32)
    mod.cas_max(3, 128, (x, out, I32(300)), race_check=True)
    assert out[0] == x.max()


def test_reading_counters_while_others_still_add_to_them_is_a_race(mod):
    bins = np.zeros(2 * 16, np.uint32)
    with pytest.raises(KernelError, match="hazard in shared memory") as info:
        mod.read_while_counting(2, 64, (data(), bins, I32(1000)), race_check=True)
    names(str(info.value), "NO BARRIER", "COUNTED")


# --------------------------------------------------------------------------- scoped atomics

def test_block_scoped_atomics_on_a_blocks_own_shared_counter_are_no_race(mod):
    d = data(1000, seed=5)
    out = np.zeros(4, np.uint32)
    mod.block_scoped_counts(4, 256, (d, out, I32(1000)), race_check=True)
    np.testing.assert_array_equal(out, [(d[256 * b:256 * (b + 1)] > 7).sum() for b in range(4)])


def test_a_block_scoped_compare_and_swap_loop_in_shared_memory_is_no_race(mod):
    x = np.random.default_rng(8).standard_normal(300).astype(F32)
    out = np.zeros(3, F32)
    mod.block_scoped_cas_max(3, 100, (x, out, I32(300)), race_check=True)
    np.testing.assert_array_equal(out, x.reshape(3, 100).max(axis=1))


def test_block_scoped_atomics_of_several_blocks_on_one_global_value_are_a_race(mod):
    d = data(600, seed=6)
    total = np.zeros(1, np.uint32)
    mod.block_scoped_total(1, 600 // 3, (d[:200], total, I32(200), I32(0)), race_check=True)
    assert total[0] == d[:200].sum(), "one block: a _block atomic is atomic among its threads"
    total[0] = 0
    mod.block_scoped_total(3, 200, (d, total, I32(600), I32(1)), race_check=True)
    assert total[0] == d.sum(), "a _system atomic is atomic for every thread"
    with pytest.raises(KernelError, match=r"kernel block_scoped_total has a race \(write-after-write "
                                          r"hazard in global memory, `total\[0\]`\): thread "
                                          r"\(0,0,0\) of block \(1,0,0\) atomically updates it "
                                          r"with a block-scoped atomic") as info:
        mod.block_scoped_total(3, 200, (d, total, I32(600), I32(0)), race_check=True)
    names(str(info.value), "BLOCK SCOPED")
    assert "atomic only among the threads of one block" in str(info.value)


def test_a_block_scoped_atomic_against_another_blocks_atomic_or_store_is_a_race(mod):
    d = data(600, seed=7)
    total = np.zeros(1, np.uint32)
    with pytest.raises(KernelError, match=r"block \(1,0,0\) atomically updates it with a "
                                          r"block-scoped atomic .* after thread \(0,0,0\) of "
                                          r"block \(0,0,0\) atomically updated it at") as info:
        mod.block_scoped_total(3, 200, (d, total, I32(600), I32(2)), race_check=True)
    names(str(info.value), "OTHER BLOCKS", "DEVICE SCOPED")
    with pytest.raises(KernelError, match=r"write-after-write hazard") as info:
        mod.block_scoped_total(3, 200, (d, total, I32(600), I32(3)), race_check=True)
    names(str(info.value), "BLOCK ZERO", "PLAIN STORE")


# --------------------------------------------------------------------------- where it runs

def test_the_detector_runs_in_the_child_process_of_an_isolated_launch(mod):
    x = np.ones(300, F32)
    out = np.zeros(1, F32)
    with pytest.raises(KernelError, match=r"kernel global_sum has a race") as info:
        mod.global_sum(2, 256, (x, out, I32(300)), race_check=True, isolate=True, timeout=30)
    names(str(info.value), "GLOBAL SUM")
    mod.global_sum_atomic(2, 256, (x, out, I32(300)), race_check=True, isolate=True, timeout=30)
    assert out[0] == 300


def test_without_its_toolchain_race_check_warns_once_and_compares_orders(mod, monkeypatch):
    monkeypatch.setattr(racecheck, "toolchain_problem", lambda: "it needs Linux")
    monkeypatch.setattr(racecheck, "_detectors", {})
    monkeypatch.setattr(racecheck, "_warned", False)
    x = np.ones(1000, F32)
    with pytest.warns(RuntimeWarning, match=r"race_check runs without its hazard detector \(it "
                                            r"needs Linux\), so only thread orders are compared"):
        mod.global_sum(4, 256, (x, np.zeros(1, F32), I32(1000)), race_check=True)
    with pytest.raises(KernelError, match="comes out different"):  # the orders still work
        mod.warp_swap(1, 64, (np.arange(64, dtype=F32), np.zeros(64, F32), I32(0)),
                      race_check=True)
    emu.race_check(mod.global_sum, 4, 256, (x, np.zeros(1, F32), I32(1000)))  # no second warning


def test_a_launch_too_large_for_the_shadow_memory_keeps_the_orders(mod, monkeypatch):
    monkeypatch.setattr(racecheck, "MAX_SHADOW_BYTES", 1000)
    monkeypatch.setattr(racecheck, "_warned", False)
    x = np.ones(1000, F32)
    with pytest.warns(RuntimeWarning, match="without its hazard detector for launches with arrays "
                                            "that large"):
        mod.global_sum(4, 256, (x, np.zeros(1000, F32), I32(1000)), race_check=True)
    # The detector ran in the child process: its warning is given here, and only once.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mod.global_sum(4, 256, (x, np.zeros(1000, F32), I32(1000)), race_check=True)


# --------------------------------------------------------------------------- float sums in any order

SUMS = textwrap.dedent(r"""
extern "C" __global__ void atomic_sum(const float* x, float* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    atomicAdd(out, x[i]);
}

extern "C" __global__ void tree_sum(const float* x, float* out, int n, int sync) {
  __shared__ float s[256];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.0f;  // TREE LOAD
  if (sync) __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h /= 2) {
    if (threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];  // TREE ADD
    if (sync) __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, s[0]);
}

extern "C" __global__ void plain_sum(const float* x, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[0] += x[i];
}
""")


@pytest.fixture(scope="module")
def sums():
    return gk.from_source(SUMS, name="sums.cu", backend="cpu")


def skewed(n: int) -> np.ndarray:
    """Positive values over many magnitudes, largest first: the forward order adds the small
    ones to a large partial sum and rounds them off, the reverse order adds them first."""
    return -np.sort(-np.random.default_rng(n).lognormal(0.0, 4.0, n)).astype(F32)


@pytest.mark.parametrize("n, grid", [(1 << 16, 256), (1 << 20, 4096), (1 << 20, 64)])
def test_a_correct_float_atomic_sum_passes_in_every_order(sums, n, grid):
    """Orders differ by up to 2 * gamma_n * sum|x| (2.3e-4 relative at 2^16 here): more than a
    fixed 1e-4, within the bound race_check derives from the launch."""
    x = skewed(n)
    out = np.zeros(1, F32)
    sums.atomic_sum(grid, 256, (x, out, I32(n)), race_check=True, timeout=60)
    exact = x.sum(dtype=np.float64)
    assert abs(out[0] - exact) <= precision.gamma(n) * exact, "the forward order's result is kept"


def test_the_orders_of_a_float_atomic_sum_really_differ_beyond_a_fixed_tolerance(sums):
    """Why the bound: the forward and reverse orders of the 2^16 sum above differ by more
    than 1e-4 of the sum, and less than the derived bound."""
    n = 1 << 16
    x = skewed(n)
    lib = sums.atomic_sum._emulator_library()
    got = {}
    for order in ("forward", "reverse"):
        out = np.zeros(1, F32)
        emu.checks.launch(lib, "atomic_sum", (256, 1, 1), (256, 1, 1), [x, out, I32(n)],
                          order=order)
        got[order] = float(out[0])
    spread = abs(got["forward"] - got["reverse"]) / max(map(abs, got.values()))
    bound = emu.checks.order_tolerance(256 * 256, [x, np.zeros(1, F32)], F32)
    assert 1e-4 < spread < bound, (spread, bound)


def test_a_correct_tree_then_atomics_sum_passes_and_a_tree_without_barriers_is_a_race(sums):
    n = 1 << 16
    x = skewed(n)
    out = np.zeros(1, F32)
    sums.tree_sum(n // 256, 256, (x, out, I32(n), I32(1)), race_check=True, timeout=60)
    with pytest.raises(KernelError, match="has a race") as info:
        sums.tree_sum(n // 256, 256, (x, np.zeros(1, F32), I32(n), I32(0)), race_check=True,
                      timeout=60)
    assert re.search(r"sums\.cu line \d+", str(info.value)), str(info.value)


def test_a_plain_float_sum_of_2_16_terms_is_still_a_race(sums):
    x = skewed(1 << 16)
    with pytest.raises(KernelError, match=r"kernel plain_sum has a race \(read-after-write"):
        sums.plain_sum(256, 256, (x, np.zeros(1, F32), I32(x.size)), race_check=True, timeout=60)


def test_without_the_detector_orders_still_catch_a_tree_without_barriers(sums, monkeypatch):
    monkeypatch.setattr(racecheck, "toolchain_problem", lambda: "it needs Linux")
    monkeypatch.setattr(racecheck, "_detectors", {})
    monkeypatch.setattr(racecheck, "_warned", True)  # its warning is tested above
    x = skewed(1 << 16)
    with pytest.raises(KernelError, match=r"kernel tree_sum has a race: argument `out` comes out "
                                          r"different"):
        sums.tree_sum(256, 256, (x, np.zeros(1, F32), I32(x.size), I32(0)), race_check=True,
                      timeout=60)
    sums.atomic_sum(4096, 256, (skewed(1 << 20), np.zeros(1, F32), I32(1 << 20)),
                    race_check=True, timeout=60)


@pytest.mark.parametrize("threads, size, dtype, n, u", [
    (1000, 10, F32, 1001, 2.0 ** -24),  # one term per thread
    (10, 1 << 20, F32, (1 << 20) + 1, 2.0 ** -24),  # a grid-stride loop over N: N / T + T <= N + 1
    (1 << 16, 1 << 16, F32, (1 << 16) + 1, 2.0 ** -24),
    (1000, 10, np.float64, 1001, 2.0 ** -24),  # a float sum may be stored in a double
    (100, 10, np.float16, 101, 2.0 ** -11),
])
def test_the_order_tolerance_is_twice_gamma_n_of_the_launch(threads, size, dtype, n, u):
    g = precision.gamma(n, u)
    got = emu.checks.order_tolerance(threads, [np.zeros(size, dtype), np.zeros(1, dtype)], dtype)
    assert got == pytest.approx(2 * g / (1 - g), rel=1e-12)


def test_where_rounding_may_lose_every_digit_only_nan_and_infinities_are_compared():
    assert emu.checks.order_tolerance(1, [np.zeros(1 << 23, F32)], F32) == np.inf
    a = np.array([1.0, np.nan, np.inf], F32)
    assert emu.checks._difference(a, np.array([5.0, np.nan, np.inf], F32), np.inf) == ""
    assert "1 of 3 elements differ" in emu.checks._difference(
        a, np.array([5.0, 1.0, np.inf], F32), np.inf)
    assert "1 of 3 elements differ" in emu.checks._difference(
        a, np.array([5.0, np.nan, -np.inf], F32), np.inf)
