"""Chapter 6 (mixed precision and quantization): number formats, FP16 training without and
with loss scaling, autocast throughput and memory, and INT8 inference.

Every experiment checks its result against an FP32 (or FP64) reference before it times
anything. The numerics are real on every device: FP16 gradients are FP16 tensors, INT8
matrix products are integer products. On a CUDA GPU the same functions run on the GPU at
sizes that fill it and report CUDA-event timings and ``torch.cuda.max_memory_allocated``.

The modules, lowest first, with the notebook's section: ``common`` (timing on the device, CPU
threads, CPU flags), ``data`` (the classifier and its data), ``int8`` (4, INT8 inference:
quantization, ``Int8Linear``, the INT8 GEMM), ``number_formats`` (1, formats and rounding),
``scaling`` (2, loss scaling), ``device_support`` (1 and 3, sizes off a multiple of 8 and
BF16 vs FP16 on this CPU or GPU), ``amp`` (3, autocast), ``widget`` (5, the precision
dropdown), ``gpu_choice`` (6, a training precision per GPU, memory by precision) and
``headless`` (``run_all``, ``gpu_check``).
The precisions, their tolerances and availability, the INT8 probe and product and the loss
scaler are ``gpucourse.precision``'s. This package exports what the notebook, the lab, the
runner and ``make gpu-check`` use; tests import the modules.
"""
from __future__ import annotations

from ...precision import availability as precision_availability
from .amp import amp_explanation, amp_model, amp_table, amp_training, autocast_dtypes
from .device_support import alignment_note, bf16_report
from .gpu_choice import memory_by_precision, precision_choices
from .headless import gpu_check, run_all
from .int8 import (int8_explanation, int8_gemm_report, int8_inference, int8_table,
                   per_channel_demo, static_vs_dynamic)
from .number_formats import check_rounding, format_table
from .scaling import gradient_magnitudes, loss_scaling, loss_scaling_table, scale_sweep, zeroed_at_scale
from .widget import run_precision

__all__ = [
    "alignment_note", "amp_explanation", "amp_model", "amp_table", "amp_training",
    "autocast_dtypes", "bf16_report", "check_rounding", "format_table", "gpu_check",
    "gradient_magnitudes", "int8_explanation", "int8_gemm_report", "int8_inference", "int8_table",
    "loss_scaling", "loss_scaling_table", "memory_by_precision", "per_channel_demo",
    "precision_availability", "precision_choices", "run_all", "run_precision", "scale_sweep",
    "static_vs_dynamic", "zeroed_at_scale",
]
