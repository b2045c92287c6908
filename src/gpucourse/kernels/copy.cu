// copy.cu: out = in for n floats, in two access patterns that move the same bytes.
//
// Versions:
//   copy_v1_coalesced  thread i copies element i: the 32 threads of a warp touch 128 contiguous bytes
//   copy_v2_strided    neighbouring threads copy elements `stride` apart; every element is still copied once
//   copy_v3_float4     coalesced with 16-byte float4 loads and a grid-stride loop: more bytes in flight per thread
//
// The strided version views the array as rows of `stride` elements and walks it column by column:
// thread i copies row i % rows, column i / rows, with rows = ceil(n / stride). Launch at least
// rows * stride threads. stride = 1 is the coalesced pattern; from stride = 8 on, each of a
// warp's 32 loads falls in a different 32-byte sector.
//
// Versions after v2 take (in, out, n) and loop with the grid's stride, so any grid size covers
// any n; chapter 1's GPU check times every such version against the library copy.
//
// Its Python home, gpucourse/kernels/copy.py, has each version's launch (grid, block, arguments),
// the reference, the bytes a copy moves and the tolerance.

extern "C" __global__ void copy_v1_coalesced(const float* __restrict__ in, float* __restrict__ out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}

extern "C" __global__ void copy_v2_strided(const float* __restrict__ in, float* __restrict__ out, int n,
                                           int stride) {
  // unsigned 32-bit arithmetic: rows * stride < n + stride fits while n < 2^31.
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned rows = ((unsigned)n + stride - 1) / stride;
  if (i >= rows * stride) return;
  const unsigned idx = (i % rows) * stride + i / rows;
  if (idx < (unsigned)n) out[idx] = in[idx];
}

// One 4-byte load per thread keeps too few bytes in flight to saturate HBM on large GPUs;
// 16-byte loads move four times as much per instruction. Any grid size works (grid-stride);
// the arrays must be 16-byte aligned, as CuPy and NumPy allocations are.
extern "C" __global__ void copy_v3_float4(const float* __restrict__ in, float* __restrict__ out, int n) {
  const unsigned first = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned step = blockDim.x * gridDim.x;
  const unsigned n4 = (unsigned)n / 4;
  const float4* in4 = reinterpret_cast<const float4*>(in);
  float4* out4 = reinterpret_cast<float4*>(out);
  for (unsigned i = first; i < n4; i += step) out4[i] = in4[i];
  // The last n % 4 elements do not fill a float4: the first threads take one each (in a
  // loop, since a grid of fewer than three threads is allowed too).
  for (unsigned t = 4 * n4 + first; t < (unsigned)n; t += step) out[t] = in[t];
}
