"""The course's one timing harness.

``benchmark(fn, *args)`` warms up by time, batches calls that are too short for the
timer, and returns a :class:`Timing` with the median and the 20th/80th percentiles of the
per-call time. On a GPU it times with CUDA events around the queued work (optionally
flushing L2 between samples); on the CPU with ``time.perf_counter_ns``. It never prints:
a ``Timing`` renders itself in a notebook.
"""
from __future__ import annotations

import contextlib
import ctypes
import html
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from . import device as _device
from .errors import DeviceError, whole_number

# A sample shorter than this is dominated by timer resolution and call overhead,
# so short calls are repeated back to back inside one sample.
MIN_SAMPLE_S = {"cpu": 1e-3, "cuda": 2e-4}
DEFAULT_WARMUP_S = {"cpu": 0.05, "cuda": 0.1}
DEFAULT_MIN_TIME_S = 0.2
# On a shared machine a multi-threaded CPU timing jumps by whole scheduler time slices
# whenever one of its threads is preempted (the others wait at the next barrier), which
# makes ratios meaningless; several threads per process make timings swing by 10x. CPU work
# is therefore timed on one thread: stable ratios, GFLOP/s per core. GPU work is unaffected.
CPU_THREADS = 1


def _three_digits(v: float) -> str:
    """3 significant digits, but never scientific notation (1000-1023 KiB, 999.7 ms)."""
    text = f"{v:.3g}"
    return f"{v:.0f}" if "e" in text else text


def format_time(seconds: float) -> str:
    """Seconds in the largest unit that keeps the value at or above 1: '1.23 ms'."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if seconds >= scale or unit == "ns":
            return f"{_three_digits(seconds / scale)} {unit}"
    return f"{_three_digits(seconds)} s"


def format_bytes(n: float, _pos=None) -> str:
    """Bytes in binary units: '64 MiB' (also a matplotlib tick formatter)."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{_three_digits(n / size)} {unit}"
    return f"{_three_digits(n)} B"



@dataclass
class Timing:
    """Per-call times of one benchmarked function, with what is needed to compare them."""

    label: str
    samples_s: list[float]
    batch: int
    device: str
    backend: str
    method: str
    size: Any = None
    bytes: float | None = None
    flops: float | None = None
    l2_flushed: bool = False
    meta: dict = field(default_factory=dict)

    @property
    def median_s(self) -> float:
        return float(np.median(self.samples_s))

    @property
    def p20_s(self) -> float:
        return float(np.percentile(self.samples_s, 20))

    @property
    def p80_s(self) -> float:
        return float(np.percentile(self.samples_s, 80))

    @property
    def count(self) -> int:
        """Number of timed samples (each of ``batch`` calls)."""
        return len(self.samples_s)

    @property
    def spread(self) -> float:
        """(p80 - p20) / median: a unitless noise figure."""
        return (self.p80_s - self.p20_s) / self.median_s if self.median_s > 0 else float("nan")

    @property
    def gbps(self) -> float | None:
        """Effective bandwidth in GB/s (1e9 bytes/s) from ``bytes``, or None."""
        return self.bytes / self.median_s / 1e9 if self.bytes else None

    @property
    def gflops(self) -> float | None:
        """Arithmetic rate in GFLOP/s from ``flops``, or None."""
        return self.flops / self.median_s / 1e9 if self.flops else None

    def speedup_over(self, baseline: "Timing") -> float:
        """How many times faster this is than ``baseline`` (ratio of medians)."""
        return baseline.median_s / self.median_s

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(median_s=self.median_s, p20_s=self.p20_s, p80_s=self.p80_s,
                 gbps=self.gbps, gflops=self.gflops)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Timing":
        keys = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in keys})

    def __str__(self) -> str:
        s = (f"{self.label}: {format_time(self.median_s)} median "
             f"(p20 {format_time(self.p20_s)}, p80 {format_time(self.p80_s)}, "
             f"{self.count} samples x {self.batch} calls, {self.method}, {self.device})")
        if self.gbps:
            s += f", {self.gbps:.3g} GB/s"
        if self.gflops:
            s += f", {self.gflops:.3g} GFLOP/s"
        return s

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return timings_table([self])


