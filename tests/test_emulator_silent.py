"""Mistakes that give a wrong answer without a word on a GPU, named by race_check: the first
read of shared memory no thread of the block wrote, and a __constant__ read out of range
(with the line, the thread and the array)."""
from __future__ import annotations

import numpy as np
import pytest

import gpucourse.emulator as emu
import gpucourse.kernels as gk
from gpucourse.errors import KernelError

SILENT = gk.from_source(r"""
__constant__ float c_taps[5] = {1, 2, 3, 2, 1};

extern "C" __global__ void partial_tile(const float* x, float* y) {
  __shared__ float tile[64];
  if (threadIdx.x < 63) tile[threadIdx.x] = x[threadIdx.x];   // forgets the last element
  __syncthreads();
  y[threadIdx.x] = tile[63 - threadIdx.x];
}

extern "C" __global__ void histogram(const int* x, int* bins, int n) {
  __shared__ int local[8];
  // the bins are never zeroed: an atomicAdd reads them first
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&local[x[i] % 8], 1);
  __syncthreads();
  if (threadIdx.x < 8) atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
}

extern "C" __global__ void histogram_zeroed(const int* x, int* bins, int n) {
  __shared__ int local[8];
  if (threadIdx.x < 8) local[threadIdx.x] = 0;
  __syncthreads();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&local[x[i] % 8], 1);
  __syncthreads();
  if (threadIdx.x < 8) atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
}

template <int N> __device__ float last_of(const float* x) {
  __shared__ float buf[N];
  if (threadIdx.x > 0) buf[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  return buf[(threadIdx.x + 1) % N];
}
extern "C" __global__ void template_tile(const float* x, float* y) { y[threadIdx.x] = last_of<32>(x); }

extern "C" __global__ void dynamic_tile(const float* x, float* y) {
  extern __shared__ float dyn[];
  dyn[threadIdx.x + 1] = x[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = dyn[threadIdx.x];
}

extern "C" __global__ void neighbour_without_barrier(const float* x, float* y) {
  __shared__ float s[32];
  s[threadIdx.x] = x[threadIdx.x];
  y[threadIdx.x] = s[(threadIdx.x + 1) % 32];   // the neighbour may not have written yet
}

extern "C" __global__ void taps(const float* x, float* y, int n, int radius) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0.0f;
  for (int k = -radius; k <= radius; k++)
    if (i + k >= 0 && i + k < n) acc += c_taps[k + 2] * x[i + k];
  y[i] = acc;
}

extern "C" __global__ void shifted(float* y) { y[threadIdx.x] = c_taps[(int)threadIdx.x - 1]; }

// g++ does not instrument a store of a call's result: the poison tells it was written.
extern "C" __global__ void call_results(const float* x, float* y) {
  __shared__ float2 s[32];
  s[threadIdx.x] = make_float2(x[threadIdx.x], 2.0f * x[threadIdx.x]);
  __syncthreads();
  const float2 v = s[31 - threadIdx.x];
  y[threadIdx.x] = v.x + v.y;
}
""", name="silent", backend="cpu")


def _line(text: str) -> int:
    return 1 + next(i for i, row in enumerate(SILENT.source.splitlines()) if text in row)


def test_a_read_of_a_shared_element_no_thread_wrote_is_named():
    x, y = np.ones(64, np.float32), np.zeros(64, np.float32)
    SILENT.partial_tile(1, 64, (x, y))  # a plain launch: thread 0 reads the poison
    assert np.isnan(y[0]) and (y[1:] == 1).all()
    line = _line("y[threadIdx.x] = tile[63 - threadIdx.x];")
    with pytest.raises(KernelError, match=rf"^kernel partial_tile: thread \(0,0,0\) of block \(0,0,0\) "
                                          rf"reads the __shared__ array `tile` at element 63 before "
                                          rf"any thread of its block wrote it, at silent\.cu line "
                                          rf"{line} \(`y\[threadIdx\.x\] = tile\[63 - threadIdx\.x\];`\); "
                                          rf"shared memory starts undefined in every block"):
        SILENT.partial_tile(1, 64, (x, y), race_check=True)


def test_an_atomic_on_shared_bins_nobody_zeroed_is_named():
    x = np.random.default_rng(3).integers(0, 100, 300).astype(np.int32)
    with pytest.raises(KernelError, match=r"^kernel histogram: thread \(\d+,0,0\) of block \(0,0,0\) "
                                          r"atomically updates the __shared__ array `local` at "
                                          r"element \d before any thread of its block wrote it"):
        SILENT.histogram(3, 128, (x, np.zeros(8, np.int32), np.int32(300)), race_check=True)
    bins = np.zeros(8, np.int32)
    SILENT.histogram_zeroed(3, 128, (x, bins, np.int32(300)), race_check=True)
    np.testing.assert_array_equal(bins, np.bincount(x % 8, minlength=8))


def test_template_and_dynamic_shared_memory_read_before_written():
    x, y = np.ones(32, np.float32), np.zeros(32, np.float32)
    with pytest.raises(KernelError, match=r"kernel template_tile: thread \(31,0,0\) of block \(0,0,0\) "
                                          r"reads the __shared__ array `buf` at element 0 before"):
        SILENT.template_tile(1, 32, (x, y), race_check=True)
    with pytest.raises(KernelError, match=r"kernel dynamic_tile: thread \(0,0,0\) of block \(0,0,0\) "
                                          r"reads dynamic shared memory `dyn` \(extern __shared__\) at "
                                          r"byte 0 before any thread of its block wrote it"):
        SILENT.dynamic_tile(1, 32, (x, y), 33 * 4, race_check=True)


def test_shared_memory_written_with_a_calls_result_counts_as_written():
    x, y = np.arange(32, dtype=np.float32), np.zeros(32, np.float32)
    SILENT.call_results(1, 32, (x, y), race_check=True)
    np.testing.assert_array_equal(y, 3 * x[::-1])


def test_a_missing_barrier_is_named_as_a_race_not_as_unwritten_memory():
    """Thread 0 reads its neighbour's element before the neighbour ran: on a GPU that is a
    race, and the race is what race_check names."""
    x, y = np.ones(32, np.float32), np.zeros(32, np.float32)
    with pytest.raises(KernelError, match=r"kernel neighbour_without_barrier has a race.* "
                                          r"write-after-read hazard in shared memory"):
        SILENT.neighbour_without_barrier(1, 32, (x, y), race_check=True)


def test_a_constant_read_out_of_range_is_named():
    x = np.random.default_rng(4).random(50).astype(np.float32)
    y = emu.empty(50)
    SILENT.taps(1, 64, (x, y, np.int32(50), np.int32(2)), race_check=True)
    want = np.convolve(x, [1, 2, 3, 2, 1], mode="same")
    np.testing.assert_allclose(y, want, rtol=1e-5)
    line = _line("acc += c_taps[k + 2]")
    with pytest.raises(emu.OutOfBounds, match=rf"^kernel taps: thread \(0,0,0\) of block \(0,0,0\) "
                                              rf"reads the __constant__ array `c_taps` out of bounds "
                                              rf"at silent\.cu line {line} .*element 5 of 5 \(past its "
                                              rf"end\); on a GPU that reads whatever lies beside it in "
                                              rf"constant memory"):
        SILENT.taps(1, 64, (x, y, np.int32(50), np.int32(3)), race_check=True)
    with pytest.raises(emu.OutOfBounds, match=r"^kernel shifted: thread \(0,0,0\) .* `c_taps` .*"
                                              r"element -1 of 5 \(before its start\)"):
        SILENT.shifted(1, 5, (y,), race_check=True)
