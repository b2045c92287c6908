// copy.cu: out = in for n floats, in two access patterns that move the same bytes.
//
// Versions:
//   copy_v1_coalesced  thread i copies element i: the 32 threads of a warp touch 128 contiguous bytes
//   copy_v2_strided    neighbouring threads copy elements `stride` apart; every element is still copied once
//
// The strided version views the array as rows of `stride` elements and walks it column by column:
// thread i copies row i % rows, column i / rows, with rows = ceil(n / stride). Launch at least
// rows * stride threads. stride = 1 is the coalesced pattern; from stride = 8 on, each of a
// warp's 32 loads falls in a different 32-byte sector.

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
