"""The chapter's model: a small GPT-style decoder in plain PyTorch, and the switches of the ladder.

Every rung of the ladder is a field of :class:`Setup`; :func:`build` makes the model for a
setup from the same seed, so two setups start from bit-identical weights. The first version
(``Setup()``) is the naive one: explicit softmax(QK^T / sqrt(d_head))V attention, FP32, eager,
PyTorch's per-parameter AdamW loop, bias and GELU as two operations.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ...check.ch7 import COMPUTE_PRECISIONS
from ...errors import InputError, whole_number

ATTENTIONS = ("naive", "sdpa")
OPTIMIZERS = ("loop", "foreach", "fused")
BIAS_GELU = ("eager", "custom_op", "triton")
LEARNING_RATE = 1e-3


@dataclass(frozen=True)
class GPTConfig:
    """Sizes of the model and of one batch: small enough that a CPU step takes milliseconds."""

    vocab: int = 256
    seq: int = 64
    d: int = 64
    heads: int = 4
    layers: int = 2
    batch: int = 8
    dropout: float = 0.0

    def __post_init__(self):
        for name in ("vocab", "seq", "d", "heads", "layers", "batch"):
            whole_number(getattr(self, name), name, getattr(GPTConfig, name))
        if self.d % self.heads:
            raise InputError(f"d={self.d} is not a multiple of heads={self.heads}: choose d = "
                             f"heads x head size (e.g. d={self.heads * 16}).")
        if not 0.0 <= self.dropout < 1.0:
            raise InputError(f"dropout={self.dropout!r}: use a probability in [0, 1) (e.g. 0.1).")

    @property
    def tokens(self) -> int:
        """Tokens per training step (batch x sequence length)."""
        return self.batch * self.seq

    def with_(self, **changes) -> "GPTConfig":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Setup:
    """The ladder's switches. ``Setup()`` is the naive version."""

    precision: str = "fp32"          # autocast dtype: fp32 (off), bf16, fp16 (+ GradScaler)
    attention: str = "naive"         # naive softmax(QK^T)V, or scaled_dot_product_attention
    compile: bool = False            # torch.compile of each block (regional compilation)
    cuda_graphs: bool = False        # the whole step captured once and replayed (GPU only)
    checkpoint: bool = False         # activation checkpointing of each block
    optimizer: str = "loop"          # AdamW: per-parameter loop, foreach, or fused
    bias_gelu: str = "eager"         # bias + GELU: two eager ops, the course's custom op, Triton

    def __post_init__(self):
        for name, allowed in (("precision", COMPUTE_PRECISIONS), ("attention", ATTENTIONS),
                              ("optimizer", OPTIMIZERS), ("bias_gelu", BIAS_GELU)):
            if getattr(self, name) not in allowed:
                raise InputError(f"{name}={getattr(self, name)!r} is not one of "
                                 f"{', '.join(map(repr, allowed))}; pick one of them.")
        for name in ("compile", "cuda_graphs", "checkpoint"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"{name}={getattr(self, name)!r} is a switch: use True or False.")

    def with_(self, **changes) -> "Setup":
        return dataclasses.replace(self, **changes)

    def changes(self) -> dict:
        """The switches that differ from the naive setup."""
        base = Setup()
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) != getattr(base, f.name)}


def causal_mask(t: int, device=None) -> torch.Tensor:
    """True where query i may attend to key j (j <= i)."""
    return torch.ones(t, t, dtype=torch.bool, device=device).tril()


def naive_attention(q, k, v, dropout: float = 0.0, training: bool = True):
    """softmax(Q K^T / sqrt(d_head) + causal mask) V, written out: the T x T scores are
    materialized (and kept for the backward pass)."""
    t = q.shape[-2]
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~causal_mask(t, q.device), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if dropout:
        weights = F.dropout(weights, dropout, training)
    return torch.matmul(weights, v)


def bias_gelu_eager(h, bias):
    """The unfused version: an addition, then GELU (two passes over the activations)."""
    return F.gelu(h + bias)


class Attention(nn.Module):
    def __init__(self, cfg: GPTConfig, kind: str):
        super().__init__()
        self.heads, self.kind, self.dropout = cfg.heads, kind, cfg.dropout
        self.qkv = nn.Linear(cfg.d, 3 * cfg.d)
        self.proj = nn.Linear(cfg.d, cfg.d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        p = self.dropout if self.training else 0.0
        if self.kind == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:
            y = naive_attention(q, k, v, p, self.training)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class MLP(nn.Module):
    """d -> 4d, bias + GELU, 4d -> d. The first bias is its own parameter so that the fused
    bias + GELU operation can take it."""

    def __init__(self, cfg: GPTConfig, bias_gelu):
        super().__init__()
        self.up = nn.Linear(cfg.d, 4 * cfg.d, bias=False)
        self.up_bias = nn.Parameter(torch.empty(4 * cfg.d).uniform_(-cfg.d ** -0.5, cfg.d ** -0.5))
        self.down = nn.Linear(4 * cfg.d, cfg.d)
        self.bias_gelu = bias_gelu

    def forward(self, x):
        return self.down(self.bias_gelu(self.up(x), self.up_bias))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig, setup: Setup, bias_gelu):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d)
        self.attn = Attention(cfg, setup.attention)
        self.ln2 = nn.LayerNorm(cfg.d)
        self.mlp = MLP(cfg, bias_gelu)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        x = x + self.drop(self.attn(self.ln1(x)))
        return x + self.drop(self.mlp(self.ln2(x)))


class GPT(nn.Module):
    """Token and position embeddings, ``layers`` blocks, a final LayerNorm and a linear head;
    ``forward(idx, targets)`` returns the mean next-token cross-entropy."""

    def __init__(self, cfg: GPTConfig, setup: Setup = Setup(), bias_gelu=bias_gelu_eager):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.d)
        self.pos = nn.Embedding(cfg.seq, cfg.d)
        self.blocks = nn.ModuleList([Block(cfg, setup, bias_gelu) for _ in range(cfg.layers)])
        self.ln = nn.LayerNorm(cfg.d)
        self.head = nn.Linear(cfg.d, cfg.vocab, bias=False)
        # Each block's forward, as called: replaced by a compiled or checkpointed one by a rung.
        self.run_block = lambda block, x: block(x)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = self.run_block(block, x)
        logits = self.head(self.ln(x))
        # The loss in FP32 whatever autocast did to the logits.
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def make_batch(cfg: GPTConfig, seed: int = 0, device: str = "cpu"):
    """Fixed random tokens (seeded): inputs and the next-token targets, each batch x seq."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq + 1), generator=g)
    return tokens[:, :-1].contiguous().to(device), tokens[:, 1:].contiguous().to(device)


def naive_model(cfg: GPTConfig, seed: int = 0, device: str = "cpu", dtype=torch.float32) -> GPT:
    """The naive model with the weights every setup starts from."""
    torch.manual_seed(seed)
    return GPT(cfg).to(device=device, dtype=dtype)
