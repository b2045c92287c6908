// <cuda_fp16.h> for the course's CPU emulator: __half and __half2, their conversions,
// arithmetic, comparisons, math functions, warp shuffles and atomicAdd, rounding as the
// GPU rounds (gcemu_float16.h: round to nearest even after every operation, overflow to
// infinity, subnormals kept).
#ifndef GPUCOURSE_CUDA_FP16_H
#define GPUCOURSE_CUDA_FP16_H
#define __CUDA_FP16_H__
#define __CUDA_FP16_HPP__

#include "gcemu_float16.h"

struct __half_raw { unsigned short x; };
struct __half2_raw { unsigned short x, y; };

static inline unsigned short __gcemu_f2h(double v, int mode = __GCEMU_RN) {
  return __gcemu_fp16::encode(v, mode);
}

struct __align__(2) __half {
  unsigned short __x;  // the bits (protected in CUDA's header)
  __half() = default;
  constexpr __half(const __half_raw& r) : __x(r.x) {}
  // Conversions, as CUDA's header gives device code: from the arithmetic types (rounded to
  // nearest), to float (exact), to the integer types (toward zero) and to bool.
  __half(float f) : __x(__gcemu_f2h(f)) {}
  __half(double d) : __x(__gcemu_f2h(d)) {}
  __half(short v) : __x(__gcemu_f2h(v)) {}
  __half(unsigned short v) : __x(__gcemu_f2h(v)) {}
  __half(int v) : __x(__gcemu_f2h(v)) {}
  __half(unsigned int v) : __x(__gcemu_f2h(v)) {}
  __half(long v) : __x(__gcemu_f2h((double)v)) {}
  __half(unsigned long v) : __x(__gcemu_f2h((double)v)) {}
  __half(long long v) : __x(__gcemu_f2h((double)v)) {}
  __half(unsigned long long v) : __x(__gcemu_f2h((double)v)) {}
  operator __half_raw() const { __half_raw r; r.x = __x; return r; }
  operator float() const { return (float)__gcemu_fp16::decode(__x); }
  explicit operator signed char() const { return __gcemu_16_to_int<signed char>(__gcemu_fp16::decode(__x), __GCEMU_RZ); }
  explicit operator unsigned char() const { return __gcemu_16_to_int<unsigned char>(__gcemu_fp16::decode(__x), __GCEMU_RZ); }
  explicit operator char() const { return __gcemu_16_to_int<char>(__gcemu_fp16::decode(__x), __GCEMU_RZ); }
  explicit operator short() const { return __gcemu_16_to_int<short>(__gcemu_fp16::decode(__x), __GCEMU_RZ); }
  explicit operator unsigned short() const { return __gcemu_16_to_int<unsigned short>(__gcemu_fp16::decode(__x), __GCEMU_RZ); }
  explicit operator int() const { return __gcemu_16_to_int<int>(__gcemu_fp16::decode(__x), __GCEMU_RZ); }
  explicit operator unsigned int() const { return __gcemu_16_to_int<unsigned int>(__gcemu_fp16::decode(__x), __GCEMU_RZ); }
  explicit operator long long() const { return __gcemu_16_to_int<long long>(__gcemu_fp16::decode(__x), __GCEMU_RZ); }
  explicit operator unsigned long long() const { return __gcemu_16_to_int<unsigned long long>(__gcemu_fp16::decode(__x), __GCEMU_RZ); }
  explicit operator bool() const { return (__x & 0x7FFFu) != 0; }
  __half& operator=(const __half_raw& r) { __x = r.x; return *this; }
  __half& operator=(float f) { __x = __gcemu_f2h(f); return *this; }
  __half& operator=(double d) { __x = __gcemu_f2h(d); return *this; }
};

struct __align__(4) __half2 {
  __half x, y;
  __half2() = default;
  constexpr __half2(const __half& a, const __half& b) : x(a), y(b) {}
  __half2(const __half2_raw& r) { x.__x = r.x; y.__x = r.y; }
  operator __half2_raw() const { __half2_raw r; r.x = x.__x; r.y = y.__x; return r; }
};

typedef __half half;
typedef __half2 half2;
template <> struct __gcemu_kind<__half> { static constexpr const char* name = "float16"; enum { lanes = 1 }; };

GCEMU_FLOAT16_COMMON(__half, __half2, __gcemu_fp16, half)

static inline __half2 make_half2(__half x, __half y) { return __half2(x, y); }

