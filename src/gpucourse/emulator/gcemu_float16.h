// What the emulator's <cuda_fp16.h> and <cuda_bf16.h> share: rounding a double to a 16-bit
// float format, and back.
//
// Every operation computes in double and rounds once to the 16-bit format, round to nearest
// even unless a _rz/_rd/_ru suffix says otherwise, with overflow to infinity and subnormal
// results, as the GPU's half and bfloat16 instructions do. A double holds the exact sum,
// product or quotient of two 16-bit values to more than 2p + 2 bits (p = 11 or 8), so
// rounding its result once more gives the correctly rounded 16-bit result; a fused
// multiply-add rounds the double sum to odd first (exact product, then TwoSum), which keeps
// the same guarantee.
#ifndef GPUCOURSE_GCEMU_FLOAT16_H
#define GPUCOURSE_GCEMU_FLOAT16_H

#include "cuda_emu.h"

enum { __GCEMU_RN = 0, __GCEMU_RZ = 1, __GCEMU_RD = 2, __GCEMU_RU = 3 };

// A 16-bit binary format: EXP exponent bits, MANT fraction bits.
template <int EXP, int MANT>
struct __gcemu_format16 {
  enum { EMAX = (1 << (EXP - 1)) - 1, EMIN = 1 - EMAX };
  static constexpr unsigned short INF = (unsigned short)(((1u << EXP) - 1u) << MANT);
  static constexpr unsigned short NAN_BITS = 0x7FFF;  // CUDA's canonical NaN of both formats
  static constexpr unsigned short MAX_FINITE = (unsigned short)(INF - 1u);

  static double decode(unsigned short h) {
    const int sign = h >> 15, e = (h >> MANT) & ((1 << EXP) - 1);
    const unsigned m = h & ((1u << MANT) - 1u);
    double v;
    if (e == (1 << EXP) - 1) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp((double)m, EMIN - MANT);
    else v = ldexp((double)(m | (1u << MANT)), e - EMAX - MANT);
    return sign ? -v : v;
  }

  // x rounded to this format in `mode` (one of __GCEMU_RN...).
  static unsigned short encode(double x, int mode = __GCEMU_RN) {
    if (x != x) return NAN_BITS;
    const unsigned short sign = signbit(x) ? 0x8000u : 0u;
    const double a = fabs(x);
    if (a == INFINITY) return sign | INF;
    if (a == 0.0) return sign;
    int e2;
    frexp(a, &e2);
    int E = e2 - 1;  // a = 1.f * 2^E
    if (E < EMIN) E = EMIN;  // subnormal: the quantum of the smallest normals
    const double n = ldexp(a, MANT - E);  // a in quanta of 2^(E - MANT), exact
    double r = floor(n);
    const double frac = n - r;
    const int up_mag = (mode == __GCEMU_RU && !sign) || (mode == __GCEMU_RD && sign);
    if (mode == __GCEMU_RN) {
      if (frac > 0.5 || (frac == 0.5 && fmod(r, 2.0) != 0.0)) r += 1.0;
    } else if (up_mag && frac > 0.0) {
      r += 1.0;
    }
    if (r == 0.0) return sign;
    // r quanta of 2^(E - MANT): at most 2^(MANT + 1), one more exponent when it reaches it.
    if (r >= ldexp(1.0, MANT + 1)) {
      r = ldexp(1.0, MANT);
      E += 1;
    }
    const int normal = r >= ldexp(1.0, MANT);
    if (E > EMAX) {  // overflow: infinity, or the largest finite value toward zero
      const int to_inf = mode == __GCEMU_RN || up_mag;
      return sign | (to_inf ? INF : MAX_FINITE);
    }
    if (!normal) return sign | (unsigned short)r;  // a subnormal: exponent field 0
    return sign | (unsigned short)(((unsigned)(E + EMAX) << MANT) | ((unsigned)r - (1u << MANT)));
  }

