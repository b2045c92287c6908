// C = A B (M x K times K x N, row-major) with 1-D register blocking: a block computes a
// BM x BN tile with BM * BN / TM threads, each TM results of one column.
template <int BM, int BN, int BK, int TM>
__device__ void matmul_blocked(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[BM * BK];
  __shared__ float Bs[BK * BN];
  const int tx = threadIdx.x % BN, ty = threadIdx.x / BN;  // ty: which TM rows
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[TM] = {0.0f};
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = threadIdx.x; i < BM * BK; i += blockDim.x) {
      const int r = i / BK, c = i % BK;
      As[i] = (row0 + r < M && k0 + c < K) ? A[(row0 + r) * K + k0 + c] : 0.0f;
    }
    for (int i = threadIdx.x; i < BK * BN; i += blockDim.x) {
      const int r = i / BN, c = i % BN;
      Bs[i] = (k0 + r < K && col0 + c < N) ? B[(k0 + r) * N + col0 + c] : 0.0f;
    }
    __syncthreads();
    for (int k = 0; k < BK; k++) {
      const float b = Bs[k * BN + tx];
      for (int m = 0; m < TM; m++) acc[m] += As[(ty * TM + m) * BK + k] * b;
    }
    __syncthreads();
  }
  for (int m = 0; m < TM; m++) {
    const int r = row0 + ty * TM + m, c = col0 + tx;
    if (r < M && c < N) C[r * N + c] = acc[m];
  }
}

// 32 x 32 tiles, 8 rows per thread: blocks of 128 threads.
extern "C" __global__ void matmul_32x32_tm8(const float* A, const float* B, float* C, int M, int N, int K) {
  matmul_blocked<32, 32, 8, 8>(A, B, C, M, N, K);
}
