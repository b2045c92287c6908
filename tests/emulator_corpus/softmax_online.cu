// Row-wise softmax, one block per row: a running max and sum per thread (the online
// recurrence), combined across the block with warp shuffles and shared memory.
extern "C" __global__ void softmax_online(const float* x, float* y, int cols) {
  __shared__ float s_max[32], s_sum[32];
  const float* xr = x + (size_t)blockIdx.x * cols;
  float m = -INFINITY, d = 0.0f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) {
    const float v = xr[i], m2 = fmaxf(m, v);
    d = d * expf(m - m2) + expf(v - m2);
    m = m2;
  }
  for (int o = 16; o > 0; o /= 2) {
    const float om = __shfl_xor_sync(0xffffffffu, m, o), od = __shfl_xor_sync(0xffffffffu, d, o);
    const float m2 = fmaxf(m, om);
    d = (m == -INFINITY ? 0.0f : d * expf(m - m2)) + (om == -INFINITY ? 0.0f : od * expf(om - m2));
    m = m2;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = (blockDim.x + 31) / 32;
  if (lane == 0) { s_max[warp] = m; s_sum[warp] = d; }
  __syncthreads();
  if (threadIdx.x == 0) {
    float M = -INFINITY, D = 0.0f;
    for (int w = 0; w < warps; w++) {
      const float m2 = fmaxf(M, s_max[w]);
      D = (M == -INFINITY ? 0.0f : D * expf(M - m2)) + (s_max[w] == -INFINITY ? 0.0f : s_sum[w] * expf(s_max[w] - m2));
      M = m2;
    }
    s_max[0] = M;
    s_sum[0] = D;
  }
  __syncthreads();
  const float M = s_max[0], D = s_sum[0];
  for (int i = threadIdx.x; i < cols; i += blockDim.x) y[(size_t)blockIdx.x * cols + i] = expf(xr[i] - M) / D;
}
