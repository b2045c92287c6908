// Transpose through a padded shared tile, templated on the tile and the rows a block covers
// (each thread copies TILE / ROWS elements).
template <int TILE, int ROWS>
__device__ void transpose_tiled(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS)
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS)
    if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

extern "C" __global__ void transpose_32x8(const float* in, float* out, int rows, int cols) {
  transpose_tiled<32, 8>(in, out, rows, cols);
}
extern "C" __global__ void transpose_16x16(const float* in, float* out, int rows, int cols) {
  transpose_tiled<16, 16>(in, out, rows, cols);
}
