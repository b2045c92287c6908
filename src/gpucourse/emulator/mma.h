// <mma.h> for the course's CPU emulator: nvcuda::wmma for the m16n16k16 shape, half or
// bfloat16 inputs, float (or half) accumulators.
//
// A fragment belongs to a whole warp, as on a GPU: load_matrix_sync, store_matrix_sync and
// mma_sync are made by all 32 lanes together, with the same arguments, at the same line. The
// last lane to arrive does the warp's work (runtime.cpp's gather) before any lane goes on,
// so a lane that returned first, a warp of fewer than 32 threads, lanes at different calls
// or with different pointers each stop the kernel with a message. Each lane holds 8 of the
// fragment's 256 elements (x[0..7], num_elements = 8; CUDA leaves the mapping unspecified):
// lane l holds elements 8l..8l+7 of the 16 x 16 matrix in row-major order. mma_sync adds the
// 16 products of each dot product to the accumulator in float, in order of k.
#ifndef GPUCOURSE_MMA_H
#define GPUCOURSE_MMA_H
#define __CUDA_MMA_H__

#include "cuda_bf16.h"
#include "cuda_fp16.h"

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
namespace precision {
struct tf32 {};
struct u8 {};
struct s8 {};
struct b1 {};
}  // namespace precision

template <class T> struct __gcemu_input { enum { ok = 0 }; };
template <> struct __gcemu_input<__half> { enum { ok = 1 }; };
template <> struct __gcemu_input<__nv_bfloat16> { enum { ok = 1 }; };
template <class T> struct __gcemu_acc { enum { ok = 0 }; };
template <> struct __gcemu_acc<float> { enum { ok = 1 }; };
template <> struct __gcemu_acc<__half> { enum { ok = 1 }; };

template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment {
  static_assert(M == 16 && N == 16 && K == 16,
                "the CPU emulator's wmma has the m16n16k16 shape only: use fragment<..., 16, 16, 16, ...>");
  static_assert(std::is_same<Use, accumulator>::value ? __gcemu_acc<T>::ok : __gcemu_input<T>::ok,
                "the CPU emulator's wmma takes half or __nv_bfloat16 matrix_a and matrix_b "
                "fragments and float or half accumulators");
  static_assert(std::is_same<Use, accumulator>::value || !std::is_same<Layout, void>::value,
                "a matrix_a or matrix_b fragment needs its layout: wmma::row_major or wmma::col_major");

 public:
  enum { num_elements = 8 };
  typedef T element_type;
  typedef T storage_element_type;
  T x[num_elements];
};

static inline float __gcemu_wmma_value(float v) { return v; }
static inline float __gcemu_wmma_value(__half v) { return __half2float(v); }
static inline float __gcemu_wmma_value(__nv_bfloat16 v) { return __bfloat162float(v); }
static inline void __gcemu_wmma_store(float* p, float v) { *p = v; }
static inline void __gcemu_wmma_store(__half* p, float v) { *p = __float2half_rn(v); }

// What each lane brings to a warp-wide wmma call.
struct __gcemu_wmma_call {
  void* frag;                // its fragment (the destination of a load or an mma)
  const void* a;             // mma: the lane's a, b and c fragments
  const void* b;
  const void* c;
  const void* ptr;           // load and store: the matrix
  unsigned ldm;
  int layout;                // 0 row-major, 1 column-major
  int line;                  // the call's line in the source
};
enum { __GCEMU_WMMA_LOAD = 0, __GCEMU_WMMA_STORE = 1, __GCEMU_WMMA_MMA = 2 };

