"""Chapter 2, section 4: allocation in a hot loop. y = a*b + c with a new result per call
against a reused buffer (NumPy and torch measured on the CPU; CuPy with its pool off and on,
and torch's caching allocator, on a GPU), what the pools keep after ``del``, and a caching
allocator in a few lines."""
from __future__ import annotations

import contextlib
import tracemalloc

import numpy as np

from ... import bench, check, device
from ...check.ch2 import TorchAllocationCounter  # the lab's counter of new torch storages
from ...display import Table
from .common import MiB, cupy_or_none, torch_module


ALLOC_N_CPU = 1 << 23
ALLOC_N_GPU = 1 << 22


def _numpy_versions(n: int, seed: int):
    a, b, c = (check.random_array(n, np.float32, seed=seed + i) for i in range(3))
    buf = np.empty_like(a)

    def fresh():
        return a * b + c  # two new arrays per call: a*b, then the sum

    def reuse():
        np.multiply(a, b, out=buf)
        np.add(buf, c, out=buf)
        return buf

    return {"NumPy: new arrays each call": fresh, "NumPy: out= buffer": reuse}, a.nbytes


def _torch_versions(n: int, seed: int, dev: str):
    torch = torch_module()
    a, b, c = (torch.from_numpy(check.random_array(n, np.float32, seed=seed + i)).to(dev)
               for i in range(3))
    buf = torch.empty_like(a)

    def fresh():
        return a * b + c

    def reuse():
        torch.mul(a, b, out=buf)
        buf.add_(c)
        return buf

    return {"torch: new tensors each call": fresh, "torch: out= buffer": reuse}


def _cupy_versions(n: int, seed: int):
    cp = cupy_or_none()
    a, b, c = (cp.asarray(check.random_array(n, np.float32, seed=seed + i)) for i in range(3))
    buf = cp.empty_like(a)
    pool = cp.get_default_memory_pool()

    def fresh():
        return a * b + c

    def reuse():
        cp.multiply(a, b, out=buf)
        cp.add(buf, c, out=buf)
        return buf

    @contextlib.contextmanager
    def no_pool():
        cp.cuda.set_allocator(None)  # every allocation is a cudaMalloc, every free a cudaFree
        try:
            yield
        finally:
            cp.cuda.set_allocator(pool.malloc)

    return fresh, reuse, no_pool


def count_allocations(fn, calls: int = 3) -> dict:
    """New buffers per call of ``fn`` after a first call: torch storages counted with a
    TorchFunctionMode, NumPy bytes with tracemalloc (peak / array size)."""
    fn()
    torch_count = TorchAllocationCounter()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        with torch_count:
            for _ in range(calls):
                fn()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return {"torch_storages_per_call": torch_count.count / calls,
            "numpy_peak_bytes": max(0, peak)}


def check_allocation_versions(n: int = (1 << 18) + 3, seed: int = 0) -> None:
    """Fresh and reused-buffer versions agree; the reused ones allocate nothing per call.

    tracemalloc also sees what a Jupyter kernel's other threads allocate meanwhile (tens of
    KB from widget and message traffic), so the arrays are 1 MiB: far above that noise.
    """
    ref = None
    versions, nbytes = _numpy_versions(n, seed)
    versions.update(_torch_versions(n, seed, "cpu"))
    for name, fn in versions.items():
        got = device.to_host(fn()).copy()
        ref = got if ref is None else ref
        # Every version rounds a*b, then a*b + c: two IEEE operations, so the same bits.
        check.assert_close(got, ref, rtol=0, atol=0, name=name)
        counts = count_allocations(fn)
        if "out=" in name:
            assert counts["torch_storages_per_call"] == 0, f"{name} allocates new tensors"
            assert counts["numpy_peak_bytes"] < nbytes / 2, f"{name} allocates new arrays"
        elif name.startswith("torch"):
            assert counts["torch_storages_per_call"] == 2, f"{name}: {counts}"
        else:
            assert counts["numpy_peak_bytes"] >= nbytes, f"{name}: {counts}"


def allocation_experiment(n: int | None = None, min_time_s: float = 0.2, seed: int = 0) -> dict:
    """Time y = a*b + c with a new result per call against writing into a reused buffer.

    CPU: NumPy and torch, measured. GPU: CuPy with its memory pool off and on, CuPy and torch
    with out= buffers, torch's caching allocator.
    """
    check_allocation_versions(seed=seed)
    cuda = device.is_cuda()
    n = n or (ALLOC_N_GPU if cuda else ALLOC_N_CPU)
    timings = bench.Timings()
    kw = dict(bytes=4 * n * 4, size=n, min_time_s=min_time_s, min_samples=3)
    counts = {}
    if not cuda:
        versions, _ = _numpy_versions(n, seed)
        versions.update(_torch_versions(n, seed, "cpu"))
        for name, fn in versions.items():
            timings.append(bench.benchmark(fn, label=name, backend="cpu", **kw))
            counts[name] = count_allocations(fn, calls=1)
    else:
        cp = cupy_or_none()
        if cp is not None:
            fresh, reuse, no_pool = _cupy_versions(n, seed)
            want = device.to_host(fresh())
            with no_pool():  # the same two IEEE operations (a*b, then + c): the same bits
                check.assert_close(device.to_host(fresh()), want, rtol=0, atol=0,
                                   name="CuPy without a pool")
                timings.append(bench.benchmark(fresh, label="CuPy: new arrays, pool OFF", **kw))
            check.assert_close(device.to_host(reuse()), want, rtol=0, atol=0, name="CuPy with out=")
            timings.append(bench.benchmark(fresh, label="CuPy: new arrays, pool on", **kw))
            timings.append(bench.benchmark(reuse, label="CuPy: out= buffer", **kw))
        if device.torch_cuda_works():
            versions = _torch_versions(n, seed, "cuda")
            want = None
            for name, fn in versions.items():
                got = device.to_host(fn()).copy()
                want = got if want is None else want
                check.assert_close(got, want, rtol=0, atol=0, name=name)  # same two operations
                timings.append(bench.benchmark(fn, label=name + " (caching allocator)", **kw))
    return {"n": n, "device": device.describe().short_name, "timings": [t.to_dict() for t in timings],
            "allocations": counts}


