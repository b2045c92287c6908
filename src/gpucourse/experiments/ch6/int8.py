"""Section 4, INT8 inference: symmetric quantization (per tensor, per output channel),
:class:`Int8Linear` and INT8 copies of a model (dynamic, static after calibration,
weight-only), FP32 vs INT8 inference checked then timed, the INT8 GEMM of a GPU against BF16
and FP32, and what the measurements say on this device.

The INT8 path, chosen on purpose: :class:`Int8Linear` (per-token activation scales, per-channel
weight scales, ``torch._int_mm`` with INT32 accumulation) runs the same code on the CPU and on
a GPU, so the learner sees the whole algorithm. ``torch._int_mm`` is not exact on every CPU
(without VNNI, oneDNN's kernels can saturate 16-bit intermediate sums):
``precision.int8_gemm_probe`` tests it once per device, and where it is wrong the INT8 values
are multiplied as float64, which is exact (``precision.int8_mm``). PyTorch's
``torch.ao.quantization.quantize_dynamic`` is measured beside it on the CPU as the library
baseline; PyTorch has deprecated that API in favour of torchao (its maintained successor,
``torchao.quantization.quantize_``), which is not a dependency of the course.
"""
from __future__ import annotations

import copy
import os
import warnings

import torch
import torch.nn.functional as F

from ... import bench, device, precision
from ...display import Table
from ...errors import PrecisionError, whole_number
from .common import bench_on, cpu_flags, threads_for
from .data import accuracy, make_dataset, trained_classifier


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
    INT8 x INT8 with INT32 accumulation (``precision.int8_mm``: ``torch._int_mm`` where it is
    exact on this device), then rescales by both scales.
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
        acc = precision.int8_mm(xq, self.qweight_t)  # INT32: no overflow for k < 2**31 / 127**2
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
    dev = dev or device.torch_device()
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
    with threads_for(dev):
        for label, m in versions.items():
            with torch.inference_mode():
                err = float((m(x_test) - ref).norm() / ref.norm())
            rows.append({"version": label, "output rel. error": err,
                         "accuracy": accuracy(m, x_test, y_test)})
    return Table(rows, caption=f"Static (calibrated on {calibration_batches * batch} training points) "
                               "vs dynamic activation scales, 2048 held-out points")


def library_int8_model(model: torch.nn.Module):
    """PyTorch's dynamic quantization (CPU only), or None where this PyTorch no longer has it."""
    try:  # here, not at the top: PyTorch has deprecated torch.ao.quantization and may drop it
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

    Versions: FP32; INT8 weight-only; INT8 dynamic (ours, ``precision.int8_mm``: ``torch._int_mm``
    where the probe found it exact here); and on the CPU PyTorch's ``quantize_dynamic`` as the
    library baseline ``ref``. ``int8_path`` says which INT8 product "ours" used, and why.
    """
    dev = dev or device.torch_device()
    probe = precision.int8_gemm_probe(dev)
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
    with threads_for(dev):
        for label, m in versions.items():
            err = 0.0 if label == "fp32" else check_int8(model, m, x_test[:512], name=label)
            with torch.inference_mode():
                t = bench_on(lambda m=m: m(x), label, dev, min_time_s, flops=flops, size=batch)
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


# --------------------------------------------------------------------------- INT8 GEMM on a GPU

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
                        + ("" if precision.int8_gemm_probe(dev).exact
                           else f": {precision.int8_gemm_probe(dev).sentence}"))
    flops = 2 * m * n * k
    ab, bb = a.bfloat16(), b.bfloat16()
    out = {"shape": [m, k, n], "int8_rel_error": err}
    for label, fn in (("fp32", lambda: a @ b.t()), ("bf16", lambda: ab @ bb.t()),
                      ("int8", lambda: torch._int_mm(aq, bq.t()))):
        tm = bench_on(fn, label, dev, min_time_s, flops=flops)
        out[label + "_tops"] = tm.gflops / 1e3
    return out


# --------------------------------------------------------------------------- what the results say

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
    """Whether this device's ``torch._int_mm`` is exact (``precision.int8_gemm_probe``), which INT8
    product the chapter uses, and on a CPU its INT8 dot-product instructions."""
    dev = dev or device.torch_device()
    s = precision.int8_gemm_probe(dev).sentence
    if dev != "cpu":
        return s
    flags = cpu_flags()
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
