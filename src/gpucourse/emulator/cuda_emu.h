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
#include <limits>
// Before the printf macro below: libstdc++'s <cstdio> undefines printf, so a kernel's own
// #include of it must find it included already (<cstdlib> and <cmath> come with the .h).
#include <cstdio>
#include <utility>
#include <type_traits>

#define __GPUCOURSE_EMULATOR__ 1

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

// ---------------------------------------------------------------- math
// The fast intrinsics give the accurate result here: the emulator checks correctness only.
// glibc declares __expf and friends itself, so these are macros rather than functions.
#define __expf(x) expf(x)
#define __exp10f(x) powf(10.0f, (x))
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __log10f(x) log10f(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __sincosf(x, s, c) (*(s) = sinf(x), *(c) = cosf(x), (void)0)
#define __powf(x, y) powf((x), (y))
static inline float __fdividef(float a, float b) { return a / b; }
static inline float fdividef(float a, float b) { return a / b; }
static inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
static inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __fmaf_ieee_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __drcp_rn(double x) { return 1.0 / x; }
static inline double __dsqrt_rn(double x) { return sqrt(x); }

// Directed rounding (_rz toward zero, _rd down, _ru up): the operation runs under that
// rounding mode of the CPU, restored at once. The volatile operands and result keep the
// compiler from moving the arithmetic out from between the two fesetround calls.
enum { __GCEMU_ADD, __GCEMU_SUB, __GCEMU_MUL, __GCEMU_DIV, __GCEMU_SQRT, __GCEMU_RCP, __GCEMU_FMA,
       __GCEMU_CVT };
template <class T, class R = T>
static inline R __gcemu_rounded(int mode, int op, T a, T b = 0, T c = 0) {
  volatile T va = a, vb = b, vc = c;
  volatile R r;
  const int old = fegetround();
  fesetround(mode);
  switch (op) {
    case __GCEMU_ADD: r = (R)(va + vb); break;
    case __GCEMU_SUB: r = (R)(va - vb); break;
    case __GCEMU_MUL: r = (R)(va * vb); break;
    case __GCEMU_DIV: r = (R)(va / vb); break;
    case __GCEMU_SQRT: r = (R)std::sqrt(va); break;
    case __GCEMU_RCP: r = (R)((T)1 / va); break;
    case __GCEMU_FMA: r = (R)std::fma(va, vb, vc); break;
    default: r = (R)va; break;  // a conversion
  }
  fesetround(old);
  return r;
}
// One precision's arithmetic under a rounding mode: __fadd_rz, __dadd_rz, ... (P: f or d;
// FMA: the fused multiply-add's name, __fmaf_ for float and __fma_ for double).
#define GCEMU_ROUNDED_ARITH(T, P, FMA, SUFFIX, MODE)                                                  \
  static inline T __##P##add_##SUFFIX(T a, T b) { return __gcemu_rounded(MODE, __GCEMU_ADD, a, b); } \
  static inline T __##P##sub_##SUFFIX(T a, T b) { return __gcemu_rounded(MODE, __GCEMU_SUB, a, b); } \
  static inline T __##P##mul_##SUFFIX(T a, T b) { return __gcemu_rounded(MODE, __GCEMU_MUL, a, b); } \
  static inline T __##P##div_##SUFFIX(T a, T b) { return __gcemu_rounded(MODE, __GCEMU_DIV, a, b); } \
  static inline T __##P##sqrt_##SUFFIX(T x) { return __gcemu_rounded(MODE, __GCEMU_SQRT, x); }        \
  static inline T __##P##rcp_##SUFFIX(T x) { return __gcemu_rounded(MODE, __GCEMU_RCP, x); }         \
  static inline T FMA##SUFFIX(T a, T b, T c) { return __gcemu_rounded(MODE, __GCEMU_FMA, a, b, c); }
#define GCEMU_ROUNDED(SUFFIX, MODE)                                                                \
  GCEMU_ROUNDED_ARITH(float, f, __fmaf_, SUFFIX, MODE)                                              \
  GCEMU_ROUNDED_ARITH(double, d, __fma_, SUFFIX, MODE)                                              \
  static inline float __double2float_##SUFFIX(double x) { return __gcemu_rounded<double, float>(MODE, __GCEMU_CVT, x); } \
  static inline float __int2float_##SUFFIX(int x) { return __gcemu_rounded<int, float>(MODE, __GCEMU_CVT, x); }          \
  static inline float __uint2float_##SUFFIX(unsigned x) { return __gcemu_rounded<unsigned, float>(MODE, __GCEMU_CVT, x); } \
  static inline float __ll2float_##SUFFIX(long long x) { return __gcemu_rounded<long long, float>(MODE, __GCEMU_CVT, x); } \
  static inline float __ull2float_##SUFFIX(unsigned long long x) {                                  \
    return __gcemu_rounded<unsigned long long, float>(MODE, __GCEMU_CVT, x);                        \
  }                                                                                                 \
  static inline double __ll2double_##SUFFIX(long long x) { return __gcemu_rounded<long long, double>(MODE, __GCEMU_CVT, x); } \
  static inline double __ull2double_##SUFFIX(unsigned long long x) {                                \
    return __gcemu_rounded<unsigned long long, double>(MODE, __GCEMU_CVT, x);                       \
  }
