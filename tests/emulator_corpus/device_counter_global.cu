// Stream compaction: the indices of the values above a threshold, appended through an
// atomic ticket on a __device__ counter (Python zeroes it and reads it with get_global).
__device__ int d_count;
__constant__ float c_threshold;

extern "C" __global__ void device_counter_global(const float* x, int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && x[i] > c_threshold) out[atomicAdd(&d_count, 1)] = i;
}
