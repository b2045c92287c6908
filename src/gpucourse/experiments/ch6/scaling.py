"""Section 2, loss scaling: an MLP trained with FP32 master weights and FP16 (or BF16)
gradients, without scaling, with a static scale and with dynamic scaling
(``precision.DynamicLossScaler``), against FP32; the gradient magnitudes at a checkpoint, and
what one backward pass keeps at each loss scale."""
from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from ... import bench, device, precision
from ...display import Table
from ...errors import PrecisionError, whole_number
from .common import bench_on, threads_for
from .number_formats import formats

# "with scaling, FP16 training matches FP32": the largest relative gap between the two loss
# curves, step by step, that we accept. One FP16 forward pass moves the loss by up to about
# 2 x 4 layers x 2 x 2^-11 = 8e-3 (as for precision.AMP_LOSS_RTOL: an input and an output
# rounding per layer); later steps add the drift of weights updated with FP16-rounded
# gradients. Measured: 1.1e-3 over 60 steps, against 0.27 without scaling. FP32 kernels that
# sum in another order move both curves by about 1e-6, nothing beside these.
LOSS_MATCH_RTOL = 0.01


class TensorCoreMatmul(torch.autograd.Function):
    """x @ w.T with FP16 (or BF16) inputs and outputs and FP32 accumulation, like a tensor core.

    On a GPU this is the native half-precision GEMM. On the CPU the inputs are widened to FP32
    (exact), multiplied with FP32 accumulation, and the result rounded to the input dtype: the
    same numbers, without the CPU's slow half-precision GEMM. The backward pass does the same
    for both gradients, so every gradient is a real FP16 tensor that can underflow.
    """

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        if x.is_cuda:
            return x @ w.t()
        return (x.float() @ w.float().t()).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        if g.is_cuda:
            return g @ w, g.t() @ x
        gf = g.float()
        return (gf @ w.float()).to(g.dtype), (gf.t() @ x.float()).to(g.dtype)


@dataclass(frozen=True)
class ScalingSetup:
    """The loss-scaling experiment's model, data and optimizer settings."""

    dim: int = 32
    width: int = 128
    depth: int = 3
    classes: int = 8
    batch: int = 256
    # The loss is divided by this many gradient-accumulation micro-batches (see the notebook).
    accumulation: int = 512
    lr: float = 1e-3
    seed: int = 0


def _scaling_data(s: ScalingSetup, dev: str):
    g = torch.Generator().manual_seed(s.seed)
    centres = torch.randn(s.classes, s.dim, generator=g)
    y = torch.randint(0, s.classes, (4 * s.batch,), generator=g)
    x = centres[y] + torch.randn(4 * s.batch, s.dim, generator=g)
    return x.to(dev), y.to(dev)


def _scaling_init(s: ScalingSetup, dev: str) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(s.seed + 1)
    params, fan_in = [], s.dim
    for i in range(s.depth + 1):
        fan_out = s.width if i < s.depth else s.classes
        params += [torch.randn(fan_out, fan_in, generator=g) / math.sqrt(fan_in),
                   torch.zeros(fan_out)]
        fan_in = fan_out
    return [p.to(dev) for p in params]


def _mlp_forward(params, x, dtype):
    h = x.to(dtype)
    n = len(params) // 2
    for i in range(n):
        w, b = params[2 * i], params[2 * i + 1]
        h = TensorCoreMatmul.apply(h, w) + b
        if i < n - 1:
            h = F.gelu(h)
    return h


def scaled_gradients(master, xb, yb, s: ScalingSetup, dtype=torch.float16, scale: float = 1.0):
    """Loss and gradients of the micro-batch loss (divided by ``s.accumulation``, times ``scale``).

    Returns (loss, raw gradients in ``dtype``) — the raw gradients are still multiplied by
    ``scale``; the caller unscales them in FP32.
    """
    params = [p.detach().to(dtype).requires_grad_() for p in master]
    # The loss is computed in FP32 from the low-precision logits, as autocast does.
    loss = F.cross_entropy(_mlp_forward(params, xb, dtype).float(), yb)
    (loss / s.accumulation * scale).backward()
    return float(loss.detach()), [p.grad for p in params]


