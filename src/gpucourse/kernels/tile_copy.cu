// tile_copy.cu: out = in for a rows x cols row-major float matrix, launched like transpose.cu.
//
// Versions:
//   tile_copy_v1_rows  block (TILE, BLOCK_ROWS) copies one TILE x TILE tile, each thread TILE / BLOCK_ROWS of its rows
//
// It moves the same bytes as a transpose, with the same launch and the same work per thread,
// but reads and writes rows only: the ceiling a transpose can reach. Launch with block
// (TILE, BLOCK_ROWS) and grid (ceil(cols / TILE), ceil(rows / TILE)).
//
// Its Python home, gpucourse/kernels/tile_copy.py, has the launch (transpose.py's), the
// reference, the bytes it moves and the tolerance.

#ifndef TILE
#define TILE 32
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 8
#endif
#if TILE % BLOCK_ROWS != 0
#error "BLOCK_ROWS must divide TILE"
#endif

extern "C" __global__ void tile_copy_v1_rows(const float* __restrict__ in, float* __restrict__ out,
                                             int rows, int cols) {
  const int x = blockIdx.x * TILE + threadIdx.x;  // column
  const int y = blockIdx.y * TILE + threadIdx.y;  // first row for this thread
  for (int j = 0; j < TILE; j += BLOCK_ROWS)
    if (x < cols && y + j < rows) out[(y + j) * cols + x] = in[(y + j) * cols + x];
}
