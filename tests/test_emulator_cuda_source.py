"""The CUDA C people write, on the emulator: preprocessed source checks, typedef'd and struct
parameters, what nvcc includes implicitly, __shared__ memory in templates, and globals set
from Python with get_global."""
from __future__ import annotations

import numpy as np
import pytest

import gpucourse.emulator as emu
import gpucourse.kernels as gk
from gpucourse.errors import CompileError, InputError, KernelError, LaunchError

RNG = np.random.default_rng(7)


# --------------------------------------------------------------------------- preprocessing

BRANCHES = r"""
#if defined(USE_BF16)
#include <cuda_bf16.h>
typedef __nv_bfloat16 floatX;
#elif USE_TEXTURES
texture<float> never_compiled;
#else
typedef float floatX;
#endif
#if __CUDA_ARCH__ >= 800 && defined(__CUDACC__)
#define SCALE 2
#else
#define SCALE 3
#endif
extern "C" __global__ void scale(const floatX* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = (float)x[i] * SCALE;
}
"""


def test_an_unsupported_construct_in_an_inactive_branch_is_fine():
    mod = gk.from_source(BRANCHES, name="branches", backend="cpu")
    assert mod.scale.params[0].dtype == np.float32
    x = RNG.random(37).astype(np.float32)
    y = emu.empty(37)
    mod.scale(1, 64, (x, y, np.int32(37)))
    np.testing.assert_array_equal(y, x * 2), "the emulator compiles as compute capability 8.0"


def test_defines_choose_the_branch_and_the_parameter_type():
    mod = gk.from_source(BRANCHES, {"USE_BF16": 1}, name="branches", backend="cpu")
    assert mod.scale.params[0].dtype == np.uint16 and mod.scale.params[0].base == "__nv_bfloat16"
    x = np.array([1.5, -2.0, 3.0], np.float32)
    y = np.zeros(3, np.float32)
    mod.scale(1, 32, (emu.bfloat16(x), y, np.int32(3)))
    np.testing.assert_array_equal(y, 2 * x)
    with pytest.raises(CompileError, match=r"^branches\.cu line 6: the CPU emulator does not "
                                           r"support texture and surface memory \(texture\)"):
        gk.from_source(BRANCHES, {"USE_TEXTURES": 1}, name="branches", backend="cpu")


TYPES = r"""
typedef unsigned int u32;
typedef uint4 vec_t;
using real = double;
#define INDEX int
typedef float* fptr;
extern "C" __global__ void types(uint n, u32 m, const vec_t* v, real* out, INDEX k, fptr f) {
  const uint i = threadIdx.x;
  if (i < n) out[i] = v[i].x + v[i].y + v[i].z + v[i].w + m + k + f[0] + UINT_MAX % 7
                    + (INT_MIN < 0) + (FLT_MAX > 1e38f) + (uint8_t)300 + sizeof(int64_t)
                    + fminf(2.0f, 3.0f) + std::numeric_limits<short>::max() % 10;
}
"""


def test_typedef_using_and_macro_parameter_types_and_nvccs_implicit_headers():
    k = gk.from_source(TYPES, name="types", backend="cpu").types
    dtypes = [(p.dtype, p.pointer, p.lanes) for p in k.params]
    assert dtypes == [(np.uint32, False, 1), (np.uint32, False, 1), (np.uint32, True, 4),
                      (np.float64, True, 1), (np.int32, False, 1), (np.float32, True, 1)]
    v = RNG.integers(0, 9, (4, 4)).astype(np.uint32)
    out = np.zeros(4)
    k(1, 4, (np.uint32(4), np.uint32(10), v, out, np.int32(-3), np.array([0.5], np.float32)))
    implicit = 4294967295 % 7 + 1 + 1 + 44 + 8 + 2 + 32767 % 10
    np.testing.assert_array_equal(out, v.sum(1) + 10 - 3 + 0.5 + implicit)


# --------------------------------------------------------------------------- templates

