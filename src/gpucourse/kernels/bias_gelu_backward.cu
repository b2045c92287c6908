// bias_gelu_backward.cu: dx = dy * gelu'(x + bias[col]) for a row-major (rows x cols) x, with
// gelu'(v) = Phi(v) + v * phi(v) (Phi, phi: the standard normal CDF and density). The bias
// gradient is the sum of dx over rows, which PyTorch's sum does. The backward of chapter 7's
// custom operator.
//
// Versions:
//   bias_gelu_backward_v1_fused  one thread per element; launch ceil(n / block) blocks

extern "C" __global__ void bias_gelu_backward_v1_fused(const float* __restrict__ dy,
                                                       const float* __restrict__ x,
                                                       const float* __restrict__ bias,
                                                       float* __restrict__ dx, int n, int cols) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i] + bias[i % cols];
    const float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
    const float pdf = 0.39894228040143268f * expf(-0.5f * v * v);
    dx[i] = dy[i] * (cdf + v * pdf);
  }
}
