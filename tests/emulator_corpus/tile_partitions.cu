// Segmented sums over tiles of 16, 8 and 4 lanes, and how many values of each 8-lane tile
// are positive (a ballot relative to the tile).
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

extern "C" __global__ void tile_partitions(const int* x, int* sums16, int* sums8, int* sums4,
                                           int* positive8, int n) {
  cg::thread_block block = cg::this_thread_block();
  auto t16 = cg::tiled_partition<16>(block);
  auto t8 = cg::tiled_partition<8>(t16);
  auto t4 = cg::tiled_partition<4>(block);
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int v = i < n ? x[i] : 0;
  const int s16 = cg::reduce(t16, v, cg::plus<int>());
  const int s8 = cg::reduce(t8, v, cg::plus<int>());
  const int s4 = cg::reduce(t4, v, cg::plus<int>());
  const unsigned pos = t8.ballot(v > 0);
  if (i < n) {
    if (t16.thread_rank() == 0) sums16[i / 16] = s16;
    if (t8.thread_rank() == 0) { sums8[i / 8] = s8; positive8[i / 8] = __popc(pos); }
    if (t4.thread_rank() == 0) sums4[i / 4] = s4;
  }
}
