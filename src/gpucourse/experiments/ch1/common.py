"""What several sections of chapter 1 share: sizes, the GPU the models describe, the backend
probes, random inputs, the copy kernels and the library copy ceiling, and the least work each
operation must do."""
from __future__ import annotations

import numbers

import numpy as np

from ... import bench, device, kernels, specs
from ...errors import LaunchError
from ...kernels import copy as copy_home
from ...kernels import matmul as matmul_home
from ...kernels import vector_add as vector_add_home

STRIDES = (1, 2, 4, 8, 16, 32)
BLOCK = copy_home.BLOCK
CPU_LINE_BYTES = 64
# The GPU the models describe where no GPU of the spec table is active.
FALLBACK_GPU = specs.DEFAULT_GPU
MiB = 2**20


def progress_to(progress, fraction):
    """Report ``fraction`` done to a progress callback, if there is one."""
    if progress:
        progress(fraction)


def default_gpu() -> str:
    """The spec-table name of the GPU the chapter's models describe (``specs.model_gpu``), or
    FALLBACK_GPU where that GPU is not in the table: the notebook's GPU menus list the table's
    GPUs, and the transfer and roofline models need its host link and peaks."""
    spec = specs.model_gpu()
    return FALLBACK_GPU if spec.estimated else spec.key


def model_spec(gpu=None) -> specs.GPUSpec:
    """The GPU a model describes: ``gpu`` (a table name or a GPUSpec), else ``default_gpu()``."""
    return specs.model_gpu(gpu if gpu is not None else default_gpu())


def cupy_or_none():
    """CuPy when the active backend is a GPU that CuPy can use, else None."""
    if device.on_gpu():
        import cupy  # optional: only a GPU machine has it

        return cupy
    return None


def torch_cuda() -> bool:
    """True when PyTorch can run on the active CUDA GPU."""
    return device.is_cuda() and device.torch_cuda_works()


def big_random(n: int, seed: int) -> np.ndarray:
    """Large float32 input, random and non-uniform in [-0.5, 1.5) (cheaper than random_array)."""
    return np.random.default_rng(seed).random(n, dtype=np.float32) * np.float32(2) - np.float32(0.5)


# --------------------------------------------------------------------------- the copy kernels

def copy_kernels() -> dict:
    """{"coalesced": copy_v1_coalesced, "strided": copy_v2_strided, "others": {name: kernel}}.

    "others" holds the later versions of copy.cu (the coalesced signature (in, out, n), e.g.
    wider loads); the GPU sweep times them too.
    """
    mod = kernels.load("copy")
    first, strided, *later = copy_home.VERSIONS
    return {"coalesced": mod[first], "strided": mod[strided],
            "others": {name: mod[name] for name in later}}


def check_block_and_stride(block: int, stride: int | None) -> None:
    """One sentence for a block size or stride that is not a whole number of at least 1."""
    whole = all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                for v in (block, 1 if stride is None else stride))
    if not whole or block < 1 or (stride is not None and stride < 1):
        raise LaunchError(f"block size {block!r} and stride {stride!r} must both be whole numbers "
                          "of at least 1 (e.g. block 256, stride 1 for a coalesced copy).")


def launch_copy(ks: dict, x, y, n: int, stride: int | None, block: int = BLOCK) -> None:
    """One copy of ``n`` floats: the coalesced kernel when ``stride`` is None, else the strided one."""
    check_block_and_stride(block, stride)
    copy_home.run(ks["coalesced"] if stride is None else ks["strided"], x, y, n, stride, block)


def copy_ceiling_gpu(nbytes: int, min_time_s: float) -> bench.Timing:
    """A large device-to-device copy by the library (CuPy or PyTorch): the measured ceiling."""
    cp = cupy_or_none()
    n = nbytes // 4
    if cp is not None:
        a = cp.random.random(n, dtype=cp.float32)
        b = cp.empty_like(a)
        fn = lambda: cp.copyto(b, a)  # noqa: E731
    else:
        import torch  # heavy: loaded only where a GPU runs PyTorch

        a = torch.rand(n, device="cuda")
        b = torch.empty_like(a)
        fn = lambda: b.copy_(a)  # noqa: E731
    fn()
    device.synchronize()
    if not bool((b == a).all()):
        raise AssertionError("the library's device copy gave a wrong result")
    return bench.benchmark(fn, label="library device copy", bytes=copy_home.bytes_moved(n),
                           size=n, min_time_s=min_time_s)


# --------------------------------------------------------------------------- work

def minimum_work(n: int, m: int, elem_bytes: int = 4) -> dict[str, tuple[float, float]]:
    """(FLOPs, bytes) each of the chapter's operations must do at least: a vector add of ``n``
    elements (reads two, writes one), a sum of ``n`` (reads them once) and an ``m`` x ``m``
    matmul (reads A and B once, writes C once; caches and tiling decide how close a kernel
    gets to that)."""
    return {"vector add": (vector_add_home.flops(n), vector_add_home.bytes_moved(n, elem_bytes)),
            # reduce.cu's home counts float32 elements; the models also take 2-byte ones
            "sum": (float(n), 1.0 * elem_bytes * n),
            "matmul": (matmul_home.flops(m, m, m), matmul_home.bytes_moved(m, m, m, elem_bytes))}
