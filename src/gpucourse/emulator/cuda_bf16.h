// <cuda_bf16.h> for the course's CPU emulator: __nv_bfloat16 and __nv_bfloat162, their
// conversions, arithmetic, comparisons, math functions, warp shuffles and atomicAdd,
// rounding as the GPU rounds (gcemu_float16.h). From Python, bfloat16 values travel as their
// bits in uint16 arrays (NumPy has no bfloat16): gc.emulator.bfloat16 makes them.
#ifndef GPUCOURSE_CUDA_BF16_H
#define GPUCOURSE_CUDA_BF16_H
#define __CUDA_BF16_H__
#define __CUDA_BF16_HPP__

#include "cuda_fp16.h"

struct __nv_bfloat16_raw { unsigned short x; };
struct __nv_bfloat162_raw { unsigned short x, y; };

static inline unsigned short __gcemu_f2bf(double v, int mode = __GCEMU_RN) {
  return __gcemu_bf16::encode(v, mode);
}

struct __align__(2) __nv_bfloat16 {
  unsigned short __x;  // the bits (protected in CUDA's header)
  __nv_bfloat16() = default;
  constexpr __nv_bfloat16(const __nv_bfloat16_raw& r) : __x(r.x) {}
  __nv_bfloat16(float f) : __x(__gcemu_f2bf(f)) {}
  __nv_bfloat16(double d) : __x(__gcemu_f2bf(d)) {}
  __nv_bfloat16(short v) : __x(__gcemu_f2bf(v)) {}
  __nv_bfloat16(unsigned short v) : __x(__gcemu_f2bf(v)) {}
  __nv_bfloat16(int v) : __x(__gcemu_f2bf(v)) {}
  __nv_bfloat16(unsigned int v) : __x(__gcemu_f2bf(v)) {}
  __nv_bfloat16(long v) : __x(__gcemu_f2bf((double)v)) {}
  __nv_bfloat16(unsigned long v) : __x(__gcemu_f2bf((double)v)) {}
  __nv_bfloat16(long long v) : __x(__gcemu_f2bf((double)v)) {}
  __nv_bfloat16(unsigned long long v) : __x(__gcemu_f2bf((double)v)) {}
  operator __nv_bfloat16_raw() const { __nv_bfloat16_raw r; r.x = __x; return r; }
  operator float() const { return (float)__gcemu_bf16::decode(__x); }
  explicit operator short() const { return __gcemu_16_to_int<short>(__gcemu_bf16::decode(__x), __GCEMU_RZ); }
  explicit operator unsigned short() const { return __gcemu_16_to_int<unsigned short>(__gcemu_bf16::decode(__x), __GCEMU_RZ); }
  explicit operator int() const { return __gcemu_16_to_int<int>(__gcemu_bf16::decode(__x), __GCEMU_RZ); }
  explicit operator unsigned int() const { return __gcemu_16_to_int<unsigned int>(__gcemu_bf16::decode(__x), __GCEMU_RZ); }
  explicit operator long long() const { return __gcemu_16_to_int<long long>(__gcemu_bf16::decode(__x), __GCEMU_RZ); }
  explicit operator unsigned long long() const { return __gcemu_16_to_int<unsigned long long>(__gcemu_bf16::decode(__x), __GCEMU_RZ); }
  explicit operator bool() const { return (__x & 0x7FFFu) != 0; }
  __nv_bfloat16& operator=(const __nv_bfloat16_raw& r) { __x = r.x; return *this; }
  __nv_bfloat16& operator=(float f) { __x = __gcemu_f2bf(f); return *this; }
  __nv_bfloat16& operator=(double d) { __x = __gcemu_f2bf(d); return *this; }
};

struct __align__(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
  __nv_bfloat162() = default;
  constexpr __nv_bfloat162(const __nv_bfloat16& a, const __nv_bfloat16& b) : x(a), y(b) {}
  __nv_bfloat162(const __nv_bfloat162_raw& r) { x.__x = r.x; y.__x = r.y; }
  operator __nv_bfloat162_raw() const { __nv_bfloat162_raw r; r.x = x.__x; r.y = y.__x; return r; }
};

typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;
template <> struct __gcemu_kind<__nv_bfloat16> { static constexpr const char* name = "bfloat16"; enum { lanes = 1 }; };

GCEMU_FLOAT16_COMMON(__nv_bfloat16, __nv_bfloat162, __gcemu_bf16, bfloat16)

static inline __nv_bfloat162 make_bfloat162(__nv_bfloat16 x, __nv_bfloat16 y) {
  return __nv_bfloat162(x, y);
}