#define __fmaf_ieee_rz __fmaf_rz
#define __fmaf_ieee_rd __fmaf_rd
#define __fmaf_ieee_ru __fmaf_ru
GCEMU_ROUNDED(rz, FE_TOWARDZERO)
GCEMU_ROUNDED(rd, FE_DOWNWARD)
GCEMU_ROUNDED(ru, FE_UPWARD)
#undef GCEMU_ROUNDED
#undef GCEMU_ROUNDED_ARITH
static inline float __double2float_rn(double x) { return (float)x; }
static inline float __int2float_rn(int x) { return (float)x; }
static inline float __uint2float_rn(unsigned x) { return (float)x; }
static inline float __ll2float_rn(long long x) { return (float)x; }
static inline float __ull2float_rn(unsigned long long x) { return (float)x; }
static inline double __ll2double_rn(long long x) { return (double)x; }
static inline double __ull2double_rn(unsigned long long x) { return (double)x; }
static inline double __int2double_rn(int x) { return (double)x; }
static inline double __uint2double_rn(unsigned x) { return (double)x; }

// Float to integer, as the GPU converts: NaN gives 0, a value out of range the nearest limit.
template <class I>
static inline I __gcemu_to_int(double v) {
  if (v != v) return 0;
  if (v <= (double)std::numeric_limits<I>::min()) return std::numeric_limits<I>::min();
  if (v >= (double)std::numeric_limits<I>::max()) return std::numeric_limits<I>::max();
  return (I)v;
}
#define GCEMU_TO_INT(NAME, I)                                                                 \
  static inline I __float2##NAME##_rn(float x) { return __gcemu_to_int<I>(nearbyint((double)x)); } \
  static inline I __float2##NAME##_rz(float x) { return __gcemu_to_int<I>(trunc((double)x)); }     \
  static inline I __float2##NAME##_rd(float x) { return __gcemu_to_int<I>(floor((double)x)); }     \
  static inline I __float2##NAME##_ru(float x) { return __gcemu_to_int<I>(ceil((double)x)); }      \
  static inline I __double2##NAME##_rn(double x) { return __gcemu_to_int<I>(nearbyint(x)); }       \
  static inline I __double2##NAME##_rz(double x) { return __gcemu_to_int<I>(trunc(x)); }           \
  static inline I __double2##NAME##_rd(double x) { return __gcemu_to_int<I>(floor(x)); }           \
  static inline I __double2##NAME##_ru(double x) { return __gcemu_to_int<I>(ceil(x)); }
GCEMU_TO_INT(int, int)
GCEMU_TO_INT(uint, unsigned)
GCEMU_TO_INT(ll, long long)
GCEMU_TO_INT(ull, unsigned long long)
#undef GCEMU_TO_INT
static inline int __double2hiint(double x) { unsigned long long b; memcpy(&b, &x, 8); return (int)(b >> 32); }
static inline int __double2loint(double x) { unsigned long long b; memcpy(&b, &x, 8); return (int)(unsigned)b; }
static inline double __hiloint2double(int hi, int lo) {
  const unsigned long long b = ((unsigned long long)(unsigned)hi << 32) | (unsigned)lo;
  double r;
  memcpy(&r, &b, 8);
  return r;
}
static inline int __float_as_int(float x) { int r; memcpy(&r, &x, 4); return r; }
static inline unsigned __float_as_uint(float x) { unsigned r; memcpy(&r, &x, 4); return r; }
static inline float __int_as_float(int x) { float r; memcpy(&r, &x, 4); return r; }
static inline float __uint_as_float(unsigned x) { float r; memcpy(&r, &x, 4); return r; }
static inline long long __double_as_longlong(double x) { long long r; memcpy(&r, &x, 8); return r; }
static inline double __longlong_as_double(long long x) { double r; memcpy(&r, &x, 8); return r; }