@dataclass
class TrainingRun:
    """Per-step record of one training run."""

    label: str
    losses: list[float]
    zeroed: list[float] = field(default_factory=list)
    grad_error: list[float | None] = field(default_factory=list)  # None: overflowed
    scales: list[float] = field(default_factory=list)
    skipped: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def train_with_scaling(mode: str, steps: int = 100, static_scale: float = 2.0 ** 12,
                       init_scale: float = 2.0 ** 16, growth_interval: int = 20,
                       setup: ScalingSetup = ScalingSetup(), dev: str | None = None,
                       dtype=torch.float16) -> TrainingRun:
    """Train the setup's MLP with FP32 master weights and Adam; gradients computed in ``dtype``.

    ``mode``: "fp32" (reference), "none" (FP16, no scaling), "static" (fixed scale) or
    "dynamic" (``precision.DynamicLossScaler``). Each step also computes the FP32 gradient at the
    same weights to count FP16 gradients flushed to zero and the relative gradient error.
    """
    if mode not in ("fp32", "none", "static", "dynamic", "bf16"):
        raise ValueError(f"mode {mode!r} is not fp32, none, static, dynamic or bf16.")
    if mode == "bf16":  # BF16 gradients, no loss scaling
        mode, dtype = "none", torch.bfloat16
    dev = dev or device.torch_device()
    x, y = _scaling_data(setup, dev)
    master = _scaling_init(setup, dev)
    opt = torch.optim.Adam(master, lr=setup.lr)
    scaler = precision.DynamicLossScaler(init_scale, growth_interval=growth_interval)
    run = TrainingRun(label={"fp32": "fp32", "none": f"{_short(dtype)}, no scaling",
                             "static": f"fp16, static scale 2^{int(math.log2(static_scale))}",
                             "dynamic": "fp16, dynamic scale"}[mode], losses=[])
    nb = x.shape[0] // setup.batch
    for step in range(steps):
        i = (step % nb) * setup.batch
        xb, yb = x[i:i + setup.batch], y[i:i + setup.batch]
        if mode == "fp32":
            loss, grads = scaled_gradients(master, xb, yb, setup, torch.float32)
            run.losses.append(loss)
        else:
            scale = {"none": 1.0, "static": static_scale, "dynamic": scaler.scale}[mode]
            loss, raw = scaled_gradients(master, xb, yb, setup, dtype, scale)
            _, ref = scaled_gradients(master, xb, yb, setup, torch.float32)
            grads, found_inf = scaler.unscale(raw) if mode == "dynamic" else \
                ([g.float() / scale for g in raw], False)
            weights = range(0, len(raw), 2)
            lost = sum(int(((raw[k] == 0) & (ref[k] != 0)).sum()) for k in weights)
            run.zeroed.append(lost / sum(raw[k].numel() for k in weights))
            num = sum(float((grads[k] - ref[k]).norm() ** 2) for k in range(len(ref)))
            den = sum(float(r.norm() ** 2) for r in ref)
            run.grad_error.append(math.sqrt(num / den) if math.isfinite(num) else None)
            run.scales.append(scale)
            run.losses.append(loss)
            if mode == "dynamic":
                scaler.update(found_inf)
                if found_inf:
                    run.skipped += 1
                    continue
        for p, g in zip(master, grads):
            p.grad = g
        opt.step()
        opt.zero_grad(set_to_none=True)
    return run


def _short(dtype) -> str:
    return {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}[dtype]


