// reduce.cu: *out += the sum of n floats, with 1-D blocks of any size up to 1024.
// Set *out to 0 before the launch: every version adds its partial sums to it with atomicAdd,
// so any grid gives the whole sum (float addition in another order: compare with a tolerance).
//
// Versions:
//   reduce_v1_atomic        every thread atomically adds its element to *out: n atomics on one address
//   reduce_v2_shared_tree   a block sums in shared memory, halving the active threads each step; one atomic per block
//   reduce_v3_warp_shuffle  warps sum in registers with __shfl_down_sync, then one warp sums the warp totals
//   reduce_v4_grid_stride   each thread first sums many elements in a grid-stride loop, then as v3: few blocks, few atomics
//   reduce_v5_float4_unrolled  as v4 with float4 loads, four in flight per thread into independent sums
//
// reduce_v2_shared_tree needs blockDim.x * 4 bytes of dynamic shared memory (shared_mem).
// Python home: kernels/reduce.py (the launch of each version, NumPy reference, bytes, FLOPs,
// tolerance).

extern "C" __global__ void reduce_v1_atomic(const float* __restrict__ in, float* out, int n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (unsigned)n) atomicAdd(out, in[i]);
}

extern "C" __global__ void reduce_v2_shared_tree(const float* __restrict__ in, float* out, int n) {
  extern __shared__ float partial[];
  const unsigned t = threadIdx.x;
  const unsigned i = blockIdx.x * blockDim.x + t;
  partial[t] = i < (unsigned)n ? in[i] : 0.0f;
  __syncthreads();
  // Fold [s, 2s) onto [0, s), starting from the power of two at or above blockDim.x, so that
  // blocks of any size work.
  unsigned p = 1;
  while (p < blockDim.x) p <<= 1;
  for (unsigned s = p / 2; s > 0; s >>= 1) {
    if (t < s && t + s < blockDim.x) partial[t] += partial[t + s];
    __syncthreads();
  }
  if (t == 0) atomicAdd(out, partial[0]);
}

// Sum over the first `lanes` lanes of a warp; lane 0 gets the total. Lanes past `lanes`
// (the end of a block whose size is not a multiple of 32) do not exist and are never read.
__device__ __forceinline__ float warp_sum(float v, int lanes) {
  const unsigned mask = lanes >= 32 ? 0xffffffffu : (1u << lanes) - 1u;
  const int lane = threadIdx.x % 32;
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_down_sync(mask, v, offset);
    if (lane + offset < lanes) v += other;
  }
  return v;
}

// The warp totals of a block summed by warp 0, which adds the block's total to *out.
__device__ __forceinline__ void block_sum_to(float* out, float v) {
  __shared__ float warp_totals[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int warps = (blockDim.x + 31) / 32;
  v = warp_sum(v, min(32, (int)blockDim.x - warp * 32));
  if (lane == 0) warp_totals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? warp_totals[lane] : 0.0f;
    v = warp_sum(v, min(32, (int)blockDim.x));
    if (lane == 0) atomicAdd(out, v);
  }
}

extern "C" __global__ void reduce_v3_warp_shuffle(const float* __restrict__ in, float* out, int n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  block_sum_to(out, i < (unsigned)n ? in[i] : 0.0f);
}

extern "C" __global__ void reduce_v4_grid_stride(const float* __restrict__ in, float* out, int n) {
  float v = 0.0f;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (unsigned)n; i += blockDim.x * gridDim.x)
    v += in[i];
  block_sum_to(out, v);
}

// reduce_v5_float4_unrolled: a grid-stride loop that loads one float into one sum has one load
// in flight per thread; even a full SM (2048 threads) then keeps only 8 KB of loads in flight,
// too little to cover the memory latency of a fast HBM GPU. Loading 16 bytes at a time, four
// loads per loop trip, into separate sums, puts 64 bytes per thread in flight. The block's
// sums then meet as in v3 and v4 (block_sum_to).

extern "C" __global__ void reduce_v5_float4_unrolled(const float* __restrict__ in, float* out,
                                                         int n) {
  const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned stride = blockDim.x * gridDim.x;
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  // float4 loads need 16-byte alignment; arrays from cudaMalloc (and NumPy) have it, and a
  // misaligned pointer (a view starting mid-array) takes the scalar path below instead.
  const bool aligned = ((unsigned long long)in & 15ull) == 0;
  const unsigned n4 = aligned ? (unsigned)n / 4 : 0;
  const float4* in4 = reinterpret_cast<const float4*>(in);
  unsigned i = tid;
  // Four independent loads are issued before any of them is needed.
  for (; i + 3 * stride < n4; i += 4 * stride) {
    const float4 a = in4[i];
    const float4 b = in4[i + stride];
    const float4 c = in4[i + 2 * stride];
    const float4 d = in4[i + 3 * stride];
    s0 += (a.x + a.y) + (a.z + a.w);
    s1 += (b.x + b.y) + (b.z + b.w);
    s2 += (c.x + c.y) + (c.z + c.w);
    s3 += (d.x + d.y) + (d.z + d.w);
  }
  for (; i < n4; i += stride) {
    const float4 a = in4[i];
    s0 += (a.x + a.y) + (a.z + a.w);
  }
  // The elements after the last whole float4 (all of them when misaligned), one per thread.
  for (unsigned j = 4 * n4 + tid; j < (unsigned)n; j += stride) s1 += in[j];
  block_sum_to(out, (s0 + s1) + (s2 + s3));
}