// ---------------------------------------------------------------- conversions
#define GCEMU_BF16_FROM(NAME, T)                                                              \
  static inline __nv_bfloat16 NAME##_rn(T v) { return __gcemu_make((__nv_bfloat16*)0, __gcemu_f2bf((double)v, __GCEMU_RN)); } \
  static inline __nv_bfloat16 NAME##_rz(T v) { return __gcemu_make((__nv_bfloat16*)0, __gcemu_f2bf((double)v, __GCEMU_RZ)); } \
  static inline __nv_bfloat16 NAME##_rd(T v) { return __gcemu_make((__nv_bfloat16*)0, __gcemu_f2bf((double)v, __GCEMU_RD)); } \
  static inline __nv_bfloat16 NAME##_ru(T v) { return __gcemu_make((__nv_bfloat16*)0, __gcemu_f2bf((double)v, __GCEMU_RU)); }
GCEMU_BF16_FROM(__float2bfloat16, float)
GCEMU_BF16_FROM(__double2bfloat16, double)
GCEMU_BF16_FROM(__int2bfloat16, int)
GCEMU_BF16_FROM(__uint2bfloat16, unsigned int)
GCEMU_BF16_FROM(__short2bfloat16, short)
GCEMU_BF16_FROM(__ushort2bfloat16, unsigned short)
GCEMU_BF16_FROM(__ll2bfloat16, long long)
GCEMU_BF16_FROM(__ull2bfloat16, unsigned long long)
#undef GCEMU_BF16_FROM
#define GCEMU_BF16_TO(NAME, T)                                                                \
  static inline T NAME##_rn(__nv_bfloat16 h) { return __gcemu_16_to_int<T>(__gcemu_value(h), __GCEMU_RN); } \
  static inline T NAME##_rz(__nv_bfloat16 h) { return __gcemu_16_to_int<T>(__gcemu_value(h), __GCEMU_RZ); } \
  static inline T NAME##_rd(__nv_bfloat16 h) { return __gcemu_16_to_int<T>(__gcemu_value(h), __GCEMU_RD); } \
  static inline T NAME##_ru(__nv_bfloat16 h) { return __gcemu_16_to_int<T>(__gcemu_value(h), __GCEMU_RU); }
GCEMU_BF16_TO(__bfloat162int, int)
GCEMU_BF16_TO(__bfloat162uint, unsigned int)
GCEMU_BF16_TO(__bfloat162short, short)
GCEMU_BF16_TO(__bfloat162ushort, unsigned short)
GCEMU_BF16_TO(__bfloat162ll, long long)
GCEMU_BF16_TO(__bfloat162ull, unsigned long long)
#undef GCEMU_BF16_TO
static inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
static inline __nv_bfloat16 __double2bfloat16(double d) { return __double2bfloat16_rn(d); }
static inline float __bfloat162float(__nv_bfloat16 h) { return (float)__gcemu_value(h); }
static inline __nv_bfloat162 __float2bfloat162_rn(float f) {
  const __nv_bfloat16 h = __float2bfloat16_rn(f);
  return __nv_bfloat162(h, h);
}
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162(__float2bfloat16_rn(a), __float2bfloat16_rn(b));
}
static inline __nv_bfloat162 __float22bfloat162_rn(float2 v) { return __floats2bfloat162_rn(v.x, v.y); }
static inline float2 __bfloat1622float2(__nv_bfloat162 h) { return __gcemu_pair_to_float2(h); }
static inline short __bfloat16_as_short(__nv_bfloat16 h) { return (short)h.__x; }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
static inline __nv_bfloat16 __short_as_bfloat16(short v) { return __gcemu_make((__nv_bfloat16*)0, (unsigned short)v); }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short v) { return __gcemu_make((__nv_bfloat16*)0, v); }
static inline __nv_bfloat16 __ldg(const __nv_bfloat16* p) { return *p; }
static inline __nv_bfloat162 __ldg(const __nv_bfloat162* p) { return *p; }

#define CUDART_INF_BF16 __ushort_as_bfloat16((unsigned short)0x7F80U)
#define CUDART_NAN_BF16 __ushort_as_bfloat16((unsigned short)0x7FFFU)
#define CUDART_MIN_DENORM_BF16 __ushort_as_bfloat16((unsigned short)0x0001U)
#define CUDART_MAX_NORMAL_BF16 __ushort_as_bfloat16((unsigned short)0x7F7FU)
#define CUDART_NEG_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x8000U)
#define CUDART_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x0000U)
#define CUDART_ONE_BF16 __ushort_as_bfloat16((unsigned short)0x3F80U)

#endif  // GPUCOURSE_CUDA_BF16_H
