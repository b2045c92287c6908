// puzzles.cu: reference answers of the kernel puzzles (lab 0b), one kernel per puzzle, from a
// one-line map to a tiled matmul. kernels/puzzles.py holds each puzzle's spec, launch shape,
// NumPy reference and budget of global reads and writes per thread. TPB (threads per block)
// and TILE are set by the launch's defines.
//
// Versions (one per puzzle, in the lab's order):
//   map_add10      out[i] = a[i] + 10, one thread per element (n a multiple of the block)
//   zip_add        out[i] = a[i] + b[i]
//   guard_add10    out[i] = a[i] + 10 for any n: threads past the end do nothing
//   map2d_add10    a 2-D grid over a rows x cols matrix
//   outer_sum      out[r][c] = a[r] + b[c] (broadcast)
//   grid_stride    out[i] = 2 a[i] + 1 with a fixed grid: each thread loops by the grid's size
//   pool3          out[i] = a[i-1] + a[i] + a[i+1] (0 past the ends), a tile in shared memory
//   block_sum      out[block] = the sum of its TPB elements, a tree in shared memory
//   warp_sum       out[warp] = the sum of its 32 elements, with __shfl_down_sync only
//   dot            *out += a . b, a block sum in shared memory then one atomicAdd per block
//   block_scan     out[i] = a[block start] + ... + a[i] (inclusive scan within each block)
//   matmul_tiled   C = A B (n x n), TILE x TILE tiles of A and B staged in shared memory

// The lab launches with TPB 64 and TILE 8 (kernels/puzzles.py, DEFINES); the defaults below
// are the same, so that the file also builds on its own.
#ifndef TPB
#define TPB 64
#endif
#ifndef TILE
#define TILE 8
#endif

extern "C" __global__ void map_add10(const float* a, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = a[i] + 10.0f;
}

extern "C" __global__ void zip_add(const float* a, const float* b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = a[i] + b[i];
}

extern "C" __global__ void guard_add10(const float* a, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + 10.0f;
}

extern "C" __global__ void map2d_add10(const float* a, float* out, int rows, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  int r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) out[r * cols + c] = a[r * cols + c] + 10.0f;
}

extern "C" __global__ void outer_sum(const float* a, const float* b, float* out, int rows, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  int r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) out[r * cols + c] = a[r] + b[c];
}

extern "C" __global__ void grid_stride(const float* a, float* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = 2.0f * a[i] + 1.0f;
}

extern "C" __global__ void pool3(const float* a, float* out, int n) {
  __shared__ float tile[TPB + 2];             // the block's elements and one on each side
  int i = blockIdx.x * TPB + threadIdx.x;
  int t = threadIdx.x + 1;
  tile[t] = i < n ? a[i] : 0.0f;
  if (threadIdx.x == 0) tile[0] = i > 0 && i - 1 < n ? a[i - 1] : 0.0f;
  if (threadIdx.x == TPB - 1) tile[TPB + 1] = i + 1 < n ? a[i + 1] : 0.0f;
  __syncthreads();                            // the whole tile loaded before anyone reads it
  if (i < n) out[i] = tile[t - 1] + tile[t] + tile[t + 1];
}

extern "C" __global__ void block_sum(const float* a, float* out, int n) {
  __shared__ float s[TPB];
  int t = threadIdx.x;
  int i = blockIdx.x * TPB + t;
  s[t] = i < n ? a[i] : 0.0f;
  __syncthreads();
  for (int half = TPB / 2; half > 0; half /= 2) {
    if (t < half) s[t] += s[t + half];
    __syncthreads();                          // this step's sums written before the next reads
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

extern "C" __global__ void warp_sum(const float* a, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? a[i] : 0.0f;              // every lane takes part in the shuffles
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0 && i < n) out[i / 32] = v;
}

extern "C" __global__ void dot(const float* a, const float* b, float* out, int n) {
  __shared__ float s[TPB];
  int t = threadIdx.x;
  int i = blockIdx.x * TPB + t;
  s[t] = i < n ? a[i] * b[i] : 0.0f;
  __syncthreads();
  for (int half = TPB / 2; half > 0; half /= 2) {
    if (t < half) s[t] += s[t + half];
    __syncthreads();
  }
  if (t == 0) atomicAdd(out, s[0]);           // blocks finish in any order: add atomically
}

extern "C" __global__ void block_scan(const float* a, float* out, int n) {
  __shared__ float s[TPB];
  int t = threadIdx.x;
  int i = blockIdx.x * TPB + t;
  s[t] = i < n ? a[i] : 0.0f;
  __syncthreads();
  for (int d = 1; d < TPB; d *= 2) {          // Hillis-Steele: add the value d places back
    float left = t >= d ? s[t - d] : 0.0f;
    __syncthreads();                          // everyone has read before anyone writes
    s[t] += left;
    __syncthreads();                          // everyone has written before the next read
  }
  if (i < n) out[i] = s[t];
}

extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C, int n) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += TILE) {
    As[ty][tx] = row < n && k0 + tx < n ? A[row * n + k0 + tx] : 0.0f;
    Bs[ty][tx] = k0 + ty < n && col < n ? B[(k0 + ty) * n + col] : 0.0f;
    __syncthreads();                          // both tiles loaded
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();                          // both tiles used before the next load
  }
  if (row < n && col < n) C[row * n + col] = acc;
}
