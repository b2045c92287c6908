// C = A B with tensor cores (WMMA m16n16k16): A (M x K) and B (K x N) half, row-major,
// C float. A block of 4 warps computes a 32 x 32 tile of C, one 16 x 16 quarter per warp;
// M, N and K are multiples of 16.
#include <mma.h>
using namespace nvcuda;

extern "C" __global__ void wmma_gemm(const half* A, const half* B, float* C, int M, int N, int K) {
  const int warp = threadIdx.x / 32;
  const int row = blockIdx.y * 32 + (warp / 2) * 16, col = blockIdx.x * 32 + (warp % 2) * 16;
  if (row >= M || col >= N) return;  // the whole warp
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