// Functions of CUDA's math library that C's lacks: computed in double, so that the float
// result is as accurate as CUDA's.
static inline double __gcemu_sinpi(double x) {  // sin(pi x), exact at integers and halves
  double r = remainder(x, 2.0);                 // exact, in [-1, 1]
  if (r > 0.5) r = 1.0 - r;
  else if (r < -0.5) r = -1.0 - r;
  const double s = sin(M_PI * r);
  return s == 0.0 ? copysign(0.0, x) : s;
}
static inline double __gcemu_cospi(double x) {  // cos(pi x) = sin(pi (1/2 - |r|))
  return sin(M_PI * (0.5 - fabs(remainder(x, 2.0))));
}
static inline float sinpif(float x) { return (float)__gcemu_sinpi(x); }
static inline float cospif(float x) { return (float)__gcemu_cospi(x); }
static inline double sinpi(double x) { return __gcemu_sinpi(x); }
static inline double cospi(double x) { return __gcemu_cospi(x); }
static inline void sincospif(float x, float* s, float* c) { *s = sinpif(x); *c = cospif(x); }
static inline void sincospi(double x, double* s, double* c) { *s = sinpi(x); *c = cospi(x); }
static inline float rhypotf(float x, float y) { return (float)(1.0 / hypot((double)x, (double)y)); }
static inline float norm3df(float a, float b, float c) {
  return (float)sqrt((double)a * a + (double)b * b + (double)c * c);
}
static inline float rnorm3df(float a, float b, float c) {
  return (float)(1.0 / sqrt((double)a * a + (double)b * b + (double)c * c));
}
static inline float norm4df(float a, float b, float c, float d) {
  return (float)sqrt((double)a * a + (double)b * b + (double)c * c + (double)d * d);
}
static inline float rnorm4df(float a, float b, float c, float d) {
  return (float)(1.0 / sqrt((double)a * a + (double)b * b + (double)c * c + (double)d * d));
}
static inline float normf(int dim, const float* p) {
  double s = 0.0;
  for (int i = 0; i < dim; i++) s += (double)p[i] * p[i];
  return (float)sqrt(s);
}
static inline float rnormf(int dim, const float* p) { return (float)(1.0 / (double)normf(dim, p)); }
static inline float normcdff(float x) { return (float)(0.5 * erfc(-(double)x * M_SQRT1_2)); }
static inline double normcdf(double x) { return 0.5 * erfc(-x * M_SQRT1_2); }
static inline float erfcxf(float x) {
  const double v = x;
  if (v < 25.0) return (float)(exp(v * v) * erfc(v));
  const double t = 1.0 / (v * v);  // asymptotic series, exact to double here
  return (float)((1.0 - 0.5 * t + 0.75 * t * t - 1.875 * t * t * t) / (v * sqrt(M_PI)));
}
// erfinv(y), given also 1 - y and 1 + y (exact where they are small, for erfcinv). In the
// middle: Giles' single-precision approximation, then Newton steps on erf; in the tails,
// Newton steps on log(erfc(|x|)), which start above the root and approach it monotonically.
static inline double __gcemu_erfinv(double y, double one_minus, double one_plus) {
  if (!(one_minus >= 0.0 && one_plus >= 0.0)) return NAN;
  if (one_minus == 0.0) return INFINITY;
  if (one_plus == 0.0) return -INFINITY;
  if (one_minus < 0.5 || one_plus < 0.5) {
    const double t = one_minus < 0.5 ? one_minus : one_plus;  // erfc(|x|) = t
    double x = sqrt(-log(t)), lt = log(t);                      // erfc(x) <= exp(-x^2)
    for (int k = 0; k < 60; k++) {
      const double e = erfc(x), step = (log(e) - lt) * e / (2.0 / sqrt(M_PI) * exp(-x * x));
      x += step;
      if (fabs(step) <= 1e-15 * x) break;
    }
    return one_minus < 0.5 ? x : -x;
  }
  double w = -log(one_minus * one_plus) - 2.5;  // w < 5 here
  double p = 2.81022636e-08;
  p = 3.43273939e-07 + p * w;
  p = -3.5233877e-06 + p * w;
  p = -4.39150654e-06 + p * w;
  p = 0.00021858087 + p * w;
  p = -0.00125372503 + p * w;
  p = -0.00417768164 + p * w;
  p = 0.246640727 + p * w;
  p = 1.50140941 + p * w;
  double x = p * y;
  for (int k = 0; k < 3; k++) x -= (erf(x) - y) / (2.0 / sqrt(M_PI) * exp(-x * x));
  return x;
}
static inline float erfinvf(float y) { return (float)__gcemu_erfinv(y, 1.0 - y, 1.0 + y); }
static inline float erfcinvf(float y) { return (float)__gcemu_erfinv(1.0 - y, y, 2.0 - y); }
static inline double erfinv(double y) { return __gcemu_erfinv(y, 1.0 - y, 1.0 + y); }
static inline double erfcinv(double y) { return __gcemu_erfinv(1.0 - y, y, 2.0 - y); }
static inline float normcdfinvf(float p) { return (float)(-M_SQRT2 * erfcinv(2.0 * (double)p)); }
static inline double normcdfinv(double p) { return -M_SQRT2 * erfcinv(2.0 * p); }

