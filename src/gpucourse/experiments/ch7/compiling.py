"""torch.compile in practice: a graph break and how to remove it, and what compiling costs.

A graph break is a place where TorchDynamo cannot keep tracing Python into one graph: here a
``.item()`` that copies a value to Python in the middle of a block (on a GPU it also waits
for the GPU). The function is then compiled as two graphs with Python between them, and
fusion stops at the break. ``torch._dynamo.explain`` traces without compiling and lists the
breaks with their reasons, in a few seconds.
"""
from __future__ import annotations

import logging

import torch

from ...display import Table
from .model import Block, GPTConfig, Setup, bias_gelu_eager


class LoggedBlock(Block):
    """A block that records its residual stream's largest value as a Python float."""

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        self.largest = x.abs().max().item()  # to Python: Dynamo must stop its graph here
        return x + self.mlp(self.ln2(x))


class TensorLoggedBlock(Block):
    """The same record kept as a tensor: no break; read it (``float(...)``) after the step."""

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        self.largest = x.abs().max().detach()
        return x + self.mlp(self.ln2(x))


def explain(block: torch.nn.Module, x: torch.Tensor) -> dict:
    """Graphs, breaks and their reasons (first line and place) for ``block(x)``."""
    log = logging.getLogger("torch._dynamo")
    level = log.level
    log.setLevel(logging.ERROR)  # the break is the lesson: no warning with a traceback for it
    try:
        ex = torch._dynamo.explain(block)(x)
    finally:
        log.setLevel(level)
    reasons = []
    for r in ex.break_reasons:
        text = str(getattr(r, "reason", r)).strip().splitlines()[0][:160]
        stack = getattr(r, "user_stack", None) or []
        where = f" ({stack[-1].name}, line {stack[-1].lineno})" if stack else ""
        reasons.append(text + where)
    return {"graphs": ex.graph_count, "breaks": ex.graph_break_count, "ops": ex.op_count,
            "reasons": reasons}


def graph_break_demo(cfg: GPTConfig = GPTConfig(), seed: int = 0) -> dict:
    """explain() of the block with ``.item()`` and of the one that keeps a tensor; both blocks
    give the same output (checked: same weights, same input, bitwise in eager mode)."""
    out = {}
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(cfg.batch, cfg.seq, cfg.d, generator=g)
    results = {}
    for name, cls in (("with .item()", LoggedBlock), ("tensor kept", TensorLoggedBlock)):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            block = cls(cfg, Setup(attention="sdpa"), bias_gelu_eager)
        with torch.no_grad():
            results[name] = block(x)
        out[name] = explain(block, x)
    if not torch.equal(*results.values()):
        raise AssertionError("the two blocks give different outputs: the fix changed the math.")
    return out


def graph_break_table(demo: dict) -> Table:
    return Table([{"block": k, "graphs": v["graphs"], "graph breaks": v["breaks"],
                   "why": "; ".join(v["reasons"]) or "-"} for k, v in demo.items()],
                 caption="torch._dynamo.explain of one block (traced, not compiled)")


def compile_summary(ladder: dict) -> dict:
    """Kernels per step before and after torch.compile, and the first compile's cost, from the
    ladder's rows (the setup just before ``compile`` and ``compile`` itself)."""
    rows = [r for r in ladder["rows"] if "median_ms" in r]
    names = [r["rung"] for r in rows]
    if "compile" not in names or names.index("compile") == 0:
        return {}
    after = rows[names.index("compile")]
    before = rows[names.index("compile") - 1]
    return {"before": before["rung"], "kernels_before": before["kernels"],
            "kernels_after": after["kernels"], "first_call_s": after["first_call_s"],
            "step_before_ms": before["median_ms"], "step_after_ms": after["median_ms"],
            "cache": after.get("compile_cache", {})}
