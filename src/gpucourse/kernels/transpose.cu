// transpose.cu: out = transpose(in) for a rows x cols row-major float matrix (out is cols x rows).
//
// Versions:
//   transpose_v1_naive   reads rows of `in` (coalesced) but writes columns of `out`: each warp store touches 32 rows
//   transpose_v2_shared  stages a TILE x TILE tile in shared memory, so reads and writes are both coalesced
//   transpose_v3_padded  as v2 with one padding column, so a column of the tile falls in 32 different banks
//
// Launch every version with block (TILE, BLOCK_ROWS) and grid (ceil(cols / TILE), ceil(rows / TILE)):
// a block moves one tile, each thread TILE / BLOCK_ROWS of its elements.
//
// Its Python home, gpucourse/kernels/transpose.py, has the launch (grid, block, static shared
// memory), the reference, the bytes a transpose moves and the tolerance.

#ifndef TILE
#define TILE 32
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 8
#endif
#if TILE % BLOCK_ROWS != 0
#error "BLOCK_ROWS must divide TILE"
#endif

extern "C" __global__ void transpose_v1_naive(const float* __restrict__ in, float* __restrict__ out,
                                              int rows, int cols) {
  const int x = blockIdx.x * TILE + threadIdx.x;  // column of in
  const int y = blockIdx.y * TILE + threadIdx.y;  // first row of in for this thread
  for (int j = 0; j < TILE; j += BLOCK_ROWS)
    if (x < cols && y + j < rows) out[x * rows + y + j] = in[(y + j) * cols + x];
}

extern "C" __global__ void transpose_v2_shared(const float* __restrict__ in, float* __restrict__ out,
                                               int rows, int cols) {
  __shared__ float tile[TILE][TILE];
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += BLOCK_ROWS)
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
  __syncthreads();  // every element of the tile must be loaded before any thread reads a column
  x = blockIdx.y * TILE + threadIdx.x;  // column of out (a row of in)
  y = blockIdx.x * TILE + threadIdx.y;  // row of out (a column of in)
  for (int j = 0; j < TILE; j += BLOCK_ROWS)
    if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

extern "C" __global__ void transpose_v3_padded(const float* __restrict__ in, float* __restrict__ out,
                                               int rows, int cols) {
  // With TILE + 1 floats per row, element [r][c] sits in bank (r * 33 + c) % 32: reading a
  // column (fixed c, r = 0..31) touches 32 different banks instead of one bank 32 times.
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += BLOCK_ROWS)
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += BLOCK_ROWS)
    if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}
