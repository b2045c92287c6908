"""bias_gelu.cu and bias_gelu_backward.cu in Python: y = gelu(x + bias[col]) for a row-major
(rows x cols) x, and its backward dx = dy * gelu'(x + bias[col]) (the exact, erf GELU).

Both files hold one version each. Here: which file holds a version, how to launch it (one
thread per element, no shared memory), the float64 references, the bytes and FLOPs a pass
moves and the bound a result is checked with; chapter 7's custom operator and the kernel
tests ask here.
"""
from __future__ import annotations

import math

import numpy as np

from .. import precision
from ..emulator.launch import ceil_div
from .shape import Launch, known_version

#: Each version and the file that holds it: the forward, then the backward.
FILES = {"bias_gelu_v1_fused": "bias_gelu",
         "bias_gelu_backward_v1_fused": "bias_gelu_backward"}
VERSIONS = tuple(FILES)
#: Threads per block of the custom operator's launches.
BLOCK = 256
#: Float32 roundings a result may be off by, in units of its scale (``scale``): an addition,
#: erf or exp (libm: 1-2 ulp) and a few multiplies, in any order.
ROUNDINGS = 16


def launch(version: str, n: int, block: int = BLOCK) -> Launch:
    """One thread per element of ``n``: ceil(n / block) blocks of ``block`` threads."""
    known_version(version, VERSIONS, "bias_gelu")
    return Launch(ceil_div(n, block), block)


def _v(x, bias) -> np.ndarray:
    x, b = np.asarray(x, np.float64), np.asarray(bias, np.float64).reshape(-1)
    return (x.reshape(-1, b.size) + b).reshape(x.shape)


def _cdf(v: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + np.vectorize(math.erf)(v / math.sqrt(2)))


def reference(x, bias) -> np.ndarray:
    """gelu(x + bias[col]) in float64 (x row-major, bias one value per column)."""
    v = _v(x, bias)
    return v * _cdf(v)


def reference_backward(dy, x, bias) -> np.ndarray:
    """dy * gelu'(x + bias[col]) in float64, gelu'(v) = Phi(v) + v phi(v)."""
    v = _v(x, bias)
    return np.asarray(dy, np.float64) * (_cdf(v) + v * np.exp(-0.5 * v * v) / math.sqrt(2 * math.pi))


def scale(x, bias, dy=None) -> np.ndarray:
    """The size of the terms a result adds, which its error is measured against: |y| + |v| for
    the forward, |dy| (1 + |v|) for the backward (v = x + bias[col])."""
    v = np.abs(_v(x, bias))
    if dy is None:
        return np.abs(reference(x, bias)) + v
    return np.abs(np.asarray(dy, np.float64)) * (1 + v)


def bound(scale):
    """The largest error a correct result may have, elementwise: ROUNDINGS float32 roundings
    of ``scale`` (a NumPy array or a tensor)."""
    return ROUNDINGS * precision.U32 * scale + 1e-30


def bytes_moved(n: int, backward: bool = False, itemsize: int = 4) -> float:
    """Bytes one fused pass over ``n`` elements moves: x read and y written (the backward also
    reads dy); the bias is one row, read from cache."""
    return (3.0 if backward else 2.0) * itemsize * n
