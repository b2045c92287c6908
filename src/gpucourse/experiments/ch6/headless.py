"""Chapter 6 without a notebook: ``run_all`` (every experiment, JSON-ready, for the headless
runner) and ``gpu_check`` (the figures chapter 6's acceptance names, measured on a GPU, with
each threshold's verdict, for ``make gpu-check``)."""
from __future__ import annotations

import numpy as np
import torch

from ... import device
from ...check import thresholds
from .amp import amp_training
from .device_support import alignment, bf16_vs_fp16_matmul
from .int8 import int8_gemm, int8_inference
from .number_formats import format_table
from .scaling import LOSS_MATCH_RTOL, gradient_magnitudes, loss_scaling, scale_sweep


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
    scaled_gap = max(ls["max_rel_gap"]["static"], ls["max_rel_gap"]["dynamic"])
    checks = {
        "bf16_autocast_speedup": thresholds.threshold(
            sp.get("bf16", 0.0), 2.0, sp.get("bf16", 0.0) >= 2.0 or cc < (8, 0),
            "fp32 step time / bf16 autocast step time (x); required on GPUs with BF16 tensor "
            "cores", rule="at least"),
        "fp16_scaled_matches_fp32": thresholds.threshold(
            scaled_gap, LOSS_MATCH_RTOL, all(ls["scaled_match"].values()),
            "largest relative loss gap, scaled fp16 vs fp32", rule="at most"),
        "fp16_unscaled_loses_gradients": thresholds.at_least(
            ls["max_zeroed_unscaled"], 0.05,
            "largest share of weight gradients flushed to zero, fp16 without scaling"),
        "int8_gemm_faster_than_bf16": thresholds.more_than(
            gemm["int8_tops"] / gemm["bf16_tops"], 1.0,
            "int8 TOP/s / bf16 TFLOP/s for an 8192^3 matmul"),
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
