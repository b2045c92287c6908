// <cooperative_groups.h> (with reduce.h and scan.h) for the course's CPU emulator: the
// groups of one block, built on the emulator's barrier and warp functions.
//
// thread_block: sync (a __syncthreads() of the line that calls it), thread_rank, size,
// num_threads, group_index, thread_index, group_dim, dim_threads. thread_block_tile<N> from
// tiled_partition<N> (N a power of 2 up to 32): sync (a __syncwarp of the tile's lanes),
// thread_rank, meta_group_rank, meta_group_size, size, num_threads, shfl, shfl_up,
// shfl_down, shfl_xor, any, all, ballot (bits relative to the tile), match_any, match_all;
// tiled_partition(parent, n) gives a thread_group. cg::sync(g), cg::reduce with cg::plus,
// cg::less, cg::greater, cg::bit_and/or/xor or a functor of one's own, inclusive_scan and
// exclusive_scan. this_grid() has its ranks and sizes, but grid.sync() cannot run here:
// blocks run one after another, so none can wait for the others.
#ifndef GPUCOURSE_COOPERATIVE_GROUPS_H
#define GPUCOURSE_COOPERATIVE_GROUPS_H
#define _COOPERATIVE_GROUPS_H_

#include "cuda_emu.h"

namespace cooperative_groups {

static inline unsigned __gcemu_block_rank() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
static inline unsigned __gcemu_block_size() { return blockDim.x * blockDim.y * blockDim.z; }

// A value of any trivially copyable type, shuffled 4 bytes at a time (CUDA's groups take
// any such type; the __shfl_*_sync functions only numbers).
template <class T, class F>
static inline T __gcemu_shuffle_any(T var, F shuffle) {
  static_assert(std::is_trivially_copyable<T>::value,
                "a cooperative group shuffles values of trivially copyable types only");
  unsigned words[(sizeof(T) + 3) / 4] = {};
  memcpy(words, &var, sizeof(T));
  for (unsigned k = 0; k < (sizeof(T) + 3) / 4; k++) words[k] = shuffle(words[k]);
  T out;
  memcpy(&out, words, sizeof(T));
  return out;
}

class thread_group {
 public:
  thread_group(unsigned size, bool is_block) : size_(size), block_(is_block) {}
  void sync(int line = __builtin_LINE()) const {
    if (block_) __gcemu_barrier(1, line);
    else __syncwarp(mask());
  }
  unsigned long long thread_rank() const { return __gcemu_block_rank() % size_; }
  unsigned long long size() const { return block_ ? __gcemu_block_size() : size_; }
  unsigned long long num_threads() const { return size(); }
  unsigned long long meta_group_rank() const { return block_ ? 0 : __gcemu_block_rank() / size_; }
  unsigned long long meta_group_size() const {
    return block_ ? 1 : (__gcemu_block_size() + size_ - 1) / size_;
  }

 protected:
  unsigned mask() const {
    const unsigned lane = __gcemu_block_rank() & 31u, base = lane & ~(size_ - 1u);
    return size_ >= 32 ? 0xffffffffu : ((1u << size_) - 1u) << base;
  }
  unsigned size_;
  bool block_;
};

class thread_block {
 public:
  void sync(int line = __builtin_LINE()) const { __gcemu_barrier(1, line); }
  static void barrier_wait(int line = __builtin_LINE()) { __gcemu_barrier(1, line); }
  unsigned long long thread_rank() const { return __gcemu_block_rank(); }
  unsigned long long size() const { return __gcemu_block_size(); }
  unsigned long long num_threads() const { return __gcemu_block_size(); }
  dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
  dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
  dim3 group_dim() const { return blockDim; }
  dim3 dim_threads() const { return blockDim; }
  operator thread_group() const { return thread_group(__gcemu_block_size(), true); }
};

static inline thread_block this_thread_block() { return thread_block(); }

template <unsigned int Size, class ParentT = void>
class thread_block_tile {
  static_assert(Size >= 1 && Size <= 32 && (Size & (Size - 1)) == 0,
                "tiled_partition<N> takes N a power of 2 from 1 to 32");

 public:
  static constexpr unsigned int num_threads_c = Size;
  thread_block_tile() = default;
  template <class P>
  thread_block_tile(const thread_block_tile<Size, P>&) {}
  void sync() const { __syncwarp(mask()); }
  void sync(int) const { __syncwarp(mask()); }
  unsigned long long thread_rank() const { return __gcemu_block_rank() & (Size - 1u); }
  unsigned long long meta_group_rank() const { return __gcemu_block_rank() / Size; }
  unsigned long long meta_group_size() const { return (__gcemu_block_size() + Size - 1) / Size; }
  static constexpr unsigned long long size() { return Size; }
  static constexpr unsigned long long num_threads() { return Size; }