  // a * b + c, rounded once: the product is exact in double, TwoSum finds the sum's error,
  // and a sum rounded to odd then rounds correctly to 16 bits.
  static unsigned short fma(double a, double b, double c, int mode = __GCEMU_RN) {
    const double p = a * b, s = p + c;
    if (!isfinite(s)) return encode(s, mode);
    const double bb = s - p, err = (p - (s - bb)) + (c - bb);
    double odd = s;
    if (err != 0.0) {
      uint64_t bits;
      memcpy(&bits, &odd, 8);
      if (!(bits & 1u)) odd = nextafter(s, err > 0 ? INFINITY : -INFINITY);
    }
    return encode(odd, mode);
  }
};
typedef __gcemu_format16<5, 10> __gcemu_fp16;
typedef __gcemu_format16<8, 7> __gcemu_bf16;

// A double rounded to an integer type as the GPU converts (NaN 0, out of range the limit).
template <class I>
static inline I __gcemu_16_to_int(double v, int mode) {
  if (v != v) return 0;
  const double r = mode == __GCEMU_RN ? nearbyint(v) : mode == __GCEMU_RZ ? trunc(v)
                   : mode == __GCEMU_RD ? floor(v) : ceil(v);
  if (r <= (double)std::numeric_limits<I>::min()) return std::numeric_limits<I>::min();
  if (r >= (double)std::numeric_limits<I>::max()) return std::numeric_limits<I>::max();
  return (I)r;
}

