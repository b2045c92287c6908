// matmul.cu: C = A · B for row-major float32 matrices; A is M×K, B is K×N, C is M×N.
// Every version takes (const float* A, const float* B, float* C, int M, int N, int K) and
// handles any M, N, K >= 1: loads outside the matrices read 0, stores outside are skipped.
// Its Python home, gpucourse/kernels/matmul.py, has each version's launch (grid, block, shared
// memory), the float64 reference, FLOPs and bytes, and the tolerance.
//
//   matmul_v1_naive         one thread per output; threadIdx.x walks DOWN a column of C,
//                           so a warp reads A and writes C with a stride (uncoalesced); block 32×32
//   matmul_v2_coalesced     one thread per output; threadIdx.x walks ALONG a row of C, so a
//                           warp reads B and writes C in one contiguous run; block 32×32
//   matmul_v3_shared        TILE×TILE tiles of A and B staged in shared memory: each global
//                           element is read once per tile instead of once per output; block TILE×TILE
//   matmul_v4_1d_blocking   a 64×64 tile per block, each thread keeps 8 outputs of one column in
//                           registers and reuses each B value from shared memory 8 times; 512 threads
//   matmul_v5_2d_blocking   a BM×BN = 128×128 tile per block, BK = 8, each thread computes an
//                           8×8 block of outputs from 8 + 8 values: 64 FMAs per 16 shared loads; 256 threads
//   matmul_v6_vectorized    v5 with 16-byte (float4) global and shared loads and stores, each
//                           thread's 8×8 split in four 4×4 pieces so that a warp's float4 reads
//                           are contiguous (no bank conflicts), a padded A tile, and the next
//                           tile's global loads in flight while the current one is multiplied;
//                           falls back to scalar loads when N or K is not a multiple of 4
//
// Tile sizes can be changed with defines: TILE (v3, default 32) and BM, BN, BK (v6; v5 also
// reads TM and TN). gcc on the CPU emulator and nvcc on a GPU compile this same file.

#ifndef TILE
#define TILE 32
#endif
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif

// ------------------------------------------------------------------------------- v1, v2

extern "C" __global__ void matmul_v1_naive(const float* A, const float* B, float* C,
                                           int M, int N, int K) {
  // Neighbouring threads (threadIdx.x) own neighbouring ROWS: A[row*K + k] is K floats
  // apart across a warp, and so is C[row*N + col]. Each load touches its own sector.
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  const int col = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}

extern "C" __global__ void matmul_v2_coalesced(const float* A, const float* B, float* C,
                                               int M, int N, int K) {
  // Neighbouring threads own neighbouring COLUMNS: a warp reads 32 consecutive floats of B,
  // one A value that all its lanes share (a broadcast), and writes 32 consecutive floats of C.
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}

// ------------------------------------------------------------------------------- v3

