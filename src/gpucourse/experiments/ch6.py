"""Chapter 6 (mixed precision and quantization): number formats, FP16 training without and
with loss scaling, autocast throughput and memory, and INT8 inference.

Every experiment checks its result against an FP32 (or FP64) reference before it times
anything. The numerics are real on every device: FP16 gradients are FP16 tensors, INT8
matrix products are integer products. On a CUDA GPU the same functions run on the GPU at
sizes that fill it and report CUDA-event timings and ``torch.cuda.max_memory_allocated``.

INT8 path, chosen on purpose: the chapter's own :class:`Int8Linear` (per-token activation
scales, per-channel weight scales, ``torch._int_mm`` with INT32 accumulation) runs the same
code on the CPU and on a GPU, so the learner sees the whole algorithm. ``torch._int_mm`` is
not exact on every CPU (without VNNI, oneDNN's kernels can saturate 16-bit intermediate
sums): :func:`int8_gemm_probe` tests it once per device, and where it is wrong the INT8
values are multiplied as float64, which is exact (:func:`int8_mm`). PyTorch's
``torch.ao.quantization.quantize_dynamic`` is measured beside it on the CPU as the library
baseline; PyTorch has deprecated that API in favour of torchao (its maintained successor,
``torchao.quantization.quantize_``), which is not a dependency of the course.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import math
import os
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from .. import bench, check, device, models, precision, reference, specs
from ..display import Table
from ..errors import PrecisionError, whole_number
from ..precision import (AMP_LOSS_RTOL, DynamicLossScaler, Int8GemmProbe,  # moved: precision
                         bf16_emulated_reason, int8_gemm_probe, int8_mm)

PRECISIONS = precision.INFERENCE  # moved: precision
DTYPES = {p: precision.torch_dtype(p) for p in precision.MATMUL}  # moved: precision
CPU_THREADS = bench.CPU_THREADS  # moved: bench
# "with scaling, FP16 training matches FP32": the largest relative gap between the two loss
# curves, step by step, that we accept. One FP16 forward pass moves the loss by up to about
# 2 x 4 layers x 2 x 2^-11 = 8e-3 (as for AMP_LOSS_RTOL: an input and an output rounding per
# layer); later steps add the drift of weights updated with FP16-rounded gradients. Measured:
# 1.1e-3 over 60 steps, against 0.27 without scaling. FP32 kernels that sum in another order
# move both curves by about 1e-6, nothing beside these.
LOSS_MATCH_RTOL = 0.01


# --------------------------------------------------------------------------- helpers

def torch_device() -> str:
    """Where the chapter's torch experiments run: ``"cuda"`` on a GPU, else ``"cpu"``."""
    return device.torch_device()


cpu_threads = bench.cpu_threads  # moved: bench
_sync = device.synchronize  # moved: device


def _bench(fn, label: str, dev: str, min_time_s: float, **kw) -> bench.Timing:
    return bench.benchmark(fn, label=label, backend="cuda" if dev == "cuda" else "cpu",
                           min_time_s=min_time_s, **kw)


# --------------------------------------------------------------------------- 1. formats

@dataclass(frozen=True)
class NumberFormat:
    """One number format: bit layout, range and spacing."""

    name: str
    bits: int
    exponent_bits: int
    mantissa_bits: int
    max: float
    min_normal: float
    min_subnormal: float
    eps: float
    used_for: str
    torch_dtype: str | None = None

    @property
    def dynamic_range_decades(self) -> float:
        """log10(max / smallest positive value): how many powers of ten fit."""
        return math.log10(self.max / self.min_subnormal)


def _float_format(name, dtype, used_for, exponent_bits, mantissa_bits) -> NumberFormat:
    fi = torch.finfo(dtype)
    return NumberFormat(name=name, bits=fi.bits, exponent_bits=exponent_bits,
                        mantissa_bits=mantissa_bits, max=float(fi.max),
                        min_normal=float(fi.smallest_normal),
                        min_subnormal=float(fi.smallest_normal) * 2.0 ** -mantissa_bits,
                        eps=float(fi.eps), used_for=used_for,
                        torch_dtype=str(dtype).replace("torch.", ""))


@functools.lru_cache(maxsize=1)
def formats() -> dict[str, NumberFormat]:
    """FP32, TF32, FP16, BF16, the two FP8 formats and INT8, from torch.finfo where torch has the dtype."""
    out = {
        "fp32": _float_format("fp32", torch.float32, "default for weights, optimizer state, "
                              "reductions, losses", 8, 23),
        # TF32 is not a storage type: FP32 values whose mantissa a tensor core rounds to 10 bits
        # before it multiplies (products are accumulated in FP32).
        "tf32": NumberFormat("tf32", 19, 8, 10, float((2 - 2 ** -10) * 2.0 ** 127), 2.0 ** -126,
                             2.0 ** -136, 2.0 ** -10, "FP32 matmuls on tensor cores (cc >= 8.0), "
                             "opt-in in PyTorch"),
        "fp16": _float_format("fp16", torch.float16, "mixed-precision training with loss "
                              "scaling (cc 7.x), inference", 5, 10),
        "bf16": _float_format("bf16", torch.bfloat16, "mixed-precision training without loss "
                              "scaling (cc >= 8.0), inference", 8, 7),
    }
    if hasattr(torch, "float8_e4m3fn"):
        out["fp8_e4m3"] = _float_format("fp8_e4m3", torch.float8_e4m3fn,
                                        "forward activations and weights on cc >= 8.9", 4, 3)
        out["fp8_e5m2"] = _float_format("fp8_e5m2", torch.float8_e5m2,
                                        "gradients on cc >= 8.9 (more range, less precision)", 5, 2)
    # INT8 holds integers -128..127; a scale s maps them to real values s*q. With a symmetric
    # scale the usable range is s..127s: 127 steps of equal size s.
    out["int8"] = NumberFormat("int8", 8, 0, 7, 127.0, 1.0, 1.0, 1.0,
                               "inference weights and activations, with a scale per tensor "
                               "or per channel", "int8")
    return out


def round_to(x: torch.Tensor, fmt: str) -> torch.Tensor:
    """``x`` (FP32) rounded to ``fmt`` and back to FP32: what storing it in that format keeps."""
    x = x.to(torch.float32)
    if fmt == "fp32":
        return x.clone()
    if fmt == "tf32":
        # Round to nearest even on the 13 mantissa bits TF32 drops.
        bits = x.contiguous().view(torch.int32)
        lsb = (bits >> 13) & 1
        rounded = (bits + 0x0FFF + lsb) & ~0x1FFF
        return rounded.view(torch.float32)
    if fmt == "int8":
        q, scale = int8_symmetric(x)
        return q.float() * scale
    fi = formats()[fmt]
    dtype = getattr(torch, {"fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}.get(
        fmt, fi.torch_dtype))
    if fmt.startswith("fp8"):
        x = x.clamp(-fi.max, fi.max)  # FP8 casts do not saturate; scaled FP8 recipes clamp
    return x.to(dtype).to(torch.float32)