// The constants of CUDA's math_constants.h that course kernels use.
#define CUDART_PI_F 3.141592654f
#define CUDART_PI 3.1415926535897931e+0
#define CUDART_INF_F __builtin_inff()
#define CUDART_NAN_F __builtin_nanf("")
#define CUDART_INF __builtin_inf()
#define CUDART_NAN __builtin_nan("")

// ---------------------------------------------------------------- integer intrinsics
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
static inline int __mul24(int a, int b) { return ((a << 8) >> 8) * ((b << 8) >> 8); }
static inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffffu) * (b & 0xffffffu); }
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline unsigned long long __brevll(unsigned long long x) {
  return ((unsigned long long)__brev((unsigned)x) << 32) | __brev((unsigned)(x >> 32));
}
// Byte i of the result is byte (s >> 4i) & 7 of the 8 bytes y:x (x the low four).
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long v = ((unsigned long long)y << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; i++) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
  return r;
}
static inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
  return (unsigned)(((((unsigned long long)hi << 32) | lo) << (shift & 31u)) >> 32);
}
static inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned shift) {
  return shift >= 32u ? lo : __funnelshift_l(lo, hi, shift);
}
static inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
  return (unsigned)((((unsigned long long)hi << 32) | lo) >> (shift & 31u));
}
static inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned shift) {
  return shift >= 32u ? hi : __funnelshift_r(lo, hi, shift);
}
static inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; i++) c += (int)(signed char)(a >> (8 * i)) * (int)(signed char)(b >> (8 * i));
  return c;
}
static inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
  for (int i = 0; i < 4; i++) c += ((a >> (8 * i)) & 0xffu) * ((b >> (8 * i)) & 0xffu);
  return c;
}
static inline int __dp4a(char4 a, char4 b, int c) {
  return c + a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}
static inline unsigned __dp4a(uchar4 a, uchar4 b, unsigned c) {
  return c + (unsigned)(a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w);
}
// Averages without overflow: (a + b) >> 1, and rounded up.
static inline int __hadd(int a, int b) { return (int)(((long long)a + b) >> 1); }
static inline int __rhadd(int a, int b) { return (int)(((long long)a + b + 1) >> 1); }
static inline unsigned __uhadd(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a + b) >> 1); }
static inline unsigned __urhadd(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a + b + 1) >> 1); }
static inline unsigned __sad(int a, int b, unsigned c) { return (unsigned)(a > b ? a - b : b - a) + c; }
static inline unsigned __usad(unsigned a, unsigned b, unsigned c) { return (a > b ? a - b : b - a) + c; }

// CUDA's min and max overloads (device code has them in the global namespace).
#define GCEMU_MINMAX(A, B, R)                                          \
  static inline R min(A a, B b) { return (R)a < (R)b ? (R)a : (R)b; }  \
  static inline R max(A a, B b) { return (R)a > (R)b ? (R)a : (R)b; }
GCEMU_MINMAX(int, int, int)
GCEMU_MINMAX(unsigned int, unsigned int, unsigned int)
GCEMU_MINMAX(int, unsigned int, unsigned int)
GCEMU_MINMAX(unsigned int, int, unsigned int)
GCEMU_MINMAX(long, long, long)
GCEMU_MINMAX(unsigned long, unsigned long, unsigned long)
GCEMU_MINMAX(long long, long long, long long)
GCEMU_MINMAX(unsigned long long, unsigned long long, unsigned long long)
GCEMU_MINMAX(long, unsigned long, unsigned long)
GCEMU_MINMAX(unsigned long, long, unsigned long)
GCEMU_MINMAX(long long, unsigned long long, unsigned long long)
GCEMU_MINMAX(unsigned long long, long long, unsigned long long)
#undef GCEMU_MINMAX
static inline unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned umax(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long llmin(long long a, long long b) { return a < b ? a : b; }
static inline long long llmax(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
static inline double min(float a, double b) { return fmin(a, b); }
static inline double max(float a, double b) { return fmax(a, b); }
static inline double min(double a, float b) { return fmin(a, b); }
static inline double max(double a, float b) { return fmax(a, b); }

// ---------------------------------------------------------------- printf and assert
// Kernel printf output is collected and printed by Python after the launch, so that it
// shows up in a notebook (C's stdout does not).
#define printf __gcemu_printf
namespace std { using ::__gcemu_printf; }  // std::printf
// A failed device assert stops the kernel with an error, as on a GPU, not the process.
#undef assert
#define assert(e) ((e) ? (void)0 : __gcemu_assert_fail(#e, __FILE__, __LINE__))

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

#endif  // GPUCOURSE_CUDA_EMU_H
