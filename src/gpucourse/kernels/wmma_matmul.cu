// wmma_matmul.cu: C = A · B on the tensor cores through WMMA (<mma.h>): A is M×K and B is K×N,
// both half and row-major; C is M×N float, row-major, accumulated in float. M, N and K are
// multiples of 16 (gpucourse.experiments.ch5_tensor_cores pads other sizes with zeros).
//
//   wmma_matmul_v1_warp_tile  one warp per 16×16 tile of C: for each k-step of 16 it loads an A
//                             and a B fragment straight from global memory and multiplies them
//                             into its accumulator; blocks of 128 threads (4 warps, 4 tiles)
//   wmma_matmul_v2_shared     a block of 4 warps computes a 64×64 tile of C, each warp 32×32
//                             (2×2 fragments); the 64×16 A and 16×64 B slices of each k-step are
//                             staged in shared memory once and read by all four warps, so each
//                             global element is loaded once per block instead of once per warp
//
// gcc on the CPU emulator and nvcc on a GPU compile this same file.
#include <mma.h>
using namespace nvcuda;

extern "C" __global__ void wmma_matmul_v1_warp_tile(const half* A, const half* B, float* C,
                                                    int M, int N, int K) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int tiles_n = N / 16;
  const int row = (warp / tiles_n) * 16, col = (warp % tiles_n) * 16;
  if (row >= M) return;  // a whole warp: past the last tile
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k = 0; k < K; k += 16) {
    wmma::load_matrix_sync(a, A + (size_t)row * K + k, K);
    wmma::load_matrix_sync(b, B + (size_t)k * N + col, N);
    wmma::mma_sync(acc, a, b, acc);
  }
  wmma::store_matrix_sync(C + (size_t)row * N + col, acc, N, wmma::mem_row_major);
}

extern "C" __global__ void wmma_matmul_v2_shared(const half* A, const half* B, float* C,
                                                 int M, int N, int K) {
  // 32-byte alignment: each fragment load starts at a multiple of 16 halfs of these tiles.
  __shared__ __align__(32) half As[64 * 16];
  __shared__ __align__(32) half Bs[16 * 64];
  const int warp = threadIdx.x / 32;
  const int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64;
  const int wr = (warp / 2) * 32, wc = (warp % 2) * 32;  // the warp's 32×32 within the block
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.0f);
  for (int k = 0; k < K; k += 16) {
    for (int e = threadIdx.x; e < 64 * 16; e += blockDim.x) {  // zeros outside A and B
      const int ar = e / 16, ac = e % 16, br = e / 64, bc = e % 64;
      As[e] = row0 + ar < M ? A[(size_t)(row0 + ar) * K + k + ac] : __float2half(0.0f);
      Bs[e] = col0 + bc < N ? B[(size_t)(k + br) * N + col0 + bc] : __float2half(0.0f);
    }
    __syncthreads();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a[2];
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b[2];
    for (int i = 0; i < 2; i++) wmma::load_matrix_sync(a[i], As + (wr + 16 * i) * 16, 16);
    for (int j = 0; j < 2; j++) wmma::load_matrix_sync(b[j], Bs + wc + 16 * j, 64);
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 2; j++) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    __syncthreads();  // the next k-step overwrites the tiles
  }
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      const int r = row0 + wr + 16 * i, c = col0 + wc + 16 * j;
      if (r < M && c < N)  // the whole warp takes the same branch
        wmma::store_matrix_sync(C + (size_t)r * N + c, acc[i][j], N, wmma::mem_row_major);
    }
}
