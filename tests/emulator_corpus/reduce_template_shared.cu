// A block-sum helper templated on type and block size, with its own __shared__ array;
// instantiated for float and int by two kernels.
template <class T, int BLOCK>
__device__ T block_reduce(T v) {
  __shared__ T buf[BLOCK];
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
    __syncthreads();
  }
  return buf[0];
}

extern "C" __global__ void sum_float_128(const float* x, float* total, int n) {
  const int i = blockIdx.x * 128 + threadIdx.x;
  const float s = block_reduce<float, 128>(i < n ? x[i] : 0.0f);
  if (threadIdx.x == 0) atomicAdd(total, s);
}

extern "C" __global__ void sum_int_64(const int* x, int* total, int n) {
  const int i = blockIdx.x * 64 + threadIdx.x;
  const int s = block_reduce<int, 64>(i < n ? x[i] : 0);
  if (threadIdx.x == 0) atomicAdd(total, s);
}
