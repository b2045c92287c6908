// saxpy: y = a * x + y, the elementwise kernel of chapter 4's block-size sweep.
//   saxpy_v1_one_per_thread  one element per thread, grid = ceil(n / block)
//   saxpy_v2_grid_stride     a fixed grid whose threads stride over the array
//
// Each element is read twice (x, y) and written once: 12 bytes of traffic per element, no
// reuse, so the kernel is bound by memory bandwidth. How fast it runs depends on whether
// the launch keeps enough loads in flight, which is what the block size changes.
// Python home: kernels/saxpy.py (the launch of each version, NumPy reference, bytes, FLOPs,
// tolerance).

extern "C" __global__ void saxpy_v1_one_per_thread(float a, const float* __restrict__ x,
                                                   float* __restrict__ y, int n) {
    // 64-bit index: blockIdx.x * blockDim.x overflows int past 2^31 elements.
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void saxpy_v2_grid_stride(float a, const float* __restrict__ x,
                                                float* __restrict__ y, int n) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = a * x[i] + y[i];
}
