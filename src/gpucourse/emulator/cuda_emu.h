// Prelude of the course's CPU emulator: the CUDA built-ins a kernel may use, written for
// the host C++ compiler. It is included before the kernel's own .cu source, which is then
// compiled unchanged (apart from `extern __shared__` declarations, see emulator/build.py).
//
// Model: the threads of a block are fibers that run one at a time on one OS thread and
// switch only inside the runtime (barriers, warp functions, exit), so everything between
// two such calls is atomic. Blocks run one after another. The runtime is runtime.cpp.
#ifndef GPUCOURSE_CUDA_EMU_H
#define GPUCOURSE_CUDA_EMU_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <stdlib.h>
#include <stdio.h>
#include <math.h>
#include <assert.h>
#include <fenv.h>
#include <limits.h>
#include <float.h>
#include <limits>
// What a .cu file gets implicitly from nvcc: the limits macros (UINT_MAX), fixed-width
// integer types and math functions, in the global namespace and in std.
#include <climits>
#include <cfloat>
#include <cstdint>
#include <cmath>
// Before the printf macro below: libstdc++'s <cstdio> undefines printf, so a kernel's own
// #include of it must find it included already (<cstdlib> and <cmath> come with the .h).
#include <cstdio>
#include <utility>
#include <type_traits>

#define __GPUCOURSE_EMULATOR__ 1
// Device code as a CUDA compiler sees it, for compute capability 8.0, the features the
// emulator runs (emulator/preprocess.py evaluates #if with the same values).
#define __CUDACC__ 1
#define __CUDA_ARCH__ 800
#define __CUDACC_VER_MAJOR__ 12
#define __CUDACC_VER_MINOR__ 0
#define __CUDACC_VER_BUILD__ 0

#define GCEMU_EXPORT extern "C" __attribute__((visibility("default")))
#define GCEMU_HIDDEN __attribute__((visibility("hidden")))

// ---------------------------------------------------------------- qualifiers
// Kernels start on a 64-byte boundary, so that their speed does not depend on how much
// code comes before them (a hot loop's alignment moved a 256x256 tiled matmul by 4%).
#define __global__ __attribute__((aligned(64)))
#define __device__
#define __host__
// Device code cannot write constant memory: g++ then rejects such a write, as nvcc does.
// (emulator/source.py gives a declaration without an initializer `= {}`.)
#define __constant__ const
#define __grid_constant__
// Not `inline`: a static local (`__shared__`) of an inline function lands in a COMDAT group,
// whose "gcshared" section then conflicts with the kernels' own shared arrays.
#define __forceinline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// Blocks run one after another on one OS thread, so a block's shared memory can be a
// static variable. A named section lets the runtime poison all of it before each block.
#if defined(__ELF__)
#define __shared__ static __attribute__((section("gcshared")))
#else
#define __shared__ static
#endif
// A static __shared__ array (emulator/source.py rewrites its declaration to this). The race
// detector's build defines GCEMU_SHARED_GUARD_BYTES: each array is then followed by guard
// bytes in one struct, so an index past its end lands in them instead of in the next array.
#ifdef GCEMU_SHARED_GUARD_BYTES
#define GCEMU_SHARED_ARRAY(T, NAME, DIMS)                                                   \
  __shared__ struct { T v DIMS; unsigned char guard[GCEMU_SHARED_GUARD_BYTES]; }         \
      NAME##__gcemu_guarded;                                                              \
  T(&NAME) DIMS = NAME##__gcemu_guarded.v
#else
#define GCEMU_SHARED_ARRAY(T, NAME, DIMS) __shared__ T NAME DIMS
#endif