def format_table(n: int = 100_003, seed: int = 0) -> Table:
    """Each format's layout, range and spacing, with the rounding error measured on random data.

    The error column stores ``n`` log-uniform magnitudes in [1e-3, 1e3) (a range FP16 and the
    FP8 formats cover, so it measures precision, not range) in each format and reports the
    median relative error. INT8 uses one scale for the whole tensor, so its small values lose
    almost everything: the reason INT8 needs careful scales.
    """
    whole_number(n, "n", "100_003")
    g = torch.Generator().manual_seed(seed)
    x = torch.exp(torch.empty(n).uniform_(math.log(1e-3), math.log(1e3), generator=g))
    x = x * torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0)
    rows = []
    for name, f in formats().items():
        err = ((round_to(x, name) - x).abs() / x.abs()).median().item()
        rows.append({"format": name, "bits": f.bits, "exponent": f.exponent_bits,
                     "mantissa": f.mantissa_bits, "max": f.max, "smallest normal": f.min_normal,
                     "smallest subnormal": f.min_subnormal, "spacing at 1 (eps)": f.eps,
                     "median rel. rounding error": float(err), "used for": f.used_for})
    return Table(rows, caption="Number formats (INT8 row: integers, range and spacing in units of its scale)")


def check_rounding() -> None:
    """round_to agrees with the formats' definitions on edge values (it is the ruler of this chapter)."""
    # One rounding of single values, no sums: the results are exact powers of two and
    # representable numbers, so they match to the bit (the tolerances only absorb printing).
    f16 = formats()["fp16"]
    t = torch.tensor([1.0, 1.0 + 2 ** -11, 65504.0, 2.0 ** -24, 2.0 ** -26, 2.0 ** -14 + 2.0 ** -25])
    got = round_to(t, "fp16")
    want = torch.tensor([1.0, 1.0, 65504.0, 2.0 ** -24, 0.0, 2.0 ** -14])
    check.assert_close(got, want, rtol=1e-6, atol=0, name="fp16 rounding")
    assert torch.isinf(round_to(torch.tensor([1e5]), "fp16")).all(), "fp16 must overflow above 65504"
    assert f16.min_subnormal == 2.0 ** -24
    # TF32 keeps 10 mantissa bits: 1 + 2^-10 survives, 1 + 2^-12 does not; 3e38 moves by at
    # most half a TF32 step (2^-11 of itself), which is the tolerance.
    t = torch.tensor([1 + 2.0 ** -10, 1 + 2.0 ** -12, 3.0e38, -2.5])
    check.assert_close(round_to(t, "tf32"), torch.tensor([1 + 2.0 ** -10, 1.0, 3.0e38, -2.5]),
                       rtol=2 ** -11, atol=0, name="tf32 rounding")
    check.assert_close(round_to(torch.tensor([1 + 2.0 ** -8]), "bf16"), torch.tensor([1.0]),
                       rtol=0, atol=0, name="bf16 rounding")


# --------------------------------------------------------------------------- data and models

@dataclass
class Dataset:
    """A seeded synthetic classification set with a held-out split."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    classes: int

    @property
    def dim(self) -> int:
        return self.x_train.shape[1]


@functools.lru_cache(maxsize=8)
def make_dataset(n_train: int = 8192, n_test: int = 2048, dim: int = 64, classes: int = 10,
                 clusters_per_class: int = 3, spread: float = 0.5, seed: int = 0) -> Dataset:
    """Gaussian clusters, several per class, in ``dim`` dimensions, with a held-out split.

    Each class owns ``clusters_per_class`` random centres; a point is a centre plus Gaussian
    noise (unit variance); ``spread`` scales the centres. Classes overlap, so a good classifier
    stays well under 100 % on the held-out split (about 85 % with the defaults).
    """
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(classes * clusters_per_class, dim, generator=g) * spread
    n = n_train + n_test
    cluster = torch.randint(0, classes * clusters_per_class, (n,), generator=g)
    x = centres[cluster] + torch.randn(n, dim, generator=g)
    y = cluster % classes
    return Dataset(x[:n_train].contiguous(), y[:n_train].contiguous(), x[n_train:].contiguous(),
                   y[n_train:].contiguous(), classes)


def classifier(dim: int = 64, hidden: int = 512, classes: int = 10, seed: int = 0) -> torch.nn.Sequential:
    """The chapter's inference model: an MLP with two hidden layers (all Linear layers)."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, classes))


def accuracy(model, x: torch.Tensor, y: torch.Tensor, batch: int = 1024) -> float:
    """Share of correctly classified rows."""
    correct = 0
    with torch.inference_mode():
        for i in range(0, x.shape[0], batch):
            out = model(x[i:i + batch])
            correct += int((out.float().argmax(1) == y[i:i + batch].to(out.device)).sum())
    return correct / x.shape[0]


@functools.lru_cache(maxsize=4)
def _trained_classifier_state(hidden: int, steps: int, seed: int, dev: str):
    data = make_dataset(seed=seed)
    model = classifier(data.dim, hidden, data.classes, seed=seed).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    g = torch.Generator().manual_seed(seed)
    x, y = data.x_train.to(dev), data.y_train.to(dev)
    with cpu_threads() if dev == "cpu" else contextlib.nullcontext():
        for _ in range(steps):
            idx = torch.randint(0, x.shape[0], (128,), generator=g).to(dev)
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def trained_classifier(hidden: int = 512, steps: int = 100, seed: int = 0,
                       dev: str | None = None) -> torch.nn.Sequential:
    """The chapter's classifier trained in FP32 on :func:`make_dataset` (cached per process)."""
    dev = dev or torch_device()
    data = make_dataset(seed=seed)
    model = classifier(data.dim, hidden, data.classes, seed=seed).to(dev)
    model.load_state_dict(_trained_classifier_state(hidden, steps, seed, dev))
    return model.eval()


# --------------------------------------------------------------------------- INT8

