// y = a x + y over a grid-stride loop, with the typedef'd types of a codebase that switches
// precision in one place.
typedef float floatX;
typedef unsigned int uint;

extern "C" __global__ void saxpy_grid_stride(uint n, floatX a, const floatX* x, floatX* y) {
  for (uint i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    y[i] = a * x[i] + y[i];
}
