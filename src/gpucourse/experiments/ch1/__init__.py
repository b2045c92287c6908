"""Chapter 1 (architecture and bottlenecks): timing done wrong and right, coalesced against
strided access, host transfer against on-device compute, and the roofline.

Every experiment checks its result against NumPy on fresh random data before it times
anything. On a CUDA GPU the kernels run through CuPy and buffers are many times the L2
size; on the CPU the NumPy/PyTorch versions are measured for real, the CUDA C kernels run
on the emulator for correctness, and GPU behaviour comes from ``gpucourse.models`` (labelled
as a model) or from reference measurements.

One module per section: ``timing`` (1), ``strided`` (2), ``transfer`` (3), ``rooflines`` (4);
``headless`` runs them all; ``common`` holds what they share. The kernels' launches are in
their homes, ``kernels.copy`` and ``kernels.vector_add``. This package exports what the
notebook, the lab, the runner and ``make gpu-check`` call.
"""
from .common import default_gpu
from .headless import gpu_check, reference_summary, roofline, run_all, stride_sweep
from .rooflines import cpu_ceilings, cpu_roofline, gpu_roofline_model, model_views
from .strided import (check_copy_kernels, copy_explorer, precision_bandwidth, sector_model,
                      warp_sectors)
from .timing import timing_wrong_vs_right
from .transfer import transfer_sweep, transfer_vs_compute

__all__ = ["check_copy_kernels", "copy_explorer", "cpu_ceilings", "cpu_roofline", "default_gpu",
           "gpu_check", "gpu_roofline_model", "model_views", "precision_bandwidth",
           "reference_summary", "roofline", "run_all", "sector_model", "stride_sweep",
           "timing_wrong_vs_right", "transfer_sweep", "transfer_vs_compute", "warp_sectors"]