// The lanes' calls, or NULL for every lane but the one that does the work, after checking
// that all 32 made the same call.
static inline __gcemu_wmma_call* const* __gcemu_wmma_gather(__gcemu_wmma_call* mine, int op,
                                                            const char* what, size_t elem) {
  __gcemu_wmma_call* const* all = (__gcemu_wmma_call* const*)__gcemu_warp_gather(mine, op, what);
  if (!all) return NULL;
  for (int l = 1; l < 32; l++) {
    const __gcemu_wmma_call* c = all[l];
    char text[300];
    if (c->line != all[0]->line) {
      snprintf(text, sizeof text, "lanes of warp %u in block (%u,%u,%u) called %s at lines %d and "
               "%d; a fragment belongs to the whole warp, so all 32 lanes must make the same call",
               __gcemu_thread_rank() / 32, blockIdx.x, blockIdx.y, blockIdx.z, what, all[0]->line,
               c->line);
      __gcemu_fail_message(text);
    }
    if (c->ptr != all[0]->ptr || c->ldm != all[0]->ldm || c->layout != all[0]->layout) {
      snprintf(text, sizeof text, "lanes 0 and %d of warp %u in block (%u,%u,%u) passed different "
               "%s to %s on line %d; every lane must pass the same pointer, ldm and layout",
               l, __gcemu_thread_rank() / 32, blockIdx.x, blockIdx.y, blockIdx.z,
               c->ptr != all[0]->ptr ? "pointers" : c->ldm != all[0]->ldm ? "ldm" : "layouts",
               what, c->line);
      __gcemu_fail_message(text);
    }
  }
  if (op != __GCEMU_WMMA_MMA) {
    char text[300];
    // A GPU wants 32 bytes (cudaMalloc gives 256); NumPy's arrays are aligned to 16 only.
    if (((uintptr_t)all[0]->ptr) % 16u) {
      snprintf(text, sizeof text, "%s on line %d got a pointer that is not aligned to 16 bytes, "
               "but a GPU needs 32 (256 bits); start each tile at a multiple of 32 bytes from the "
               "start of its array", what, all[0]->line);
      __gcemu_fail_message(text);
    }
    if ((all[0]->ldm * elem) % 16u) {
      snprintf(text, sizeof text, "%s on line %d got ldm = %u, but ldm must be a multiple of %u "
               "elements (16 bytes) for this element type", what, all[0]->line, all[0]->ldm,
               (unsigned)(16 / elem));
      __gcemu_fail_message(text);
    }
  }
  return all;
}

// Where element (r, c) of a 16 x 16 tile lies, for a layout (0: row-major) and ldm.
static inline size_t __gcemu_wmma_at(int r, int c, int layout, unsigned ldm) {
  return layout == 0 ? (size_t)r * ldm + c : (size_t)c * ldm + r;
}

// The operations that touch memory are inlined (at -O0 too), so that the race detector's
// debug information names the kernel's line of each call.
#define GCEMU_WMMA_INLINE __attribute__((always_inline)) static inline

template <class Use, class T, class L>
GCEMU_WMMA_INLINE void __gcemu_wmma_load(fragment<Use, 16, 16, 16, T, L>& f, const T* p, unsigned ldm,
                                     int layout, int line) {
  __gcemu_wmma_call mine = {&f, 0, 0, 0, p, ldm, layout, line};
  __gcemu_wmma_call* const* all = __gcemu_wmma_gather(&mine, __GCEMU_WMMA_LOAD,
                                                      "wmma::load_matrix_sync", sizeof(T));
  if (!all) return;
  for (int l = 0; l < 32; l++) {
    fragment<Use, 16, 16, 16, T, L>* g = (fragment<Use, 16, 16, 16, T, L>*)all[l]->frag;
    for (int e = 0; e < 8; e++) {
      const int k = 8 * l + e;
      g->x[e] = p[__gcemu_wmma_at(k / 16, k % 16, layout, ldm)];
    }
  }
}

template <class T>
GCEMU_WMMA_INLINE void load_matrix_sync(fragment<matrix_a, 16, 16, 16, T, row_major>& f, const T* p,
                                    unsigned ldm, int line = __builtin_LINE()) {
  __gcemu_wmma_load(f, p, ldm, 0, line);
}
template <class T>
GCEMU_WMMA_INLINE void load_matrix_sync(fragment<matrix_a, 16, 16, 16, T, col_major>& f, const T* p,
                                    unsigned ldm, int line = __builtin_LINE()) {
  __gcemu_wmma_load(f, p, ldm, 1, line);
}
template <class T>
GCEMU_WMMA_INLINE void load_matrix_sync(fragment<matrix_b, 16, 16, 16, T, row_major>& f, const T* p,
                                    unsigned ldm, int line = __builtin_LINE()) {
  __gcemu_wmma_load(f, p, ldm, 0, line);
}
template <class T>
GCEMU_WMMA_INLINE void load_matrix_sync(fragment<matrix_b, 16, 16, 16, T, col_major>& f, const T* p,
                                    unsigned ldm, int line = __builtin_LINE()) {
  __gcemu_wmma_load(f, p, ldm, 1, line);
}
template <class T>
GCEMU_WMMA_INLINE void load_matrix_sync(fragment<accumulator, 16, 16, 16, T>& f, const T* p,
                                    unsigned ldm, layout_t layout, int line = __builtin_LINE()) {
  __gcemu_wmma_load(f, p, ldm, layout == mem_col_major, line);
}

