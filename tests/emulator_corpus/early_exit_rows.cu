// The maximum of each row, one warp per row: warps past the last row return at once.
extern "C" __global__ void early_exit_rows(const float* x, float* row_max, int rows, int cols) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x & 31;
  if (warp >= rows) return;
  float m = -INFINITY;
  for (int c = lane; c < cols; c += 32) m = fmaxf(m, x[(size_t)warp * cols + c]);
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (lane == 0) row_max[warp] = m;
}