// ---------------------------------------------------------------- vector types
#define GCEMU_VEC(T, N, A2, A4)                                                           \
  struct __attribute__((aligned(A2))) N##2 { T x, y; };                                  \
  struct N##3 { T x, y, z; };                                                             \
  struct __attribute__((aligned(A4))) N##4 { T x, y, z, w; };                            \
  static inline N##2 make_##N##2(T x, T y) { N##2 r = {x, y}; return r; }               \
  static inline N##3 make_##N##3(T x, T y, T z) { N##3 r = {x, y, z}; return r; }       \
  static inline N##4 make_##N##4(T x, T y, T z, T w) { N##4 r = {x, y, z, w}; return r; }
GCEMU_VEC(signed char, char, 2, 4)
GCEMU_VEC(unsigned char, uchar, 2, 4)
GCEMU_VEC(short, short, 4, 8)
GCEMU_VEC(unsigned short, ushort, 4, 8)
GCEMU_VEC(int, int, 8, 16)
GCEMU_VEC(unsigned int, uint, 8, 16)
GCEMU_VEC(long, long, 16, 16)
GCEMU_VEC(unsigned long, ulong, 16, 16)
GCEMU_VEC(long long, longlong, 16, 16)
GCEMU_VEC(unsigned long long, ulonglong, 16, 16)
GCEMU_VEC(float, float, 8, 16)
GCEMU_VEC(double, double, 16, 16)
#undef GCEMU_VEC

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

// ---------------------------------------------------------------- built-in variables
// Set by the runtime each time it switches to another thread (fiber).
extern GCEMU_HIDDEN uint3 threadIdx;
extern GCEMU_HIDDEN uint3 blockIdx;
extern GCEMU_HIDDEN dim3 blockDim;
extern GCEMU_HIDDEN dim3 gridDim;
// A variable, as in CUDA (not a compile-time constant): it cannot size an array.
extern GCEMU_HIDDEN const int warpSize;

