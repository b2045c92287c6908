"""Launch checks and compile errors: one clear sentence for each mistake, with the file's lines."""
from __future__ import annotations

import numpy as np
import pytest

import gpucourse as gc
import gpucourse.kernels as gk
from gpucourse.errors import CompileError, CourseError, LaunchError

F32 = np.float32


@pytest.fixture(scope="module")
def transpose():
    return gk.load("transpose", backend="cpu").transpose_v1_naive


@pytest.fixture(scope="module")
def scalars():
    return gk.from_source(r"""
    extern "C" __global__ void scalars(float* out, float f, double d, long long ll, size_t s,
                                       unsigned u, bool b) {
      out[0] = f; out[1] = (float)d; out[2] = (float)ll; out[3] = (float)s; out[4] = (float)u;
      out[5] = b ? 1.0f : 0.0f;
    }
    extern "C" __global__ void by_reference(float& x) { x = 1.0f; }
    """, name="scalars", backend="cpu")


def args_for(rows=5, cols=7):
    x = np.random.default_rng(0).standard_normal((rows, cols), dtype=F32)
    return x, np.empty((cols, rows), F32), np.int32(rows), np.int32(cols)


@pytest.mark.parametrize("grid,block,match", [
    (1, 2048, r"block 2048 has 2048 threads, but a block may hold at most 1024 on the emulator"),
    (1, (32, 32, 2), r"block \(32, 32, 2\) has 2048 threads"),
    (0, 256, r"grid 0 has x = 0, but every grid and block dimension must be at least 1: round "
             r"the grid up"),
    (1, (32, -1), r"block \(32, -1\) has y = -1, but every grid and block dimension must be at "
                  r"least 1\."),
    (1, (1, 1, 65), r"block z is 65, but may be at most 64"),
    ((1, 1, 70000), 1, r"grid z is 70000, but may be at most 65535"),
    ((1, 65536), 1, r"grid y is 65536, but may be at most 65535"),
    (2.5, 32, r"grid must be an int or a tuple of 1 to 3 ints, not 2.5"),
    (1, (1, 2, 3, 4), r"block must be an int or a tuple of 1 to 3 ints"),
])
def test_bad_launch_configurations(transpose, grid, block, match):
    with pytest.raises(LaunchError, match=match) as info:
        transpose(grid, block, args_for())
    assert isinstance(info.value, CourseError) and isinstance(info.value, ValueError)
    assert str(info.value).startswith("transpose_v1_naive") or "must be" in str(info.value)


def test_dynamic_shared_memory_over_the_limit(transpose):
    with pytest.raises(LaunchError, match=r"shared_mem=49153 bytes of dynamic shared memory is over "
                                          r"the 49152 bytes \(48 KB\) a block may use on the emulator"):
        transpose(1, 32, args_for(), shared_mem=48 * 1024 + 1)
    with pytest.raises(LaunchError, match="shared_mem must be a whole number of bytes"):
        transpose(1, 32, args_for(), shared_mem=-4)
    transpose(1, 32, args_for(), shared_mem=48 * 1024)  # exactly the limit is fine


def test_static_shared_memory_is_limited_to_48_kb_as_cuda_limits_it():
    with pytest.raises(CompileError, match=r"^big\.cu: kernel big uses more than the 48 KB of "
                                           r"static shared memory a block may have \(131072 "
                                           r"__shared__ bytes, 49152 allowed\); use a smaller tile"):
        gk.from_source(r"""
        extern "C" __global__ void small(float* out) { out[0] = 1.0f; }
        extern "C" __global__ void big(float* out) {
          __shared__ float s[32 * 1024];
          s[threadIdx.x] = 1.0f;
          __syncthreads();
          out[threadIdx.x] = s[threadIdx.x ^ 1];
        }""", name="big.cu", backend="cpu")


def test_static_and_dynamic_shared_memory_share_the_48_kb():
    mod = gk.from_source(r"""
    extern "C" __global__ void mixed(float* out) {
      __shared__ float fixed[8192];  // 32 KB
      extern __shared__ float dynamic[];
      fixed[threadIdx.x] = 1.0f;
      dynamic[threadIdx.x] = 2.0f;
      __syncthreads();
      out[threadIdx.x] = fixed[threadIdx.x ^ 1] + dynamic[threadIdx.x ^ 1];
    }
    extern "C" __global__ void plain(float* out) { out[threadIdx.x] = 3.0f; }
    """, name="mixed.cu", backend="cpu")
    out = np.zeros(32, F32)
    mod.mixed(1, 32, (out,), shared_mem=16 * 1024)
    assert (out == 3).all()
    with pytest.raises(LaunchError, match=r"^mixed: shared_mem=16388 bytes of dynamic shared memory "
                                          r"is over the 16384 bytes \(16 KB\) a block may use on the "
                                          r"emulator beside its 32768 bytes of static __shared__ "
                                          r"memory;"):
        mod.mixed(1, 32, (out,), shared_mem=16 * 1024 + 4)
    mod.plain(1, 32, (out,), shared_mem=48 * 1024)  # the other kernel's arrays are not its own
    # The race check and the profiler hold a launch to the same limit.
    for run in (lambda: mod.mixed(1, 32, (out,), shared_mem=16 * 1024 + 4, race_check=True),
                lambda: gc.profile(mod.mixed, 1, 32, (out,), shared_mem=16 * 1024 + 4)):
        with pytest.raises(LaunchError, match=r"over the 16384 bytes \(16 KB\) a block may use"):
            run()


