// Part of the emulator's prelude (cuda_emu.h includes it): CUDA's math functions, rounding
// intrinsics and integer intrinsics, written for the host C++ compiler.
#ifndef GPUCOURSE_CUDA_EMU_MATH_H
#define GPUCOURSE_CUDA_EMU_MATH_H
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

#endif  // GPUCOURSE_CUDA_EMU_MATH_H