// Everything both 16-bit types have, for T (__half or __nv_bfloat16), its pair T2, format F
// and the word H of its names (half: __low2half, bfloat16: __low2bfloat16).
#define GCEMU_FLOAT16_COMMON(T, T2, F, H)                                                         \
  static inline T __gcemu_make(T*, unsigned short bits) { T h; h.__x = bits; return h; }     \
  static inline double __gcemu_value(T h) { return F::decode(h.__x); }                        \
  static inline T __gcemu_round(T*, double v, int mode) {                                     \
    return __gcemu_make((T*)0, F::encode(v, mode));                                           \
  }                                                                                           \
  static inline T __hadd(T a, T b) { return __gcemu_round((T*)0, __gcemu_value(a) + __gcemu_value(b), 0); } \
  static inline T __hsub(T a, T b) { return __gcemu_round((T*)0, __gcemu_value(a) - __gcemu_value(b), 0); } \
  static inline T __hmul(T a, T b) { return __gcemu_round((T*)0, __gcemu_value(a) * __gcemu_value(b), 0); } \
  static inline T __hdiv(T a, T b) { return __gcemu_round((T*)0, __gcemu_value(a) / __gcemu_value(b), 0); } \
  static inline T __hadd_rn(T a, T b) { return __hadd(a, b); }                                 \
  static inline T __hsub_rn(T a, T b) { return __hsub(a, b); }                                 \
  static inline T __hmul_rn(T a, T b) { return __hmul(a, b); }                                 \
  static inline T __hfma(T a, T b, T c) {                                                     \
    return __gcemu_make((T*)0, F::fma(__gcemu_value(a), __gcemu_value(b), __gcemu_value(c))); \
  }                                                                                           \
  static inline T __gcemu_sat(T h) {                                                          \
    const double v = __gcemu_value(h);                                                        \
    return v != v ? __gcemu_make((T*)0, 0) : v < 0 ? __gcemu_make((T*)0, 0)                   \
                    : v > 1 ? __gcemu_round((T*)0, 1.0, 0) : h;                               \
  }                                                                                           \
  static inline T __hadd_sat(T a, T b) { return __gcemu_sat(__hadd(a, b)); }                   \
  static inline T __hsub_sat(T a, T b) { return __gcemu_sat(__hsub(a, b)); }                   \
  static inline T __hmul_sat(T a, T b) { return __gcemu_sat(__hmul(a, b)); }                   \
  static inline T __hfma_sat(T a, T b, T c) { return __gcemu_sat(__hfma(a, b, c)); }          \
  static inline T __hfma_relu(T a, T b, T c) {                                                \
    const T r = __hfma(a, b, c);                                                              \
    return __gcemu_value(r) < 0 ? __gcemu_make((T*)0, 0) : r;                                 \
  }                                                                                           \
  static inline T __hneg(T a) { return __gcemu_make((T*)0, (unsigned short)(a.__x ^ 0x8000u)); } \
  static inline T __habs(T a) { return __gcemu_make((T*)0, (unsigned short)(a.__x & 0x7FFFu)); } \
  static inline bool __hisnan(T a) { return __gcemu_value(a) != __gcemu_value(a); }           \
  static inline int __hisinf(T a) {                                                           \
    const double v = __gcemu_value(a);                                                        \
    return v == INFINITY ? 1 : v == -INFINITY ? -1 : 0;                                       \
  }                                                                                           \
  static inline bool __heq(T a, T b) { return __gcemu_value(a) == __gcemu_value(b); }         \
  static inline bool __hne(T a, T b) { return __gcemu_value(a) != __gcemu_value(b) && !__hisnan(a) && !__hisnan(b); } \
  static inline bool __hlt(T a, T b) { return __gcemu_value(a) < __gcemu_value(b); }          \
  static inline bool __hle(T a, T b) { return __gcemu_value(a) <= __gcemu_value(b); }         \
  static inline bool __hgt(T a, T b) { return __gcemu_value(a) > __gcemu_value(b); }          \
  static inline bool __hge(T a, T b) { return __gcemu_value(a) >= __gcemu_value(b); }         \
  static inline bool __hequ(T a, T b) { return !(__gcemu_value(a) != __gcemu_value(b)); }     \
  static inline bool __hneu(T a, T b) { return __gcemu_value(a) != __gcemu_value(b); }        \
  static inline bool __hltu(T a, T b) { return !(__gcemu_value(a) >= __gcemu_value(b)); }     \
  static inline bool __hleu(T a, T b) { return !(__gcemu_value(a) > __gcemu_value(b)); }      \
  static inline bool __hgtu(T a, T b) { return !(__gcemu_value(a) <= __gcemu_value(b)); }     \
  static inline bool __hgeu(T a, T b) { return !(__gcemu_value(a) < __gcemu_value(b)); }      \
  static inline T __hmax(T a, T b) {                                                          \
    if (__hisnan(a)) return b;                                                                \
    if (__hisnan(b)) return a;                                                                \
    return __gcemu_value(a) > __gcemu_value(b) || (__gcemu_value(a) == __gcemu_value(b) &&    \
           !(a.__x & 0x8000u)) ? a : b;                                                       \
  }                                                                                           \
  static inline T __hmin(T a, T b) {                                                          \
    if (__hisnan(a)) return b;                                                                \
    if (__hisnan(b)) return a;                                                                \
    return __gcemu_value(a) < __gcemu_value(b) || (__gcemu_value(a) == __gcemu_value(b) &&    \
           (a.__x & 0x8000u)) ? a : b;                                                        \
  }                                                                                           \
  static inline T __hmax_nan(T a, T b) { return __hisnan(a) || __hisnan(b) ? __gcemu_make((T*)0, F::NAN_BITS) : __hmax(a, b); } \
  static inline T __hmin_nan(T a, T b) { return __hisnan(a) || __hisnan(b) ? __gcemu_make((T*)0, F::NAN_BITS) : __hmin(a, b); } \
  /* Math functions: computed in double, then rounded (the GPU's are approximate too). */   \
  static inline T hsqrt(T a) { return __gcemu_round((T*)0, sqrt(__gcemu_value(a)), 0); }     \
  static inline T hrsqrt(T a) { return __gcemu_round((T*)0, 1.0 / sqrt(__gcemu_value(a)), 0); } \
  static inline T hrcp(T a) { return __gcemu_round((T*)0, 1.0 / __gcemu_value(a), 0); }      \
  static inline T hexp(T a) { return __gcemu_round((T*)0, exp(__gcemu_value(a)), 0); }       \
  static inline T hexp2(T a) { return __gcemu_round((T*)0, exp2(__gcemu_value(a)), 0); }     \
  static inline T hexp10(T a) { return __gcemu_round((T*)0, pow(10.0, __gcemu_value(a)), 0); } \
  static inline T hlog(T a) { return __gcemu_round((T*)0, log(__gcemu_value(a)), 0); }       \
  static inline T hlog2(T a) { return __gcemu_round((T*)0, log2(__gcemu_value(a)), 0); }     \
  static inline T hlog10(T a) { return __gcemu_round((T*)0, log10(__gcemu_value(a)), 0); }   \
  static inline T hsin(T a) { return __gcemu_round((T*)0, sin(__gcemu_value(a)), 0); }       \
  static inline T hcos(T a) { return __gcemu_round((T*)0, cos(__gcemu_value(a)), 0); }       \
  static inline T htanh(T a) { return __gcemu_round((T*)0, tanh(__gcemu_value(a)), 0); }     \
  static inline T htrunc(T a) { return __gcemu_round((T*)0, trunc(__gcemu_value(a)), 0); }   \
  static inline T hceil(T a) { return __gcemu_round((T*)0, ceil(__gcemu_value(a)), 0); }     \
  static inline T hfloor(T a) { return __gcemu_round((T*)0, floor(__gcemu_value(a)), 0); }   \
  static inline T hrint(T a) { return __gcemu_round((T*)0, nearbyint(__gcemu_value(a)), 0); } \
  /* Pairs: each operation on both halves. */                                                \
  static inline T2 __gcemu_pair(T lo, T hi) { T2 r; r.x = lo; r.y = hi; return r; }          \
  static inline T2 __hadd2(T2 a, T2 b) { return __gcemu_pair(__hadd(a.x, b.x), __hadd(a.y, b.y)); } \
  static inline T2 __hsub2(T2 a, T2 b) { return __gcemu_pair(__hsub(a.x, b.x), __hsub(a.y, b.y)); } \
  static inline T2 __hmul2(T2 a, T2 b) { return __gcemu_pair(__hmul(a.x, b.x), __hmul(a.y, b.y)); } \
  static inline T2 __h2div(T2 a, T2 b) { return __gcemu_pair(__hdiv(a.x, b.x), __hdiv(a.y, b.y)); } \
  static inline T2 __hfma2(T2 a, T2 b, T2 c) {                                                \
    return __gcemu_pair(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));                        \
  }                                                                                           \
  static inline T2 __hadd2_sat(T2 a, T2 b) { return __gcemu_pair(__hadd_sat(a.x, b.x), __hadd_sat(a.y, b.y)); } \
  static inline T2 __hmul2_sat(T2 a, T2 b) { return __gcemu_pair(__hmul_sat(a.x, b.x), __hmul_sat(a.y, b.y)); } \
  static inline T2 __hfma2_sat(T2 a, T2 b, T2 c) {                                            \
    return __gcemu_pair(__hfma_sat(a.x, b.x, c.x), __hfma_sat(a.y, b.y, c.y));                \
  }                                                                                           \
  static inline T2 __hneg2(T2 a) { return __gcemu_pair(__hneg(a.x), __hneg(a.y)); }          \
  static inline T2 __habs2(T2 a) { return __gcemu_pair(__habs(a.x), __habs(a.y)); }          \
  static inline T2 __hmax2(T2 a, T2 b) { return __gcemu_pair(__hmax(a.x, b.x), __hmax(a.y, b.y)); } \
  static inline T2 __hmin2(T2 a, T2 b) { return __gcemu_pair(__hmin(a.x, b.x), __hmin(a.y, b.y)); } \
  static inline bool __hbeq2(T2 a, T2 b) { return __heq(a.x, b.x) && __heq(a.y, b.y); }      \
  static inline bool __hbne2(T2 a, T2 b) { return __hne(a.x, b.x) && __hne(a.y, b.y); }      \
  static inline bool __hblt2(T2 a, T2 b) { return __hlt(a.x, b.x) && __hlt(a.y, b.y); }      \
  static inline bool __hble2(T2 a, T2 b) { return __hle(a.x, b.x) && __hle(a.y, b.y); }      \
  static inline bool __hbgt2(T2 a, T2 b) { return __hgt(a.x, b.x) && __hgt(a.y, b.y); }      \
  static inline bool __hbge2(T2 a, T2 b) { return __hge(a.x, b.x) && __hge(a.y, b.y); }      \
  static inline T2 h2sqrt(T2 a) { return __gcemu_pair(hsqrt(a.x), hsqrt(a.y)); }             \
  static inline T2 h2rsqrt(T2 a) { return __gcemu_pair(hrsqrt(a.x), hrsqrt(a.y)); }          \
  static inline T2 h2rcp(T2 a) { return __gcemu_pair(hrcp(a.x), hrcp(a.y)); }                \
  static inline T2 h2exp(T2 a) { return __gcemu_pair(hexp(a.x), hexp(a.y)); }                \
  static inline T2 h2exp2(T2 a) { return __gcemu_pair(hexp2(a.x), hexp2(a.y)); }             \
  static inline T2 h2log(T2 a) { return __gcemu_pair(hlog(a.x), hlog(a.y)); }                \
  static inline T2 h2log2(T2 a) { return __gcemu_pair(hlog2(a.x), hlog2(a.y)); }             \
  static inline T2 h2sin(T2 a) { return __gcemu_pair(hsin(a.x), hsin(a.y)); }                \
  static inline T2 h2cos(T2 a) { return __gcemu_pair(hcos(a.x), hcos(a.y)); }                \
  static inline T2 h2trunc(T2 a) { return __gcemu_pair(htrunc(a.x), htrunc(a.y)); }          \
  static inline T2 h2floor(T2 a) { return __gcemu_pair(hfloor(a.x), hfloor(a.y)); }          \
  static inline T2 h2ceil(T2 a) { return __gcemu_pair(hceil(a.x), hceil(a.y)); }             \
  static inline T2 __lowhigh2highlow(T2 a) { return __gcemu_pair(a.y, a.x); }                \
  static inline float __low2float(T2 a) { return (float)__gcemu_value(a.x); }                 \
  static inline float __high2float(T2 a) { return (float)__gcemu_value(a.y); }                \
  static inline float2 __gcemu_pair_to_float2(T2 a) {                                         \
    return make_float2((float)__gcemu_value(a.x), (float)__gcemu_value(a.y));                 \
  }                                                                                           \
  /* Operators, as CUDA's headers define them for device code. */                            \
  static inline T operator+(const T& a, const T& b) { return __hadd(a, b); }                 \
  static inline T operator-(const T& a, const T& b) { return __hsub(a, b); }                 \
  static inline T operator*(const T& a, const T& b) { return __hmul(a, b); }                 \
  static inline T operator/(const T& a, const T& b) { return __hdiv(a, b); }                 \
  static inline T& operator+=(T& a, const T& b) { return a = __hadd(a, b); }                 \
  static inline T& operator-=(T& a, const T& b) { return a = __hsub(a, b); }                 \
  static inline T& operator*=(T& a, const T& b) { return a = __hmul(a, b); }                 \
  static inline T& operator/=(T& a, const T& b) { return a = __hdiv(a, b); }                 \
  static inline T& operator++(T& a) { return a = __hadd(a, __gcemu_round((T*)0, 1.0, 0)); } \
  static inline T& operator--(T& a) { return a = __hsub(a, __gcemu_round((T*)0, 1.0, 0)); } \
  static inline T operator++(T& a, int) { T old = a; ++a; return old; }                      \
  static inline T operator--(T& a, int) { T old = a; --a; return old; }                      \
  static inline T operator+(const T& a) { return a; }                                        \
  static inline T operator-(const T& a) { return __hneg(a); }                                \
  static inline bool operator==(const T& a, const T& b) { return __heq(a, b); }              \
  static inline bool operator!=(const T& a, const T& b) { return __hneu(a, b); }             \
  static inline bool operator<(const T& a, const T& b) { return __hlt(a, b); }               \
  static inline bool operator<=(const T& a, const T& b) { return __hle(a, b); }              \
  static inline bool operator>(const T& a, const T& b) { return __hgt(a, b); }               \
  static inline bool operator>=(const T& a, const T& b) { return __hge(a, b); }              \
  static inline T2 operator+(const T2& a, const T2& b) { return __hadd2(a, b); }             \
  static inline T2 operator-(const T2& a, const T2& b) { return __hsub2(a, b); }             \
  static inline T2 operator*(const T2& a, const T2& b) { return __hmul2(a, b); }             \
  static inline T2 operator/(const T2& a, const T2& b) { return __h2div(a, b); }             \
  static inline T2& operator+=(T2& a, const T2& b) { return a = __hadd2(a, b); }             \
  static inline T2& operator-=(T2& a, const T2& b) { return a = __hsub2(a, b); }             \
  static inline T2& operator*=(T2& a, const T2& b) { return a = __hmul2(a, b); }             \
  static inline T2& operator/=(T2& a, const T2& b) { return a = __h2div(a, b); }             \
  static inline T2 operator-(const T2& a) { return __hneg2(a); }                             \
  static inline bool operator==(const T2& a, const T2& b) { return __hbeq2(a, b); }          \
  static inline bool operator!=(const T2& a, const T2& b) { return !__hbeq2(a, b); }         \
  /* Warp functions and atomics move and update the bits. */                                 \
  static inline T __shfl_sync(unsigned m, T v, int s, int w = 32) {                           \
    return __gcemu_make((T*)0, __shfl_sync(m, v.__x, s, w));                                  \
  }                                                                                           \
  static inline T __shfl_up_sync(unsigned m, T v, unsigned d, int w = 32) {                   \
    return __gcemu_make((T*)0, __shfl_up_sync(m, v.__x, d, w));                               \
  }                                                                                           \
  static inline T __shfl_down_sync(unsigned m, T v, unsigned d, int w = 32) {                 \
    return __gcemu_make((T*)0, __shfl_down_sync(m, v.__x, d, w));                             \
  }                                                                                           \
  static inline T __shfl_xor_sync(unsigned m, T v, int l, int w = 32) {                       \
    return __gcemu_make((T*)0, __shfl_xor_sync(m, v.__x, l, w));                              \
  }                                                                                           \
  static inline T2 __shfl_sync(unsigned m, T2 v, int s, int w = 32) {                         \
    return __gcemu_pair(__shfl_sync(m, v.x, s, w), __shfl_sync(m, v.y, s, w));                \
  }                                                                                           \
  static inline T2 __shfl_up_sync(unsigned m, T2 v, unsigned d, int w = 32) {                 \
    return __gcemu_pair(__shfl_up_sync(m, v.x, d, w), __shfl_up_sync(m, v.y, d, w));          \
  }                                                                                           \
  static inline T2 __shfl_down_sync(unsigned m, T2 v, unsigned d, int w = 32) {               \
    return __gcemu_pair(__shfl_down_sync(m, v.x, d, w), __shfl_down_sync(m, v.y, d, w));      \
  }                                                                                           \
  static inline T2 __shfl_xor_sync(unsigned m, T2 v, int l, int w = 32) {                     \
    return __gcemu_pair(__shfl_xor_sync(m, v.x, l, w), __shfl_xor_sync(m, v.y, l, w));        \
  }                                                                                           \
  /* In parentheses: an instrumented build's atomicAdd macro (atomic_marks.h) marks calls. */ \
  GCEMU_ATOMIC_ATTR static inline T(atomicAdd)(T * address, T val) {                          \
    const T old = *address;                                                                   \
    *address = __hadd(old, val);                                                              \
    return old;                                                                               \
  }                                                                                           \
  GCEMU_ATOMIC_ATTR static inline T2(atomicAdd)(T2 * address, T2 val) {                       \
    const T2 old = *address;                                                                  \
    *address = __hadd2(old, val);                                                             \
    return old;                                                                               \
  }                                                                                           \
  GCEMU_ATOMIC_ATTR static inline T(atomicAdd_block)(T * address, T val) { return (atomicAdd)(address, val); } \
  GCEMU_ATOMIC_ATTR static inline T(atomicAdd_system)(T * address, T val) { return (atomicAdd)(address, val); } \
  /* Moving halves about, with each type's names (H: half or bfloat16). */                  \
  static inline T __low2##H(T2 a) { return a.x; }                                            \
  static inline T __high2##H(T2 a) { return a.y; }                                           \
  static inline T2 __halves2##H##2(T a, T b) { return __gcemu_pair(a, b); }                  \
  static inline T2 __##H##2##H##2(T a) { return __gcemu_pair(a, a); }                        \
  static inline T2 __lows2##H##2(T2 a, T2 b) { return __gcemu_pair(a.x, b.x); }              \
  static inline T2 __highs2##H##2(T2 a, T2 b) { return __gcemu_pair(a.y, b.y); }             \
  static inline T2 __low2##H##2(T2 a) { return __gcemu_pair(a.x, a.x); }                     \
  static inline T2 __high2##H##2(T2 a) { return __gcemu_pair(a.y, a.y); }                    \
  template <> struct __gcemu_kind<T2> {                                                       \
    static constexpr const char* name = __gcemu_kind<T>::name;                                \
    enum { lanes = 2 };                                                                       \
  };

#endif  // GPUCOURSE_GCEMU_FLOAT16_H