extern "C" __global__ void matmul_v3_shared(const float* A, const float* B, float* C,
                                            int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty;
  const int col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    // Each thread stages one element of each tile; zeros pad the ragged edges so the
    // inner loop needs no bounds checks.
    As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();  // the tiles are complete before anyone reads them
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();  // nobody overwrites a tile another thread is still reading
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

// ------------------------------------------------------------------------------- v4

#define V4_BM 64
#define V4_BN 64
#define V4_BK 8
#define V4_TM 8
#define V4_THREADS ((V4_BM / V4_TM) * V4_BN)

extern "C" __global__ void matmul_v4_1d_blocking(const float* A, const float* B, float* C,
                                                 int M, int N, int K) {
  static_assert(V4_BM * V4_BK == V4_THREADS && V4_BK * V4_BN == V4_THREADS,
                "v4 loads exactly one element of each tile per thread");
  __shared__ float As[V4_BM * V4_BK];  // As[m][k]
  __shared__ float Bs[V4_BK * V4_BN];  // Bs[k][n]
  const int tid = threadIdx.x;
  const int tCol = tid % V4_BN;  // the column of C this thread works on
  const int tRow = tid / V4_BN;  // it owns rows tRow*TM .. tRow*TM + TM-1 of the tile
  const int rowBase = blockIdx.y * V4_BM, colBase = blockIdx.x * V4_BN;
  const int aR = tid / V4_BK, aC = tid % V4_BK;  // the element of the A tile it loads
  const int bR = tid / V4_BN, bC = tid % V4_BN;  // and of the B tile
  float acc[V4_TM];
  for (int i = 0; i < V4_TM; ++i) acc[i] = 0.0f;
  for (int k0 = 0; k0 < K; k0 += V4_BK) {
    const int ar = rowBase + aR, ac = k0 + aC;
    As[aR * V4_BK + aC] = (ar < M && ac < K) ? A[ar * K + ac] : 0.0f;
    const int br = k0 + bR, bc = colBase + bC;
    Bs[bR * V4_BN + bC] = (br < K && bc < N) ? B[br * N + bc] : 0.0f;
    __syncthreads();
    for (int k = 0; k < V4_BK; ++k) {
      const float b = Bs[k * V4_BN + tCol];  // one shared load, reused TM times from a register
#pragma unroll
      for (int i = 0; i < V4_TM; ++i) acc[i] += As[(tRow * V4_TM + i) * V4_BK + k] * b;
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < V4_TM; ++i) {
    const int row = rowBase + tRow * V4_TM + i, col = colBase + tCol;
    if (row < M && col < N) C[row * N + col] = acc[i];
  }
}

// ------------------------------------------------------------------------------- v5

extern "C" __global__ void __launch_bounds__((BM / TM) * (BN / TN))
matmul_v5_2d_blocking(const float* A, const float* B, float* C, int M, int N, int K) {
  constexpr int NT = (BM / TM) * (BN / TN);  // threads per block
  static_assert((BM * BK) % NT == 0 && (BK * BN) % NT == 0,
                "v5 needs the A and B tiles to split evenly over the threads");
  __shared__ float As[BK][BM];  // transposed: a thread's TM values of one k are contiguous
  __shared__ float Bs[BK][BN];
  const int tid = threadIdx.x;
  const int tCol = tid % (BN / TN), tRow = tid / (BN / TN);
  const int rowBase = blockIdx.y * BM, colBase = blockIdx.x * BN;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
  float regM[TM], regN[TN];

  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int i = 0; i < BM * BK / NT; ++i) {
      const int e = tid + i * NT, r = e / BK, c = e % BK;
      const int gr = rowBase + r, gc = k0 + c;
      As[c][r] = (gr < M && gc < K) ? A[gr * K + gc] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < BK * BN / NT; ++i) {
      const int e = tid + i * NT, r = e / BN, c = e % BN;
      const int gr = k0 + r, gc = colBase + c;
      Bs[r][c] = (gr < K && gc < N) ? B[gr * N + gc] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      // TM + TN shared loads feed TM*TN multiply-adds: the register tile is the reuse.
#pragma unroll
      for (int i = 0; i < TM; ++i) regM[i] = As[k][tRow * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) regN[j] = Bs[k][tCol * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += regM[i] * regN[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = rowBase + tRow * TM + i;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int col = colBase + tCol * TN + j;
      if (row < M && col < N) C[row * N + col] = acc[i][j];
    }
  }
}

// ------------------------------------------------------------------------------- v6

#define V6_PAD 4  // one float4 of padding per As row: the transposed stores hit 32 banks

static __device__ __forceinline__ bool matmul_aligned16(const void* p) {
  return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0ull;
}

// P[r][c .. c+3] of a rows×cols row-major matrix, 0 outside it. `vec` says that cols is a
// multiple of 4 and P is 16-byte aligned, so that a group of 4 is all in or all out.
static __device__ __forceinline__ float4 matmul_load4(const float* P, int rows, int cols,
                                                      int r, int c, bool vec) {
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (r < rows) {
    const float* p = P + (long long)r * cols + c;
    if (vec) {
      if (c < cols) v = *reinterpret_cast<const float4*>(p);
    } else {
      if (c < cols) v.x = p[0];
      if (c + 1 < cols) v.y = p[1];
      if (c + 2 < cols) v.z = p[2];
      if (c + 3 < cols) v.w = p[3];
    }
  }
  return v;
}

static __device__ __forceinline__ void matmul_store4(float* P, int rows, int cols, int r,
                                                     int c, float4 v, bool vec) {
  if (r >= rows) return;
  float* p = P + (long long)r * cols + c;
  if (vec) {
    if (c < cols) *reinterpret_cast<float4*>(p) = v;
  } else {
    if (c < cols) p[0] = v.x;
    if (c + 1 < cols) p[1] = v.y;
    if (c + 2 < cols) p[2] = v.z;
    if (c + 3 < cols) p[3] = v.w;
  }
}

extern "C" __global__ void __launch_bounds__((BM / 8) * (BN / 8), 2)
matmul_v6_vectorized(const float* __restrict__ A, const float* __restrict__ B,
                     float* __restrict__ C, int M, int N, int K) {
  constexpr int NT = (BM / 8) * (BN / 8);       // each thread computes 8×8 outputs
  constexpr int LA = BM * BK / (4 * NT);        // float4 loads of A per thread per tile
  constexpr int LB = BK * BN / (4 * NT);        // and of B
  static_assert(LA >= 1 && LA * 4 * NT == BM * BK && LB >= 1 && LB * 4 * NT == BK * BN,
                "v6 needs BM*BK and BK*BN to be multiples of 4 x the thread count");
  static_assert(BK % 4 == 0 && BM % 8 == 0 && BN % 8 == 0, "v6 needs BK % 4 == 0, BM, BN % 8 == 0");
  __shared__ __align__(16) float As[BK][BM + V6_PAD];  // transposed A tile
  __shared__ __align__(16) float Bs[BK][BN];
  const int tid = threadIdx.x;
  const int tCol = tid % (BN / 8), tRow = tid / (BN / 8);
  const int rowBase = blockIdx.y * BM, colBase = blockIdx.x * BN;
  // One decision for the whole launch: every thread takes the same branch.
  const bool vecA = (K % 4 == 0) && matmul_aligned16(A);
  const bool vecBC = (N % 4 == 0) && matmul_aligned16(B) && matmul_aligned16(C);

  // This thread's rows are tRow*4 + (0..3) and BM/2 + tRow*4 + (0..3); its columns likewise.
  // A warp's 16 threads of one tRow then read 16 consecutive float4s of a Bs row.
  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

  float4 ra[LA], rb[LB];  // the next tile, on its way from global memory
#pragma unroll
  for (int i = 0; i < LA; ++i) {
    const int e = tid + i * NT;
    ra[i] = matmul_load4(A, M, K, rowBase + e / (BK / 4), (e % (BK / 4)) * 4, vecA);
  }
#pragma unroll
  for (int i = 0; i < LB; ++i) {
    const int e = tid + i * NT;
    rb[i] = matmul_load4(B, K, N, e / (BN / 4), colBase + (e % (BN / 4)) * 4, vecBC);
  }

  for (int k0 = 0; k0 < K; k0 += BK) {
    // Registers -> shared memory (A transposed, so a column of the tile is contiguous).
#pragma unroll
    for (int i = 0; i < LA; ++i) {
      const int e = tid + i * NT, r = e / (BK / 4), c = (e % (BK / 4)) * 4;
      As[c + 0][r] = ra[i].x;
      As[c + 1][r] = ra[i].y;
      As[c + 2][r] = ra[i].z;
      As[c + 3][r] = ra[i].w;
    }
#pragma unroll
    for (int i = 0; i < LB; ++i) {
      const int e = tid + i * NT, r = e / (BN / 4), c = (e % (BN / 4)) * 4;
      *reinterpret_cast<float4*>(&Bs[r][c]) = rb[i];
    }
    __syncthreads();
    // Issue the next tile's loads now; they complete while the math below runs.
    if (k0 + BK < K) {
#pragma unroll
      for (int i = 0; i < LA; ++i) {
        const int e = tid + i * NT;
        ra[i] = matmul_load4(A, M, K, rowBase + e / (BK / 4), k0 + BK + (e % (BK / 4)) * 4, vecA);
      }
#pragma unroll
      for (int i = 0; i < LB; ++i) {
        const int e = tid + i * NT;
        rb[i] = matmul_load4(B, K, N, k0 + BK + e / (BN / 4), colBase + (e % (BN / 4)) * 4, vecBC);
      }
    }
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float4 a0 = *reinterpret_cast<const float4*>(&As[k][tRow * 4]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[k][BM / 2 + tRow * 4]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[k][tCol * 4]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[k][BN / 2 + tCol * 4]);
      const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();  // the tiles are read: the next iteration may overwrite them
  }

#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = rowBase + (i < 4 ? tRow * 4 + i : BM / 2 + tRow * 4 + i - 4);
    matmul_store4(C, M, N, row, colBase + tCol * 4,
                  make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]), vecBC);
    matmul_store4(C, M, N, row, colBase + BN / 2 + tCol * 4,
                  make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]), vecBC);
  }
}
