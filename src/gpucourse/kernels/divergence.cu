// Warp divergence: the same result computed three ways.
//   divergence_v1_odd_even_lanes  odd and even lanes take different branches (every warp diverges)
//   divergence_v2_per_warp        threads remapped so each warp takes one branch (no divergence)
//   divergence_v3_branch_free     one loop whose coefficients are selected per element (no branch)
//
// Element i is transformed by k steps of y <- a*y + b, with (a, b) = (A0, B0) for even i and
// (A1, B1) for odd i. The loop makes each branch cost k fused multiply-adds, so the kernel is
// bound by arithmetic and a diverged warp, which runs both branches one after the other with
// half its lanes masked off each time, takes about twice as long.
// Python home: kernels/divergence.py (the launch of each version, which element each
// thread handles, NumPy reference, FLOPs, tolerance; the coefficients below are its COEFS).

#define A0 0.75f
#define B0 0.25f
#define A1 (-0.5f)
#define B1 1.0f

extern "C" __global__ void divergence_v1_odd_even_lanes(const float* __restrict__ x,
                                                        float* __restrict__ y, int n, int k) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    if (i % 2 == 0) {  // lanes 0, 2, 4, ... of every warp
        for (int s = 0; s < k; ++s) v = fmaf(v, A0, B0);
    } else {           // lanes 1, 3, 5, ... wait for the others, then run
        for (int s = 0; s < k; ++s) v = fmaf(v, A1, B1);
    }
    y[i] = v;
}

extern "C" __global__ void divergence_v2_per_warp(const float* __restrict__ x,
                                                  float* __restrict__ y, int n, int k) {
    // Two neighbouring warps share 64 elements: the even warp takes the even elements, the odd
    // warp the odd ones, so the branch below is the same for all 32 lanes of a warp. Warps are
    // consecutive runs of 32 global thread indices when blockDim.x is a multiple of 64.
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    int parity = (g / 32) % 2;
    int i = 64 * (g / 64) + 2 * (g % 32) + parity;
    if (i >= n) return;
    float v = x[i];
    if (parity == 0) {
        for (int s = 0; s < k; ++s) v = fmaf(v, A0, B0);
    } else {
        for (int s = 0; s < k; ++s) v = fmaf(v, A1, B1);
    }
    y[i] = v;
}

extern "C" __global__ void divergence_v3_branch_free(const float* __restrict__ x,
                                                     float* __restrict__ y, int n, int k) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    // The branches differ only in their constants: select the constants (a select, not a
    // jump) and run one loop that every lane executes together.
    int odd = i & 1;
    float a = odd ? A1 : A0;
    float b = odd ? B1 : B0;
    float v = x[i];
    for (int s = 0; s < k; ++s) v = fmaf(v, a, b);
    y[i] = v;
}
