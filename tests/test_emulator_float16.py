"""16-bit floats on the emulator (<cuda_fp16.h>, <cuda_bf16.h>): every operation rounds once,
to nearest even, with overflow to infinity and subnormals, as the GPU's instructions do.

Checked against NumPy's float16 (whose +, -, *, / round correctly) and against an exact
reference (float16_reference: rational arithmetic rounded once; float32 -> bfloat16 by bit
manipulation), on random bit patterns of every class (subnormals, infinities, NaN)."""
from __future__ import annotations

import numpy as np
import pytest

import gpucourse.emulator as emu
import gpucourse.kernels as gk
from float16_reference import BF16, FP16, agree, float_to_bf16_bits, reference, value16
from gpucourse.errors import CompileError

SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>

// out[5 i + k]: a + b, a - b, a * b, a / b, fma(a, b, c) of one 16-bit type.
extern "C" __global__ void half_ops(const half* a, const half* b, const half* c, half* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[5 * i + 0] = a[i] + b[i];
  out[5 * i + 1] = __hsub(a[i], b[i]);
  out[5 * i + 2] = a[i] * b[i];
  out[5 * i + 3] = __hdiv(a[i], b[i]);
  out[5 * i + 4] = __hfma(a[i], b[i], c[i]);
}

extern "C" __global__ void bf16_ops(const __nv_bfloat16* a, const __nv_bfloat16* b,
                                    const __nv_bfloat16* c, __nv_bfloat16* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[5 * i + 0] = __hadd(a[i], b[i]);
  out[5 * i + 1] = a[i] - b[i];
  out[5 * i + 2] = __hmul(a[i], b[i]);
  out[5 * i + 3] = a[i] / b[i];
  out[5 * i + 4] = __hfma(a[i], b[i], c[i]);
}

// Conversions from float in the four rounding modes, and back.
extern "C" __global__ void from_float(const float* x, half* h, __nv_bfloat16* b, float* back, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  h[4 * i + 0] = __float2half(x[i]);
  h[4 * i + 1] = __float2half_rz(x[i]);
  h[4 * i + 2] = __float2half_rd(x[i]);
  h[4 * i + 3] = __float2half_ru(x[i]);
  b[4 * i + 0] = __float2bfloat16(x[i]);
  b[4 * i + 1] = __float2bfloat16_rz(x[i]);
  b[4 * i + 2] = __float2bfloat16_rd(x[i]);
  b[4 * i + 3] = __float2bfloat16_ru(x[i]);
  back[2 * i] = __half2float(h[4 * i]);
  back[2 * i + 1] = __bfloat162float(b[4 * i]);
}

