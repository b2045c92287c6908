// Exclusive prefix sum of up to 2 * blockDim.x elements in one block (work-efficient:
// up-sweep, then down-sweep), in dynamic shared memory of 2 * blockDim.x floats.
extern "C" __global__ void scan_blelloch(const float* x, float* y, int n) {
  extern __shared__ float temp[];
  const int t = threadIdx.x, size = 2 * blockDim.x;
  temp[2 * t] = 2 * t < n ? x[2 * t] : 0.0f;
  temp[2 * t + 1] = 2 * t + 1 < n ? x[2 * t + 1] : 0.0f;
  int offset = 1;
  for (int d = size >> 1; d > 0; d >>= 1) {
    __syncthreads();
    if (t < d) {
      const int a = offset * (2 * t + 1) - 1, b = offset * (2 * t + 2) - 1;
      temp[b] += temp[a];
    }
    offset *= 2;
  }
  if (t == 0) temp[size - 1] = 0.0f;
  for (int d = 1; d < size; d *= 2) {
    offset >>= 1;
    __syncthreads();
    if (t < d) {
      const int a = offset * (2 * t + 1) - 1, b = offset * (2 * t + 2) - 1;
      const float keep = temp[a];
      temp[a] = temp[b];
      temp[b] += keep;
    }
  }
  __syncthreads();
  if (2 * t < n) y[2 * t] = temp[2 * t];
  if (2 * t + 1 < n) y[2 * t + 1] = temp[2 * t + 1];
}
