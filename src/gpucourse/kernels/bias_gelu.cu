// bias_gelu.cu: y = gelu(x + bias[col]) for a row-major (rows x cols) x, the exact (erf) GELU.
// Eager PyTorch runs the addition and the GELU as two kernels, each reading and writing the
// whole tensor; fused, one pass reads x once and writes y once (8 bytes per element).
// Chapter 7 registers it as the forward of a PyTorch custom operator (torch.library).
//
// Versions:
//   bias_gelu_v1_fused  one thread per element; launch ceil(n / block) blocks

extern "C" __global__ void bias_gelu_v1_fused(const float* __restrict__ x,
                                              const float* __restrict__ bias,
                                              float* __restrict__ y, int n, int cols) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i] + bias[i % cols];
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  }
}
