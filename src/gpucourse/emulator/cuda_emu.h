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
// Before the printf macro below: libstdc++'s <cstdio> undefines printf, so a kernel's own
// #include of it must find it included already (<cstdlib> and <cmath> come with the .h).
#include <cstdio>
#include <utility>
#include <type_traits>

#define __GPUCOURSE_EMULATOR__ 1

#define GCEMU_EXPORT extern "C" __attribute__((visibility("default")))
#define GCEMU_HIDDEN __attribute__((visibility("hidden")))

// ---------------------------------------------------------------- qualifiers
#define __global__
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
enum { GCEMU_SHFL_IDX, GCEMU_SHFL_UP, GCEMU_SHFL_DOWN, GCEMU_SHFL_XOR, GCEMU_VOTE };
// Points to the calling thread's result, which stays until its next warp function.
GCEMU_HIDDEN const GcemuWarpResult* __gcemu_exchange(unsigned mask, uint64_t value, int mode,
                                                     int arg, int width, const char* what);
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

// ---------------------------------------------------------------- atomics
// No other thread runs between the read and the write, so plain code is atomic here.
// An instrumented build defines GCEMU_ATOMIC_ATTR to keep that read and write unobserved.
#ifndef GCEMU_ATOMIC_ATTR
#define GCEMU_ATOMIC_ATTR
#endif
#define GCEMU_ATOMIC(NAME, T, NEW)                                \
  GCEMU_ATOMIC_ATTR static inline T NAME(T* address, T val) {     \
    T old = *address;                                             \
    *address = (NEW);                                             \
    return old;                                                   \
  }
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
#define GCEMU_CAS(T)                                                          \
  GCEMU_ATOMIC_ATTR static inline T atomicCAS(T* address, T compare, T val) { \
    T old = *address;                                                         \
    if (old == compare) *address = val;                                       \
    return old;                                                               \
  }
GCEMU_CAS(int)
GCEMU_CAS(unsigned int)
GCEMU_CAS(unsigned long long)
GCEMU_CAS(unsigned short)
#undef GCEMU_CAS

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
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
static inline int __float2int_rz(float x) { return (int)x; }
static inline int __float2int_rd(float x) { return (int)floorf(x); }
static inline int __float2int_ru(float x) { return (int)ceilf(x); }
static inline unsigned __float2uint_rn(float x) { return (unsigned)nearbyintf(x); }
static inline float __int2float_rn(int x) { return (float)x; }
static inline float __uint2float_rn(unsigned x) { return (float)x; }
static inline int __float_as_int(float x) { int r; memcpy(&r, &x, 4); return r; }
static inline unsigned __float_as_uint(float x) { unsigned r; memcpy(&r, &x, 4); return r; }
static inline float __int_as_float(int x) { float r; memcpy(&r, &x, 4); return r; }
static inline float __uint_as_float(unsigned x) { float r; memcpy(&r, &x, 4); return r; }
static inline long long __double_as_longlong(double x) { long long r; memcpy(&r, &x, 8); return r; }
static inline double __longlong_as_double(long long x) { double r; memcpy(&r, &x, 8); return r; }

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
#undef GCEMU_MINMAX
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
