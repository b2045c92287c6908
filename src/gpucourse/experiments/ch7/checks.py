"""Check, then time: every rung's loss and gradients against the naive version's, the
optimizers against PyTorch's per-parameter loop, a replayed CUDA Graph against eager mode.
The tolerances and their derivation are in :mod:`gpucourse.check.ch7`."""
from __future__ import annotations

import contextlib
import functools

import torch

from ... import device as gdev
from ...bench import cpu_threads
from ...check import ch7 as check7
from . import custom_op
from .model import GPTConfig, Setup, make_batch
from .step import Trainer, make_optimizer


def _no_tf32(dev: str):
    return gdev.tf32(False) if dev == "cuda" else contextlib.nullcontext()


@functools.lru_cache(maxsize=8)
def naive_reference(cfg: GPTConfig, device: str = "cpu", seed: int = 0):
    """(loss, {name: gradient}) of the naive FP32 model at its initial weights (TF32 off)."""
    with _no_tf32(device), cpu_threads():
        t = Trainer(cfg, Setup(), device, seed)
        loss = t.forward_backward()
        return float(loss), check7.flat_grads(t.model)


@functools.lru_cache(maxsize=1)
def emulator_check() -> float:
    """The course's CUDA C kernels of the custom operator, run on the emulator once."""
    return custom_op.check_kernels_on_emulator()


def check_trainer(trainer: Trainer, reference=None, tol: float | None = None,
                  what: str | None = None) -> dict:
    """The trainer's loss and gradients at its initial weights against the naive version's,
    within the tolerance of its precision; a report dict, or AssertionError."""
    setup = trainer.setup
    ref_loss, ref_grads = reference or naive_reference(trainer.cfg, trainer.device, trainer.seed)
    tol = check7.tolerance(trainer.cfg, setup.precision) if tol is None else tol
    with _no_tf32(trainer.device):
        loss = trainer.forward_backward()
    report = check7.compare_loss_and_grads(loss, check7.flat_grads(trainer.model), ref_loss,
                                           ref_grads, tol, what or describe(setup))
    if setup.bias_gelu == "custom_op" and trainer.device != "cuda":
        report["emulator_kernel_error"] = emulator_check()
    if setup.optimizer != "loop":
        report.update(check_optimizer(setup.optimizer, trainer.cfg, trainer.device))
    return report


def describe(setup: Setup) -> str:
    changes = setup.changes()
    return "the naive version" if not changes else \
        "the setup " + ", ".join(f"{k}={v}" for k, v in changes.items())


def check_optimizer(kind: str, cfg: GPTConfig = GPTConfig(), device: str = "cpu",
                    make=make_optimizer, steps: int = 2) -> dict:
    """``kind`` of AdamW against the per-parameter loop: two steps from the same weights with
    the naive model's gradients, new weights compared element by element."""
    ref_loss, grads = naive_reference(cfg, device)
    t = Trainer(cfg, Setup(), device)
    before = {n: p.detach().clone() for n, p in t.model.named_parameters()}

    def run(maker, k):
        params = {n: torch.nn.Parameter(p.clone()) for n, p in before.items()}
        for n, p in params.items():
            p.grad = grads[n].to(device=device, dtype=p.dtype)
        opt = maker(list(params.values()), k)
        for _ in range(steps):
            opt.step()
        return {n: p.detach().double().cpu() for n, p in params.items()}

    got = run(make, kind)
    want = run(make_optimizer, "loop")
    start = {n: p.double().cpu() for n, p in before.items()}
    report = check7.compare_optimizer_step(got, want, start, f"AdamW ({kind})")
    return {"optimizer_" + k: v for k, v in report.items()}


def check_replay(trainer: Trainer, seed: int = 1, load=None) -> dict:
    """A captured step, replayed on a new batch, against eager mode at the same weights: the
    replay must read the new inputs (copied into the tensors the graph captured).

    ``load(trainer, x, y)`` puts the batch in place (default: ``trainer.load_batch``)."""
    x, y = make_batch(trainer.cfg, seed, trainer.device)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    (load or Trainer.load_batch)(trainer, x, y)
    loss = trainer.step()
    grads = check7.flat_grads(trainer.model)
    with _no_tf32(trainer.device):
        ref = Trainer(trainer.cfg, Setup(), trainer.device, trainer.seed)
        with torch.no_grad():
            for n, p in ref.model.named_parameters():
                p.copy_(before[n])
        ref.x, ref.y = x, y
        ref_loss = ref.forward_backward()
    tol = check7.tolerance(trainer.cfg, trainer.setup.precision)
    return check7.compare_loss_and_grads(loss, grads, ref_loss, check7.flat_grads(ref.model),
                                         tol, "the replayed CUDA Graph")
