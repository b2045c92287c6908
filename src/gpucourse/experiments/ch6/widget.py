"""Section 5, the precision dropdown: the chapter's classifier stored for inference at one
precision and timed beside FP32, with its weight memory and output error."""
from __future__ import annotations

import contextlib
import copy

import torch

from ... import device
from ...errors import PrecisionError
# names, not the module: the widget's argument is called ``precision``
from ...precision import INFERENCE, availability, torch_dtype
from .common import bench_on, threads_for
from .data import accuracy, make_dataset, trained_classifier
from .int8 import int8_model, model_bytes


def inference_model(precision: str, dev: str | None = None, hidden: int = 512) -> torch.nn.Module:
    """The trained classifier stored for inference at ``precision`` (INT8: ``int8.Int8Linear``)."""
    dev = dev or device.torch_device()
    model = trained_classifier(hidden=hidden, dev=dev)
    if precision == "int8":
        return int8_model(model, "dynamic")
    if precision in ("fp16", "bf16"):
        return copy.deepcopy(model).to(torch_dtype(precision))
    return model


def run_precision(precision: str, batch: int = 64, min_time_s: float = 0.1,
                  dev: str | None = None) -> dict:
    """Classifier inference at one precision vs FP32: time, weight memory and output error.

    Raises :class:`PrecisionError` with the reason when the device lacks the precision.
    """
    dev = dev or device.torch_device()
    if precision not in INFERENCE:
        raise PrecisionError(f"{precision!r} is not one of {', '.join(INFERENCE)}.")
    reason = availability(dev).get(precision)
    if reason:
        raise PrecisionError(f"{precision} is not available here: {reason}.")
    data = make_dataset()
    g = torch.Generator().manual_seed(2)
    x = data.x_test[torch.randint(0, data.x_test.shape[0], (batch,), generator=g)].to(dev)
    out = {"precision": precision, "batch": batch, "backend": dev}
    with threads_for(dev):
        for p in dict.fromkeys(("fp32", precision)):
            model = inference_model(p, dev)
            xin = x.to(torch_dtype(p)) if p in ("fp16", "bf16") else x
            with torch.inference_mode(), (device.tf32(p == "tf32") if dev == "cuda"
                                          else contextlib.nullcontext()):
                y = model(xin).float()
                if dev == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                t = bench_on(lambda: model(xin), p, dev, min_time_s, size=batch)
                peak = torch.cuda.max_memory_allocated() if dev == "cuda" else None
            out[p] = {"median_s": t.median_s, "p20_s": t.p20_s, "p80_s": t.p80_s,
                      "weights_bytes": model_bytes(model), "peak_bytes": peak,
                      "accuracy": accuracy(model, (data.x_test.to(torch_dtype(p))
                                                   if p in ("fp16", "bf16") else data.x_test).to(dev),
                                           data.y_test.to(dev)),
                      "device": t.device}
            if p == "fp32":
                y32 = y
            out[p]["rel_error"] = float((y - y32).norm() / y32.norm())
    return out
