"""Section 1, number formats: each format's bit layout, range and spacing (from ``torch.finfo``
where PyTorch has the dtype), what storing a value in it keeps (:func:`round_to`, the ruler of
the chapter), and the table of rounding errors measured on random data."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from ...check.compare import assert_close
from ...display import Table
from ...errors import whole_number
from .int8 import int8_symmetric


@dataclass(frozen=True)
class NumberFormat:
    """One number format: bit layout, range and spacing."""

    name: str
    bits: int
    exponent_bits: int
    mantissa_bits: int
    max: float
    min_normal: float
    min_subnormal: float
    eps: float
    used_for: str
    torch_dtype: str | None = None

    @property
    def dynamic_range_decades(self) -> float:
        """log10(max / smallest positive value): how many powers of ten fit."""
        return math.log10(self.max / self.min_subnormal)


def _float_format(name, dtype, used_for, exponent_bits, mantissa_bits) -> NumberFormat:
    fi = torch.finfo(dtype)
    return NumberFormat(name=name, bits=fi.bits, exponent_bits=exponent_bits,
                        mantissa_bits=mantissa_bits, max=float(fi.max),
                        min_normal=float(fi.smallest_normal),
                        min_subnormal=float(fi.smallest_normal) * 2.0 ** -mantissa_bits,
                        eps=float(fi.eps), used_for=used_for,
                        torch_dtype=str(dtype).replace("torch.", ""))


@functools.lru_cache(maxsize=1)
def formats() -> dict[str, NumberFormat]:
    """FP32, TF32, FP16, BF16, the two FP8 formats and INT8, from torch.finfo where torch has the dtype."""
    out = {
        "fp32": _float_format("fp32", torch.float32, "default for weights, optimizer state, "
                              "reductions, losses", 8, 23),
        # TF32 is not a storage type: FP32 values whose mantissa a tensor core rounds to 10 bits
        # before it multiplies (products are accumulated in FP32).
        "tf32": NumberFormat("tf32", 19, 8, 10, float((2 - 2 ** -10) * 2.0 ** 127), 2.0 ** -126,
                             2.0 ** -136, 2.0 ** -10, "FP32 matmuls on tensor cores (cc >= 8.0), "
                             "opt-in in PyTorch"),
        "fp16": _float_format("fp16", torch.float16, "mixed-precision training with loss "
                              "scaling (cc 7.x), inference", 5, 10),
        "bf16": _float_format("bf16", torch.bfloat16, "mixed-precision training without loss "
                              "scaling (cc >= 8.0), inference", 8, 7),
    }
    if hasattr(torch, "float8_e4m3fn"):
        out["fp8_e4m3"] = _float_format("fp8_e4m3", torch.float8_e4m3fn,
                                        "forward activations and weights on cc >= 8.9", 4, 3)
        out["fp8_e5m2"] = _float_format("fp8_e5m2", torch.float8_e5m2,
                                        "gradients on cc >= 8.9 (more range, less precision)", 5, 2)
    # INT8 holds integers -128..127; a scale s maps them to real values s*q. With a symmetric
    # scale the usable range is s..127s: 127 steps of equal size s.
    out["int8"] = NumberFormat("int8", 8, 0, 7, 127.0, 1.0, 1.0, 1.0,
                               "inference weights and activations, with a scale per tensor "
                               "or per channel", "int8")
    return out


def round_to(x: torch.Tensor, fmt: str) -> torch.Tensor:
    """``x`` (FP32) rounded to ``fmt`` and back to FP32: what storing it in that format keeps."""
    x = x.to(torch.float32)
    if fmt == "fp32":
        return x.clone()
    if fmt == "tf32":
        # Round to nearest even on the 13 mantissa bits TF32 drops.
        bits = x.contiguous().view(torch.int32)
        lsb = (bits >> 13) & 1
        rounded = (bits + 0x0FFF + lsb) & ~0x1FFF
        return rounded.view(torch.float32)
    if fmt == "int8":
        q, scale = int8_symmetric(x)
        return q.float() * scale
    fi = formats()[fmt]
    dtype = getattr(torch, {"fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}.get(
        fmt, fi.torch_dtype))
    if fmt.startswith("fp8"):
        x = x.clamp(-fi.max, fi.max)  # FP8 casts do not saturate; scaled FP8 recipes clamp
    return x.to(dtype).to(torch.float32)


def format_table(n: int = 100_003, seed: int = 0) -> Table:
    """Each format's layout, range and spacing, with the rounding error measured on random data.

    The error column stores ``n`` log-uniform magnitudes in [1e-3, 1e3) (a range FP16 and the
    FP8 formats cover, so it measures precision, not range) in each format and reports the
    median relative error. INT8 uses one scale for the whole tensor, so its small values lose
    almost everything: the reason INT8 needs careful scales.
    """
    whole_number(n, "n", "100_003")
    g = torch.Generator().manual_seed(seed)
    x = torch.exp(torch.empty(n).uniform_(math.log(1e-3), math.log(1e3), generator=g))
    x = x * torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0)
    rows = []
    for name, f in formats().items():
        err = ((round_to(x, name) - x).abs() / x.abs()).median().item()
        rows.append({"format": name, "bits": f.bits, "exponent": f.exponent_bits,
                     "mantissa": f.mantissa_bits, "max": f.max, "smallest normal": f.min_normal,
                     "smallest subnormal": f.min_subnormal, "spacing at 1 (eps)": f.eps,
                     "median rel. rounding error": float(err), "used for": f.used_for})
    return Table(rows, caption="Number formats (INT8 row: integers, range and spacing in units of its scale)")


def check_rounding() -> None:
    """round_to agrees with the formats' definitions on edge values (it is the ruler of this chapter)."""
    # One rounding of single values, no sums: the results are exact powers of two and
    # representable numbers, so they match to the bit (the tolerances only absorb printing).
    f16 = formats()["fp16"]
    t = torch.tensor([1.0, 1.0 + 2 ** -11, 65504.0, 2.0 ** -24, 2.0 ** -26, 2.0 ** -14 + 2.0 ** -25])
    got = round_to(t, "fp16")
    want = torch.tensor([1.0, 1.0, 65504.0, 2.0 ** -24, 0.0, 2.0 ** -14])
    assert_close(got, want, rtol=1e-6, atol=0, name="fp16 rounding")
    assert torch.isinf(round_to(torch.tensor([1e5]), "fp16")).all(), "fp16 must overflow above 65504"
    assert f16.min_subnormal == 2.0 ** -24
    # TF32 keeps 10 mantissa bits: 1 + 2^-10 survives, 1 + 2^-12 does not; 3e38 moves by at
    # most half a TF32 step (2^-11 of itself), which is the tolerance.
    t = torch.tensor([1 + 2.0 ** -10, 1 + 2.0 ** -12, 3.0e38, -2.5])
    assert_close(round_to(t, "tf32"), torch.tensor([1 + 2.0 ** -10, 1.0, 3.0e38, -2.5]),
                 rtol=2 ** -11, atol=0, name="tf32 rounding")
    assert_close(round_to(torch.tensor([1 + 2.0 ** -8]), "bf16"), torch.tensor([1.0]),
                 rtol=0, atol=0, name="bf16 rounding")