def loss_scaling(steps: int = 100, static_scale: float = 2.0 ** 12, growth_interval: int = 20,
                 setup: ScalingSetup = ScalingSetup(), dev: str | None = None,
                 min_time_s: float = 0.0, bf16: bool = False) -> dict:
    """FP32 vs FP16 without scaling, with a static scale and with dynamic scaling (and BF16
    without scaling when ``bf16``).

    Returns the runs, the largest relative loss gap to FP32 of each, whether the scaled runs
    stay within ``LOSS_MATCH_RTOL``, and (with ``min_time_s`` > 0) the time of one step of each.
    """
    whole_number(steps, "steps", 100)
    dev = dev or device.torch_device()
    modes = ("fp32", "none", "static", "dynamic") + (("bf16",) if bf16 else ())
    with threads_for(dev):
        runs = {m: train_with_scaling(m, steps, static_scale, growth_interval=growth_interval,
                                      setup=setup, dev=dev) for m in modes}
    ref = np.array(runs["fp32"].losses)
    gap = {m: float(np.max(np.abs(np.array(r.losses) - ref) / ref)) for m, r in runs.items()}
    out = {"device": device.describe().short_name if dev == device.torch_device() else dev,
           "backend": dev, "steps": steps, "setup": asdict(setup),
           "runs": {m: r.to_dict() for m, r in runs.items()}, "max_rel_gap": gap,
           "tolerance": LOSS_MATCH_RTOL,
           "scaled_match": {m: gap[m] <= LOSS_MATCH_RTOL for m in ("static", "dynamic")},
           "max_zeroed_unscaled": max(runs["none"].zeroed),
           "zeroed_final": {m: r.zeroed[-1] for m, r in runs.items() if r.zeroed},
           "max_zeroed_scaled": max(max(runs["static"].zeroed), max(runs["dynamic"].zeroed))}
    if min_time_s:
        out["step_time_s"] = step_times(setup, dev, min_time_s)
    return out


def step_times(setup: ScalingSetup = ScalingSetup(), dev: str | None = None,
               min_time_s: float = 0.1) -> dict:
    """Time of one training step (forward, backward, unscale, Adam) per mode."""
    dev = dev or device.torch_device()
    x, y = _scaling_data(setup, dev)
    xb, yb = x[:setup.batch], y[:setup.batch]
    out = {}
    for mode, dtype, scale in (("fp32", torch.float32, 1.0), ("fp16 + scaling", torch.float16, 2.0 ** 12)):
        master = _scaling_init(setup, dev)
        opt = torch.optim.Adam(master, lr=setup.lr)

        def step(dtype=dtype, scale=scale):
            _, raw = scaled_gradients(master, xb, yb, setup, dtype, scale)
            for p, g in zip(master, raw):
                p.grad = g.float() / scale
            opt.step()
            opt.zero_grad(set_to_none=True)
        out[mode] = bench_on(step, mode, dev, min_time_s).median_s
    return out


def _cpu_name() -> str:
    return device.describe("cpu").short_name


@functools.lru_cache(maxsize=4)
def _checkpoint(steps: int, setup: ScalingSetup):
    """Master weights after ``steps`` FP32 steps (where gradients have become small)."""
    dev = "cpu"
    x, y = _scaling_data(setup, dev)
    master = _scaling_init(setup, dev)
    opt = torch.optim.Adam(master, lr=setup.lr)
    nb = x.shape[0] // setup.batch
    with bench.cpu_threads():
        for step in range(steps):
            i = (step % nb) * setup.batch
            _, grads = scaled_gradients(master, x[i:i + setup.batch], y[i:i + setup.batch], setup,
                                        torch.float32)
            for p, g in zip(master, grads):
                p.grad = g
            opt.step()
            opt.zero_grad(set_to_none=True)
    return [p.detach().clone() for p in master], x[:setup.batch], y[:setup.batch]


def gradient_magnitudes(steps: int = 60, setup: ScalingSetup = ScalingSetup()) -> dict:
    """|gradient| of every weight and every activation, in FP32, at a mid-training checkpoint."""
    whole_number(steps, "steps", 60)
    master, xb, yb = _checkpoint(steps, setup)
    params = [p.detach().clone().requires_grad_() for p in master]
    acts = []
    h = xb
    n = len(params) // 2
    for i in range(n):
        h = h @ params[2 * i].t() + params[2 * i + 1]
        h.retain_grad()
        acts.append(h)
        if i < n - 1:
            h = F.gelu(h)
    loss = F.cross_entropy(h, yb) / setup.accumulation
    loss.backward()
    w = torch.cat([p.grad.abs().flatten() for p in params[::2]]).numpy()
    a = torch.cat([t.grad.abs().flatten() for t in acts]).numpy()
    f16 = formats()["fp16"]
    below = lambda v, t: float(np.mean(v < t))  # noqa: E731
    # measured on the CPU even on a GPU machine: say so in the figure, not the GPU's name
    return {"weights": w, "activations": a, "step": steps, "device": _cpu_name(),
            "fp16_min_subnormal": f16.min_subnormal, "fp16_min_normal": f16.min_normal,
            "fp16_max": f16.max, "bf16_min_normal": formats()["bf16"].min_normal,
            "share_below_subnormal": {"weights": below(w, f16.min_subnormal / 2),
                                      "activations": below(a, f16.min_subnormal / 2)},
            "share_below_normal": {"weights": below(w, f16.min_normal),
                                   "activations": below(a, f16.min_normal)}}


