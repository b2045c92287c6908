// A 1-D stencil of radius R: the taps in constant memory (set from Python with
// get_global), the input in a shared tile with a halo on each side.
#define R 3
__constant__ float c_taps[2 * R + 1];

extern "C" __global__ void stencil_constant(const float* x, float* y, int n) {
  __shared__ float tile[128 + 2 * R];
  const int i = blockIdx.x * blockDim.x + threadIdx.x, t = threadIdx.x + R;
  tile[t] = i < n ? x[i] : 0.0f;
  if (threadIdx.x < R) {
    const int left = i - R, right = i + blockDim.x;
    tile[threadIdx.x] = left >= 0 && left < n ? x[left] : 0.0f;
    tile[t + blockDim.x] = right < n ? x[right] : 0.0f;
  }
  __syncthreads();
  if (i >= n) return;
  float acc = 0.0f;
  for (int k = -R; k <= R; k++) acc += c_taps[k + R] * tile[t + k];
  y[i] = acc;
}
