// The SharedMemory<T> pattern: dynamic shared memory seen as T (one extern name per type,
// as CUDA requires), used by a reduction templated on its type.
template <class T> struct SharedMemory {
  __device__ inline operator T*() { extern __shared__ int smem_words[]; return (T*)smem_words; }
};
template <> struct SharedMemory<double> {
  __device__ inline operator double*() { extern __shared__ double smem_doubles[]; return smem_doubles; }
};

template <class T>
__device__ void reduce_dynamic(const T* x, T* partial, int n) {
  T* sdata = SharedMemory<T>();
  const unsigned tid = threadIdx.x, i = blockIdx.x * blockDim.x * 2 + threadIdx.x;
  T v = i < n ? x[i] : (T)0;
  if (i + blockDim.x < n) v += x[i + blockDim.x];
  sdata[tid] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = sdata[0];
}

extern "C" __global__ void reduce_dynamic_float(const float* x, float* partial, int n) {
  reduce_dynamic<float>(x, partial, n);
}
extern "C" __global__ void reduce_dynamic_double(const double* x, double* partial, int n) {
  reduce_dynamic<double>(x, partial, n);
}
