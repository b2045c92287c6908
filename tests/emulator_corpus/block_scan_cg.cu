// Inclusive prefix sums within each block: tiles of 32 scan with cooperative groups, the
// tile totals are scanned by the first tile through shared memory and added back.
#include <cooperative_groups.h>
#include <cooperative_groups/scan.h>
namespace cg = cooperative_groups;

extern "C" __global__ void block_scan_cg(const int* x, int* y, int n) {
  __shared__ int totals[32];
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = cg::inclusive_scan(tile, i < n ? x[i] : 0);
  if (tile.thread_rank() == 31) totals[tile.meta_group_rank()] = v;
  block.sync();
  if (tile.meta_group_rank() == 0) {
    const int t = tile.thread_rank() < tile.meta_group_size() ? totals[tile.thread_rank()] : 0;
    totals[tile.thread_rank()] = cg::exclusive_scan(tile, t);
  }
  block.sync();
  v += totals[tile.meta_group_rank()];
  if (i < n) y[i] = v;
}
