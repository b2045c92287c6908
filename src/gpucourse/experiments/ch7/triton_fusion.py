"""The same fused bias + GELU written in Triton, registered as a custom operator too.

On a GPU Triton compiles the kernels for it. Without one, Triton's interpreter runs them
(``TRITON_INTERPRET=1``, set here before Triton is imported when no CUDA GPU is usable): it
executes each program instance with NumPy, one after another, so it checks the kernel's
indexing and arithmetic but says nothing about its speed. Triton is optional (about 1 GB
installed): without it the rung is skipped with one sentence saying how to install it.
"""
from __future__ import annotations

import functools
import os

import torch

BLOCK = 4096
INSTALL = "pip install 'triton==3.9.0' (or: pip install -e '.[triton]')"


def _interpreting() -> bool:
    return not torch.cuda.is_available()


@functools.lru_cache(maxsize=1)
def _triton():
    """(triton, triton.language), or None when Triton is not installed."""
    if _interpreting():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None
    return triton, tl


def missing_reason() -> str | None:
    """None when the Triton rung can run here, else one sentence saying why not and what to do."""
    if _triton() is None:
        return f"Triton is not installed in this Python: install it with {INSTALL} to run this rung."
    if _interpreting() and os.environ.get("TRITON_INTERPRET") != "1":
        return ("Triton was imported before the course could turn on its interpreter and there is "
                "no CUDA GPU: restart the kernel, or set TRITON_INTERPRET=1 before importing it.")
    return None


def how_it_runs() -> str:
    if _interpreting():
        return ("Triton's interpreter (TRITON_INTERPRET=1): NumPy runs each program instance in "
                "turn; it checks the kernel, its time is the interpreter's, not a kernel's")
    return "compiled by Triton for this GPU"


@functools.lru_cache(maxsize=1)
def _register():
    """Define the two Triton kernels and their custom operators (once)."""
    triton, tl = _triton()

    @triton.jit
    def forward_kernel(x_ptr, b_ptr, y_ptr, n, cols, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        inside = offs < n
        v = tl.load(x_ptr + offs, mask=inside) + tl.load(b_ptr + offs % cols, mask=inside)
        tl.store(y_ptr + offs, 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476)), mask=inside)

    @triton.jit
    def backward_kernel(dy_ptr, x_ptr, b_ptr, dx_ptr, n, cols, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        inside = offs < n
        v = tl.load(x_ptr + offs, mask=inside) + tl.load(b_ptr + offs % cols, mask=inside)
        cdf = 0.5 * (1.0 + tl.erf(v * 0.7071067811865476))
        pdf = 0.3989422804014327 * tl.exp(-0.5 * v * v)
        tl.store(dx_ptr + offs, tl.load(dy_ptr + offs, mask=inside) * (cdf + v * pdf), mask=inside)

    def launch(kernel, out, *inputs, cols):
        n = out.numel()
        kernel[(triton.cdiv(n, BLOCK),)](*inputs, out, n, cols, BLOCK=BLOCK)
        return out

    def f32(t):
        return t.to(torch.float32).contiguous()

    @torch.library.custom_op("gpucourse::bias_gelu_triton", mutates_args=())
    def bias_gelu_triton(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        y = torch.empty(x.shape, dtype=torch.float32, device=x.device)
        return launch(forward_kernel, y, f32(x), f32(bias), cols=bias.numel()).to(x.dtype)

    @bias_gelu_triton.register_fake
    def _(x, bias):
        return torch.empty_like(x)

    @torch.library.custom_op("gpucourse::bias_gelu_triton_backward", mutates_args=())
    def bias_gelu_triton_backward(dy: torch.Tensor, x: torch.Tensor,
                                  bias: torch.Tensor) -> torch.Tensor:
        dx = torch.empty(x.shape, dtype=torch.float32, device=x.device)
        return launch(backward_kernel, dx, f32(dy), f32(x), f32(bias),
                      cols=bias.numel()).to(x.dtype)

    @bias_gelu_triton_backward.register_fake
    def _(dy, x, bias):
        return torch.empty_like(x)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, dy):
        x, bias = ctx.saved_tensors
        dx = bias_gelu_triton_backward(dy, x, bias)
        return dx, dx.reshape(-1, bias.numel()).sum(0, dtype=torch.float32).to(bias.dtype)

    bias_gelu_triton.register_autograd(backward, setup_context=setup_context)
    return bias_gelu_triton


def operator():
    """``torch.ops.gpucourse.bias_gelu_triton`` (registered on first use): what the model calls."""
    _register()
    return torch.ops.gpucourse.bias_gelu_triton
