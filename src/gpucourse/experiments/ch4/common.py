"""What several sections of chapter 4 share: reference data, the array library of the device
the kernels run on, a copy's bandwidth (the ceiling), and a kernel's source."""
from __future__ import annotations

import numpy as np

from ... import bench, device, kernels, reference


def references(key: str, *required: str) -> list[dict]:
    """ch4/``key`` of every reference file that has ``required``, with its label and GPU."""
    return [{"label": ref.label, "gpu": ref.gpu, **val} for ref, val in reference.find("ch4", key)
            if isinstance(val, dict) and all(k in val for k in required)]


def xp():
    """CuPy where the kernels run on a GPU, else NumPy."""
    if device.on_gpu():
        import cupy as cp  # optional: installed only where there is a GPU

        return cp
    return np


def copy_ceiling(x, min_time_s: float = 0.1) -> bench.Timing:
    """A large copy of ``x`` on its device: bytes read plus bytes written per second."""
    lib = xp() if not isinstance(x, np.ndarray) else np
    dst = lib.empty_like(x)
    if lib is np:
        fn = lambda: np.copyto(dst, x)  # noqa: E731
    else:  # cudaMemcpy device to device: the copy engine's best
        fn = lambda: dst.data.copy_from_device_async(x.data, x.nbytes)  # noqa: E731
    return bench.benchmark(fn, label="copy (read + write)", bytes=2 * x.nbytes, size=x.size,
                           min_time_s=min_time_s, backend="cpu" if lib is np else None)


def kernel_source(file: str, name: str):
    """The source of one ``__global__`` function of a course kernel file."""
    return kernels.source_of(file, name)
