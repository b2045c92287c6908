"""Chapter 5 (accelerated libraries): the SGEMM ladder against cuBLAS, convolution against
cuDNN/oneDNN, dense against sparse, fusion of an elementwise chain, and tensor-core precisions.

Every experiment checks before it times, on fresh random non-uniform data. On a CUDA GPU the
hand-written matmuls (``kernels/matmul.cu``, launched as ``kernels/matmul.py`` says) run
through CuPy and everything is timed with CUDA events at sizes that fill the device. On the
CPU the kernels run on the course's emulator for correctness only; the PyTorch/NumPy
experiments (a matmul ladder from Python loops to BLAS, convolution, sparse vs dense,
torch.compile fusion) are measured for real, and GPU figures come from labelled models or
reference measurements (``gpucourse.reference``, key ``"ch5"``).

One module per section: ``sgemm`` (the SGEMM ladder), ``cpu_matmul`` (the CPU ladder),
``conv``, ``sparse``, ``kernel_fusion``, ``tensor_cores`` (precisions), ``wmma`` (tensor
cores by hand); ``common`` holds what they share and
``headless`` runs them all (``run_all``, ``gpu_check``). This package exports what the
chapter's notebook, its lab, the runner and ``make gpu-check`` call.
"""
from ...precision import MATMUL as PRECISIONS
from ...specs import model_gpu as target_gpu
from .common import library_table, reference_for
from .conv import conv_ladder, cudnn_benchmark_mode, cudnn_table
from .cpu_matmul import cpu_ladder, matmul_size_point
from .headless import gpu_check, run_all
from .kernel_fusion import fusion, fusion_table
from .sgemm import check_matmul, kernel_source, reuse_model, sgemm_ladder, sgemm_summary
from .sparse import crossover_text, sparse_point, sparse_sweep
from .tensor_cores import (peak_table, precision_availability, precision_model, precision_point,
                           precision_sweep, precision_table)
from .wmma import tensor_core_ladder, tensor_core_summary

__all__ = ["PRECISIONS", "check_matmul", "conv_ladder", "cpu_ladder", "crossover_text",
           "cudnn_benchmark_mode", "cudnn_table", "fusion", "fusion_table", "gpu_check",
           "kernel_source", "library_table", "matmul_size_point", "peak_table",
           "precision_availability", "precision_model", "precision_point", "precision_sweep",
           "precision_table", "reference_for", "tensor_core_ladder",
           "tensor_core_summary", "reuse_model", "run_all", "sgemm_ladder",
           "sgemm_summary", "sparse_point", "sparse_sweep", "target_gpu"]