def test_a_python_int_for_an_int_parameter(transpose):
    x, out, rows, cols = args_for()
    with pytest.raises(LaunchError, match=r"^argument 3 `rows` of transpose_v1_naive is `int`: pass "
                                          r"np\.int32\(rows\), not a Python int"):
        transpose(1, (32, 8), (x, out, 5, cols))
    with pytest.raises(LaunchError, match=r"argument 4 `cols` .* pass np\.int32\(cols\), not np\.int64"):
        transpose(1, (32, 8), (x, out, rows, np.int64(7)))


def test_wrong_arrays(transpose):
    x, out, rows, cols = args_for()
    with pytest.raises(LaunchError, match=r"^argument 1 `in` of transpose_v1_naive is `const float\*`: "
                                          r"pass a float32 array, not a float64 array \(convert "
                                          r"with \.astype\(np\.float32\)\)\.$"):
        transpose(1, (32, 8), (x.astype(np.float64), out, rows, cols))
    with pytest.raises(LaunchError, match=r"argument 2 `out` .* pass a float32 array, not a list"):
        transpose(1, (32, 8), (x, [0.0] * 35, rows, cols))
    with pytest.raises(LaunchError, match=r"argument 1 `in` .* is not C-contiguous"):
        transpose(1, (32, 8), (np.ascontiguousarray(x.T).T, out, rows, cols))
    with pytest.raises(LaunchError, match=r"transpose_v1_naive takes 4 arguments \(in, out, rows, "
                                          r"cols\), but 3 were passed"):
        transpose(1, (32, 8), (x, out, rows))
    with pytest.raises(LaunchError, match="args must be a tuple of the kernel's arguments"):
        transpose(1, (32, 8), x)


def test_scalar_types_follow_cupys_rules(scalars):
    out = np.zeros(6, F32)
    k = scalars.scalars
    # 64-bit parameters take Python numbers, as CuPy passes them as 64 bits.
    k(1, 1, (out, F32(1.5), 2.5, -3, 4, np.uint32(5), True))
    assert list(out) == [1.5, 2.5, -3, 4, 5, 1]
    k(1, 1, (out, F32(1.5), np.float64(2.5), np.int64(-3), np.uint64(4), np.uint32(5), np.bool_(0)))
    assert out[5] == 0
    with pytest.raises(LaunchError, match=r"argument 2 `f` of scalars is `float`: pass "
                                          r"np\.float32\(f\), not a Python float \(it would be "
                                          r"passed as a 64-bit double\)"):
        k(1, 1, (out, 1.5, 2.5, -3, 4, np.uint32(5), True))
    with pytest.raises(LaunchError, match=r"argument 5 `s` .* pass np\.uint64\(s\), not a Python int"):
        k(1, 1, (out, F32(1), 2.5, -3, -4, np.uint32(5), True))
    with pytest.raises(LaunchError, match=r"argument 2 `f` .* pass np\.float32\(f\), not a float32 array"):
        k(1, 1, (out, np.ones(1, F32), 2.5, -3, 4, np.uint32(5), True))
    with pytest.raises(LaunchError, match="a reference parameter cannot be passed from Python"):
        scalars.by_reference(1, 1, (np.zeros(1, F32),))


# --------------------------------------------------------------------------- compile errors


def test_compile_errors_point_at_the_files_own_lines():
    code = ('extern "C" __global__ void k(float* x, int n) {\n'
            '  int i = threadIdx.x;\n'
            '  if (i < n) x[i] = TILE * undefined_name;\n'
            '}\n')
    with pytest.raises(CompileError) as info:
        gk.from_source(code, {"TILE": 4}, name="lab_cell", backend="cpu")
    msg = str(info.value)
    assert msg.startswith("lab_cell.cu line 3: ") and "undefined_name" in msg
    assert "x[i] = TILE * undefined_name" in msg and len(msg.splitlines()) == 2
    assert "error" in info.value.log


