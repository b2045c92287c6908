"""bfloat16 values for kernels, as uint16 bits: NumPy has no bfloat16 type, so an
``__nv_bfloat16*`` parameter takes a uint16 array of the bits (on the emulator and on a GPU
alike)."""
from __future__ import annotations

import numpy as np


def bfloat16(values) -> np.ndarray:
    """``values`` rounded to bfloat16 (to nearest, ties to even, as ``__float2bfloat16``),
    as uint16 bits; NaN becomes the canonical 0x7FFF."""
    x = np.ascontiguousarray(np.asarray(values, dtype=np.float32))
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # an overflow carries into infinity
    out = rounded.astype(np.uint16)
    out[np.isnan(x)] = 0x7FFF
    return out


def bfloat16_to_float(bits) -> np.ndarray:
    """The float32 values of bfloat16 ``bits`` (a uint16 array), exactly."""
    b = np.asarray(bits)
    if b.dtype != np.uint16:
        raise TypeError(f"bfloat16 bits come as a uint16 array, not {b.dtype}")
    return (b.astype(np.uint32) << 16).view(np.float32)