// ---------------------------------------------------------------- runtime entry points
extern "C" {
// Dynamic shared memory (extern __shared__, which emulator/rewrite.py turns into a pointer
// to it) and the placed __shared__ variables after it.
extern GCEMU_HIDDEN char __gcemu_dynamic_shared_buf[];
GCEMU_HIDDEN int __gcemu_block_barrier(int pred);  // returns the round's slot for the *_count/and/or results
GCEMU_HIDDEN int __gcemu_barrier_result(int slot, int kind);
// The source line of the barrier a thread calls, set just before __gcemu_block_barrier: all
// threads of a block must reach the same one.
extern GCEMU_HIDDEN int __gcemu_barrier_line;
// A kernel's `return;` statements call this first (emulator/source.py adds the call), so
// that a barrier's deadlock message can tell an early return from a skipped barrier.
GCEMU_HIDDEN void __gcemu_return(void);
GCEMU_HIDDEN void __gcemu_syncwarp(unsigned mask);
// A warp function's result for one lane: the value it read (valid: from a lane of its
// group), the lanes of its group, and the ballot of their values (votes).
struct GcemuWarpResult { uint64_t value; unsigned members, ballot; int valid; };
// Modes: shuffles read one lane's value, a vote all the group's values (__gcemu_exchange);
// a match and a reduction read all of them too (__gcemu_collective).
enum { GCEMU_SHFL_IDX, GCEMU_SHFL_UP, GCEMU_SHFL_DOWN, GCEMU_SHFL_XOR, GCEMU_VOTE,
       GCEMU_MATCH_ANY, GCEMU_MATCH_ALL, GCEMU_REDUCE_ADD, GCEMU_REDUCE_MIN, GCEMU_REDUCE_UMIN,
       GCEMU_REDUCE_MAX, GCEMU_REDUCE_UMAX, GCEMU_REDUCE_AND, GCEMU_REDUCE_OR, GCEMU_REDUCE_XOR };
// Points to the calling thread's result, which stays until its next warp function.
GCEMU_HIDDEN const GcemuWarpResult* __gcemu_exchange(unsigned mask, uint64_t value, int mode,
                                                     int arg, int width, const char* what);
// A match or a reduction (mode GCEMU_MATCH_ANY or after): its answer in the result's value.
GCEMU_HIDDEN const GcemuWarpResult* __gcemu_collective(unsigned mask, uint64_t value, int mode,
                                                       const char* what);
GCEMU_HIDDEN void __gcemu_fail(const char* what) __attribute__((noreturn));
// Stops the launch with "kernel NAME: " and `what`, a sentence that names the thread itself.
GCEMU_HIDDEN void __gcemu_fail_message(const char* what) __attribute__((noreturn));
GCEMU_HIDDEN void __gcemu_assert_fail(const char* expr, const char* file, int line) __attribute__((noreturn));
GCEMU_HIDDEN int __gcemu_printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
GCEMU_HIDDEN long long __gcemu_clock64(void);
// For tools linked into an emulator build (the profiler, the race detector): where the
// running thread is, and a function the runtime calls, if set, when a block starts
// (GCEMU_SYNC_BLOCK, `members`: its thread count), when a __syncthreads() completes
// (GCEMU_SYNC_BARRIER), when a __syncwarp() completes (GCEMU_SYNC_WARP, `members`: the
// lanes it joined, in the running thread's warp) and when a shuffle or vote completes
// (GCEMU_SYNC_EXCHANGE, `members` likewise). Only the first three order memory: CUDA
// promises no memory ordering for shuffles and votes.
GCEMU_HIDDEN unsigned __gcemu_thread_rank(void);  // linear index of the thread in its block
// The memory of a __shared__ variable of a template, inline function or lambda, placed by
// the runtime once per block (emulator/source.py rewrites such declarations to call it).
struct GcemuSharedSlot { unsigned long long block; void* at; };
GCEMU_HIDDEN void* __gcemu_shared_place(GcemuSharedSlot* slot, size_t bytes, size_t align,
                                        size_t elem, const char* name);
// A warp-wide operation (wmma): every lane brings `desc`; the last lane to arrive gets the
// 32 lanes' descs (the others NULL) and does the work before any other lane goes on.
GCEMU_HIDDEN void* const* __gcemu_warp_gather(void* desc, int op, const char* what);
extern GCEMU_HIDDEN void (*__gcemu_sync_hook)(int event, unsigned members);
}
enum { GCEMU_SYNC_BLOCK = 0, GCEMU_SYNC_BARRIER = 1, GCEMU_SYNC_WARP = 2, GCEMU_SYNC_EXCHANGE = 3 };

// ---------------------------------------------------------------- synchronization
static inline int __gcemu_barrier(int pred, int line) {
  __gcemu_barrier_line = line;
  return __gcemu_block_barrier(pred);
}
// Macros, so that each barrier knows its line.
#define __syncthreads() ((void)__gcemu_barrier(1, __LINE__))
#define __syncthreads_count(p) __gcemu_barrier_result(__gcemu_barrier((p), __LINE__), 0)
#define __syncthreads_and(p) __gcemu_barrier_result(__gcemu_barrier((p), __LINE__), 1)
#define __syncthreads_or(p) __gcemu_barrier_result(__gcemu_barrier((p), __LINE__), 2)
static inline void __syncwarp(unsigned mask = 0xffffffffu) { __gcemu_syncwarp(mask); }
// One thread runs at a time, so memory is always coherent: fences only stop the compiler.
static inline void __threadfence(void) { __asm__ __volatile__("" ::: "memory"); }
static inline void __threadfence_block(void) { __asm__ __volatile__("" ::: "memory"); }
static inline void __threadfence_system(void) { __asm__ __volatile__("" ::: "memory"); }
static inline void __nanosleep(unsigned) {}
static inline long long clock64(void) { return __gcemu_clock64(); }
static inline void __trap(void) { __gcemu_fail("__trap() was called"); }
static inline void __brkpt(void) { __gcemu_fail("__brkpt() was called"); }

