// Y = relu(X W^T + bias) with bf16 tensor-core products: X (M x K) row-major, W (N x K)
// row-major, so W^T is a column-major matrix_b. Each warp stores its accumulator tile to
// shared memory, then (after __syncwarp) adds the bias and clamps element by element.
#include <mma.h>
using namespace nvcuda;

extern "C" __global__ void wmma_bf16_bias_relu(const __nv_bfloat16* X, const __nv_bfloat16* W,
                                               const float* bias, float* Y, int M, int N, int K) {
  __shared__ float tile[4][16 * 16];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tiles_n = N / 16;
  const int t = blockIdx.x * 4 + warp;
  const int row = (t / tiles_n) * 16, col = (t % tiles_n) * 16;
  if (row >= M) return;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k = 0; k < K; k += 16) {
    wmma::load_matrix_sync(a, X + (size_t)row * K + k, K);
    wmma::load_matrix_sync(b, W + (size_t)col * K + k, K);
    wmma::mma_sync(acc, a, b, acc);
  }
  wmma::store_matrix_sync(tile[warp], acc, 16, wmma::mem_row_major);
  __syncwarp();
  for (int e = lane; e < 256; e += 32) {
    const int r = e / 16, c = e % 16;
    Y[(size_t)(row + r) * N + col + c] = fmaxf(tile[warp][e] + bias[col + c], 0.0f);
  }
}