// ---------------------------------------------------------------- conversions
#define GCEMU_HALF_FROM(NAME, T)                                                              \
  static inline __half NAME##_rn(T v) { return __gcemu_make((__half*)0, __gcemu_f2h((double)v, __GCEMU_RN)); } \
  static inline __half NAME##_rz(T v) { return __gcemu_make((__half*)0, __gcemu_f2h((double)v, __GCEMU_RZ)); } \
  static inline __half NAME##_rd(T v) { return __gcemu_make((__half*)0, __gcemu_f2h((double)v, __GCEMU_RD)); } \
  static inline __half NAME##_ru(T v) { return __gcemu_make((__half*)0, __gcemu_f2h((double)v, __GCEMU_RU)); }
GCEMU_HALF_FROM(__float2half, float)
GCEMU_HALF_FROM(__double2half, double)
GCEMU_HALF_FROM(__int2half, int)
GCEMU_HALF_FROM(__uint2half, unsigned int)
GCEMU_HALF_FROM(__short2half, short)
GCEMU_HALF_FROM(__ushort2half, unsigned short)
GCEMU_HALF_FROM(__ll2half, long long)
GCEMU_HALF_FROM(__ull2half, unsigned long long)
#undef GCEMU_HALF_FROM
#define GCEMU_HALF_TO(NAME, T)                                                                \
  static inline T NAME##_rn(__half h) { return __gcemu_16_to_int<T>(__gcemu_value(h), __GCEMU_RN); } \
  static inline T NAME##_rz(__half h) { return __gcemu_16_to_int<T>(__gcemu_value(h), __GCEMU_RZ); } \
  static inline T NAME##_rd(__half h) { return __gcemu_16_to_int<T>(__gcemu_value(h), __GCEMU_RD); } \
  static inline T NAME##_ru(__half h) { return __gcemu_16_to_int<T>(__gcemu_value(h), __GCEMU_RU); }
GCEMU_HALF_TO(__half2int, int)
GCEMU_HALF_TO(__half2uint, unsigned int)
GCEMU_HALF_TO(__half2short, short)
GCEMU_HALF_TO(__half2ushort, unsigned short)
GCEMU_HALF_TO(__half2ll, long long)
GCEMU_HALF_TO(__half2ull, unsigned long long)
#undef GCEMU_HALF_TO
static inline __half __float2half(float f) { return __float2half_rn(f); }
static inline __half __double2half(double d) { return __double2half_rn(d); }
static inline float __half2float(__half h) { return (float)__gcemu_value(h); }
static inline signed char __half2char_rz(__half h) { return __gcemu_16_to_int<signed char>(__gcemu_value(h), __GCEMU_RZ); }
static inline unsigned char __half2uchar_rz(__half h) { return __gcemu_16_to_int<unsigned char>(__gcemu_value(h), __GCEMU_RZ); }
static inline __half2 __float2half2_rn(float f) { const __half h = __float2half_rn(f); return __half2(h, h); }
static inline __half2 __floats2half2_rn(float a, float b) { return __half2(__float2half_rn(a), __float2half_rn(b)); }
static inline __half2 __float22half2_rn(float2 v) { return __floats2half2_rn(v.x, v.y); }
static inline float2 __half22float2(__half2 h) { return __gcemu_pair_to_float2(h); }
static inline short __half_as_short(__half h) { return (short)h.__x; }
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline __half __short_as_half(short v) { return __gcemu_make((__half*)0, (unsigned short)v); }
static inline __half __ushort_as_half(unsigned short v) { return __gcemu_make((__half*)0, v); }
static inline __half __ldg(const __half* p) { return *p; }
static inline __half2 __ldg(const __half2* p) { return *p; }

#define CUDART_INF_FP16 __ushort_as_half((unsigned short)0x7C00U)
#define CUDART_NAN_FP16 __ushort_as_half((unsigned short)0x7FFFU)
#define CUDART_MIN_DENORM_FP16 __ushort_as_half((unsigned short)0x0001U)
#define CUDART_MAX_NORMAL_FP16 __ushort_as_half((unsigned short)0x7BFFU)
#define CUDART_NEG_ZERO_FP16 __ushort_as_half((unsigned short)0x8000U)
#define CUDART_ZERO_FP16 __ushort_as_half((unsigned short)0x0000U)
#define CUDART_ONE_FP16 __ushort_as_half((unsigned short)0x3C00U)

#endif  // GPUCOURSE_CUDA_FP16_H