def test_errors_inside_the_prelude_name_the_kernel_line():
    code = ('struct Big { double a, b; };\n'
            'extern "C" __global__ void k(double* x) {\n'
            '  Big v = {x[0], x[1]};\n'
            '  v = __shfl_sync(0xffffffff, v, 0);\n'
            '  x[0] = v.a;\n'
            '}\n')
    with pytest.raises(CompileError, match=r"^big\.cu line 4: .*at most 8 bytes"):
        gk.from_source(code, name="big", backend="cpu")


@pytest.mark.parametrize("call,name", [("__vabsdiffu4(a, b)", "__vabsdiffu4"),
                                       ("__dp2a_lo(a, b, 0)", "__dp2a_lo"),
                                       ("(unsigned)cyl_bessel_i0f((float)a)", "cyl_bessel_i0f")])
def test_a_cuda_function_the_emulator_lacks_is_named(call, name):
    code = ('extern "C" __global__ void k(unsigned* x) {\n'
            '  unsigned a = x[0], b = x[1];\n'
            f'  x[2] = {call};\n'
            '}\n')
    with pytest.raises(CompileError, match=rf"^lacking\.cu line 3: CUDA has {name}\(\); the "
                                           rf"emulator does not: write it from operations it "
                                           rf"has, or run this kernel on a GPU\n"):
        gk.from_source(code, name="lacking", backend="cpu")
    with pytest.raises(CompileError, match=r"line 3: 'sinnpif' was not declared"):  # a typo
        gk.from_source(code.replace(call, "(unsigned)sinnpif(1.0f)"), name="typo", backend="cpu")


def test_a_device_function_without_a_body():
    code = ('__device__ float helper(float);\n'
            'extern "C" __global__ void k(float* x) { x[0] = helper(x[0]); }\n')
    with pytest.raises(CompileError, match=r"`helper\(float\)` is used but never defined"):
        gk.from_source(code, name="nobody", backend="cpu")


@pytest.mark.parametrize("snippet,match", [
    ("#include <curand_kernel.h>", r"the header <curand_kernel\.h>"),
    ('asm volatile("membar.gl;");', r"inline PTX assembly \(asm\)"),
    ("other<<<1, 1>>>(x);", r"launching a kernel from a kernel"),
    ("x[0] = tex2D<float>(0, 0.f, 0.f);", r"texture and surface memory \(tex2D\)"),
    ("x[0] = __shfl_down(x[0], 1);", r"the pre-CUDA-9 warp function __shfl_down\(\); use its "
                                     r"_sync form"),
    ("__nv_fp8_e4m3 h; (void)h;", r"8-bit and smaller floating-point types \(__nv_fp8_e4m3\)"),
    ("unsigned m = __activemask(); (void)m;", r"__activemask\(\); the emulator does not track"),
    ("float* p; cudaMalloc(&p, 4);", r"the host-side CUDA runtime call cudaMalloc"),
    ("auto g = cooperative_groups::coalesced_threads();",
     r"the cooperative group coalesced_threads, whose lanes are those that happen to run together"),
    ("long long c = clock();", r"clock\(\); use clock64\(\)"),
])
def test_constructs_outside_the_emulators_subset_are_named(snippet, match):
    code = ('extern "C" __global__ void other(float* x) {}\n'
            'extern "C" __global__ void k(float* x) {\n'
            f'  {snippet}\n'
            '}\n')
    line = 3
    if snippet.startswith("#"):  # an include goes above the kernel
        code = code.replace(f"  {snippet}\n", "").replace('extern "C" __global__ void k',
                                                          f'{snippet}\nextern "C" __global__ void k')
        line = 2
    with pytest.raises(CompileError, match=rf"^unsupported\.cu line {line}: the CPU emulator does "
                                           rf"not support {match}"):
        gk.from_source(code, name="unsupported", backend="cpu")