def pool_demo(mib: int = 256) -> dict:
    """What a caching allocator keeps after ``del``: bytes in use and bytes held by the pool,
    relative to the start, for torch and CuPy (GPU only)."""
    device.require_cuda("Reading the memory pools")
    out = {"mib": mib, "stages": []}
    n = mib * MiB // 4

    def recorder(library, in_use, held):
        base = (in_use(), held())

        def stage(label):
            out["stages"].append({"library": library, "stage": label,
                                  "in use (MiB)": (in_use() - base[0]) / MiB,
                                  "held by the pool (MiB)": (held() - base[1]) / MiB})
        return stage

    if device.torch_cuda_works():
        torch = torch_module()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        stage = recorder("torch", torch.cuda.memory_allocated, torch.cuda.memory_reserved)
        stage("start")
        x = torch.empty(n, device="cuda")
        stage(f"after torch.empty ({mib} MiB)")
        del x
        stage("after del")
        torch.cuda.empty_cache()
        stage("after torch.cuda.empty_cache()")
    cp = cupy_or_none()
    if cp is not None:
        pool = cp.get_default_memory_pool()
        pool.free_all_blocks()
        stage = recorder("CuPy", pool.used_bytes, pool.total_bytes)
        stage("start")
        y = cp.empty(n, dtype=cp.float32)
        stage(f"after cp.empty ({mib} MiB)")
        del y
        stage("after del")
        pool.free_all_blocks()
        stage("after free_all_blocks()")
    return out


class ToyCachingAllocator:
    """A caching allocator in a few lines, to watch it work on any machine (a teaching model).

    Requests are rounded up to a block size; a freed block goes to a free list and is handed
    out again for the next request of the same size, so the expensive ``device_malloc`` is
    called only when no cached block fits. ``reserved`` is what ``nvidia-smi`` would show.
    """

    def __init__(self, round_to: int = 512):
        self.round_to = round_to
        self.free: dict[int, int] = {}
        self.in_use = 0
        self.reserved = 0
        self.device_mallocs = 0

    def malloc(self, nbytes: int) -> int:
        size = -(-nbytes // self.round_to) * self.round_to
        if self.free.get(size):
            self.free[size] -= 1
        else:
            self.device_mallocs += 1  # cudaMalloc: slow, and it may synchronize the device
            self.reserved += size
        self.in_use += size
        return size

    def release(self, size: int) -> None:
        self.in_use -= size
        self.free[size] = self.free.get(size, 0) + 1  # kept, not returned to the driver

    def empty_cache(self) -> None:
        self.reserved -= sum(s * k for s, k in self.free.items())
        self.free.clear()


def allocation_table(result: dict) -> Table:
    """Allocations per call of each CPU version: torch tensors with new storage (counted with a
    TorchFunctionMode), NumPy bytes at peak (tracemalloc) in arrays of the input's size."""
    n_bytes = 4 * result["n"]
    rows = Table([], caption="measured: new buffers per call")
    for name, c in result["allocations"].items():
        if name.startswith("torch"):
            rows.append({"version": name, "new buffers per call": c["torch_storages_per_call"],
                         "counted by": "tensors whose storage is new"})
        else:
            rows.append({"version": name, "new buffers per call": round(c["numpy_peak_bytes"] / n_bytes, 2),
                         "counted by": "tracemalloc peak / array size"})
    return rows


def toy_pool_run(iterations: int = 100, sizes=(4 * MiB, 4 * MiB, 1 * MiB)) -> dict:
    """A loop that allocates and frees the same buffers each iteration, with and without a pool."""
    pool = ToyCachingAllocator()
    for _ in range(iterations):
        blocks = [pool.malloc(s) for s in sizes]
        for b in blocks:
            pool.release(b)
    held = pool.reserved
    pool.empty_cache()
    return {"iterations": iterations, "requests": iterations * len(sizes),
            "device_mallocs_without_pool": iterations * len(sizes),
            "device_mallocs_with_pool": pool.device_mallocs,
            "in_use_after_loop": pool.in_use, "reserved_after_loop": held,
            "reserved_after_empty_cache": pool.reserved}