TEMPLATES = r"""
// A block reduction helper with its own __shared__ array, in a function template.
template <class T, int BLOCK> __device__ T block_sum(T v) {
  __shared__ T partial[BLOCK];
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  T total = partial[0];
  __syncthreads();
  return total;
}

// The SharedMemory<T> pattern: dynamic shared memory seen as T, one name per type.
template <class T> struct SharedMemory {
  __device__ operator T*() { extern __shared__ int smem_int[]; return (T*)smem_int; }
};
template <> struct SharedMemory<double> {
  __device__ operator double*() { extern __shared__ double smem_double[]; return smem_double; }
};

// A class template whose member function keeps a static __shared__ tile.
template <int TILE> struct Transposer {
  __device__ void run(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    if (x < cols && y < rows) tile[threadIdx.y][threadIdx.x] = in[y * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x; y = blockIdx.x * TILE + threadIdx.y;
    if (x < rows && y < cols) out[y * rows + x] = tile[threadIdx.x][threadIdx.y];
  }
};

// A tiled matmul templated on its tile, instantiated by extern "C" wrappers.
template <int TILE> __device__ void matmul(const float* A, const float* B, float* C, int n) {
  __shared__ float sA[TILE][TILE], sB[TILE][TILE];
  const int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int t = 0; t < (n + TILE - 1) / TILE; t++) {
    sA[threadIdx.y][threadIdx.x] = (row < n && t * TILE + threadIdx.x < n) ? A[row * n + t * TILE + threadIdx.x] : 0.0f;
    sB[threadIdx.y][threadIdx.x] = (col < n && t * TILE + threadIdx.y < n) ? B[(t * TILE + threadIdx.y) * n + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < TILE; k++) acc += sA[threadIdx.y][k] * sB[k][threadIdx.x];
    __syncthreads();
  }
  if (row < n && col < n) C[row * n + col] = acc;
}

extern "C" __global__ void sums(const float* x, const int* xi, float* out, int* outi) {
  const int i = blockIdx.x * 64 + threadIdx.x;
  const float s = block_sum<float, 64>(x[i]);
  const int si = block_sum<int, 64>(xi[i]);
  if (threadIdx.x == 0) { out[blockIdx.x] = s; outi[blockIdx.x] = si; }
}
extern "C" __global__ void reverse_dynamic(const double* x, double* y, int n) {
  double* s = SharedMemory<double>();
  float* f = SharedMemory<float>();
  (void)f;
  s[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  y[blockIdx.x * blockDim.x + threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}
extern "C" __global__ void transpose16(const float* in, float* out, int rows, int cols) {
  Transposer<16>().run(in, out, rows, cols);
}
extern "C" __global__ void matmul8(const float* A, const float* B, float* C, int n) { matmul<8>(A, B, C, n); }
extern "C" __global__ void matmul16(const float* A, const float* B, float* C, int n) { matmul<16>(A, B, C, n); }
extern "C" __global__ void too_big(float* x) {
  __shared__ float mine[8192];
  mine[threadIdx.x] = 1.0f;
  x[threadIdx.x] = block_sum<double, 4096>(mine[threadIdx.x]);
}
"""
TMPL = gk.from_source(TEMPLATES, name="templates", backend="cpu")


def test_shared_arrays_of_function_templates_per_type_and_per_block():
    x = RNG.random(64 * 5).astype(np.float32)
    xi = RNG.integers(-50, 50, 64 * 5).astype(np.int32)
    out, outi = emu.empty(5), np.zeros(5, np.int32)
    TMPL.sums(5, 64, (x, xi, out, outi))
    np.testing.assert_allclose(out, x.reshape(5, 64).sum(1), rtol=1e-5)
    np.testing.assert_array_equal(outi, xi.reshape(5, 64).sum(1))


