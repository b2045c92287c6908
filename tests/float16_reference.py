"""Exact references for 16-bit float arithmetic: an operation's exact rational result,
rounded once to the format (round to nearest, ties to even, unless a mode says otherwise),
with overflow to infinity and subnormals; and float32 -> bfloat16 by bit manipulation.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

FP16 = (10, 5)   # fraction bits, exponent bits
BF16 = (7, 8)


def _exponent(a: Fraction) -> int:
    """floor(log2(a)) of a positive rational, exactly."""
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    return e


def round_exact(x: Fraction, fmt, mode: str = "rn") -> float:
    """``x`` rounded once to the format ``fmt`` (FP16 or BF16), as a float64 value (every
    value of both formats is one); ``mode``: rn, rz, rd or ru."""
    mant, exp_bits = fmt
    emax = (1 << (exp_bits - 1)) - 1
    emin = 1 - emax
    if x == 0:
        return 0.0
    sign = -1 if x < 0 else 1
    a = abs(x)
    e = max(_exponent(a), emin)
    quantum = Fraction(2) ** (e - mant)
    n = a / quantum
    r = math.floor(n)
    frac = n - r
    away = (mode == "ru" and sign > 0) or (mode == "rd" and sign < 0)
    if mode == "rn":
        if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and r % 2 == 1):
            r += 1
    elif away and frac > 0:
        r += 1
    value = r * quantum
    largest = (2 - Fraction(2) ** -mant) * Fraction(2) ** emax
    if value > largest:
        return sign * (math.inf if mode == "rn" or away else float(largest))
    return sign * float(value)


def bits16(values, fmt) -> np.ndarray:
    """The 16-bit patterns of float64 ``values`` that the format holds exactly."""
    v = np.asarray(values, dtype=np.float64)
    if fmt == FP16:
        return v.astype(np.float16).view(np.uint16)
    return (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def value16(bits, fmt) -> np.ndarray:
    """float64 values of 16-bit patterns."""
    b = np.asarray(bits, dtype=np.uint16)
    with np.errstate(invalid="ignore"):
        if fmt == FP16:
            return b.view(np.float16).astype(np.float64)
        return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def float_to_bf16_bits(x) -> np.ndarray:
    """float32 -> bfloat16 rounded to nearest even, by bit manipulation: add 0x7FFF plus the
    lowest kept bit, then drop the low 16 bits (NaN: 0x7FFF)."""
    f = np.asarray(x, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    out = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(f), np.uint16(0x7FFF), out)


def agree(got_bits, want_values, fmt) -> np.ndarray:
    """Where 16-bit results agree with reference values: both NaN, both zero (either sign),
    or the same bits."""
    got = value16(got_bits, fmt)
    want = np.asarray(want_values, dtype=np.float64)
    both_nan = np.isnan(got) & np.isnan(want)
    with np.errstate(invalid="ignore"):
        zeros = (got == 0) & (want == 0)
    return both_nan | zeros | (np.asarray(got_bits, np.uint16) == bits16(want, fmt))


def reference(op, a, b, c, fmt, mode: str = "rn") -> np.ndarray:
    """Bits of ``op`` (add, sub, mul, div, fma) on 16-bit values ``a``, ``b`` (, ``c``),
    each rounded exactly; NaN where IEEE gives NaN."""
    out = []
    for i in range(len(a)):
        x, y = float(a[i]), float(b[i])
        z = float(c[i]) if c is not None else 0.0
        with np.errstate(all="ignore"):
            approx = {"add": x + y, "sub": x - y, "mul": x * y,
                      "div": np.float64(x) / np.float64(y) if y != 0 or x != 0 else math.nan,
                      "fma": x * y + z}[op]
        if op == "div" and y == 0 and x != 0 and not math.isnan(x):
            out.append(math.copysign(math.inf, x) * math.copysign(1.0, y))
            continue
        if not math.isfinite(approx) or not all(math.isfinite(v) for v in (x, y, z)):
            out.append(approx)  # infinities and NaN: IEEE's rules, no rounding
            continue
        X, Y, Z = Fraction(x), Fraction(y), Fraction(z)
        exact = {"add": lambda: X + Y, "sub": lambda: X - Y, "mul": lambda: X * Y,
                 "div": lambda: X / Y if Y else None, "fma": lambda: X * Y + Z}[op]()
        if exact is None:  # 0 / 0
            out.append(math.nan)
            continue
        out.append(round_exact(exact, fmt, mode))
    return np.asarray(out)