  template <class T>
  T shfl(T var, int src) const {
    return __gcemu_shuffle_any(var, [&](unsigned w) { return __shfl_sync(mask(), w, src, Size); });
  }
  template <class T>
  T shfl_up(T var, unsigned delta) const {
    return __gcemu_shuffle_any(var, [&](unsigned w) { return __shfl_up_sync(mask(), w, delta, Size); });
  }
  template <class T>
  T shfl_down(T var, unsigned delta) const {
    return __gcemu_shuffle_any(var, [&](unsigned w) { return __shfl_down_sync(mask(), w, delta, Size); });
  }
  template <class T>
  T shfl_xor(T var, unsigned lane_mask) const {
    return __gcemu_shuffle_any(var, [&](unsigned w) { return __shfl_xor_sync(mask(), w, (int)lane_mask, Size); });
  }
  int any(int pred) const { return __any_sync(mask(), pred); }
  int all(int pred) const { return __all_sync(mask(), pred); }
  unsigned ballot(int pred) const { return __ballot_sync(mask(), pred) >> base(); }
  template <class T>
  unsigned match_any(T value) const { return __match_any_sync(mask(), value) >> base(); }
  template <class T>
  unsigned match_all(T value, int& pred) const { return __match_all_sync(mask(), value, &pred) >> base(); }
  operator thread_group() const { return thread_group(Size, false); }

 private:
  static unsigned base() { return (__gcemu_block_rank() & 31u) & ~(Size - 1u); }
  static unsigned mask() { return Size >= 32 ? 0xffffffffu : ((1u << Size) - 1u) << base(); }
};

template <unsigned int Size, class ParentT>
static inline thread_block_tile<Size, ParentT> tiled_partition(const ParentT&) {
  return thread_block_tile<Size, ParentT>();
}
static inline thread_group tiled_partition(const thread_group& parent, unsigned tile_size) {
  if (tile_size < 1 || tile_size > 32 || (tile_size & (tile_size - 1)))
    __gcemu_fail("tiled_partition(parent, n) takes n a power of 2 from 1 to 32");
  (void)parent;
  return thread_group(tile_size, false);
}
static inline thread_group tiled_partition(const thread_block& parent, unsigned tile_size) {
  return tiled_partition((thread_group)parent, tile_size);
}

template <class Group>
static inline void sync(const Group& g, int line = __builtin_LINE()) { g.sync(line); }
template <unsigned int Size, class P>
static inline void sync(const thread_block_tile<Size, P>& g) { g.sync(); }

class grid_group {
 public:
  // blocks run one after another here, so no block can wait at a grid-wide barrier
  template <int Never = 0>
  void sync() const {
    static_assert(Never != 0, "the CPU emulator cannot run grid-wide synchronization "
                              "(this_grid().sync()): it runs blocks one after another, so split "
                              "the kernel into two launches");
  }
  bool is_valid() const { return true; }
  unsigned long long thread_rank() const {
    const unsigned long long block = blockIdx.x + (unsigned long long)gridDim.x *
                                     (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);
    return block * __gcemu_block_size() + __gcemu_block_rank();
  }
  unsigned long long size() const {
    return (unsigned long long)gridDim.x * gridDim.y * gridDim.z * __gcemu_block_size();
  }
  unsigned long long num_threads() const { return size(); }
  unsigned long long num_blocks() const { return (unsigned long long)gridDim.x * gridDim.y * gridDim.z; }
  unsigned long long block_rank() const { return thread_rank() / __gcemu_block_size(); }
  dim3 group_dim() const { return gridDim; }
  dim3 dim_blocks() const { return gridDim; }
  dim3 block_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
};
static inline grid_group this_grid() { return grid_group(); }

// ---------------------------------------------------------------- reduce.h and scan.h
template <class T> struct plus { T operator()(const T& a, const T& b) const { return a + b; } };
template <class T> struct less { T operator()(const T& a, const T& b) const { return b < a ? b : a; } };
template <class T> struct greater { T operator()(const T& a, const T& b) const { return a < b ? b : a; } };
template <class T> struct bit_and { T operator()(const T& a, const T& b) const { return a & b; } };
template <class T> struct bit_or { T operator()(const T& a, const T& b) const { return a | b; } };
template <class T> struct bit_xor { T operator()(const T& a, const T& b) const { return a ^ b; } };

// Every lane of the tile gets op over all the tile's values (a butterfly of shuffles).
template <unsigned int Size, class P, class T, class Op>
static inline T reduce(const thread_block_tile<Size, P>& g, T value, Op op) {
  for (unsigned offset = Size / 2; offset > 0; offset /= 2) value = op(value, g.shfl_xor(value, offset));
  return value;
}

template <unsigned int Size, class P, class T, class Op>
static inline T inclusive_scan(const thread_block_tile<Size, P>& g, T value, Op op) {
  const unsigned rank = (unsigned)g.thread_rank();
  for (unsigned offset = 1; offset < Size; offset *= 2) {
    const T other = g.shfl_up(value, offset);
    if (rank >= offset) value = op(other, value);
  }
  return value;
}
template <unsigned int Size, class P, class T>
static inline T inclusive_scan(const thread_block_tile<Size, P>& g, T value) {
  return inclusive_scan(g, value, plus<T>());
}
template <unsigned int Size, class P, class T, class Op>
static inline T exclusive_scan(const thread_block_tile<Size, P>& g, T value, Op op) {
  const T inclusive = inclusive_scan(g, value, op);
  const T before = g.shfl_up(inclusive, 1);
  return g.thread_rank() == 0 ? T() : before;
}
template <unsigned int Size, class P, class T>
static inline T exclusive_scan(const thread_block_tile<Size, P>& g, T value) {
  return exclusive_scan(g, value, plus<T>());
}

}  // namespace cooperative_groups

#endif  // GPUCOURSE_COOPERATIVE_GROUPS_H
