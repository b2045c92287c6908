"""``scaled_dot_product_attention`` against the naive attention: peak memory of one forward
and backward pass against the sequence length, and which of PyTorch's attention backends
runs (``torch.nn.attention.sdpa_kernel`` restricts the choice to the ones it is given)."""
from __future__ import annotations

import contextlib
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from ... import device as gdev
from ...bench import cpu_threads
from ...check import ch7 as check7
from ...display import Table
from ...precision import UNIT_ROUNDOFF
from .model import naive_attention
from .profile import quiet_native_output

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}
VARIANTS = ("naive", "sdpa", "sdpa, math backend")


def _qkv(t: int, heads: int, head_dim: int, batch: int, dev: str, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, heads, t, head_dim, generator=g).to(dev).requires_grad_()
            for _ in range(3)]


def _run(variant: str, q, k, v):
    if variant == "naive":
        return naive_attention(q, k, v)
    ctx = sdpa_kernel([SDPBackend.MATH]) if variant.endswith("math backend") else \
        contextlib.nullcontext()
    with ctx:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def peak_bytes(variant: str, t: int, heads: int = 4, head_dim: int = 16, batch: int = 1,
               dev: str = "cpu") -> int:
    """Peak bytes allocated above the inputs during one forward and backward pass."""
    q, k, v = _qkv(t, heads, head_dim, batch, dev)
    dy = torch.randn_like(q)
    if dev == "cuda":
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        _run(variant, q, k, v).backward(dy)
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base
    with quiet_native_output():
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            _run(variant, q, k, v).backward(dy)
        prof.events()
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    now = top = 0
    for e in events:
        now += e.nbytes()
        top = max(top, now)
    return top


def check_sdpa(t: int = 67, heads: int = 4, head_dim: int = 16, batch: int = 2,
               dev: str = "cpu") -> float:
    """SDPA (default and math backends) against the naive attention, output and input
    gradients, at an awkward length; returns the largest relative error.

    Bound: float32 reductions of at most max(t, head_dim) terms on a path of 4 reductions
    forward and 4 backward, reordered: lambda sqrt(8 K) 2^-24 (module gpucourse.check.ch7)."""
    q, k, v = _qkv(t, heads, head_dim, batch, dev, seed=3)
    dy = torch.randn_like(q)
    want = naive_attention(q, k, v)
    want_grads = torch.autograd.grad(want, (q, k, v), dy)
    tol = check7.LAMBDA * (8 * max(t, head_dim)) ** 0.5 * UNIT_ROUNDOFF["fp32"]
    worst = 0.0
    for variant in VARIANTS[1:]:
        got = _run(variant, q, k, v)
        grads = torch.autograd.grad(got, (q, k, v), dy)
        for name, a, b in [("output", got, want)] + [(f"d{n}", x, y) for n, x, y in
                                                     zip("qkv", grads, want_grads)]:
            err = check7.relative_error(a, b)
            worst = max(worst, err)
            if err > tol:
                raise AssertionError(f"{variant}: {name} differs from the naive attention by "
                                     f"{err:.3g} relative (bound {tol:.3g}) at T={t}.")
    return worst


def backends(dev: str = "cpu", t: int = 256, heads: int = 4, head_dim: int = 64) -> dict:
    """{backend: None when it runs these inputs, else why not}, and the one PyTorch chose by
    itself (the operator the profiler saw)."""
    q, k, v = (z.detach() for z in _qkv(t, heads, head_dim, 1, dev))
    if dev == "cuda":
        q, k, v = (z.to(torch.bfloat16) for z in (q, k, v))
    out = {}
    for name, b in BACKENDS.items():
        with warnings.catch_warnings(record=True) as said:  # PyTorch warns why a backend declines
            warnings.simplefilter("always")
            try:
                with sdpa_kernel([b]):
                    F.scaled_dot_product_attention(q, k, v, is_causal=True)
                out[name] = None
            except RuntimeError as exc:
                reasons = [str(w.message).split("(Triggered")[0].strip() for w in said
                           if "not used because" in str(w.message)]
                out[name] = (reasons[0] if reasons else str(exc).strip().splitlines()[0])[:160]
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
    with quiet_native_output():
        with profile(activities=acts) as prof:
            F.scaled_dot_product_attention(q, k, v, is_causal=True)
        prof.events()
    ops = [e.name for e in prof.events() if "scaled_dot_product" in e.name
           and e.name != "aten::scaled_dot_product_attention"]
    return {"available": out, "chosen_op": ops[0] if ops else "aten::scaled_dot_product_attention",
            "dtype": str(q.dtype).replace("torch.", ""), "shape": list(q.shape)}


def attention_memory(seqs=(128, 256, 512, 1024), heads: int = 4, head_dim: int = 16,
                     batch: int = 1, dev: str | None = None) -> dict:
    """Peak memory of one attention forward + backward against T, each variant checked first."""
    dev = dev or gdev.torch_device()
    with cpu_threads() if dev == "cpu" else contextlib.nullcontext():
        worst = check_sdpa(dev=dev)
        rows = []
        for t in seqs:
            row = {"T": t}
            for variant in VARIANTS:
                row[variant] = peak_bytes(variant, t, heads, head_dim, batch, dev)
            rows.append(row)
        chosen = backends(dev)
    return {"backend": dev, "device": gdev.describe(dev).short_name, "heads": heads,
            "head_dim": head_dim, "batch": batch, "rows": rows, "check_rel_error": worst,
            "sdpa_backends": chosen}


def memory_table(result: dict) -> Table:
    rows = [{"T": r["T"], **{f"{v} (MB)": r[v] / 1e6 for v in VARIANTS},
             "naive / sdpa": r["naive"] / max(r["sdpa"], 1)} for r in result["rows"]]
    return Table(rows, caption=f"Peak memory of one attention forward + backward, "
                               f"{result['batch']} x {result['heads']} heads x d_head "
                               f"{result['head_dim']}, {result['device']} (measured)")
