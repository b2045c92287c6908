// C = A B for half matrices (M x K times K x N), products accumulated in float and the
// result rounded to half once.
#include <cuda_fp16.h>

extern "C" __global__ void half_matmul_naive(const half* A, const half* B, half* C, int M, int N, int K) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; k++) acc += __half2float(A[row * K + k]) * __half2float(B[k * N + col]);
  C[row * N + col] = __float2half_rn(acc);
}