// ---------------------------------------------------------------- warp functions
// Every lane brings its value to the warp function and waits until all lanes named in the
// mask have made the same call (lanes that have returned excepted, as in CUDA); the runtime
// then hands each lane its partner's value. Reading a lane that does not take part is
// undefined in CUDA: it gives a poison here (NaN for floats, a large number for integers),
// so that a kernel relying on it computes a visibly wrong answer.
template <class T>
static inline uint64_t __gcemu_bits(T v) {
  static_assert((std::is_arithmetic<T>::value || std::is_enum<T>::value) && sizeof(T) <= 8,
                "warp shuffles move one number of at most 8 bytes (int, unsigned, long long, float, "
                "double), as in CUDA, which has no shuffle of a float2 or a struct: shuffle each "
                "member on its own");
  uint64_t b = 0;
  memcpy(&b, &v, sizeof(T));
  return b;
}

template <class T>
static inline T __gcemu_shfl(const char* what, int mode, unsigned mask, T var, int arg, int width) {
  if (width < 1 || width > 32 || (width & (width - 1)))
    __gcemu_fail("the width of a warp shuffle must be a power of 2 from 1 to 32");
  const GcemuWarpResult* r = __gcemu_exchange(mask, __gcemu_bits(var), mode, arg, width, what);
  // 0x7ffbadbd: a quiet NaN as a float (and, repeated, as a double), 2147200445 as an int.
  const uint64_t poison = 0x7ffbadbd7ffbadbdULL;
  T out;
  memcpy(&out, r->valid ? &r->value : &poison, sizeof(T));
  return out;
}

template <class T>
static inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32) {
  return __gcemu_shfl("__shfl_sync", GCEMU_SHFL_IDX, mask, var, srcLane, width);
}
template <class T>
static inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return __gcemu_shfl("__shfl_up_sync", GCEMU_SHFL_UP, mask, var, (int)delta, width);
}
template <class T>
static inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return __gcemu_shfl("__shfl_down_sync", GCEMU_SHFL_DOWN, mask, var, (int)delta, width);
}
template <class T>
static inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = 32) {
  return __gcemu_shfl("__shfl_xor_sync", GCEMU_SHFL_XOR, mask, var, laneMask, width);
}

static inline unsigned __gcemu_vote(const char* what, unsigned mask, int pred, unsigned* members) {
  const GcemuWarpResult* r = __gcemu_exchange(mask, pred != 0, GCEMU_VOTE, 0, 32, what);
  *members = r->members;
  return r->ballot;
}
static inline unsigned __ballot_sync(unsigned mask, int pred) {
  unsigned m;
  return __gcemu_vote("__ballot_sync", mask, pred, &m);
}
static inline int __any_sync(unsigned mask, int pred) {
  unsigned m;
  return __gcemu_vote("__any_sync", mask, pred, &m) != 0;
}
static inline int __all_sync(unsigned mask, int pred) {
  unsigned m;
  return __gcemu_vote("__all_sync", mask, pred, &m) == m;
}

// Matches (compute capability 7.0): the lanes of the group whose value has the same bits as
// this lane's (so -0.0 and 0.0 differ, and a NaN matches the same NaN), or `mask` if all
// lanes of the group have the same value. One overload per type of CUDA's, so that C++ picks
// the same one for a short or a bool.
static inline unsigned __gcemu_match(const char* what, int mode, unsigned mask, uint64_t bits) {
  return (unsigned)__gcemu_collective(mask, bits, mode, what)->value;
}
static inline unsigned __gcemu_match_all(unsigned mask, uint64_t bits, int* pred) {
  const int all = __gcemu_match("__match_all_sync", GCEMU_MATCH_ALL, mask, bits) != 0;
  *pred = all;
  return all ? mask : 0u;
}
#define GCEMU_MATCH(T)                                                                     \
  static inline unsigned __match_any_sync(unsigned mask, T value) {                        \
    return __gcemu_match("__match_any_sync", GCEMU_MATCH_ANY, mask, __gcemu_bits(value));  \
  }                                                                                        \
  static inline unsigned __match_all_sync(unsigned mask, T value, int* pred) {             \
    return __gcemu_match_all(mask, __gcemu_bits(value), pred);                             \
  }