// Pairs, shuffles, atomics, comparisons and integer conversions.
extern "C" __global__ void misc(const half2* p, half2* sum, half* shuffled, half* total,
                                int* ints, __nv_bfloat162* bpair) {
  const int t = threadIdx.x;
  sum[t] = __hadd2(p[t], __halves2half2(__float2half(1.0f), __float2half(-1.0f))) * p[t];
  shuffled[t] = __shfl_down_sync(0xffffffffu, __low2half(p[t]), 1);
  atomicAdd(total, __high2half(p[t]));
  ints[3 * t] = __half2int_rn(__low2half(p[t]) * __float2half(4.0f));
  ints[3 * t + 1] = __low2half(p[t]) < __high2half(p[t]);
  ints[3 * t + 2] = __hisinf(__hdiv(__low2half(p[t]), __float2half(0.0f)));
  bpair[t] = __floats2bfloat162_rn(__low2float(p[t]), 3.0f) * __bfloat162bfloat162(__float2bfloat16(0.5f));
}
"""

MOD = gk.from_source(SOURCE, name="float16", backend="cpu")
RNG = np.random.default_rng(1616)


def _random_bits(n: int) -> np.ndarray:
    """Random 16-bit patterns, with more of the small and the large exponents mixed in."""
    bits = RNG.integers(0, 1 << 16, n).astype(np.uint16)
    special = np.array([0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00,
                        0xFC00, 0x7E00, 0x3C00, 0x3555], np.uint16)
    bits[:special.size] = special
    return bits


def _run(kernel, a, b, c, dtype):
    n = a.size
    out = np.zeros(5 * n, dtype)
    kernel((n + 127) // 128, 128, (a, b, c, out, np.int32(n)))
    return out.reshape(n, 5)


def test_half_arithmetic_matches_numpy_float16_bit_for_bit():
    n = 30_000
    a, b, c = (_random_bits(n).view(np.float16) for _ in range(3))
    out = _run(MOD.half_ops, a, b, c, np.float16)
    with np.errstate(all="ignore"):
        for k, want in enumerate([a + b, a - b, a * b, a / b]):
            ok = agree(out[:, k].view(np.uint16), want.astype(np.float64), FP16)
            assert ok.all(), (k, np.flatnonzero(~ok)[:5], a[~ok][:3], b[~ok][:3])


def test_half_fma_rounds_once_like_the_exact_reference():
    n = 2_000
    a, b, c = (_random_bits(n).view(np.float16) for _ in range(3))
    # products and sums in the subnormal and overflow ranges
    a[:200], b[:200] = np.float16(2.0 ** -12), np.float16(2.0 ** -13)
    a[200:300], b[200:300], c[200:300] = np.float16(300.0), np.float16(300.0), np.float16(-4.0)
    out = _run(MOD.half_ops, a, b, c, np.float16)
    want = reference("fma", a.astype(np.float64), b.astype(np.float64), c.astype(np.float64), FP16)
    ok = agree(out[:, 4].view(np.uint16), want, FP16)
    assert ok.all(), np.flatnonzero(~ok)[:5]
    assert np.isinf(out[200:300, 4]).all(), "90000 - 4 overflows half: inf"
    # a fused result differs from the product rounded before the add, somewhere in the sample
    with np.errstate(all="ignore"):
        unfused = (a * b + c)
        assert (out[:, 4].view(np.uint16) != unfused.view(np.uint16))[300:].any()


@pytest.mark.parametrize("k,op", list(enumerate(["add", "sub", "mul", "div", "fma"])))
def test_bfloat16_arithmetic_rounds_once_like_the_exact_reference(k, op):
    n = 1_500
    a, b, c = (_random_bits(n) for _ in range(3))
    out = _run(MOD.bf16_ops, a, b, c, np.uint16)
    fa, fb, fc = (value16(x, BF16) for x in (a, b, c))
    want = reference(op, fa, fb, fc if op == "fma" else None, BF16)
    ok = agree(out[:, k], want, BF16)
    assert ok.all(), (op, np.flatnonzero(~ok)[:5], fa[~ok][:3], fb[~ok][:3])


def test_conversions_from_float_in_every_rounding_mode():
    n = 8_000
    x = RNG.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x[:6] = [65504.0, 65520.0, 65519.996, 2.0 ** -25, 2.0 ** -24 * 1.5, 3.4e38]
    h, b = np.zeros(4 * n, np.float16), np.zeros(4 * n, np.uint16)
    back = np.zeros(2 * n, np.float32)
    MOD.from_float((n + 127) // 128, 128, (x, h, b, back, np.int32(n)))
    h, b = h.reshape(n, 4), b.reshape(n, 4)
    # to nearest: NumPy for half, the bit-manipulation reference for bfloat16
    with np.errstate(over="ignore"):
        assert agree(h[:, 0].view(np.uint16), x.astype(np.float16).astype(np.float64), FP16).all()
    assert ((b[:, 0] == float_to_bf16_bits(x)) | np.isnan(x)).all()
    assert h[0, 0] == 65504 and np.isinf(h[1, 0]) and h[2, 0] == 65504, "65520 rounds to inf"
    assert h[3, 0] == 0 and h[4, 0] == np.float16(2.0 ** -23), "ties to even in subnormals"
    from fractions import Fraction

    from float16_reference import round_exact
    finite = np.flatnonzero(np.isfinite(x))[:1500]
    for col, mode in ((1, "rz"), (2, "rd"), (3, "ru")):
        want_h = [round_exact(Fraction(float(x[i])), FP16, mode) for i in finite]
        want_b = [round_exact(Fraction(float(x[i])), BF16, mode) for i in finite]
        assert agree(h[finite, col].view(np.uint16), want_h, FP16).all(), mode
        assert agree(b[finite, col], want_b, BF16).all(), mode
    # back to float: exact
    np.testing.assert_array_equal(back[0::2][np.isfinite(x)],
                                  h[:, 0].astype(np.float32)[np.isfinite(x)])
    np.testing.assert_array_equal(back[1::2], value16(b[:, 0], BF16).astype(np.float32))


def test_pairs_shuffles_atomics_and_comparisons():
    t = 32
    p = np.round(RNG.uniform(-8, 8, 2 * t), 2).astype(np.float16)
    sum_, shuffled, total = np.zeros(2 * t, np.float16), np.zeros(t, np.float16), np.zeros(1, np.float16)
    ints, bpair = np.zeros(3 * t, np.int32), np.zeros(2 * t, np.uint16)
    MOD.misc(1, t, (p, sum_, shuffled, total, ints, bpair))
    lo, hi = p[0::2], p[1::2]
    np.testing.assert_array_equal(sum_[0::2], (lo + np.float16(1)) * lo)
    np.testing.assert_array_equal(sum_[1::2], (hi - np.float16(1)) * hi)
    np.testing.assert_array_equal(shuffled[:31], lo[1:])
    assert shuffled[31] == lo[31], "the last lane keeps its own value"
    acc = np.float16(0)
    for v in hi:  # the emulator runs the threads in order: each add rounds to half
        acc = np.float16(acc + v)
    assert total[0] == acc
    np.testing.assert_array_equal(ints[0::3], np.rint((lo * np.float16(4)).astype(np.float64)))
    np.testing.assert_array_equal(ints[1::3], (lo < hi).astype(np.int32))
    np.testing.assert_array_equal(ints[2::3], np.where(lo > 0, 1, np.where(lo < 0, -1, 0)))
    np.testing.assert_array_equal(value16(bpair[0::2], BF16),
                                  value16(float_to_bf16_bits(lo.astype(np.float32)), BF16) * 0.5)
    assert (value16(bpair[1::2], BF16) == 1.5).all()


def test_bfloat16_helpers_make_and_read_the_bits():
    x = np.array([1.0, -2.5, 3.14159, 1e-40, np.inf, np.nan], np.float32)
    bits = emu.bfloat16(x)
    np.testing.assert_array_equal(bits, float_to_bf16_bits(x))
    back = emu.bfloat16_to_float(bits)
    assert back[0] == 1 and back[1] == -2.5 and back[2] == np.float32(3.140625)
    assert np.isinf(back[4]) and np.isnan(back[5])


def test_a_bfloat16_parameter_takes_uint16_bits_and_names_them():
    x = np.zeros(4, np.float32)
    with pytest.raises(Exception, match=r"pass a uint16 array of bfloat16 bits \(gc\.emulator\."
                                        r"bfloat16\(values\) makes them\), not a float32 array"):
        MOD.bf16_ops(1, 4, (x, x, x, x, np.int32(4)))


@pytest.mark.parametrize("body,match", [
    ("__half h = __float2half(x[0]); x[0] = __half2float(h);",
     r"`__half` comes from <cuda_fp16\.h>: add #include <cuda_fp16\.h>"),
    ("x[0] = __bfloat162float(__float2bfloat16(x[0]));",
     r"`__(?:bfloat162float|float2bfloat16)` comes from <cuda_bf16\.h>"),
])
def test_a_16_bit_name_without_its_header_names_the_header(body, match):
    code = f'extern "C" __global__ void k(float* x) {{ {body} }}\n'
    with pytest.raises(CompileError, match=rf"^noheader\.cu line 1: {match}"):
        gk.from_source(code, name="noheader", backend="cpu")


def test_mixing_half_and_float_is_ambiguous_as_in_cuda():
    code = ('#include <cuda_fp16.h>\n'
            'extern "C" __global__ void k(half* x) { x[0] = x[0] + 1.0f; }\n')
    with pytest.raises(CompileError, match=r"line 2: ambiguous overload for 'operator\+'.*CUDA has "
                                           r"no mixed 16-bit and float arithmetic either"):
        gk.from_source(code, name="mixed", backend="cpu")
