"""Parallel training: ring all-reduce time and the GPipe pipeline bubble."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from .base import _int, _ModelResult, _bytes, _nonneg, _positive, _seconds


# --------------------------------------------------------------------------- ring all-reduce

@dataclass(frozen=True)
class AllReduce(_ModelResult):
    """Time of a ring all-reduce."""

    bytes: float
    workers: int
    bandwidth: float
    latency: float
    bandwidth_time: float
    latency_time: float
    time: float

    @property
    def algorithm_bandwidth(self) -> float:
        """bytes / time, what a benchmark of the call reports."""
        return self.bytes / self.time if self.time else math.inf

    @property
    def bus_bandwidth(self) -> float:
        """Algorithm bandwidth x 2(p-1)/p: the per-link rate, comparable across worker counts."""
        p = self.workers
        return self.algorithm_bandwidth * 2 * (p - 1) / p

    def _headline(self) -> str:
        return (f"ring all-reduce of {_bytes(self.bytes)} over {self.workers} workers: "
                f"{_seconds(self.time)}")

    def _rows(self):
        return [("bandwidth term 2(p-1)/p x bytes / bandwidth", _seconds(self.bandwidth_time)),
                ("latency term 2(p-1) x latency", _seconds(self.latency_time))]


def ring_allreduce_time(nbytes: float, workers: int, bandwidth: float, latency: float = 0.0) -> AllReduce:
    """Ring all-reduce = 2(p-1)/p x bytes / bandwidth + 2(p-1) x latency; full-duplex links of ``bandwidth`` bytes/s, reduction arithmetic free."""
    n = _nonneg(nbytes, "nbytes")
    p = _int(workers, "workers", 1)
    bw = _positive(bandwidth, "bandwidth")
    lat = _nonneg(latency, "latency")
    t_bw = 2 * (p - 1) / p * n / bw
    t_lat = 2 * (p - 1) * lat
    return AllReduce(bytes=n, workers=p, bandwidth=bw, latency=lat, bandwidth_time=t_bw,
                     latency_time=t_lat, time=t_bw + t_lat)


# --------------------------------------------------------------------------- pipeline bubble

class PipelineOp(NamedTuple):
    """One bar of a pipeline schedule (times in units of one micro-batch's forward on one stage)."""

    stage: int
    microbatch: int
    phase: str
    start: float
    end: float


@dataclass(frozen=True)
class PipelineBubble(_ModelResult):
    """GPipe schedule and its idle fraction."""

    stages: int
    microbatches: int
    bubble_fraction: float
    total_time: float
    ideal_time: float
    schedule: tuple[PipelineOp, ...]

    def _headline(self) -> str:
        return (f"GPipe with {self.stages} stages and {self.microbatches} micro-batches: "
                f"bubble {self.bubble_fraction:.0%} of each stage's time")


def pipeline_bubble(stages: int, microbatches: int, backward_ratio: float = 2.0) -> PipelineBubble:
    """GPipe bubble = (p-1)/(m+p-1): all forwards, then all backwards; equal stage times, backward = ``backward_ratio`` x forward, no communication cost."""
    p = _int(stages, "stages", 1)
    m = _int(microbatches, "microbatches", 1)
    tb = _positive(backward_ratio, "backward_ratio")
    tf = 1.0
    ops = [PipelineOp(s, j, "forward", (j + s) * tf, (j + s + 1) * tf)
           for j in range(m) for s in range(p)]
    t0 = (m + p - 1) * tf  # the last stage finishes its last forward here
    for k in range(m):  # backward runs from the last stage to the first, micro-batches in reverse
        j = m - 1 - k
        for s in range(p):
            start = t0 + (k + (p - 1 - s)) * tb
            ops.append(PipelineOp(s, j, "backward", start, start + tb))
    ops.sort(key=lambda o: (o.start, o.stage))
    total = (m + p - 1) * (tf + tb)
    return PipelineBubble(stages=p, microbatches=m, bubble_fraction=(p - 1) / (m + p - 1),
                          total_time=total, ideal_time=m * (tf + tb), schedule=tuple(ops))
