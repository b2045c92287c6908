"""What several sections of chapter 5 share: where PyTorch runs, the chapter's reference
measurements, and the table of libraries behind the calls."""
from __future__ import annotations

import contextlib

from ... import bench, device, reference
from ...display import Table

SECTION = "ch5"


def load_torch():
    """The torch module."""
    import torch  # heavy: loaded by the experiments that use it, not when the chapter is imported

    return torch


def torch_on_gpu() -> bool:
    """True when PyTorch experiments run on a CUDA GPU."""
    return device.torch_device() == "cuda"


def threads_for(backend: str):
    """bench.cpu_threads() for CPU work, nothing for GPU work."""
    return bench.cpu_threads() if backend == "cpu" else contextlib.nullcontext()


def reference_for(*keys: str) -> list[dict]:
    """Reference measurements of this chapter: [{"label", "gpu", "date", "value"}, ...]."""
    return [{"label": r.label, "gpu": r.gpu, "date": r.date, "command": r.command, "value": v}
            for r, v in reference.find(SECTION, *keys)]


def no_reference_note(what: str) -> str:
    """What the notebook says when there is neither a GPU nor reference data for ``what``."""
    return (f"No GPU here and no reference measurement of {what} in "
            "src/gpucourse/data/reference/ yet: run `make gpu-check` on a GPU to record one. "
            "No numbers are shown rather than invented ones.")


def library_table() -> Table:
    """Which library does the work behind each operation here (read from the installed builds)."""
    torch = load_torch()
    gpu = torch_on_gpu()
    rows = []
    if gpu:
        cudnn = torch.backends.cudnn.version()
        rows += [["torch.matmul, torch.nn.Linear", "cuBLAS / cuBLASLt (dense matrices)", torch.version.cuda],
                 ["torch.nn.functional.conv2d", "cuDNN (convolutions, normalization)",
                  f"{cudnn // 10000}.{cudnn // 100 % 100}.{cudnn % 100}" if cudnn else "not available"],
                 ["torch.sparse_csr_tensor @ dense", "cuSPARSE (sparse matrices)", torch.version.cuda]]
    else:
        rows += [["torch.matmul, torch.nn.Linear",
                  "MKL" if torch.backends.mkl.is_available() else "torch's BLAS", "CPU"],
                 ["torch.nn.functional.conv2d",
                  "oneDNN (mkldnn)" if torch.backends.mkldnn.is_available() else "torch's own loops", "CPU"],
                 ["torch.sparse_csr_tensor @ dense",
                  "MKL sparse BLAS" if torch.backends.mkl.is_available() else "torch's own loops", "CPU"]]
    blas = "OpenBLAS" if bench.openblas() else "the BLAS NumPy was built with"
    rows.append(["numpy.matmul (@)", blas, "CPU"])
    if device.on_gpu():
        import cupy as cp  # optional: present only where a GPU is

        rows += [["cupy.matmul", "cuBLAS", cp.__version__],
                 ["cupyx.scipy.sparse.csr_matrix @ dense", "cuSPARSE", cp.__version__],
                 ["cupy.ElementwiseKernel / RawKernel", "your own CUDA C, compiled by NVRTC", cp.__version__]]
    else:
        rows.append(["cupy.*, cupyx.scipy.sparse", "cuBLAS, cuSPARSE (needs a GPU and CuPy)", "not here"])
    return Table.from_lists(["call", "runs in", "version / device"], rows,
                            caption="Libraries behind the calls on this machine "
                                    f"({device.describe().short_name})")
