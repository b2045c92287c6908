// The maximum of a float array with an atomicCAS loop on its bits (CUDA has no float
// atomicMax): read, then compare-and-swap until no other thread got in between.
extern "C" __global__ void atomic_cas_max(const float* x, float* result, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  int* addr = reinterpret_cast<int*>(result);
  int old = *addr;
  while (__int_as_float(old) < v) {
    const int seen = atomicCAS(addr, old, __float_as_int(v));
    if (seen == old) break;
    old = seen;
  }
}
