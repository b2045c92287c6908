// A histogram of byte values: per-block bins in shared memory (zeroed first), merged with
// one atomicAdd per bin and block.
typedef unsigned int uint;
#define BINS 256

extern "C" __global__ void histogram_privatized(const unsigned char* data, uint* bins, int n) {
  __shared__ uint local[BINS];
  for (int b = threadIdx.x; b < BINS; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    atomicAdd(&local[data[i]], 1u);
  __syncthreads();
  for (int b = threadIdx.x; b < BINS; b += blockDim.x)
    if (local[b]) atomicAdd(&bins[b], local[b]);
}
