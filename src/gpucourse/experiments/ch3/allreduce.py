"""Experiment 2, the all-reduce: its time against message size beside the ring model fitted to
a ping-pong (``allreduce_sweep``), one call per gradient tensor against buckets
(``bucketing``), and one DDP step's timeline with its buckets' all-reduces (``ddp_timeline``)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np

from ... import bench, models
from ...bench import format_bytes as _fmt_bytes, format_time as _fmt_s
from ...errors import whole_number
from .common import _size, _slowest, _table
from .data import DDP_DEPTH, DDP_WIDTH, transformer_grad_shapes
from .pool import Workers, _pool
from .tasks import _task_allreduce_sweep, _task_bucketing, _task_ddp_timeline
from .worker import DistributedError


@dataclass
class AllReduceSweep:
    """All-reduce time against message size, with the ring model fed by a ping-pong fit."""

    sizes: list[int]
    allreduce: list[bench.Timing]
    pingpong: list[bench.Timing]
    workers: int
    backend: str
    device: str
    latency_s: float | None
    bandwidth_Bps: float | None

    def model(self) -> list[models.AllReduce] | None:
        if not self.bandwidth_Bps:
            return None
        return [models.ring_allreduce_time(n, self.workers, self.bandwidth_Bps,
                                           self.latency_s or 0.0) for n in self.sizes]

    @property
    def algbw_GBps(self) -> list[float]:
        """Message bytes / time: what an all-reduce benchmark reports."""
        return [n / t.median_s / 1e9 for n, t in zip(self.sizes, self.allreduce)]

    @property
    def busbw_GBps(self) -> list[float]:
        """Algorithm bandwidth x 2(p-1)/p: comparable with a link's bandwidth."""
        p = self.workers
        return [b * 2 * (p - 1) / p for b in self.algbw_GBps]

    def to_dict(self) -> dict:
        return {"sizes": self.sizes, "allreduce": [t.to_dict() for t in self.allreduce],
                "pingpong": [t.to_dict() for t in self.pingpong], "workers": self.workers,
                "backend": self.backend, "device": self.device, "latency_s": self.latency_s,
                "bandwidth_Bps": self.bandwidth_Bps, "algbw_GBps": self.algbw_GBps,
                "busbw_GBps": self.busbw_GBps}

    @classmethod
    def from_dict(cls, d: dict) -> "AllReduceSweep":
        return cls(d["sizes"], [bench.Timing.from_dict(t) for t in d["allreduce"]],
                   [bench.Timing.from_dict(t) for t in d["pingpong"]], d["workers"],
                   d["backend"], d["device"], d["latency_s"], d["bandwidth_Bps"])

    def __repr__(self) -> str:
        fit = (f"; ping-pong fit: latency {_fmt_s(self.latency_s)}, bandwidth "
               f"{self.bandwidth_Bps / 1e9:.3g} GB/s" if self.bandwidth_Bps else "")
        return (f"all-reduce over {self.workers} workers ({self.backend}): "
                f"{_fmt_s(self.allreduce[0].median_s)} for {_fmt_bytes(self.sizes[0])} to "
                f"{_fmt_s(self.allreduce[-1].median_s)} for {_fmt_bytes(self.sizes[-1])}{fit}")

    def _repr_html_(self) -> str:
        mod = self.model() or [None] * len(self.sizes)
        rows = [(_fmt_bytes(n), _fmt_s(t.median_s), f"{bw:.3g}",
                 _fmt_s(m.time) if m else "–") for n, t, bw, m in
                zip(self.sizes, self.allreduce, self.algbw_GBps, mod)]
        note = (f"{self.workers} workers, {self.backend} on {self.device}. Ring model with "
                f"latency {_fmt_s(self.latency_s)} and bandwidth {self.bandwidth_Bps / 1e9:.3g} GB/s "
                "fitted from the ping-pong" if self.bandwidth_Bps else "one worker: nothing to exchange")
        return _table(("message", "all-reduce (median)", "algorithm GB/s", "ring model"), rows, note)


