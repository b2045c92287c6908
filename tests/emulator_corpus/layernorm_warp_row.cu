// LayerNorm with one warp per row (block: 4 warps). The weights are staged in shared memory
// by the warps that have a row; warps past the last row return first, as whole warps, and
// the others meet at a __syncthreads() after (exited warps hold no barrier since sm_70).
typedef float floatX;

extern "C" __global__ void layernorm_warp_row(const floatX* x, const floatX* w, const floatX* b,
                                              floatX* y, float* mean_out, float* rstd_out,
                                              int rows, int C) {
  extern __shared__ float wb[];  // 2 * C floats: weight, then bias
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = blockIdx.x * (blockDim.x / 32) + warp;
  if (row >= rows) return;
  const int live = min((int)(blockDim.x / 32), rows - (int)blockIdx.x * (int)(blockDim.x / 32));
  for (int i = threadIdx.x; i < C; i += 32 * live) { wb[i] = w[i]; wb[C + i] = b[i]; }
  __syncthreads();
  const floatX* xr = x + (size_t)row * C;
  float sum = 0.0f;
  for (int i = lane; i < C; i += 32) sum += xr[i];
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float mean = sum / C;
  float var = 0.0f;
  for (int i = lane; i < C; i += 32) { const float d = xr[i] - mean; var += d * d; }
  for (int o = 16; o > 0; o /= 2) var += __shfl_xor_sync(0xffffffffu, var, o);
  const float rstd = rsqrtf(var / C + 1e-5f);
  for (int i = lane; i < C; i += 32) y[(size_t)row * C + i] = (xr[i] - mean) * rstd * wb[i] + wb[C + i];
  if (lane == 0) { mean_out[row] = mean; rstd_out[row] = rstd; }
}