def timings_table(timings: list[Timing], baseline: Timing | None = None) -> str:
    """An HTML table of timings, with speed-up against ``baseline`` (default: the first)."""
    if not timings:
        return "<p>no timings</p>"
    base = baseline or timings[0]
    rows = []
    for t in timings:
        cells = [t.label, format_time(t.median_s), f"{format_time(t.p20_s)} – {format_time(t.p80_s)}",
                 f"{t.count}×{t.batch}",
                 f"{t.gbps:.3g}" if t.gbps else "", f"{t.gflops:.3g}" if t.gflops else "",
                 f"{t.speedup_over(base):.2f}×"]
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in
                   ("version", "median", "p20 – p80", "samples×calls", "GB/s", "GFLOP/s",
                    f"speed-up vs {html.escape(base.label)}"))
    return (f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f"<div style='color:#666;font-size:90%'>measured on {html.escape(base.device)} "
            f"with {html.escape(base.method)}</div>")


class Timings(list):
    """A list of Timing records that renders as one table in a notebook."""

    def _repr_html_(self) -> str:
        return timings_table(list(self))

    def __str__(self) -> str:
        return "\n".join(str(t) for t in self)

    def by_label(self) -> dict[str, Timing]:
        return {t.label: t for t in self}


# --------------------------------------------------------------------------- timers

class _CpuTimer:
    method = "perf_counter"

    def start(self):
        self._t0 = time.perf_counter_ns()

    def stop(self) -> float:
        return (time.perf_counter_ns() - self._t0) * 1e-9

    def sync(self):
        pass


class _CudaEventTimer:
    """CUDA events on the current stream: they time the GPU work, not the launch."""

    method = "CUDA events"

    @staticmethod
    def sync():
        # CuPy's and PyTorch's queued work alike (before an L2 flush is timed around), also
        # when GPUCOURSE_DEVICE=cpu but the caller asked for backend="cuda".
        _device.synchronize("cuda")

    def __init__(self):
        if _device.cupy_works():
            import cupy as cp  # optional: present only where a GPU is

            self._start, self._end = cp.cuda.Event(), cp.cuda.Event()
            self._elapsed = lambda: cp.cuda.get_elapsed_time(self._start, self._end) * 1e-3
        else:
            import torch  # heavy: loaded only where a GPU is

            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)
            self._elapsed = lambda: self._start.elapsed_time(self._end) * 1e-3

    def start(self):
        self._start.record()

    def stop(self) -> float:
        self._end.record()
        self._end.synchronize()
        return self._elapsed()


class _L2Flusher:
    """Writes a buffer larger than L2 so the next sample starts with a cold cache."""

    def __init__(self):
        l2 = _device.describe().l2_bytes or 64 * 2**20
        n = 2 * l2 // 4
        if _device.cupy_works():
            import cupy as cp  # optional: present only where a GPU is

            self._buf = cp.empty(n, dtype=cp.float32)
        else:
            import torch  # heavy: loaded only where a GPU is

            self._buf = torch.empty(n, dtype=torch.float32, device="cuda")
        self._i = 0

    def __call__(self):
        self._i += 1
        self._buf.fill(float(self._i))


def _out_of_memory(exc: BaseException) -> bool:
    name = type(exc).__name__
    return "OutOfMemory" in name or "out of memory" in str(exc).lower()


# --------------------------------------------------------------------------- harness

