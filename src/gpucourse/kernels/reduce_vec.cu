// reduce_vec.cu: *out += the sum of n floats, the last rung of chapter 4's reduction ladder
// (after reduce.cu's v1 to v4). Set *out to 0 before the launch; any 1-D grid and any block
// size that is a multiple of 32 gives the whole sum.
//
// Versions:
//   reduce_vec_v1_float4_unrolled  grid-stride loop over float4 loads, four in flight per thread into independent sums, then a warp-shuffle block sum
//
// Why: a grid-stride loop that loads one float and adds it to one sum has one load in flight
// per thread; even a full SM (2048 threads) then keeps only 8 KB of loads in flight, too
// little to cover the memory latency of a fast HBM GPU. Loading 16 bytes at a time, four
// loads per loop trip, into separate sums, puts 64 bytes per thread in flight.

__device__ __forceinline__ float reduce_vec_warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

extern "C" __global__ void reduce_vec_v1_float4_unrolled(const float* __restrict__ in, float* out,
                                                         int n) {
  __shared__ float warp_totals[32];
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
  float v = reduce_vec_warp_sum((s0 + s1) + (s2 + s3));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_totals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (int)(blockDim.x / 32) ? warp_totals[lane] : 0.0f;
    v = reduce_vec_warp_sum(v);
    if (lane == 0) atomicAdd(out, v);
  }
}