@pytest.mark.parametrize("decl,body,match", [
    ("", "__shared__ float s[1024 / warpSize]; s[0] = 1; x[0] = s[0];",
     r"line 3: warpSize is not a compile-time constant in CUDA"),
    ("", "__shared__ float s = 3.0f; x[0] = s;",
     r"line 3: a __shared__ variable cannot have an initializer"),
    ("", "__shared__ int n, m[2] = {0, 0}; x[0] = n + m[0];",
     r"line 3: a __shared__ variable cannot have an initializer"),
    ("__constant__ float c[4] = {1, 2, 3, 4};", "c[0] = 5; x[0] = c[0];",
     r"line 3: `c` is a __constant__ variable, which device code may only read"),
    ("__constant__ int c;", "c++; x[0] = c;", r"line 3: `c` is a __constant__ variable"),
    ("__constant__ float c[4];", "atomicAdd(&c[1], 1.0f);", r"line 3: `c` is a __constant__"),
    ("__constant__ float c[4];", "float* p = c; p[0] = 1;", r"line 3: `c` is a __constant__"),
    ("", "float2 v = make_float2(x[0], x[1]); v = __shfl_xor_sync(0xffffffff, v, 1);",
     r"line 3: warp shuffles move one number .* no shuffle of a float2"),
])
def test_code_cuda_rejects_is_rejected(decl, body, match):
    code = f'{decl}\nextern "C" __global__ void k(float* x) {{\n  {body}\n}}\n'
    with pytest.raises(CompileError, match=rf"^rejected\.cu {match}"):
        gk.from_source(code, name="rejected", backend="cpu")


def test_constant_variables_without_an_initializer_read_zero():
    code = ('__constant__ float c[4], d;\n'
            '__constant__ int e = 7, f[2 /* , */];\n'
            'extern "C" __global__ void k(float* x) {\n'
            '  __shared__ float s[sizeof(float) == 4 ? 32 : 64];\n'
            '  s[threadIdx.x] = c[threadIdx.x % 4] + d + e + f[1] + warpSize;\n'
            '  __syncthreads();\n'
            '  x[threadIdx.x] = s[threadIdx.x];\n'
            '}\n')
    x = np.zeros(32, F32)
    gk.from_source(code, name="constants", backend="cpu").k(1, 32, (x,))
    assert (x == 39).all()


def test_comments_and_strings_do_not_count_as_constructs():
    code = ('// __shfl_down(x, 1) was replaced; asm( too\n'
            'extern "C" __global__ void k(int* x) {\n'
            '  /* cudaMalloc( <<< */ printf("asm( __half\\n");\n'
            '  x[0] = 1;\n'
            '}\n')
    k = gk.from_source(code, name="quoted", backend="cpu").k
    x = np.zeros(1, np.int32)
    k(1, 1, (x,))
    assert x[0] == 1


@pytest.mark.parametrize("code,match", [
    ('__global__ void k(float* x) {}', r'kernel k is not declared extern "C"'),
    ('template <int N> __global__ void k(float* x) {}', r"kernel k is a template"),
    ('extern "C" __global__ int k(float* x) { return 0; }', r"kernel k must return void"),
    ('__device__ float f(float x) { return x; }', r'defines no kernel: write `extern "C" __global__'),
])
def test_kernels_must_be_callable_by_name(code, match):
    with pytest.raises(CompileError, match=match):
        gk.from_source(code, name="names", backend="cpu")


def test_extern_c_blocks_and_launch_bounds_are_understood():
    code = ('#define BLOCK 64\n'
            'extern "C" {\n'
            '__global__ void __launch_bounds__((BLOCK * 2) / 2, 1) first(int* x) { x[0] = 1; }\n'
            '__global__ void second(int* x) { x[1] = 2; }\n'
            '}\n')
    mod = gk.from_source(code, name="block", backend="cpu")
    assert mod.names == ["first", "second"]
    x = np.zeros(2, np.int32)
    mod.first(1, 1, (x,))
    mod.second(1, 1, (x,))
    assert list(x) == [1, 2]


def test_defines_must_be_identifiers():
    with pytest.raises(CompileError, match="define '1TILE' is not a C identifier"):
        gk.load("transpose", {"1TILE": 4}, backend="cpu")


def test_a_shared_array_inside_a_function_template_is_shared_memory_of_each_block():
    """g++ places a template's static local in a section of its own, outside the emulator's
    shared memory: the emulator gives it memory of the block instead, fresh in every block."""
    code = ('template <int T> __device__ void fill(float* x) {\n'
            '  __shared__ float tile[T];\n'
            '  if (blockIdx.x == 0) tile[threadIdx.x] = 1.0f;\n'
            '  __syncthreads(); x[blockIdx.x * T + threadIdx.x] = tile[T - 1 - threadIdx.x];\n'
            '}\n'
            'template <typename F> __device__ F twice(F v) { return v + v; }\n'
            'extern "C" __global__ void k(float* x) {\n'
            '  fill<32>(x); if (blockIdx.x + threadIdx.x == 0) x[0] = twice(x[0]);\n'
            '}\n')
    x = np.zeros(64, F32)
    gk.from_source(code, name="t.cu", backend="cpu").k(2, 32, (x,))
    assert x[0] == 2 and (x[1:32] == 1).all()
    assert np.isnan(x[32:]).all(), "block 1 reads its own, unwritten tile: poison, not block 0's"