def benchmark(fn: Callable, *args, label: str | None = None, bytes: float | None = None,
              flops: float | None = None, size: Any = None, warmup_s: float | None = None,
              min_time_s: float = DEFAULT_MIN_TIME_S, min_samples: int = 5,
              max_samples: int = 200, batch: int | None = None, flush_l2: bool = False,
              backend: str | None = None, **kwargs) -> Timing:
    """Time ``fn(*args, **kwargs)``: warm-up by time, then samples until ``min_time_s``.

    ``bytes``/``flops`` are the work of ONE call (they give GB/s and GFLOP/s).
    ``backend`` is the device the work runs on (default: the active one); pass
    ``"cpu"`` to time CPU work with a host timer on a GPU machine.
    """
    which = backend or _device.backend()
    if which not in ("cpu", "cuda"):
        raise DeviceError(f"backend {which!r} is not one of 'cpu' or 'cuda'.")
    min_samples = whole_number(min_samples, "min_samples", 5)
    max_samples = whole_number(max_samples, "max_samples", max(200, min_samples), minimum=min_samples)
    if batch is not None and batch < 1:
        raise ValueError(f"batch={batch}: time at least 1 call per sample (or leave it None).")
    for what, amount in (("bytes", bytes), ("flops", flops)):
        if amount is not None and amount < 0:
            raise ValueError(f"{what}={amount}: the work of one call cannot be negative.")
    if which == "cuda" and not _device.cuda_available():
        raise DeviceError("benchmark(backend='cuda') needs a CUDA GPU; use backend='cpu' here.")
    timer = _CudaEventTimer() if which == "cuda" else _CpuTimer()
    flusher = _L2Flusher() if (flush_l2 and which == "cuda") else None
    label = label or getattr(fn, "__name__", "fn")

    def call():
        return fn(*args, **kwargs)

    try:
        # Warm-up by time: first-call costs (compilation, allocation, clock ramp) stay out.
        warm = DEFAULT_WARMUP_S[which] if warmup_s is None else warmup_s
        t_end = time.perf_counter() + warm
        n_warm, per_call = 0, None
        while n_warm < 2 or time.perf_counter() < t_end:
            timer.start()
            call()
            # The fastest warm-up call: one preempted call must not disable batching.
            t = timer.stop()
            per_call = t if per_call is None else min(per_call, t)
            n_warm += 1
        if batch is None:
            batch = 1 if flusher else max(1, math.ceil(MIN_SAMPLE_S[which] / max(per_call, 1e-9)))
        samples: list[float] = []
        t_end = time.perf_counter() + min_time_s
        while len(samples) < min_samples or (time.perf_counter() < t_end
                                             and len(samples) < max_samples):
            if flusher:
                flusher()
                timer.sync()
            timer.start()
            for _ in range(batch):
                call()
            samples.append(timer.stop() / batch)
    except Exception as exc:
        if which == "cuda" and _out_of_memory(exc):
            raise DeviceError(
                f"Out of GPU memory while timing {label!r}: use a smaller size, or free memory "
                "(delete large arrays, then torch.cuda.empty_cache() / "
                "cupy.get_default_memory_pool().free_all_blocks())."
            ) from exc
        raise
    return Timing(label=label, samples_s=samples, batch=batch,
                  device=_device.describe(which).short_name,
                  backend=which, method=timer.method, size=size, bytes=bytes, flops=flops,
                  l2_flushed=flusher is not None)


def compare(fns: dict[str, Callable], **kwargs) -> Timings:
    """Benchmark several zero-argument callables with the same settings, in order."""
    return Timings(benchmark(f, label=name, **kwargs) for name, f in fns.items())


# --------------------------------------------------------------------------- CPU threads

def openblas():
    """NumPy's OpenBLAS as (set_num_threads, get_num_threads), or None if it cannot be found."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for suffix in ("64_", ""):
            for prefix in ("scipy_openblas", "openblas"):
                setter = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
                getter = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
                if setter is not None and getter is not None:
                    return setter, getter
    return None


@contextlib.contextmanager
def cpu_threads(n: int | None = None):
    """Run PyTorch and NumPy's BLAS on ``n`` threads (default CPU_THREADS) inside the block;
    the previous counts come back afterwards."""
    import torch  # heavy: only CPU timings of PyTorch work use this

    n = CPU_THREADS if n is None else n
    old = torch.get_num_threads()
    blas = openblas()
    old_blas = blas[1]() if blas else None
    torch.set_num_threads(n)
    if blas:
        blas[0](n)
    try:
        yield
    finally:
        torch.set_num_threads(old)
        if blas:
            blas[0](old_blas)