def fit_latency_bandwidth(sizes: Sequence[float], seconds: Sequence[float]) -> tuple[float, float]:
    """Fit t = latency + bytes / bandwidth to one-way times, weighting relative errors.

    Each size counts equally (rows divided by t), so the small messages fix the latency and
    the large ones the bandwidth; both come out positive.
    """
    n = np.asarray(sizes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    a = np.stack([1 / t, n / t], axis=1)
    (lat, inv_bw), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    if inv_bw <= 0:  # noise swamped the slope: take the largest message's rate
        inv_bw = max((t[-1] - max(lat, 0.0)) / n[-1], 1e-15)
    if lat < 0:
        lat = float(max(0.0, np.min(t - n * inv_bw)))
    return float(lat), float(1 / inv_bw)


def _fit_pingpong(sizes: list[int], pingpong: list[bench.Timing]) -> tuple[float, float] | tuple[None, None]:
    """(latency s, bandwidth B/s) of one direction, fitted to all the ping-pong round trips."""
    if not pingpong:
        return None, None
    return fit_latency_bandwidth(sizes, [t.median_s / 2 for t in pingpong])


def allreduce_sweep(pool: Workers | int | None = None, sizes: Sequence[int] | None = None,
                    samples: int = 5) -> AllReduceSweep:
    """All-reduce (checked on random data first) and ping-pong time for each message size."""
    whole_number(samples, "samples", 5)
    pool = _pool(pool)
    if sizes is None:
        top = 30 if pool.backend == "nccl" else 24
        sizes = [2**k for k in range(10, top + 1, 2)]
    sizes = [int(s) for s in sizes]
    target = 256 * 2**20 if pool.backend == "nccl" else 2 * 2**20
    res = pool.run(_task_allreduce_sweep, sizes, samples, target)
    # The collective ends when the slowest rank is done.
    allreduce = [_slowest(r["allreduce"][i] for r in res)
                 for i in range(len(sizes))]
    pingpong = res[0]["pingpong"]
    lat, bw = _fit_pingpong(sizes, pingpong)
    return AllReduceSweep(sizes, allreduce, pingpong, pool.n, pool.backend, pool.device_name,
                          lat, bw)


@dataclass
class Bucketing:
    """Time to all-reduce a model's gradients: one call per tensor against buckets."""

    timings: bench.Timings
    buckets: list[int]
    caps: list[float]
    tensors: int
    total_bytes: int
    workers: int
    backend: str
    device: str
    bucket_bytes: list[list[int]] = field(default_factory=list)

    @property
    def speedup(self) -> float:
        """Per-tensor time over the best bucketed time."""
        return self.timings[0].median_s / min(t.median_s for t in self.timings[1:])

    def model(self, latency_s: float, bandwidth_Bps: float) -> list[float]:
        """Ring model of each version: one latency-bound call per bucket plus the bytes."""
        return [sum(models.ring_allreduce_time(b, self.workers, bandwidth_Bps, latency_s).time
                    for b in bb) for bb in self.bucket_bytes]

    def to_dict(self) -> dict:
        return {"timings": [t.to_dict() for t in self.timings], "buckets": self.buckets,
                "caps": self.caps, "tensors": self.tensors, "total_bytes": self.total_bytes,
                "workers": self.workers, "backend": self.backend, "device": self.device,
                "bucket_bytes": self.bucket_bytes}

    @classmethod
    def from_dict(cls, d: dict) -> "Bucketing":
        return cls(bench.Timings(bench.Timing.from_dict(t) for t in d["timings"]), d["buckets"],
                   d["caps"], d["tensors"], d["total_bytes"], d["workers"], d["backend"],
                   d["device"], d.get("bucket_bytes", []))

    def __repr__(self) -> str:
        return "; ".join(f"{t.label}: {_fmt_s(t.median_s)} ({b} call{'s' if b > 1 else ''})"
                         for t, b in zip(self.timings, self.buckets))

    def _repr_html_(self) -> str:
        base = self.timings[0]
        rows = [(t.label, str(b), _fmt_s(t.median_s), f"{_fmt_s(t.p20_s)} – {_fmt_s(t.p80_s)}",
                 f"{t.speedup_over(base):.2f}×") for t, b in zip(self.timings, self.buckets)]
        return _table(("version", "all-reduce calls", "median", "p20 – p80", "speed-up"), rows,
                      f"{self.tensors} gradient tensors, {_fmt_bytes(self.total_bytes)} in all, "
                      f"{self.workers} workers, {self.backend} on {self.device}")


def bucketing(pool: Workers | int | None = None, d_model: int = 128, layers: int = 8,
              caps: Sequence[float] = (0, 256 * 2**10, 25 * 2**20), samples: int = 5,
              seed: int = 0) -> Bucketing:
    """All-reduce a small transformer's gradients per tensor, then in buckets (checked first)."""
    whole_number(samples, "samples", 5)
    pool = _pool(pool)
    caps = [float(c) for c in caps]
    if caps[0] != 0:
        caps = [0.0] + caps
    shapes = transformer_grad_shapes(d_model, layers)
    res = pool.run(_task_bucketing, shapes, caps, samples, seed)
    timings = bench.Timings(_slowest(r["timings"][i] for r in res)
                            for i in range(len(caps)))
    r0 = res[0]
    return Bucketing(timings, r0["buckets"], caps, r0["tensors"], r0["total_bytes"], pool.n,
                     pool.backend, pool.device_name, r0["bucket_bytes"])


@dataclass
class DDPTimeline:
    """One DDP step per rank: forward, backward and each gradient bucket's all-reduce."""

    events: list[list[tuple[str, float, float]]]  # per rank, seconds from the step's start
    bucket_cap_mb: float
    bucket_bytes: list[int]
    timing: bench.Timing
    workers: int
    backend: str
    device: str
    grad_bytes: int

    @property
    def buckets(self) -> int:
        return len(self.bucket_bytes)

    @property
    def overlap_fraction(self) -> float:
        """Share of all-reduce time (rank 0) that ran while backward was still computing."""
        ev = self.events[0]
        bwd = next(((a, b) for n, a, b in ev if n == "backward"), None)
        comm = [(a, b) for n, a, b in ev if n.startswith("all-reduce")]
        total = sum(b - a for a, b in comm)
        if not bwd or total <= 0:
            return 0.0
        inside = sum(max(0.0, min(b, bwd[1]) - max(a, bwd[0])) for a, b in comm)
        return inside / total

    def __repr__(self) -> str:
        return (f"DDP step over {self.workers} workers with {self.bucket_cap_mb:g} MiB buckets: "
                f"{self.buckets} bucket(s), median {_fmt_s(self.timing.median_s)}, "
                f"{self.overlap_fraction:.0%} of all-reduce time overlapped with backward")

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k != "timing"}
        d["timing"] = self.timing.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "DDPTimeline":
        d = dict(d)
        d["timing"] = bench.Timing.from_dict(d["timing"])
        d["events"] = [[tuple(e) for e in ev] for ev in d["events"]]
        return cls(**d)


def ddp_timeline(pool: Workers | int | None = None, bucket_cap_mb: float = 25.0,
                 per_worker: int | None = None, samples: int = 3, seed: int = 0) -> DDPTimeline:
    """Time DDP steps with a bucket cap, and record one step's timeline on every rank.

    ``per_worker`` rows per worker: 64 on the CPU, 4096 on GPUs by default.
    """
    whole_number(samples, "samples", 5)
    pool = _pool(pool)
    per_worker = _size(pool, 64, 4096, per_worker)
    if not bucket_cap_mb > 0:
        raise DistributedError(f"bucket_cap_mb must be > 0 (MiB), got {bucket_cap_mb!r}.")
    res = pool.run(_task_ddp_timeline, DDP_WIDTH, DDP_DEPTH, per_worker, float(bucket_cap_mb),
                   samples, seed)
    t0 = min(a for r in res for _, a, _ in r["events"])
    events = [[(n, a - t0, b - t0) for n, a, b in r["events"]] for r in res]
    timing = _slowest(r["timing"] for r in res)
    out = DDPTimeline(events, float(bucket_cap_mb), res[0]["bucket_bytes"], timing, pool.n,
                      pool.backend, pool.device_name, res[0]["grad_bytes"])
    return out