def to_int8(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """round(x / scale) saturated to -127..127 (symmetric: -128 is left out so that q and -q
    both fit)."""
    return torch.round(x.float() / scale).clamp(-127, 127).to(torch.int8)


def int8_symmetric(x: torch.Tensor, dim: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric INT8: scale = max|x| / 127 over ``dim`` (None: the whole tensor), kept as a
    broadcastable dimension; an all-zero slice gets scale 1. Returns (q, scale), x ≈ q * scale."""
    x = x.float()
    amax = x.abs().max() if dim is None else x.abs().amax(dim=dim, keepdim=True)
    # NaN stays NaN (the slice cannot be quantized); only a true all-zero slice gets scale 1
    scale = torch.where((amax > 0) | torch.isnan(amax), amax / 127, torch.ones_like(amax))
    return to_int8(x, scale), scale


def quantize_per_channel(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric INT8 with one scale per output channel (row): w ≈ q * scale[:, None]."""
    q, scale = int8_symmetric(w, dim=1)
    return q, scale.squeeze(1)


def quantize_per_tensor(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric INT8 with one scale for the whole tensor."""
    return int8_symmetric(w)


def _pad_to(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


class Int8Linear(torch.nn.Module):
    """A Linear layer with INT8 weights (one scale per output channel).

    ``mode="dynamic"``: each call quantizes the activations per row (token) and multiplies
    INT8 x INT8 with INT32 accumulation (:func:`int8_mm`: ``torch._int_mm`` where it is exact
    on this device), then rescales by both scales.
    ``mode="static"``: like dynamic, but the activations use one scale fixed in advance
    (``act_scale``, from :func:`calibrate`): no max over the activations at run time.
    ``mode="weight-only"``: INT8 storage only; the weights are dequantized to the activation
    dtype for an ordinary floating-point product (saves memory, not arithmetic).
    """

    # torch._int_mm needs k and n multiples of 8 and, on CUDA, more than 16 rows.
    MIN_ROWS = 17

    def __init__(self, linear: torch.nn.Linear, mode: str = "dynamic"):
        super().__init__()
        if mode not in ("dynamic", "static", "weight-only"):
            raise PrecisionError(f"Int8Linear mode {mode!r} is not 'dynamic', 'static' or "
                                 "'weight-only'.")
        self.mode = mode
        self.in_features, self.out_features = linear.in_features, linear.out_features
        w = linear.weight.detach()
        k, n = _pad_to(self.in_features, 8), _pad_to(self.out_features, 8)
        w = F.pad(w, (0, k - self.in_features, 0, n - self.out_features))
        q, scale = quantize_per_channel(w)
        # Stored as (k, n) column-major: the layout the INT8 GEMMs want for the second operand.
        self.register_buffer("qweight_t", q.t())
        self.register_buffer("scale", scale.float())
        b = linear.bias.detach().float() if linear.bias is not None else torch.zeros(self.out_features)
        self.register_buffer("bias", b.to(w.device))
        self.register_buffer("act_scale", torch.ones((), device=w.device))

    def nbytes(self) -> int:
        """Bytes of the stored weights, scales and bias."""
        return sum(t.numel() * t.element_size() for t in (self.qweight_t, self.scale, self.bias))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape[:-1]
        x = x.reshape(-1, x.shape[-1])
        k = self.qweight_t.shape[0]
        if self.mode == "weight-only":
            w = (self.qweight_t.to(x.dtype) * self.scale.to(x.dtype))[:self.in_features, :self.out_features]
            return (x @ w + self.bias.to(x.dtype)).reshape(*shape, self.out_features)
        rows = x.shape[0]
        xf = x.float()
        if k != self.in_features:
            xf = F.pad(xf, (0, k - self.in_features))
        if rows < self.MIN_ROWS:
            xf = F.pad(xf, (0, 0, 0, self.MIN_ROWS - rows))
        if self.mode == "static":
            xs = self.act_scale.expand(xf.shape[0], 1)
            xq = to_int8(xf, xs)
        else:
            xq, xs = int8_symmetric(xf, dim=1)
        acc = int8_mm(xq, self.qweight_t)  # INT32: no overflow for k < 2**31 / 127**2
        out = acc.float() * xs * self.scale
        out = out[:rows, :self.out_features] + self.bias
        return out.to(x.dtype).reshape(*shape, self.out_features)


def int8_model(model: torch.nn.Module, mode: str = "dynamic") -> torch.nn.Module:
    """A copy of ``model`` with every Linear replaced by :class:`Int8Linear`."""
    out = copy.deepcopy(model)
    for name, child in list(out.named_children()):
        if isinstance(child, torch.nn.Linear):
            setattr(out, name, Int8Linear(child, mode))
        else:
            setattr(out, name, int8_model(child, mode))
    return out.eval()


def calibrate(model: torch.nn.Module, qmodel: torch.nn.Module, batches, percentile: float = 100.0):
    """Set each static :class:`Int8Linear`'s activation scale from calibration batches.

    Runs the FP32 ``model`` on ``batches``, records every Linear's input, and sets the scale
    of the matching layer of ``qmodel`` to the ``percentile`` of |input| / 127 (100 = the max;
    a lower percentile clips rare outliers to gain resolution for the rest).
    """
    seen: dict[str, list] = {}
    hooks = [m.register_forward_hook(lambda m, inp, out, n=n: seen.setdefault(n, []).append(
        inp[0].detach().abs().flatten().float()))
        for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    try:
        with torch.inference_mode():
            for xb in batches:
                model(xb)
    finally:
        for h in hooks:
            h.remove()
    qlayers = dict(qmodel.named_modules())
    for n, vals in seen.items():
        v = torch.cat(vals)
        amax = torch.quantile(v[:2 ** 24].cpu(), percentile / 100) if percentile < 100 else v.max()
        qlayers[n].act_scale.fill_(float(max(float(amax), 1e-12)) / 127)
    return qmodel


def static_vs_dynamic(calibration_batches: int = 4, batch: int = 256, dev: str | None = None) -> Table:
    """INT8 with activation scales fixed by calibration (max, 99.99th percentile) vs per-row dynamic scales."""
    dev = dev or torch_device()
    data = make_dataset()
    model = trained_classifier(dev=dev)
    x_cal = data.x_train[:calibration_batches * batch].to(dev)
    x_test, y_test = data.x_test.to(dev), data.y_test.to(dev)
    with torch.inference_mode():
        ref = model(x_test)
    rows = []
    versions = {"fp32": model, "int8 dynamic (scale per row, at run time)": int8_model(model, "dynamic")}
    for pct in (100.0, 99.99):
        versions[f"int8 static, calibrated ({pct:g}th percentile)"] = calibrate(
            model, int8_model(model, "static"), x_cal.split(batch), pct)
    with cpu_threads() if dev == "cpu" else contextlib.nullcontext():
        for label, m in versions.items():
            with torch.inference_mode():
                err = float((m(x_test) - ref).norm() / ref.norm())
            rows.append({"version": label, "output rel. error": err,
                         "accuracy": accuracy(m, x_test, y_test)})
    return Table(rows, caption=f"Static (calibrated on {calibration_batches * batch} training points) "
                               "vs dynamic activation scales, 2048 held-out points")


def library_int8_model(model: torch.nn.Module):
    """PyTorch's dynamic quantization (CPU only), or None where this PyTorch no longer has it."""
    try:
        from torch.ao.quantization import quantize_dynamic
    except ImportError:
        return None
    with warnings.catch_warnings():
        # torch.ao.quantization announces its deprecation in favour of torchao on every call;
        # we measure it on purpose as the library baseline, and the notebook says so once.
        warnings.filterwarnings("ignore", message=r".*torch\.ao\.quantization is deprecated.*")
        warnings.filterwarnings("ignore", message=r".*quantized tensor creation functions.*")
        warnings.filterwarnings("ignore", message=r".*quantize_per_tensor.*deprecated.*")
        return quantize_dynamic(copy.deepcopy(model).cpu().eval(), {torch.nn.Linear},
                                dtype=torch.qint8)


def model_bytes(model: torch.nn.Module) -> int:
    """Bytes of a model's stored weights (parameters and buffers, packed INT8 weights included)."""
    total = sum(t.numel() * t.element_size() for t in model.parameters())
    total += sum(t.numel() * t.element_size() for t in model.buffers())
    for m in model.modules():  # torch.ao's packed INT8 layers keep their weights off the books
        if hasattr(m, "_packed_params") and hasattr(m, "weight") and callable(m.weight):
            w = m.weight()
            total += w.numel() * w.element_size()
            total += w.q_per_channel_scales().numel() * 8 if w.qscheme() in (
                torch.per_channel_affine, torch.per_channel_symmetric) else 8
            b = m.bias()
            total += 0 if b is None else b.numel() * b.element_size()
    return int(total)


def quantization_error(w: torch.Tensor, scheme: str) -> float:
    """Relative error ||w - dequant(quant(w))|| / ||w|| of per-tensor or per-channel INT8."""
    if scheme == "per-channel":
        q, s = quantize_per_channel(w)
        deq = q.float() * s[:, None]
    elif scheme == "per-tensor":
        q, s = quantize_per_tensor(w)
        deq = q.float() * s
    else:
        raise ValueError(f"scheme {scheme!r} is not 'per-tensor' or 'per-channel'.")
    return float((deq - w).norm() / w.norm())


#: Relative output error allowed for an INT8 version of the classifier. Rounding each value to
#: its step s = max|x| / 127 errs by s / sqrt(12) on average, about 0.5 % of a row here, per
#: operand and layer; over three layers that is about 1 % (measured: 0.6 % for our dynamic
#: INT8, 1.5 % for torch.ao, whose activations share one scale). The FP32 reference differs
#: between BLAS kernels and core counts by about 1e-6 (FP32 sums of 512 terms), nothing beside
#: this. A scale off by 1.5x in one layer gives 50 %; INT8 sums that saturate at 16 bits (a
#: stand-in for oneDNN's kernels on CPUs without VNNI) give 5.06 %, just over the limit.
INT8_OUTPUT_RTOL = 0.05


def check_int8(model: torch.nn.Module, qmodel: torch.nn.Module, x: torch.Tensor,
               rtol: float = INT8_OUTPUT_RTOL, name: str = "int8 model") -> float:
    """Relative error of an INT8 model's outputs against FP32; raises when over ``rtol``."""
    with torch.inference_mode():
        ref = model(x).float()
        got = qmodel(x).float()
    err = float((got - ref).norm() / ref.norm())
    assert err < rtol, (f"{name}: relative output error {err:.3g} is over {rtol:g}; "
                        "check the scales (per channel, max-abs / 127).")
    return err


def int8_inference(batch: int = 64, hidden: int = 512, min_time_s: float = 0.2,
                   dev: str | None = None) -> dict:
    """FP32 vs INT8 for the chapter's classifier: check the outputs, then time, size and accuracy.

    Versions: FP32; INT8 weight-only; INT8 dynamic (ours, :func:`int8_mm`: ``torch._int_mm``
    where the probe found it exact here); and on the CPU PyTorch's ``quantize_dynamic`` as the
    library baseline ``ref``. ``int8_path`` says which INT8 product "ours" used, and why.
    """
    dev = dev or torch_device()
    probe = int8_gemm_probe(dev)
    data = make_dataset()
    model = trained_classifier(hidden=hidden, dev=dev)
    versions = {"fp32": model, "int8 weight-only": int8_model(model, "weight-only"),
                "int8 dynamic (ours)": int8_model(model, "dynamic")}
    notes = []
    if dev == "cpu":
        lib = library_int8_model(model)
        if lib is not None:
            versions["int8 dynamic (ref: torch.ao)"] = lib
        else:
            notes.append("torch.ao.quantization is not in this PyTorch (moved to torchao): "
                         "the library baseline is skipped.")
    x_test = data.x_test.to(dev)
    y_test = data.y_test.to(dev)
    g = torch.Generator().manual_seed(1)
    x = data.x_test[torch.randint(0, data.x_test.shape[0], (batch,), generator=g)].to(dev)
    rows, timings = [], bench.Timings()
    flops = 2 * batch * sum(m.in_features * m.out_features for m in model.modules()
                            if isinstance(m, torch.nn.Linear))
    with cpu_threads() if dev == "cpu" else contextlib.nullcontext():
        for label, m in versions.items():
            err = 0.0 if label == "fp32" else check_int8(model, m, x_test[:512], name=label)
            with torch.inference_mode():
                t = _bench(lambda m=m: m(x), label, dev, min_time_s, flops=flops, size=batch)
            timings.append(t)
            rows.append({"version": label, "median_ms": t.median_s * 1e3,
                         "speed-up vs fp32": timings[0].median_s / t.median_s,
                         "weights_MB": model_bytes(m) / 1e6,
                         "accuracy": accuracy(m, x_test, y_test), "output rel. error": err})
    base = rows[0]
    best = max(rows[1:], key=lambda r: r["speed-up vs fp32"] if "dynamic" in r["version"] else 0)
    return {"device": timings[0].device, "backend": dev, "batch": batch, "hidden": hidden,
            "rows": rows, "timings": [t.to_dict() for t in timings], "notes": notes,
            "fastest_int8": best["version"], "int8_speedup": best["speed-up vs fp32"],
            "accuracy_drop": base["accuracy"] - best["accuracy"],
            "size_ratio": base["weights_MB"] / best["weights_MB"],
            "per_tensor_error": quantization_error(model[2].weight.detach().cpu(), "per-tensor"),
            "per_channel_error": quantization_error(model[2].weight.detach().cpu(), "per-channel"),
            "int8_path": probe.path, "int8_probe": probe.sentence}


def int8_table(result: dict) -> Table:
    return Table(result["rows"], caption=f"FP32 vs INT8 inference, batch {result['batch']}, "
                                         f"on {result['device']}")


def per_channel_demo(rows: int = 256, cols: int = 512, outliers: int = 4, seed: int = 0) -> dict:
    """Per-tensor vs per-channel INT8 error on weights whose channels differ in scale."""
    whole_number(rows, "rows", 256)
    whole_number(cols, "cols", 512)
    whole_number(outliers, "outliers", 4, minimum=0)
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(rows, cols, generator=g) * torch.exp(torch.randn(rows, 1, generator=g) * 0.5)
    w[torch.randperm(rows, generator=g)[:outliers]] *= 30  # a few channels with large weights
    return {"per-tensor": quantization_error(w, "per-tensor"),
            "per-channel": quantization_error(w, "per-channel"),
            "rows": rows, "cols": cols, "outlier_channels": outliers}


# --------------------------------------------------------------------------- 2. loss scaling

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
    "dynamic" (:class:`DynamicLossScaler`). Each step also computes the FP32 gradient at the
    same weights to count FP16 gradients flushed to zero and the relative gradient error.
    """
    if mode not in ("fp32", "none", "static", "dynamic", "bf16"):
        raise ValueError(f"mode {mode!r} is not fp32, none, static, dynamic or bf16.")
    if mode == "bf16":  # BF16 gradients, no loss scaling
        mode, dtype = "none", torch.bfloat16
    dev = dev or torch_device()
    x, y = _scaling_data(setup, dev)
    master = _scaling_init(setup, dev)
    opt = torch.optim.Adam(master, lr=setup.lr)
    scaler = DynamicLossScaler(init_scale, growth_interval=growth_interval)
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
    dev = dev or torch_device()
    modes = ("fp32", "none", "static", "dynamic") + (("bf16",) if bf16 else ())
    with cpu_threads() if dev == "cpu" else contextlib.nullcontext():
        runs = {m: train_with_scaling(m, steps, static_scale, growth_interval=growth_interval,
                                      setup=setup, dev=dev) for m in modes}
    ref = np.array(runs["fp32"].losses)
    gap = {m: float(np.max(np.abs(np.array(r.losses) - ref) / ref)) for m, r in runs.items()}
    out = {"device": device.describe().short_name if dev == torch_device() else dev,
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
    dev = dev or torch_device()
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
        out[mode] = _bench(step, mode, dev, min_time_s).median_s
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
    with cpu_threads():
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
    with cpu_threads():
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


# --------------------------------------------------------------------------- 3. AMP

class FeedForwardBlock(torch.nn.Module):
    """A transformer's feed-forward block: LayerNorm, d → 4d, GELU, 4d → d, residual."""

    def __init__(self, d: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


def amp_model(d: int, blocks: int = 2, seed: int = 0) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return torch.nn.Sequential(*[FeedForwardBlock(d) for _ in range(blocks)])


def amp_sizes(dev: str, quick: bool = True) -> dict:
    """Problem sizes: small on the CPU (half precision can be very slow there), GPU-filling on a GPU."""
    if dev == "cuda":
        return {"tokens": 8192, "d": 2048 if quick else 4096, "blocks": 2}
    return {"tokens": 64, "d": 128, "blocks": 2}


def _saved_bytes(fn, params=()) -> tuple[int, torch.Tensor]:
    """(bytes of the distinct tensors autograd keeps for backward while ``fn()`` runs, its result).

    Tensors that share storage with ``params`` are not counted: a linear layer saves its own
    weight for the backward pass, which takes no memory beyond the weight (a cast copy, as
    autocast makes, is counted)."""
    seen: dict[int, int] = {}
    skip = {q.untyped_storage().data_ptr() for q in params}

    def pack(t):
        try:
            key = t.untyped_storage().data_ptr()
            if key in skip:
                return t
            seen[key] = max(seen.get(key, 0), t.untyped_storage().nbytes())
        except Exception:
            pass
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return sum(seen.values()), out


def amp_training(precisions=("fp32", "bf16", "fp16"), tokens: int | None = None,
                 d: int | None = None, blocks: int | None = None, min_time_s: float = 0.2,
                 dev: str | None = None) -> dict:
    """One training step (forward, backward, AdamW) in FP32 and under autocast: check, then time.

    Check: each precision's loss is within its tolerance of the FP32 loss from the same weights.
    Memory: on a GPU the peak allocated during a step (``torch.cuda.max_memory_allocated``);
    on the CPU the bytes of weights, gradients and optimizer state plus the activations autograd
    saves (counted tensor by tensor). The model ``models.training_memory`` is shown beside it.
    """
    dev = dev or torch_device()
    size = amp_sizes(dev)
    tokens, d, blocks = tokens or size["tokens"], d or size["d"], blocks or size["blocks"]
    avail = precision_availability(dev)
    rows, timings = [], bench.Timings()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(tokens, d, generator=g).to(dev)
    target = torch.randn(tokens, d, generator=g).to(dev)
    params = sum(p.numel() for p in amp_model(d, blocks).parameters())
    flops = 3 * 2 * tokens * blocks * 8 * d * d  # forward + backward of the two matmuls
    with cpu_threads() if dev == "cpu" else contextlib.nullcontext():
        # The reference is FP32 whatever ``precisions`` lists first (same weights, seed 0).
        with torch.no_grad(), device.tf32(False) if dev == "cuda" else contextlib.nullcontext():
            ref_loss = float(F.mse_loss(amp_model(d, blocks).to(dev)(x).float(), target))
        for p in precisions:
            if avail.get(p):
                rows.append({"precision": p, "skipped": avail[p]})
                continue
            model = amp_model(d, blocks).to(dev)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            dtype = DTYPES[p]

            def loss_fn(model=model, dtype=dtype, p=p):
                with torch.autocast(dev, dtype=dtype, enabled=p in ("fp16", "bf16")):
                    out = model(x)
                return F.mse_loss(out.float(), target)

            def step(model=model, opt=opt, loss_fn=loss_fn):
                loss = loss_fn()
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                return loss

            with device.tf32(p == "tf32") if dev == "cuda" else contextlib.nullcontext():
                with torch.no_grad():
                    loss0 = float(loss_fn())
                rtol = AMP_LOSS_RTOL[p]
                assert abs(loss0 - ref_loss) <= rtol * abs(ref_loss), \
                    f"{p} loss {loss0} differs from fp32 {ref_loss} by more than {rtol:g}"
                step()  # first step creates the optimizer state
                if dev == "cuda":
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    base = torch.cuda.memory_allocated()
                    step()
                    torch.cuda.synchronize()
                    peak = torch.cuda.max_memory_allocated()
                    memory, how = peak, "peak allocated (torch.cuda.max_memory_allocated)"
                    activations = peak - base
                else:
                    saved, loss = _saved_bytes(loss_fn, list(model.parameters()))
                    loss.backward()
                    opt.zero_grad(set_to_none=True)
                    state = sum(t.numel() * t.element_size() for s in opt.state.values()
                                for t in s.values() if torch.is_tensor(t))
                    weights = sum(q.numel() * q.element_size() for q in model.parameters())
                    activations = saved
                    memory = weights * 2 + state + saved
                    how = "weights + gradients + AdamW state + saved activations (counted)"
                t = _bench(step, p, dev, min_time_s, flops=flops, size=tokens)
            timings.append(t)
            predicted = models.training_memory(params, _activation_count(tokens, d, blocks),
                                               dtype="fp32" if p in ("fp32", "tf32") else p,
                                               optimizer="adamw")
            rows.append({"precision": p, "median_ms": t.median_s * 1e3, "TFLOP/s": t.gflops / 1e3,
                         "memory_MB": memory / 1e6, "activations_MB": activations / 1e6,
                         "model_MB": predicted.total / 1e6, "memory_how": how,
                         "loss_rel_diff": abs(loss0 - ref_loss) / abs(ref_loss)})
            del model, opt
    base = timings.by_label().get("fp32")
    speedups = {t.label: base.median_s / t.median_s for t in timings} if base else {}
    ceilings, how = matmul_ceilings(dev, [t.label for t in timings])
    return {"device": timings[0].device if timings else dev, "backend": dev, "tokens": tokens,
            "d": d, "blocks": blocks, "params": params, "rows": rows,
            "timings": [t.to_dict() for t in timings], "speedup_vs_fp32": speedups,
            "ceiling_gflops": ceilings, "ceiling_how": how,
            "cpu_support": cpu_low_precision_support() if dev == "cpu" else None}


def matmul_ceilings(dev: str, precisions) -> tuple[dict, str]:
    """Ceiling in GFLOP/s per precision: datasheet peaks on a GPU (or the spec table's default
    GPU when the table lacks this one), the measured FP32 matmul rate on the CPU."""
    if dev == "cuda":
        g = specs.for_active_device()
        out = {p: g.peak_flops(p) / 1e9 for p in precisions if p in g.precisions}
        return out, f"datasheet peak ({g.key})"
    return {"fp32": cpu_matmul_gflops()}, f"fp32 matmul rate of this CPU, {CPU_THREADS} thread (measured)"


@functools.lru_cache(maxsize=2)
def cpu_matmul_gflops(n: int = 512, min_time_s: float = 0.1) -> float:
    """Measured FP32 matrix-multiply rate of this CPU (n x n x n), on CPU_THREADS threads."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    with cpu_threads():
        return bench.benchmark(torch.mm, a, b, backend="cpu", flops=2 * n ** 3,
                               min_time_s=min_time_s).gflops


def _activation_count(tokens: int, d: int, blocks: int) -> int:
    """Values a feed-forward block keeps for backward: input, norm output, up output, GELU output."""
    return blocks * tokens * (d + d + 4 * d + 4 * d)


def amp_table(result: dict) -> Table:
    rows = []
    for r in result["rows"]:
        if "skipped" in r:
            rows.append({"precision": r["precision"], "median ms": None, "speed-up vs fp32": None,
                         "memory MB": None, "note": "not run: " + r["skipped"]})
            continue
        rows.append({"precision": r["precision"], "median ms": r["median_ms"],
                     "speed-up vs fp32": result["speedup_vs_fp32"].get(r["precision"]),
                     "memory MB": r["memory_MB"], "note": r["memory_how"]})
    return Table(rows, caption=f"Training step of {result['blocks']} feed-forward blocks, "
                               f"{result['tokens']} tokens x d={result['d']}, on {result['device']}")


def autocast_dtypes(dtype=torch.bfloat16, dev: str | None = None) -> Table:
    """The dtype each common op returns under autocast on this device (measured, not a list).

    ``dtype``: torch.bfloat16 or torch.float16, or their names "bf16" and "fp16"."""
    if isinstance(dtype, str):
        if dtype not in ("bf16", "fp16"):
            raise PrecisionError(f"autocast runs in 'bf16' or 'fp16' (or torch.bfloat16, "
                                 f"torch.float16), not {dtype!r}.")
        dtype = DTYPES[dtype]
    dev = dev or torch_device()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 16, generator=g).to(dev)
    w = torch.randn(16, 16, generator=g).to(dev)
    y_int = torch.randint(0, 16, (8,), generator=g).to(dev)
    norm = torch.nn.LayerNorm(16).to(dev)
    rows = []
    with torch.autocast(dev, dtype=dtype):
        h = F.linear(x, w)  # a low-precision activation, as inside a network
        ops = {"linear / matmul (x @ W)": lambda: F.linear(x, w),
               "gelu(h)": lambda: F.gelu(h), "h + h": lambda: h + h,
               "layer_norm(h)": lambda: norm(h), "softmax(h)": lambda: torch.softmax(h, -1),
               "exp(h)": lambda: torch.exp(h), "h.sum()": lambda: h.sum(),
               "mse_loss(h, target)": lambda: F.mse_loss(h, x),
               "cross_entropy(h, labels)": lambda: F.cross_entropy(h, y_int)}
        for name, fn in ops.items():
            rows.append({"op under autocast": name,
                         "result dtype": str(fn().dtype).replace("torch.", "")})
    return Table(rows, caption=f"torch.autocast('{dev}', dtype={str(dtype).replace('torch.', '')}): "
                               "dtypes measured here")


# --------------------------------------------------------------------------- device support

def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_low_precision_support() -> dict:
    """What this CPU offers for BF16 and FP16 arithmetic, and one sentence saying what it means."""
    flags = _cpu_flags()
    cap = torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, "cpu") else "?"
    bf16 = sorted(f for f in flags if f in ("avx512_bf16", "amx_bf16"))
    fp16 = sorted(f for f in flags if f in ("avx512_fp16", "amx_fp16"))
    if bf16:
        s_bf16 = (f"it has BF16 dot-product instructions ({', '.join(bf16)}), so oneDNN runs BF16 "
                  "matmuls natively: they can beat FP32 by moving half the bytes")
    else:
        s_bf16 = ("it has no BF16 instructions, so every BF16 value is widened to FP32 in software "
                  "before it is multiplied: BF16 matmuls are much slower than FP32")
    if fp16:
        s_fp16 = f"and FP16 arithmetic ({', '.join(fp16)})"
    else:
        s_fp16 = ("and no FP16 arithmetic (only F16C conversions), so FP16 matmuls take a slow "
                  "generic path, several to hundreds of times slower than FP32 depending on the size and the "
                  "threads (the measurement beside this shows how much here)")
    return {"capability": cap, "bf16_flags": bf16, "fp16_flags": fp16,
            "sentence": f"PyTorch uses this CPU's {cap} code path; {s_bf16}; {s_fp16}."}


_int_mm_works = precision.int8_runs  # moved: precision


def precision_availability(dev: str | None = None) -> dict[str, str | None]:
    """Each precision mapped to None (usable here) or the reason it is not
    (``precision.availability``)."""
    return precision.availability(dev, PRECISIONS)


def bf16_is_native(cc) -> bool:
    """True when a GPU of this compute capability has BF16 tensor cores (8.0 and newer)."""
    return precision.bf16_is_native(specs.parse_cc(cc))


# --------------------------------------------------------------------------- precision widget

def inference_model(precision: str, dev: str | None = None, hidden: int = 512) -> torch.nn.Module:
    """The trained classifier stored for inference at ``precision`` (INT8: :class:`Int8Linear`)."""
    dev = dev or torch_device()
    model = trained_classifier(hidden=hidden, dev=dev)
    if precision == "int8":
        return int8_model(model, "dynamic")
    if precision in ("fp16", "bf16"):
        return copy.deepcopy(model).to(DTYPES[precision])
    return model


def run_precision(precision: str, batch: int = 64, min_time_s: float = 0.1,
                  dev: str | None = None) -> dict:
    """Classifier inference at one precision vs FP32: time, weight memory and output error.

    Raises :class:`PrecisionError` with the reason when the device lacks the precision.
    """
    dev = dev or torch_device()
    if precision not in PRECISIONS:
        raise PrecisionError(f"{precision!r} is not one of {', '.join(PRECISIONS)}.")
    reason = precision_availability(dev).get(precision)
    if reason:
        raise PrecisionError(f"{precision} is not available here: {reason}.")
    data = make_dataset()
    g = torch.Generator().manual_seed(2)
    x = data.x_test[torch.randint(0, data.x_test.shape[0], (batch,), generator=g)].to(dev)
    out = {"precision": precision, "batch": batch, "backend": dev}
    with cpu_threads() if dev == "cpu" else contextlib.nullcontext():
        for p in dict.fromkeys(("fp32", precision)):
            model = inference_model(p, dev)
            xin = x.to(DTYPES[p]) if p in ("fp16", "bf16") else x
            with torch.inference_mode(), (device.tf32(p == "tf32") if dev == "cuda"
                                          else contextlib.nullcontext()):
                y = model(xin).float()
                if dev == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                t = _bench(lambda: model(xin), p, dev, min_time_s, size=batch)
                peak = torch.cuda.max_memory_allocated() if dev == "cuda" else None
            out[p] = {"median_s": t.median_s, "p20_s": t.p20_s, "p80_s": t.p80_s,
                      "weights_bytes": model_bytes(model), "peak_bytes": peak,
                      "accuracy": accuracy(model, (data.x_test.to(DTYPES[p]) if p in ("fp16", "bf16")
                                                   else data.x_test).to(dev), data.y_test.to(dev)),
                      "device": t.device}
            if p == "fp32":
                y32 = y
            out[p]["rel_error"] = float((y - y32).norm() / y32.norm())
    return out


# --------------------------------------------------------------------------- GPU choice

def training_precision(gpu) -> tuple[str, bool]:
    """(precision, needs loss scaling) for mixed-precision training on ``gpu``, from the spec table.

    BF16 where the part has it; FP16 with loss scaling where FP16 is faster than FP32; else
    FP32 (``models.training_precision``, which exercise 6.3's checker uses too).
    """
    return models.training_precision(specs.lookup(gpu))


def precision_choices() -> Table:
    """The recommended training precision for every GPU in the table, with the peak ratio it buys."""
    rows = []
    for g in specs.all_gpus():
        p, scaling = training_precision(g.key)
        rows.append({"GPU": g.key, "cc": g.cc, "train in": p, "loss scaling": "yes" if scaling else "no",
                     "peak vs fp32 (x)": g.peak_flops(p) / g.peak_flops("fp32"),
                     "int8 peak TOP/s": g.peak_tflops.get("int8")})
    return Table(rows, caption="Training precision by GPU, from the spec table (dense datasheet peaks)")


def memory_by_precision(params: int = 1_000_000_000, activations: int = 2_000_000_000,
                        optimizer: str = "adam") -> Table:
    """Bytes of a training step by precision (model), by kind."""
    rows = []
    for dt in ("fp32", "bf16", "fp16"):
        m = models.training_memory(params, activations, dtype=dt, optimizer=optimizer)
        rows.append({"dtype": dt + (" + fp32 master" if m.master_weights else ""),
                     "weights GB": m.weights / 1e9, "gradients GB": m.gradients / 1e9,
                     "master GB": m.master_copy / 1e9, "optimizer GB": m.optimizer_state / 1e9,
                     "activations GB": m.activations / 1e9, "total GB": m.total / 1e9})
    return Table(rows, caption=f"model: training memory of {params:,} parameters and "
                               f"{activations:,} saved activation values, {optimizer}")


# --------------------------------------------------------------------------- notebook helpers

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


def amp_explanation(result: dict) -> str:
    """What the AMP measurement shows on this device, in a few sentences."""
    sp = result["speedup_vs_fp32"]
    parts = [f"{p}: {v:.2f}x" for p, v in sp.items() if p != "fp32"]
    head = f"Measured speed-up over FP32 on {result['device']}: " + ", ".join(parts) + "."
    if result["backend"] == "cuda":
        return head + (" Tensor cores run the 16-bit matrix products; FP32 runs on the ordinary "
                       "cores unless TF32 is allowed.")
    faster = [p for p, v in sp.items() if p != "fp32" and v > 1.05]
    slower = [p for p, v in sp.items() if p != "fp32" and v < 0.95]
    tail = result["cpu_support"]["sentence"]
    verdict = []
    if faster:
        verdict.append(f"{' and '.join(faster)} ran faster here")
    if slower:
        verdict.append(f"{' and '.join(slower)} ran slower here")
    return (head + " " + tail + (" So " + "; ".join(verdict) + "." if verdict else "")
            + _memory_sentence(result))


def _memory_sentence(result: dict) -> str:
    """The counted memory per precision, and why 16 bits can need more of it at a small step."""
    mem = {r["precision"]: r["memory_MB"] for r in result["rows"] if "memory_MB" in r}
    if "fp32" not in mem or len(mem) < 2:
        return ""
    s = " Memory of a step: " + ", ".join(f"{p} {v:.2f} MB" for p, v in mem.items()) + "."
    if any(v > mem["fp32"] for p, v in mem.items() if p != "fp32"):
        s += (f" Autocast keeps the FP32 weights and adds a 16-bit copy of each for the step; at "
              f"{result['tokens']} tokens the activations it halves weigh less than those copies. "
              "With many tokens per step the activations dominate, and the total falls.")
    return s


def int8_explanation(result: dict) -> str:
    """What the INT8 measurement shows on this device."""
    rows = {r["version"]: r for r in result["rows"]}
    parts = [f"{k}: {r['speed-up vs fp32']:.2f}x" for k, r in rows.items() if k != "fp32"]
    s = (f"Speed-up over FP32 at batch {result['batch']} on {result['device']}: "
         + ", ".join(parts) + f". Weights {result['size_ratio']:.1f}x smaller; held-out accuracy "
         f"changed by {-100 * result['accuracy_drop']:+.2f} points.")
    if result.get("int8_path", "torch._int_mm") != "torch._int_mm":
        s += (" 'int8 dynamic (ours)' did not use an INT8 kernel here: " + result["int8_probe"])
    elif result["int8_speedup"] <= 1.0:
        s += (" INT8 was not faster here: this device's INT8 kernels do not beat its FP32 ones at "
              "this size (small matrices spend their time quantizing and in overheads).")
    return s


#: /proc/cpuinfo flags of x86 INT8 dot-product instructions that sum u8 x s8 products straight
#: into INT32 (VNNI, AVX-VNNI, AMX), where older instructions (vpmaddubsw) go through INT16.
INT8_DOT_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")


def int8_gemm_report(dev: str | None = None) -> str:
    """Whether this device's ``torch._int_mm`` is exact (:func:`int8_gemm_probe`), which INT8
    product the chapter uses, and on a CPU its INT8 dot-product instructions."""
    dev = dev or torch_device()
    s = int8_gemm_probe(dev).sentence
    if dev != "cpu":
        return s
    flags = _cpu_flags()
    have = [f for f in INT8_DOT_FLAGS if f in flags]
    if have:
        s += f" This CPU has INT8 dot-product instructions with INT32 sums ({', '.join(have)})."
    elif flags:
        s += (" This CPU has no VNNI or AMX instructions: an INT8 kernel here must go through "
              "16-bit intermediate sums or widen the values first.")
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA")
    if isa:
        s += f" ONEDNN_MAX_CPU_ISA={isa} is set: oneDNN uses no instructions beyond {isa} here."
    return s


def alignment_note(n: int = 4096) -> Table:
    """BF16 matmul rate at a multiple of 8 and one below it: measured on a GPU, reference data elsewhere."""
    if torch_device() == "cuda":
        a = alignment(n, min_time_s=0.1)
        return Table([{"size": int(k), "TFLOP/s (measured)": v} for k, v in a.items()],
                     caption=f"{n}^3 vs {n - 1}^3 BF16 matrix products on {device.describe().name}")
    rows = [{"GPU": ref.gpu, "size": int(k), "TFLOP/s": v, "source": ref.provenance}
            for ref, val in reference.find("ch6", "alignment_tflops") for k, v in val.items()]
    if rows:
        return Table(rows, caption="BF16 matrix products, aligned vs not (reference measurements)")
    return Table([], caption="No GPU here and no reference data for chapter 6 yet: on a GPU this "
                             "cell times an n^3 and an (n-1)^3 BF16 product (make gpu-check records "
                             "them as reference data).")


def bf16_report() -> Table:
    """Whether BF16 is native: measured BF16 vs FP16 matmul on a GPU; the table's GPUs by compute capability elsewhere."""
    if torch_device() == "cuda":
        r = bf16_vs_fp16_matmul(4096, min_time_s=0.1)
        cc = torch.cuda.get_device_capability()
        verdict = "native" if r["bf16_over_fp16"] and r["bf16_over_fp16"] > 0.7 else "emulated"
        return Table([{"GPU": device.describe().name, "cc": "%d.%d" % cc,
                       "torch says BF16 supported": torch.cuda.is_bf16_supported(),
                       "FP16 TFLOP/s": r["fp16"], "BF16 TFLOP/s": r["bf16"],
                       "BF16 / FP16": r["bf16_over_fp16"], "verdict": verdict}],
                     caption="4096^3 matrix products, measured here")
    rows = [{"GPU": g.key, "cc": g.cc, "BF16 tensor cores": "yes" if bf16_is_native(g.cc) else
             "no: emulated, slower than FP16", "bf16 peak TFLOP/s": g.peak_tflops.get("bf16"),
             "fp16 peak TFLOP/s": g.peak_tflops.get("fp16")} for g in specs.all_gpus()]
    return Table(rows, caption="No GPU here: the rule (cc >= 8.0) applied to the spec table "
                               "(datasheet peaks; a missing bf16 peak means no BF16 tensor cores)")


# --------------------------------------------------------------------------- headless runner

def _jsonable_grads(g: dict) -> dict:
    """Histogram counts instead of raw arrays (JSON-ready)."""
    bins = np.logspace(-14, 0, 57)
    out = {k: v for k, v in g.items() if not isinstance(v, np.ndarray)}
    out["bins"] = bins.tolist()
    for k in ("weights", "activations"):
        v = g[k]
        out[k + "_hist"] = np.histogram(np.clip(v, bins[0], bins[-1]), bins)[0].tolist()
        out[k + "_zero"] = int(np.sum(v == 0))
    return out


def run_all(quick: bool = True, progress=None) -> dict:
    """Every experiment of the chapter, as JSON-ready results (for the headless runner)."""
    t = 0.05 if quick else 0.3
    out = {}
    steps = [("formats", lambda: {"rows": format_table().rows}),
             ("gradients", lambda: _jsonable_grads(gradient_magnitudes())),
             ("loss_scaling", lambda: loss_scaling(steps=60 if quick else 150)),
             ("scale_sweep", lambda: scale_sweep()),
             ("amp", lambda: amp_training(min_time_s=t)),
             ("int8", lambda: int8_inference(min_time_s=t))]
    for i, (name, fn) in enumerate(steps):
        out[name] = fn()
        if progress:
            progress((i + 1) / len(steps))
    return out


def int8_gemm(m: int = 8192, k: int = 8192, n: int = 8192, min_time_s: float = 0.2,
              dev: str = "cuda") -> dict:
    """INT8 x INT8 → INT32 (``torch._int_mm``) against BF16 and FP32 matmul of the same shape."""
    g = torch.Generator(device=dev).manual_seed(0)
    a = torch.randn(m, k, device=dev, generator=g)
    b = torch.randn(n, k, device=dev, generator=g)
    aq, as_ = quantize_per_channel(a)
    bq, bs = quantize_per_channel(b)
    # Checked on 256 rows against FP64 (FP32 sums of 8192 terms could err by up to
    # 8192 * 2^-24 * sum|products|, as much as the bound below). What remains is quantization:
    # rounding to steps of max|x| / 127 (max about 4 sigma for 8192 Gaussian values) errs by
    # s / sqrt(12), 0.9 % per operand, about 1.3 % for the product (1.28 % on an H200).
    r = min(m, 256)
    ref = a[:r].double() @ b.double().t()
    got = torch._int_mm(aq, bq.t())[:r].double() * as_[:r, None].double() * bs[None, :].double()
    err = float((got - ref).norm() / ref.norm())
    assert err < 0.02, (f"int8 GEMM relative error {err:.3g} is over 0.02"
                        + ("" if int8_gemm_probe(dev).exact else f": {int8_gemm_probe(dev).sentence}"))
    flops = 2 * m * n * k
    ab, bb = a.bfloat16(), b.bfloat16()
    out = {"shape": [m, k, n], "int8_rel_error": err}
    for label, fn in (("fp32", lambda: a @ b.t()), ("bf16", lambda: ab @ bb.t()),
                      ("int8", lambda: torch._int_mm(aq, bq.t()))):
        tm = _bench(fn, label, dev, min_time_s, flops=flops)
        out[label + "_tops"] = tm.gflops / 1e3
    return out


LOW_PRECISION_MATMUL_RTOL = {DTYPES[p]: rtol for p, rtol in  # moved: precision
                             precision.LOW_PRECISION_MATMUL_RTOL.items()}


def check_square_matmul(a: torch.Tensor, name: str, product=torch.matmul) -> float:
    """``product(a, a)`` (the matmul that is timed) in a's own type against float64 on the
    same, already rounded, inputs, over its first 64 rows; returns the relative error and
    raises when it is over the type's tolerance."""
    rows = a[:64]
    got = product(rows, a).double().cpu()
    r64, a64 = rows.double().cpu(), a.double().cpu()
    ref = r64 @ a64
    err = float((got - ref).norm() / ref.norm())
    # Plus the worst case of FP32 accumulation, in any order and on any number of cores: a sum
    # of n products errs by at most n * 2^-24 * sum|products| (about 1e-2 at n = 4096).
    sums = a.shape[0] * 2.0 ** -24 * float((r64.abs() @ a64.abs()).norm() / ref.norm())
    rtol = LOW_PRECISION_MATMUL_RTOL.get(a.dtype, 0.0) + sums
    assert err < rtol, f"{name}: relative error {err:.3g} of a @ a is over {rtol:.3g}"
    return err


def bf16_vs_fp16_matmul(n: int = 4096, min_time_s: float = 0.2, dev: str = "cuda") -> dict:
    """TFLOP/s of an n x n x n matmul in FP16 and in BF16: far apart when BF16 is emulated."""
    out = {}
    for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        a = torch.randn(n, n, device=dev).to(dtype)
        try:
            check_square_matmul(a, f"{name} matmul, n={n}")
            out[name] = _bench(lambda a=a: a @ a, name, dev, min_time_s, flops=2 * n ** 3).gflops / 1e3
        except RuntimeError as exc:  # a GPU or build without BF16 GEMMs at all
            out[name], out[name + "_error"] = 0.0, str(exc)[:120]
    out["bf16_over_fp16"] = out["bf16"] / out["fp16"] if out["fp16"] else None
    return out


def alignment(n: int = 8192, min_time_s: float = 0.2, dev: str = "cuda") -> dict:
    """BF16 matmul TFLOP/s at a size that is a multiple of 8 and one that is not."""
    out = {}
    for size in (n, n - 1):
        a = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
        check_square_matmul(a, f"bf16 matmul, n={size}")
        tm = _bench(lambda a=a: a @ a, str(size), dev, min_time_s, flops=2 * size ** 3)
        out[str(size)] = tm.gflops / 1e3
    return out


def gpu_check(dev: str = "cuda") -> dict:
    """The figures chapter 6's issue names, measured on this GPU, with each threshold's pass/fail.

    ``dev="cpu"`` takes the same steps on the CPU, for the tests of this function on machines
    without a GPU; its figures and verdicts mean nothing there.
    """
    if dev == "cuda":
        device.require_cuda("chapter 6's GPU check", needs="torch")
    cc = torch.cuda.get_device_capability() if dev == "cuda" else (0, 0)
    amp = amp_training(("fp32", "tf32", "bf16", "fp16"), min_time_s=0.3, dev=dev)
    sp = amp["speedup_vs_fp32"]
    ls = loss_scaling(steps=100, dev=dev, min_time_s=0.1)
    i8 = int8_inference(batch=4096, hidden=4096, min_time_s=0.2, dev=dev)
    gemm = int8_gemm(dev=dev)
    align = alignment(dev=dev)
    bf16_fp16 = bf16_vs_fp16_matmul(dev=dev)
    checks = {
        "bf16_autocast_speedup": check.threshold(sp.get("bf16", 0.0), 2.0,
                                        sp.get("bf16", 0.0) >= 2.0 or cc < (8, 0),
                                        "fp32 step time / bf16 autocast step time (x); "
                                        "required on GPUs with BF16 tensor cores", rule="at least"),
        "fp16_scaled_matches_fp32": check.threshold(max(ls["max_rel_gap"]["static"], ls["max_rel_gap"]["dynamic"]),
                                           LOSS_MATCH_RTOL,
                                           all(ls["scaled_match"].values()),
                                           "largest relative loss gap, scaled fp16 vs fp32",
                                           rule="at most"),
        "fp16_unscaled_loses_gradients": check.at_least(ls["max_zeroed_unscaled"], 0.05,
                                                        "largest share of weight gradients flushed "
                                                        "to zero, fp16 without scaling"),
        "int8_gemm_faster_than_bf16": check.more_than(gemm["int8_tops"] / gemm["bf16_tops"], 1.0,
                                                      "int8 TOP/s / bf16 TFLOP/s for an 8192^3 "
                                                      "matmul"),
    }
    return {"checks": checks, "passed": all(c["passed"] for c in checks.values()),
            "compute_capability": "%d.%d" % cc,
            "amp": {"tokens": amp["tokens"], "d": amp["d"], "blocks": amp["blocks"],
                    "rows": amp["rows"], "speedup_vs_fp32": sp},
            "loss_scaling": {"max_rel_gap": ls["max_rel_gap"],
                             "max_zeroed_unscaled": ls["max_zeroed_unscaled"],
                             "step_time_s": ls.get("step_time_s")},
            "int8": {k: i8[k] for k in ("batch", "hidden", "rows", "int8_speedup", "accuracy_drop",
                                        "size_ratio")},
            "int8_gemm": gemm, "alignment_tflops": align, "bf16_vs_fp16_matmul": bf16_fp16}


__all__ = [n for n in dir() if not n.startswith("_")]
