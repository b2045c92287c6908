// Cross-entropy loss of each row of logits against an integer label: one warp per row,
// the log-sum-exp with shuffles.
typedef int label_t;

extern "C" __global__ void cross_entropy(const float* logits, const label_t* labels, float* loss,
                                         int rows, int classes) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* z = logits + (size_t)row * classes;
  float m = -INFINITY;
  for (int c = lane; c < classes; c += 32) m = fmaxf(m, z[c]);
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, o));
  m = __shfl_sync(0xffffffffu, m, 0);
  float s = 0.0f;
  for (int c = lane; c < classes; c += 32) s += expf(z[c] - m);
  for (int o = 16; o > 0; o /= 2) s += __shfl_down_sync(0xffffffffu, s, o);
  if (lane == 0) loss[row] = logf(s) + m - z[labels[row]];
}