template <class T>
GCEMU_WMMA_INLINE void store_matrix_sync(T* p, const fragment<accumulator, 16, 16, 16, T>& f,
                                     unsigned ldm, layout_t layout, int line = __builtin_LINE()) {
  __gcemu_wmma_call mine = {(void*)&f, 0, 0, 0, p, ldm, layout == mem_col_major, line};
  __gcemu_wmma_call* const* all = __gcemu_wmma_gather(&mine, __GCEMU_WMMA_STORE,
                                                      "wmma::store_matrix_sync", sizeof(T));
  if (!all) return;
  for (int l = 0; l < 32; l++) {
    const fragment<accumulator, 16, 16, 16, T>* g = (const fragment<accumulator, 16, 16, 16, T>*)all[l]->frag;
    for (int e = 0; e < 8; e++) {
      const int k = 8 * l + e;
      p[__gcemu_wmma_at(k / 16, k % 16, mine.layout, ldm)] = g->x[e];
    }
  }
}

template <class Use, class T, class L, class V>
static inline void fill_fragment(fragment<Use, 16, 16, 16, T, L>& f, const V& v) {
  for (int e = 0; e < 8; e++) f.x[e] = (T)v;
}

// D = A B + C for the warp: the lane that arrives last gathers the 32 lanes' a, b and c
// elements, multiplies in float and gives each lane its elements of d.
template <class TI, class LA, class LB, class TC, class TD>
GCEMU_WMMA_INLINE void mma_sync(fragment<accumulator, 16, 16, 16, TD>& d,
                            const fragment<matrix_a, 16, 16, 16, TI, LA>& a,
                            const fragment<matrix_b, 16, 16, 16, TI, LB>& b,
                            const fragment<accumulator, 16, 16, 16, TC>& c, bool satf = false,
                            int line = __builtin_LINE()) {
  (void)satf;
  __gcemu_wmma_call mine = {&d, &a, &b, &c, 0, 0, 0, line};
  __gcemu_wmma_call* const* all = __gcemu_wmma_gather(&mine, __GCEMU_WMMA_MMA,
                                                      "wmma::mma_sync", sizeof(TI));
  if (!all) return;
  float A[16][16], B[16][16], C[16][16];
  for (int l = 0; l < 32; l++) {
    const fragment<matrix_a, 16, 16, 16, TI, LA>* fa = (const fragment<matrix_a, 16, 16, 16, TI, LA>*)all[l]->a;
    const fragment<matrix_b, 16, 16, 16, TI, LB>* fb = (const fragment<matrix_b, 16, 16, 16, TI, LB>*)all[l]->b;
    const fragment<accumulator, 16, 16, 16, TC>* fc = (const fragment<accumulator, 16, 16, 16, TC>*)all[l]->c;
    for (int e = 0; e < 8; e++) {
      const int k = 8 * l + e;
      A[k / 16][k % 16] = __gcemu_wmma_value(fa->x[e]);
      B[k / 16][k % 16] = __gcemu_wmma_value(fb->x[e]);
      C[k / 16][k % 16] = __gcemu_wmma_value(fc->x[e]);
    }
  }
  for (int l = 0; l < 32; l++) {
    fragment<accumulator, 16, 16, 16, TD>* fd = (fragment<accumulator, 16, 16, 16, TD>*)all[l]->frag;
    for (int e = 0; e < 8; e++) {
      const int i = (8 * l + e) / 16, j = (8 * l + e) % 16;
      float acc = C[i][j];
      for (int k = 0; k < 16; k++) acc = fmaf(A[i][k], B[k][j], acc);
      __gcemu_wmma_store(&fd->x[e], acc);
    }
  }
}

}  // namespace wmma
}  // namespace nvcuda

#endif  // GPUCOURSE_MMA_H
