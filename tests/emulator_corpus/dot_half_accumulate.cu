// A dot product of half vectors, products accumulated in float: tiles of 16 lanes reduce
// with cooperative groups, then one atomicAdd per tile.
#include <cuda_fp16.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

extern "C" __global__ void dot_half_accumulate(const __half* a, const __half* b, float* out, int n) {
  cg::thread_block_tile<16> tile = cg::tiled_partition<16>(cg::this_thread_block());
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    acc += __half2float(a[i]) * __half2float(b[i]);
  acc = cg::reduce(tile, acc, cg::plus<float>());
  if (tile.thread_rank() == 0) atomicAdd(out, acc);
}
