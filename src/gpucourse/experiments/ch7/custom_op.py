"""The course's fused bias + GELU kernel as a PyTorch custom operator (``torch.library``).

``torch.ops.gpucourse.bias_gelu(x, bias)`` is one operator to PyTorch: eager mode calls it,
``torch.compile`` keeps it in its graph as one opaque call (its ``register_fake`` tells the
compiler the output's shape and dtype without running it), and autograd differentiates it
through ``register_autograd`` with a second operator for the backward. On a GPU both run the
course's CUDA C kernels (``kernels/bias_gelu.cu``, ``kernels/bias_gelu_backward.cu``) through
CuPy on PyTorch's current stream. Elsewhere they run a CPU fallback made of PyTorch's own
operations (not fused), and :func:`check_kernels_on_emulator` runs the CUDA C kernels on the
CPU emulator against that fallback, so the code a GPU would run is checked here too.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ... import kernels
from ...kernels import bias_gelu as bias_gelu_cu


def _fp32(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float32).contiguous()


def _cuda_launch(file: str, kernel: str, out: torch.Tensor, *inputs: torch.Tensor, cols: int):
    """Launch a course kernel through CuPy on PyTorch's current CUDA stream (no copies)."""
    import cupy as cp

    k = getattr(kernels.load(file, backend="cuda"), kernel)
    n = out.numel()
    shape = bias_gelu_cu.launch(kernel, n)
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    args = tuple(cp.asarray(t) for t in (*inputs, out)) + (np.int32(n), np.int32(cols))
    k((shape.grid,), (shape.block,), args, stream=stream)
    return out


@torch.library.custom_op("gpucourse::bias_gelu", mutates_args=())
def bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """gelu(x + bias), bias broadcast over the last dimension (CPU fallback: PyTorch's ops)."""
    return F.gelu(x.float() + bias.float()).to(x.dtype)


@bias_gelu.register_kernel("cuda")
def _bias_gelu_cuda(x, bias):
    y = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    _cuda_launch("bias_gelu", "bias_gelu_v1_fused", y, _fp32(x), _fp32(bias), cols=bias.numel())
    return y.to(x.dtype)


@bias_gelu.register_fake
def _bias_gelu_fake(x, bias):
    return torch.empty_like(x)


@torch.library.custom_op("gpucourse::bias_gelu_backward", mutates_args=())
def bias_gelu_backward(dy: torch.Tensor, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """dy * gelu'(x + bias) (CPU fallback: PyTorch's gelu_backward)."""
    return torch.ops.aten.gelu_backward(dy.float(), x.float() + bias.float()).to(x.dtype)


@bias_gelu_backward.register_kernel("cuda")
def _bias_gelu_backward_cuda(dy, x, bias):
    dx = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    _cuda_launch("bias_gelu_backward", "bias_gelu_backward_v1_fused", dx, _fp32(dy), _fp32(x),
                 _fp32(bias), cols=bias.numel())
    return dx.to(x.dtype)


@bias_gelu_backward.register_fake
def _bias_gelu_backward_fake(dy, x, bias):
    return torch.empty_like(x)


def _setup_context(ctx, inputs, output):
    x, bias = inputs
    ctx.save_for_backward(x, bias)


def _backward(ctx, dy):
    x, bias = ctx.saved_tensors
    dx = bias_gelu_backward(dy, x, bias)
    # The bias was added to every row: its gradient is the sum of dx over them.
    dbias = dx.reshape(-1, bias.numel()).sum(0, dtype=torch.float32).to(bias.dtype)
    return dx, dbias


bias_gelu.register_autograd(_backward, setup_context=_setup_context)


def custom_bias_gelu(h, bias):
    """The model's bias + GELU through the custom operator."""
    return torch.ops.gpucourse.bias_gelu(h, bias)


def where_it_runs(dev: str) -> str:
    """One sentence: which code the operator runs on ``dev``."""
    if dev == "cuda":
        return ("on this GPU the operator runs the course's CUDA C kernels bias_gelu_v1_fused and "
                "bias_gelu_backward_v1_fused through CuPy, one pass each")
    return ("on this CPU the operator runs its CPU fallback (PyTorch's add and GELU, not fused); "
            "the CUDA C kernels it runs on a GPU were checked on the emulator against it")


def check_kernels_on_emulator(rows: int = 37, cols: int = 96, seed: int = 7) -> float:
    """Run the course's two CUDA C kernels on the CPU emulator against the CPU fallback on an
    awkward shape; return the largest difference, raise when it is over the bound.

    Bound: the kernel and the fallback each compute gelu(x + b) from the same float32 inputs
    with a handful of float32 roundings (an addition, erf or exp, three multiplies): within
    16 units of float32 rounding (2^-24) of the result's scale, |y| + |x + b| (for the
    backward |dy| (1 + |x + b|), the size of the terms Phi(v) and v phi(v) it adds), which
    covers libm's erf/exp (1-2 ulp) and any order.
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=g) * 3
    bias = torch.randn(cols, generator=g)
    dy = torch.randn(rows, cols, generator=g)
    n = rows * cols
    worst = 0.0
    for name, inputs, want in (
            ("bias_gelu_v1_fused", (x, bias), bias_gelu(x, bias)),
            ("bias_gelu_backward_v1_fused", (dy, x, bias), bias_gelu_backward(dy, x, bias))):
        k = getattr(kernels.load(bias_gelu_cu.FILES[name], backend="cpu"), name)
        out = np.full(n, np.nan, np.float32)
        arrays = tuple(np.ascontiguousarray(t.numpy().reshape(-1)) for t in inputs)
        bias_gelu_cu.launch(name, n).run(k, (*arrays, out, np.int32(n), np.int32(cols)))
        got = torch.from_numpy(out).reshape(rows, cols)
        v = (x + bias).abs()
        scale = dy.abs() * (1 + v) if len(inputs) == 3 else want.abs() + v
        err = (got - want).abs()
        bound = bias_gelu_cu.bound(scale)
        if not bool((err <= bound).all()):
            raise AssertionError(f"{name} on the emulator differs from the CPU fallback by up to "
                                 f"{float(err.max()):.3g} (bound {float(bound.max()):.3g}).")
        worst = max(worst, float((err / (scale + 1e-30)).max()))
    return worst
