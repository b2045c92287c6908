"""What several sections of chapter 6 share: timing on the device the experiments run on, the
CPU threads of CPU timings, and the CPU's instruction flags."""
from __future__ import annotations

import contextlib

from ... import bench


def bench_on(fn, label: str, dev: str, min_time_s: float, **kw) -> bench.Timing:
    """``bench.benchmark`` of ``fn`` with CUDA events on ``dev="cuda"``, a CPU clock elsewhere."""
    return bench.benchmark(fn, label=label, backend="cuda" if dev == "cuda" else "cpu",
                           min_time_s=min_time_s, **kw)


def threads_for(dev: str):
    """``bench.cpu_threads()`` for work on the CPU, nothing for work on a GPU."""
    return bench.cpu_threads() if dev == "cpu" else contextlib.nullcontext()


def cpu_flags() -> set[str]:
    """The instruction-set flags of this CPU from /proc/cpuinfo (empty where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()
