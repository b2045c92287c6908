// GELU (tanh approximation) on half values, two at a time through half2, the odd tail one
// by one; the arithmetic in float, each result rounded to half.
#include <cuda_fp16.h>

__device__ __forceinline__ float gelu(float v) {
  const float c = 0.7978845608f;  // sqrt(2 / pi)
  return 0.5f * v * (1.0f + tanhf(c * (v + 0.044715f * v * v * v)));
}

extern "C" __global__ void gelu_half2(const half* x, half* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int pairs = n / 2;
  if (i < pairs) {
    const half2 v = reinterpret_cast<const half2*>(x)[i];
    const float2 f = __half22float2(v);
    reinterpret_cast<half2*>(y)[i] = __floats2half2_rn(gelu(f.x), gelu(f.y));
  }
  if (i == 0 && (n & 1)) y[n - 1] = __float2half(gelu(__half2float(x[n - 1])));
}
