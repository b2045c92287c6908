"""One training step for a :class:`Setup`: the model built with its switches, the optimizer,
autocast (and GradScaler for FP16), regional ``torch.compile``, activation checkpointing and,
on a GPU, the whole step captured as a CUDA Graph."""
from __future__ import annotations

import contextlib
import time

import torch
from torch.utils.checkpoint import checkpoint

from ...errors import DeviceError
from ...precision import torch_dtype
from . import custom_op, triton_fusion
from .model import GPT, LEARNING_RATE, GPTConfig, Setup, bias_gelu_eager, make_batch


def bias_gelu_function(kind: str):
    """What the MLP calls for bias + GELU: two eager ops, the course's operator, or Triton's."""
    if kind == "custom_op":
        return custom_op.custom_bias_gelu
    if kind == "triton":
        reason = triton_fusion.missing_reason()
        if reason:
            raise DeviceError(reason)
        return triton_fusion.operator()
    return bias_gelu_eager


def compile_blocks(model: GPT, backend: str = "inductor") -> None:
    """Regional compilation: each block's forward goes through torch.compile. The blocks share
    their code, so one compilation serves every layer (and every model built the same way)."""
    # A learner's widget session compiles the block for many switch settings; past dynamo's
    # default limit of 8 it would silently run the block eagerly.
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    options = None
    if backend == "inductor" and not next(model.parameters()).is_cuda:
        # Name inductor's C++ kernels in the profiler, so that they can be counted.
        options = {"cpp.enable_kernel_profile": True}
    for block in model.blocks:
        block.compile(backend=backend, options=options)


def build(cfg: GPTConfig, setup: Setup = Setup(), seed: int = 0, device: str = "cpu",
          compile_backend: str = "inductor", bias_gelu=None) -> GPT:
    """The model of ``setup`` with the naive model's weights (same seed, same order)."""
    fn = bias_gelu or bias_gelu_function(setup.bias_gelu)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT(cfg, setup, fn)
    model.to(device)
    if setup.compile:
        compile_blocks(model, compile_backend)
    if setup.checkpoint:
        # Each block's activations are dropped after its forward and recomputed in backward;
        # with dropout the RNG state is replayed so that it draws the same masks both times
        # (without, there is nothing to replay, and reading a GPU's RNG state would stop a
        # CUDA Graph capture).
        keep_rng = cfg.dropout > 0
        model.run_block = lambda block, x: checkpoint(block, x, use_reentrant=False,
                                                      preserve_rng_state=keep_rng)
    return model


def make_optimizer(params, kind: str = "loop", lr: float = LEARNING_RATE,
                   capturable: bool = False) -> torch.optim.AdamW:
    """AdamW as PyTorch's per-parameter loop (foreach=False), its foreach version (one
    multi-tensor call per operation) or its fused kernel (one call for the whole update)."""
    flags = {"loop": {"foreach": False}, "foreach": {"foreach": True},
             "fused": {"fused": True}}[kind]
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.01, capturable=capturable, **flags)


class Trainer:
    """A model, its optimizer and one fixed batch: ``step()`` is one training step."""

    def __init__(self, cfg: GPTConfig, setup: Setup = Setup(), device: str = "cpu",
                 seed: int = 0, compile_backend: str = "inductor", bias_gelu=None,
                 make_opt=make_optimizer):
        if setup.cuda_graphs and device != "cuda":
            raise DeviceError("CUDA Graphs need a CUDA GPU; turn the cuda_graphs switch off here.")
        if setup.cuda_graphs and setup.precision == "fp16":
            raise DeviceError("GradScaler reads found_inf on the CPU every step, which a CUDA "
                              "Graph cannot capture: use bf16 with CUDA Graphs.")
        self.cfg, self.setup, self.device, self.seed = cfg, setup, device, seed
        self.model = build(cfg, setup, seed, device, compile_backend, bias_gelu)
        self.opt = make_opt(self.model.parameters(), setup.optimizer,
                            capturable=setup.cuda_graphs)
        self.x, self.y = make_batch(cfg, seed, device)
        self.scaler = torch.amp.GradScaler(device) if setup.precision == "fp16" else None
        self.graph = None
        self.first_call_s = None

    def autocast(self):
        if self.setup.precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(self.device, dtype=torch_dtype(self.setup.precision))

    def loss(self):
        with self.autocast():
            return self.model(self.x, self.y)

    def forward_backward(self, rng_seed: int = 0):
        """Loss and gradients (unscaled) at the current weights, without an optimizer step;
        the RNG is seeded so that dropout draws the same masks in every setup."""
        self.opt.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        gpus = [torch.cuda.current_device()] if self.device == "cuda" else []
        with torch.random.fork_rng(devices=gpus):
            torch.manual_seed(rng_seed)
            loss = self.loss()
            if self.scaler is not None:
                self.scaler.scale(loss).backward()
                self.scaler.unscale_(self.opt)
            else:
                loss.backward()
        if self.first_call_s is None:  # includes torch.compile's compilation, if any
            if self.device == "cuda":
                torch.cuda.synchronize()
            self.first_call_s = time.perf_counter() - t0
        if self.scaler is not None:  # forget this step's unscaling: the next step starts clean
            self.scaler = torch.amp.GradScaler(self.device)
        return loss.detach()

    def eager_step(self):
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss()
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            self.opt.step()
        return loss

    def step(self):
        """One training step (a replay of the captured graph when there is one)."""
        if self.graph is not None:
            self.graph.replay()
            return self.static_loss
        return self.eager_step()

    def capture(self, warmup: int = 3) -> None:
        """Capture forward, backward and the optimizer step as one CUDA Graph (the recipe of
        PyTorch's CUDA Graphs notes: warm up on a side stream, gradients allocated inside the
        capture from the graph's private memory pool, inputs in static tensors)."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                self.eager_step()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.static_loss = self.loss()
            self.static_loss.backward()
            self.opt.step()

    def load_batch(self, x, y) -> None:
        """New inputs for the next step: copied into the tensors the graph reads."""
        self.x.copy_(x)
        self.y.copy_(y)
