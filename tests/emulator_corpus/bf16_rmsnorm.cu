// RMSNorm of bfloat16 rows in float: one block per row, a block reduction of squares through
// shared memory, the output rounded to bfloat16 (typedef'd as llm.c names it).
#include <cuda_bf16.h>
typedef __nv_bfloat16 floatX;

extern "C" __global__ void bf16_rmsnorm(const floatX* x, const floatX* w, floatX* y, int C) {
  __shared__ float partial[256];
  const floatX* xr = x + (size_t)blockIdx.x * C;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < C; i += blockDim.x) { const float v = __bfloat162float(xr[i]); ss += v * v; }
  partial[threadIdx.x] = ss;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const float scale = rsqrtf(partial[0] / C + 1e-6f);
  for (int i = threadIdx.x; i < C; i += blockDim.x)
    y[(size_t)blockIdx.x * C + i] = __float2bfloat16(__bfloat162float(xr[i]) * scale * __bfloat162float(w[i]));
}