def zeroed_at_scale(log2_scale: float, steps: int = 60, setup: ScalingSetup = ScalingSetup(),
                    dtype=torch.float16) -> dict:
    """One FP16 backward at the checkpoint with loss scale 2**log2_scale: what survives.

    Returns the share of weight gradients flushed to zero (FP32 nonzero, FP16 zero), the
    share that overflowed to inf/NaN, the relative gradient error after unscaling, and the
    scaled FP32 gradient magnitudes (for the histogram).
    """
    if not (isinstance(log2_scale, (int, float)) and math.isfinite(log2_scale)
            and -64 <= log2_scale <= 64):
        raise PrecisionError(f"log2_scale is the exponent of the loss scale, between -64 and 64 "
                             f"(16 means a scale of 65536); got {log2_scale!r}.")
    master, xb, yb = _checkpoint(steps, setup)
    scale = 2.0 ** log2_scale
    with bench.cpu_threads():
        _, raw = scaled_gradients(master, xb, yb, setup, dtype, scale)
        _, ref = scaled_gradients(master, xb, yb, setup, torch.float32)
    w = range(0, len(raw), 2)
    total = sum(raw[k].numel() for k in w)
    zeroed = sum(int(((raw[k] == 0) & (ref[k] != 0)).sum()) for k in w) / total
    overflow = sum(int((~torch.isfinite(raw[k])).sum()) for k in w) / total
    num = sum(float((raw[k].float() / scale - ref[k]).norm() ** 2) for k in w)
    den = sum(float(ref[k].norm() ** 2) for k in w)
    err = math.sqrt(num / den) if math.isfinite(num) else float("inf")
    mags = torch.cat([(ref[k] * scale).abs().flatten() for k in w]).numpy()
    return {"log2_scale": float(log2_scale), "zeroed": zeroed, "overflow": overflow,
            "grad_error": err, "scaled_magnitudes": mags, "dtype": str(dtype).replace("torch.", "")}


def scale_sweep(log2_scales=tuple(range(0, 47, 2)), steps: int = 60,
                setup: ScalingSetup = ScalingSetup()) -> dict:
    """:func:`zeroed_at_scale` over a range of scales: too small loses gradients, too large overflows."""
    rows = [zeroed_at_scale(s, steps, setup) for s in log2_scales]
    return {"device": _cpu_name(),  # the checkpoint runs on the CPU, see _checkpoint
            "log2_scales": list(log2_scales), "zeroed": [r["zeroed"] for r in rows],
            "overflow": [r["overflow"] for r in rows],
            # None where the gradients overflowed (inf is not JSON)
            "grad_error": [r["grad_error"] if math.isfinite(r["grad_error"]) else None for r in rows]}


# --------------------------------------------------------------------------- what the results say

def loss_scaling_table(result: dict) -> Table:
    """One row per training run: gradients lost, gap to the FP32 loss, skipped steps, final scale."""
    rows = []
    for mode, r in result["runs"].items():
        rows.append({"run": r["label"],
                     "max % zeroed": 100 * max(r["zeroed"]) if r["zeroed"] else 0.0,
                     "final % zeroed": 100 * r["zeroed"][-1] if r["zeroed"] else 0.0,
                     "max loss gap to fp32 %": 100 * result["max_rel_gap"][mode],
                     "final loss": r["losses"][-1], "skipped steps": r["skipped"],
                     "final scale": r["scales"][-1] if r["scales"] else None})
    return Table(rows, caption=f"{result['steps']} training steps on {result['device']}; "
                               f"tolerance {100 * result['tolerance']:g} %")
