// vector_add.cu: out[i] = a[i] + b[i] for n floats. Each byte is read or written once and
// there is one addition per 12 bytes, so the speed of every version is memory bandwidth.
//
// Versions:
//   vector_add_v1_naive        one thread per element; launch ceil(n / block) blocks
//   vector_add_v2_grid_stride  a loop over the array with the grid's stride: any grid size works
//   vector_add_v3_float4       as v2 with 16-byte float4 loads and stores (arrays 16-byte aligned)
//
// Its Python home, gpucourse/kernels/vector_add.py, has each version's launch (grid, block),
// the reference, FLOPs and bytes, and the tolerance.

extern "C" __global__ void vector_add_v1_naive(const float* __restrict__ a, const float* __restrict__ b,
                                               float* __restrict__ out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

extern "C" __global__ void vector_add_v2_grid_stride(const float* __restrict__ a, const float* __restrict__ b,
                                                     float* __restrict__ out, int n) {
  // unsigned: i + stride cannot overflow while n < 2^31.
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (unsigned)n; i += blockDim.x * gridDim.x)
    out[i] = a[i] + b[i];
}

extern "C" __global__ void vector_add_v3_float4(const float* __restrict__ a, const float* __restrict__ b,
                                                float* __restrict__ out, int n) {
  const unsigned first = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned stride = blockDim.x * gridDim.x;
  const unsigned n4 = (unsigned)n / 4;
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  float4* out4 = reinterpret_cast<float4*>(out);
  for (unsigned i = first; i < n4; i += stride) {
    const float4 x = a4[i], y = b4[i];
    out4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
  // The last n % 4 elements do not fill a float4: the first threads take one each (in a
  // loop, since a grid of fewer than three threads is allowed too).
  for (unsigned t = 4 * n4 + first; t < (unsigned)n; t += stride) out[t] = a[t] + b[t];
}