GCEMU_MATCH(int)
GCEMU_MATCH(unsigned int)
GCEMU_MATCH(long)
GCEMU_MATCH(unsigned long)
GCEMU_MATCH(long long)
GCEMU_MATCH(unsigned long long)
GCEMU_MATCH(float)
GCEMU_MATCH(double)
#undef GCEMU_MATCH

// Reductions (compute capability 8.0) over the group's 32-bit values, the same result for
// every lane: add wraps modulo 2^32; min and max compare as the type is signed or not.
static inline unsigned __gcemu_reduce(const char* what, int mode, unsigned mask, unsigned value) {
  return (unsigned)__gcemu_collective(mask, value, mode, what)->value;
}
#define GCEMU_REDUCE(NAME, T, MODE)                                           \
  static inline T NAME(unsigned mask, T value) {                             \
    return (T)__gcemu_reduce(#NAME, MODE, mask, (unsigned)value);            \
  }
GCEMU_REDUCE(__reduce_add_sync, unsigned int, GCEMU_REDUCE_ADD)
GCEMU_REDUCE(__reduce_add_sync, int, GCEMU_REDUCE_ADD)
GCEMU_REDUCE(__reduce_min_sync, unsigned int, GCEMU_REDUCE_UMIN)
GCEMU_REDUCE(__reduce_min_sync, int, GCEMU_REDUCE_MIN)
GCEMU_REDUCE(__reduce_max_sync, unsigned int, GCEMU_REDUCE_UMAX)
GCEMU_REDUCE(__reduce_max_sync, int, GCEMU_REDUCE_MAX)
GCEMU_REDUCE(__reduce_and_sync, unsigned int, GCEMU_REDUCE_AND)
GCEMU_REDUCE(__reduce_or_sync, unsigned int, GCEMU_REDUCE_OR)
GCEMU_REDUCE(__reduce_xor_sync, unsigned int, GCEMU_REDUCE_XOR)
#undef GCEMU_REDUCE

// ---------------------------------------------------------------- atomics
// No other thread runs between the read and the write, so plain code is atomic here.
// An instrumented build defines GCEMU_ATOMIC_ATTR to keep that read and write unobserved.
#ifndef GCEMU_ATOMIC_ATTR
#define GCEMU_ATOMIC_ATTR
#endif
// Each comes in CUDA's three scopes: NAME (the device), NAME_block and NAME_system, all
// the same here (instrumented builds tell a _block atomic apart: atomic_marks.h).
#define GCEMU_ATOMIC_SCOPE(NAME, T, NEW)                          \
  GCEMU_ATOMIC_ATTR static inline T NAME(T* address, T val) {     \
    T old = *address;                                             \
    *address = (NEW);                                             \
    return old;                                                   \
  }
#define GCEMU_ATOMIC(NAME, T, NEW)              \
  GCEMU_ATOMIC_SCOPE(NAME, T, NEW)              \
  GCEMU_ATOMIC_SCOPE(NAME##_block, T, NEW)      \
  GCEMU_ATOMIC_SCOPE(NAME##_system, T, NEW)
GCEMU_ATOMIC(atomicAdd, int, old + val)
GCEMU_ATOMIC(atomicAdd, unsigned int, old + val)
GCEMU_ATOMIC(atomicAdd, unsigned long long, old + val)
GCEMU_ATOMIC(atomicAdd, float, old + val)
GCEMU_ATOMIC(atomicAdd, double, old + val)
GCEMU_ATOMIC(atomicSub, int, old - val)
GCEMU_ATOMIC(atomicSub, unsigned int, old - val)
GCEMU_ATOMIC(atomicExch, int, val)
GCEMU_ATOMIC(atomicExch, unsigned int, val)
GCEMU_ATOMIC(atomicExch, unsigned long long, val)
GCEMU_ATOMIC(atomicExch, float, val)
GCEMU_ATOMIC(atomicMax, int, old > val ? old : val)
GCEMU_ATOMIC(atomicMax, unsigned int, old > val ? old : val)
GCEMU_ATOMIC(atomicMax, long long, old > val ? old : val)
GCEMU_ATOMIC(atomicMax, unsigned long long, old > val ? old : val)
GCEMU_ATOMIC(atomicMin, int, old < val ? old : val)
GCEMU_ATOMIC(atomicMin, unsigned int, old < val ? old : val)
GCEMU_ATOMIC(atomicMin, long long, old < val ? old : val)
GCEMU_ATOMIC(atomicMin, unsigned long long, old < val ? old : val)
GCEMU_ATOMIC(atomicAnd, int, old & val)
GCEMU_ATOMIC(atomicAnd, unsigned int, old & val)
GCEMU_ATOMIC(atomicAnd, unsigned long long, old & val)
GCEMU_ATOMIC(atomicOr, int, old | val)
GCEMU_ATOMIC(atomicOr, unsigned int, old | val)
GCEMU_ATOMIC(atomicOr, unsigned long long, old | val)
GCEMU_ATOMIC(atomicXor, int, old ^ val)
GCEMU_ATOMIC(atomicXor, unsigned int, old ^ val)
GCEMU_ATOMIC(atomicXor, unsigned long long, old ^ val)
GCEMU_ATOMIC(atomicInc, unsigned int, old >= val ? 0u : old + 1u)
GCEMU_ATOMIC(atomicDec, unsigned int, (old == 0u || old > val) ? val : old - 1u)
#undef GCEMU_ATOMIC
#undef GCEMU_ATOMIC_SCOPE
#define GCEMU_CAS_SCOPE(NAME, T)                                         \
  GCEMU_ATOMIC_ATTR static inline T NAME(T* address, T compare, T val) { \
    T old = *address;                                                    \
    if (old == compare) *address = val;                                  \
    return old;                                                          \
  }
#define GCEMU_CAS(T)                  \
  GCEMU_CAS_SCOPE(atomicCAS, T)       \
  GCEMU_CAS_SCOPE(atomicCAS_block, T) \
  GCEMU_CAS_SCOPE(atomicCAS_system, T)
GCEMU_CAS(int)
GCEMU_CAS(unsigned int)
GCEMU_CAS(unsigned long long)
GCEMU_CAS(unsigned short)
#undef GCEMU_CAS
#undef GCEMU_CAS_SCOPE

// ---------------------------------------------------------------- loads and stores with cache hints
template <class T> static inline T __ldg(const T* p) { return *p; }
template <class T> static inline T __ldcg(const T* p) { return *p; }
template <class T> static inline T __ldca(const T* p) { return *p; }
template <class T> static inline T __ldcs(const T* p) { return *p; }
template <class T> static inline T __ldlu(const T* p) { return *p; }
template <class T> static inline T __ldcv(const T* p) { return *p; }
template <class T> static inline void __stwb(T* p, T v) { *p = v; }
template <class T> static inline void __stcg(T* p, T v) { *p = v; }
template <class T> static inline void __stcs(T* p, T v) { *p = v; }
template <class T> static inline void __stwt(T* p, T v) { *p = v; }

#include "cuda_emu_math.h"

// ---------------------------------------------------------------- printf and assert
// Kernel printf output is collected and printed by Python after the launch, so that it
// shows up in a notebook (C's stdout does not).
#define printf __gcemu_printf
namespace std { using ::__gcemu_printf; }  // std::printf
// A failed device assert stops the kernel with an error, as on a GPU, not the process.
#undef assert
#define assert(e) ((e) ? (void)0 : __gcemu_assert_fail(#e, __FILE__, __LINE__))

// ---------------------------------------------------------------- globals from Python
// What get_global (emulator/globals.py) reads of a __constant__ or __device__ variable: its
// address; its bytes, its element's bytes, its rank and its element's lanes (info[0..3]); its
// extents (info[4..]); the NumPy name of its element's type ("" for a struct).
template <class T> struct __gcemu_kind { static constexpr const char* name = ""; enum { lanes = 1 }; };
#define GCEMU_KIND(T, NAME, LANES)                                              \
  template <> struct __gcemu_kind<T> {                                          \
    static constexpr const char* name = NAME;                                   \
    enum { lanes = LANES };                                                     \
  };
GCEMU_KIND(float, "float32", 1) GCEMU_KIND(double, "float64", 1) GCEMU_KIND(bool, "bool", 1)
GCEMU_KIND(char, "int8", 1) GCEMU_KIND(signed char, "int8", 1) GCEMU_KIND(unsigned char, "uint8", 1)
GCEMU_KIND(short, "int16", 1) GCEMU_KIND(unsigned short, "uint16", 1)
GCEMU_KIND(int, "int32", 1) GCEMU_KIND(unsigned int, "uint32", 1)
GCEMU_KIND(long, "int64", 1) GCEMU_KIND(unsigned long, "uint64", 1)
GCEMU_KIND(long long, "int64", 1) GCEMU_KIND(unsigned long long, "uint64", 1)
#define GCEMU_KIND_VEC(N, NAME)                                                 \
  GCEMU_KIND(N##2, NAME, 2) GCEMU_KIND(N##3, NAME, 3) GCEMU_KIND(N##4, NAME, 4)
GCEMU_KIND_VEC(char, "int8") GCEMU_KIND_VEC(uchar, "uint8") GCEMU_KIND_VEC(short, "int16")
GCEMU_KIND_VEC(ushort, "uint16") GCEMU_KIND_VEC(int, "int32") GCEMU_KIND_VEC(uint, "uint32")
GCEMU_KIND_VEC(long, "int64") GCEMU_KIND_VEC(ulong, "uint64") GCEMU_KIND_VEC(longlong, "int64")
GCEMU_KIND_VEC(ulonglong, "uint64") GCEMU_KIND_VEC(float, "float32")
GCEMU_KIND_VEC(double, "float64")
#undef GCEMU_KIND_VEC
template <class V> struct __gcemu_extents { static void put(unsigned long long*) {} };
template <class V, size_t N> struct __gcemu_extents<V[N]> {
  static void put(unsigned long long* out) { out[0] = N; __gcemu_extents<V>::put(out + 1); }
};
template <class V>
static inline void* __gcemu_global_info(V& v, unsigned long long* info, const char** kind) {
  typedef typename std::remove_cv<typename std::remove_all_extents<V>::type>::type E;
  info[0] = sizeof(V);
  info[1] = sizeof(E);
  info[2] = std::rank<V>::value;
  info[3] = __gcemu_kind<E>::lanes;
  __gcemu_extents<typename std::remove_cv<V>::type>::put(info + 4);
  *kind = __gcemu_kind<E>::name;
  return (void*)&v;
}

// ---------------------------------------------------------------- kernel entry
// Python passes a kernel's arguments as an array of pointers to values of the declared types.
template <class... A, size_t... I>
static inline void __gcemu_call(void (*f)(A...), void** a, std::index_sequence<I...>) {
  (void)a;
  f(*static_cast<typename std::remove_cv<typename std::remove_reference<A>::type>::type*>(a[I])...);
}
template <class... A>
static inline void __gcemu_invoke(void (*f)(A...), void** a) {
  __gcemu_call(f, a, std::index_sequence_for<A...>{});
}
// The bytes of each parameter, for the launch checks of a struct passed by value.
template <class... A>
static inline void __gcemu_param_sizes(void (*)(A...), unsigned long long* out) {
  const unsigned long long sizes[] = {(unsigned long long)sizeof(A)..., 0ull};
  for (size_t i = 0; i < sizeof...(A); i++) out[i] = sizes[i];
}

#endif  // GPUCOURSE_CUDA_EMU_H