def test_the_shared_memory_pattern_and_a_class_templates_tile():
    x = RNG.random(96)
    y = np.zeros(96)
    TMPL.reverse_dynamic(3, 32, (x, y, np.int32(96)), shared_mem=32 * 8)
    np.testing.assert_array_equal(y, x.reshape(3, 32)[:, ::-1].reshape(-1))
    for rows, cols in [(33, 17), (16, 16), (1, 40)]:
        a = RNG.random((rows, cols)).astype(np.float32)
        out = emu.empty((cols, rows))
        TMPL.transpose16(((cols + 15) // 16, (rows + 15) // 16), (16, 16),
                         (a, out, np.int32(rows), np.int32(cols)))
        np.testing.assert_array_equal(out, a.T)


@pytest.mark.parametrize("kernel,tile,n", [("matmul8", 8, 37), ("matmul16", 16, 33), ("matmul16", 16, 16)])
def test_kernels_templated_on_their_tile_size(kernel, tile, n):
    A, B = RNG.standard_normal((n, n)).astype(np.float32), RNG.standard_normal((n, n)).astype(np.float32)
    C = emu.empty((n, n))
    TMPL[kernel](((n + tile - 1) // tile,) * 2, (tile, tile), (A, B, C, np.int32(n)))
    ref = A.astype(np.float64) @ B.astype(np.float64)
    assert (np.abs(C - ref) <= n * 2.0 ** -23 * (np.abs(A) @ np.abs(B))).all()


def test_template_shared_memory_counts_against_the_48_kb_of_a_block():
    with pytest.raises(KernelError, match=r"kernel too_big: the __shared__ array `partial` \(32768 "
                                          r"bytes, in a template or inline function\) does not fit in "
                                          r"the 48 KB of shared memory a block may have"):
        TMPL.too_big(1, 32, (np.zeros(32, np.float32),))


def test_template_shared_memory_shares_the_48_kb_with_its_own_kernels_arrays_only():
    """Other kernels' static arrays in the same file are not charged to this kernel's block."""
    code = ('template <int N> __device__ float twice(float v) {\n'
            '  __shared__ float t[N]; t[threadIdx.x] = v; __syncthreads(); return 2 * t[threadIdx.x];\n'
            '}\n'
            'extern "C" __global__ void big1(float* x) { __shared__ float a[10000]; a[0] = 1; x[0] = a[0]; }\n'
            'extern "C" __global__ void big2(float* x) { __shared__ float b[10000]; b[0] = 2; x[0] = b[0]; }\n'
            'extern "C" __global__ void small(float* x) { x[threadIdx.x] = twice<1536>(x[threadIdx.x]); }\n')
    mod = gk.from_source(code, name="shares", backend="cpu")
    x = np.ones(32, np.float32)
    mod.small(1, 32, (x,))
    assert (x == 2).all()
    mod.big1(1, 1, (x,))
    assert x[0] == 1


def test_a_race_on_template_shared_memory_is_found_and_named():
    racy = TEMPLATES.replace("    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];\n"
                             "    __syncthreads();\n",
                             "    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];\n")
    mod = gk.from_source(racy, name="racy_template", backend="cpu")
    x, xi = np.ones(64, np.float32), np.ones(64, np.int32)
    with pytest.raises(KernelError, match=r"kernel sums has a race.* at racy_template\.cu line 8 "
                                          r"\(`if \(threadIdx\.x < s\) partial\[threadIdx\.x\] \+= "
                                          r"partial\[threadIdx\.x \+ s\];`\)"):
        mod.sums(1, 64, (x, xi, np.zeros(1, np.float32), np.zeros(1, np.int32)), race_check=True)


# --------------------------------------------------------------------------- structs

STRUCTS = r"""
struct CSR { const int* row_ptr; const int* cols; const float* vals; int rows; };
typedef struct { float scale; int shift; float bias[3]; } Params;
extern "C" __global__ void spmv(CSR m, const float* x, float* y) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= m.rows) return;
  float acc = 0.0f;
  for (int k = m.row_ptr[r]; k < m.row_ptr[r + 1]; k++) acc += m.vals[k] * x[m.cols[k]];
  y[r] = acc;
}
extern "C" __global__ void affine(Params p, float4 w, const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = p.scale * x[i] + p.shift + p.bias[i % 3] + w.x + 10 * w.w;
}
extern "C" __global__ void by_pointer(const Params* p, float* y) { y[threadIdx.x] = p->bias[threadIdx.x % 3]; }
"""
STR = gk.from_source(STRUCTS, name="structs", backend="cpu")
CSR = np.dtype([("row_ptr", np.uintp), ("cols", np.uintp), ("vals", np.uintp), ("rows", np.int32)],
               align=True)
PARAMS = np.dtype([("scale", np.float32), ("shift", np.int32), ("bias", np.float32, 3)], align=True)
FLOAT4 = np.dtype([("x", "f4"), ("y", "f4"), ("z", "f4"), ("w", "f4")])


@pytest.mark.parametrize("rows,density", [(1, 0.5), (37, 0.1), (130, 0.03)])
def test_a_csr_struct_passed_by_value(rows, density):
    dense = (RNG.random((rows, 41)) < density) * RNG.standard_normal((rows, 41))
    dense = dense.astype(np.float32)
    row_ptr = np.concatenate([[0], np.cumsum((dense != 0).sum(1))]).astype(np.int32)
    cols = np.nonzero(dense)[1].astype(np.int32)
    vals = dense[np.nonzero(dense)].astype(np.float32)
    m = np.array((gk.pointer(row_ptr), gk.pointer(cols), gk.pointer(vals), rows), dtype=CSR)[()]
    x, y = RNG.standard_normal(41).astype(np.float32), emu.empty(rows)
    STR.spmv((rows + 63) // 64, 64, (m, x, y))
    np.testing.assert_allclose(y, dense @ x, rtol=1e-5, atol=1e-5)


def test_structs_and_vector_types_by_value_and_a_struct_by_pointer():
    p = np.array((2.0, 3, (0.25, 0.5, 0.75)), dtype=PARAMS)[()]
    w = np.array((1.0, 0.0, 0.0, 2.0), dtype=FLOAT4)[()]
    x, y = RNG.random(10).astype(np.float32), np.zeros(10, np.float32)
    STR.affine(1, 32, (p, w, x, y, np.int32(10)))
    np.testing.assert_allclose(y, 2 * x + 3 + np.tile([0.25, 0.5, 0.75], 4)[:10] + 21, rtol=1e-6)
    raw = np.frombuffer(p.tobytes(), np.uint8).copy()  # a struct's bytes through its pointer
    out = np.zeros(3, np.float32)
    STR.by_pointer(1, 3, (raw, out))
    np.testing.assert_array_equal(out, [0.25, 0.5, 0.75])


@pytest.mark.parametrize("arg,match", [
    (np.float32(1), r"argument 1 `p` of affine is `Params`: pass a NumPy structured scalar of 20 "
                    r"bytes, e\.g\. np\.array\(\(\.\.\.\), dtype=np\.dtype\(\[\(name, type\), \.\.\.\], "
                    r"align=True\)\)\[\(\)\], with the struct's fields in order, not np\.float32"),
    (np.array((1.0, 2), dtype=[("a", "f4"), ("b", "i4")])[()],
     r"argument 1 `p` of affine is `Params`: the structured scalar has 8 bytes but `Params` has 20"),
])
def test_a_struct_argument_that_does_not_fit_is_one_sentence(arg, match):
    w = np.zeros((), FLOAT4)[()]
    with pytest.raises(LaunchError, match=match):
        STR.affine(1, 32, (arg, w, np.zeros(1, np.float32), np.zeros(1, np.float32), np.int32(1)))


# --------------------------------------------------------------------------- get_global

GLOBALS = r"""
#define R 2
struct Weights { float w[2 * R + 1]; float bias; };
__constant__ float c_filter[2 * R + 1][2 * R + 1];
__constant__ Weights c_weights;
__constant__ int c_len;
__device__ unsigned int hits;
extern "C" __global__ void conv2d(const float* in, float* out, int rows, int cols) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= cols || y >= rows) return;
  float acc = 0.0f;
  for (int dy = -R; dy <= R; dy++)
    for (int dx = -R; dx <= R; dx++) {
      const int yy = y + dy, xx = x + dx;
      if (yy >= 0 && yy < rows && xx >= 0 && xx < cols) acc += c_filter[dy + R][dx + R] * in[yy * cols + xx];
    }
  out[y * cols + x] = acc;
  atomicAdd(&hits, 1u);
}
extern "C" __global__ void weighted(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = c_weights.w[i % (2 * R + 1)] * in[i] + c_weights.bias;
}
extern "C" __global__ void copy_len(const float* in, float* out) {
  const int i = threadIdx.x;
  if (i < c_len) out[i] = in[i];
}
"""
GLB = gk.from_source(GLOBALS, name="globals", backend="cpu")


def _conv2d_reference(a, f):
    rows, cols = a.shape
    r = f.shape[0] // 2
    padded = np.pad(a.astype(np.float64), r)
    return sum(f[dy, dx] * padded[dy:dy + rows, dx:dx + cols]
               for dy in range(f.shape[0]) for dx in range(f.shape[1]))


@pytest.mark.parametrize("rows,cols", [(17, 31), (1, 5), (40, 3)])
def test_a_constant_filter_set_from_python_is_what_the_kernel_reads(rows, cols):
    f = RNG.standard_normal((5, 5)).astype(np.float32)
    g = GLB.get_global("c_filter")
    assert g.shape == (5, 5) and g.dtype == np.float32
    g[...] = f
    GLB.get_global("hits")[...] = 0
    a = RNG.standard_normal((rows, cols)).astype(np.float32)
    out = emu.empty((rows, cols))
    GLB.conv2d(((cols + 7) // 8, (rows + 7) // 8), (8, 8), (a, out, np.int32(rows), np.int32(cols)))
    np.testing.assert_allclose(out, _conv2d_reference(a, f), rtol=1e-5, atol=1e-5)
    assert int(GLB.get_global("hits")) == rows * cols, "a __device__ variable read back"


def test_a_struct_constant_and_set_global():
    w = GLB.get_global("c_weights").view(np.dtype([("w", "f4", 5), ("bias", "f4")]))
    w["w"], w["bias"] = [1, 2, 3, 4, 5], 0.5
    x, y = RNG.random(12).astype(np.float32), np.zeros(12, np.float32)
    GLB.weighted(1, 32, (x, y, np.int32(12)))
    np.testing.assert_allclose(y, np.tile([1, 2, 3, 4, 5], 3)[:12] * x + 0.5, rtol=1e-6)
    GLB.set_global("c_filter", np.ones((5, 5)))
    assert (GLB.get_global("c_filter") == 1).all()
    with pytest.raises(InputError, match=r"c_filter holds \(5, 5\) of float32, so set it from an "
                                         r"array of that shape"):
        GLB.set_global("c_filter", np.ones(25))
    with pytest.raises(InputError, match=r"globals\.cu has no __constant__ or __device__ variable "
                                         r"named 'c_filt' outside every namespace; it has: c_filter, "
                                         r"c_weights, c_len, hits\."):
        GLB.get_global("c_filt")


def test_the_race_detector_runs_with_the_values_python_set():
    """A bound read from constant memory drives the index: the detector's own build must see
    the 20 that Python set (not 0) to name the line that reads past the 10 elements."""
    GLB.set_global("c_len", 20)
    x, y = RNG.random(10).astype(np.float32), np.zeros(10, np.float32)
    try:
        with pytest.raises(emu.OutOfBounds, match=r"kernel copy_len: thread \(10,0,0\) of block "
                                                  r"\(0,0,0\) reads `in` out of bounds at globals\.cu "
                                                  r"line 27"):
            GLB.copy_len(1, 32, (x, y))
    finally:
        GLB.set_global("c_len", 10)
    GLB.copy_len(1, 32, (x, y), race_check=True)
    np.testing.assert_array_equal(y, x)
