// Histogram of values in [0, NBINS): global atomics against shared-memory privatization.
//   histogram_v1_global_atomics     every element is one atomicAdd on the global bins
//   histogram_v2_shared_privatized  each block counts in its own shared-memory copy, then adds
//                                   its non-zero bins to the global bins once
//
// When many elements fall in a few bins (skewed data), v1's atomics pile up on a few global
// addresses and are served one after another by the L2 cache. v2 turns most of them into
// shared-memory atomics, spread over all SMs, and leaves at most NBINS global atomics per block.
// Both use a grid-stride loop, so any grid covers any n. `bins` must be zeroed before a launch.
// Python home: kernels/histogram.py (the launch of each version, NumPy reference, bytes).

#ifndef NBINS
#define NBINS 256
#endif

extern "C" __global__ void histogram_v1_global_atomics(const int* __restrict__ data,
                                                       unsigned int* bins, int n) {
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        atomicAdd(&bins[data[i]], 1u);
}

extern "C" __global__ void histogram_v2_shared_privatized(const int* __restrict__ data,
                                                          unsigned int* bins, int n) {
    __shared__ unsigned int local[NBINS];
    // Any block size works: each thread clears and flushes every blockDim.x-th bin.
    for (int b = threadIdx.x; b < NBINS; b += blockDim.x) local[b] = 0;
    __syncthreads();  // every bin is zero before any thread counts into it
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        atomicAdd(&local[data[i]], 1u);
    __syncthreads();  // every count of this block is in before any thread reads a bin
    for (int b = threadIdx.x; b < NBINS; b += blockDim.x) {
        unsigned int c = local[b];
        if (c) atomicAdd(&bins[b], c);
    }
}
