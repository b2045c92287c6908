"""Host <-> device copies over PCIe, and copy/compute overlap over CUDA streams."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .. import specs
from .base import ModelInputError, _int, _ModelResult, _bytes, _nonneg, _positive, _seconds

# Per-call cost of a host<->device copy (driver call + DMA setup). Measured values range from
# a few to a few tens of microseconds; 10 us is a round order of magnitude.
TRANSFER_LATENCY_S = 10e-6


# --------------------------------------------------------------------------- host <-> device transfers

@dataclass(frozen=True)
class Transfer(_ModelResult):
    """Time of one host<->device copy."""

    bytes: int
    pinned: bool
    link: str
    latency: float
    bandwidth: float
    time: float

    @property
    def effective_bandwidth(self) -> float:
        """Bytes per second including the fixed latency."""
        return self.bytes / self.time

    def _headline(self) -> str:
        kind = "pinned" if self.pinned else "pageable"
        return (f"{_bytes(self.bytes)} {kind} over {self.link}: {_seconds(self.time)} "
                f"({self.effective_bandwidth / 1e9:.3g} GB/s effective)")

    def _rows(self):
        return [("latency", _seconds(self.latency)),
                ("streaming rate", f"{self.bandwidth / 1e9:.3g} GB/s")]


def transfer_time(nbytes: float, gpu=None, pinned: bool = True, *, latency: float = TRANSFER_LATENCY_S,
                  bandwidth: float | None = None) -> Transfer:
    """Copy time = latency + bytes / rate; rate = 85 % of the PCIe link's theoretical rate if pinned, half that if pageable.

    Why: PCIe packet headers and flow control cost ~10 % and copy engines reach 80-90 % of
    the encoded rate on large pinned copies; pageable memory is first copied by the CPU into
    a pinned staging buffer, roughly halving the rate (host-dependent). ``latency`` (10 us by
    default) is the per-copy driver and DMA set-up cost. ``bandwidth`` (bytes/s) overrides the
    link's theoretical rate, e.g. for a GPU the table does not know.
    """
    n = _nonneg(nbytes, "nbytes")
    lat = _nonneg(latency, "latency")
    if bandwidth is not None:
        rate = _positive(bandwidth, "bandwidth") * specs.PINNED_EFFICIENCY
        if not pinned:
            rate *= specs.PAGEABLE_FRACTION_OF_PINNED
        link = "the given link"
    else:
        if gpu is None:
            raise ModelInputError("Give a GPU (a name from specs.names() or a GPUSpec) or bandwidth= in bytes/s.")
        spec = specs.lookup(gpu)
        rate = spec.link_bandwidth_Bps(pinned=pinned)
        link = f"PCIe gen {spec.pcie_gen} x{spec.pcie_lanes} ({spec.name})"
    return Transfer(bytes=int(n), pinned=bool(pinned), link=link, latency=lat, bandwidth=rate,
                    time=lat + n / rate)


# --------------------------------------------------------------------------- streams

class TimelineOp(NamedTuple):
    """One bar of a timeline: which stream, on which engine, what, from when to when (seconds)."""

    stream: int
    engine: str
    op: str
    start: float
    end: float


ENGINES = ("copy H2D", "compute", "copy D2H")


@dataclass(frozen=True)
class StreamTimeline(_ModelResult):
    """A copy/compute overlap schedule over CUDA streams."""

    n_streams: int
    chunks: int
    ops: tuple[TimelineOp, ...]
    total: float
    serial_total: float

    @property
    def speedup(self) -> float:
        return self.serial_total / self.total if self.total else 1.0

    def _headline(self) -> str:
        return (f"{self.chunks} chunks on {self.n_streams} stream(s): {_seconds(self.total)} "
                f"vs {_seconds(self.serial_total)} serial ({self.speedup:.2f}x)")


def stream_timeline(n_streams: int, h2d: float, compute: float, d2h: float, chunks: int | None = None) -> StreamTimeline:
    """Schedule of copy-in / kernel / copy-out chunks: one engine per copy direction and one compute engine, each serving chunks in issue order; work split evenly into ``chunks`` (default one per stream), assigned round-robin; in-order within a stream.

    ``h2d``, ``compute`` and ``d2h`` are the times of the WHOLE job's copies and kernel.
    """
    n = _int(n_streams, "n_streams", 1)
    k = n if chunks is None else _int(chunks, "chunks", 1)
    times = [_nonneg(h2d, "h2d") / k, _nonneg(compute, "compute") / k, _nonneg(d2h, "d2h") / k]
    labels = ("H2D", "kernel", "D2H")
    engine_free = [0.0, 0.0, 0.0]
    stream_free = [0.0] * n
    ops: list[TimelineOp] = []
    for c in range(k):
        s = c % n
        ready = stream_free[s]
        for stage in range(3):
            start = max(ready, engine_free[stage])
            end = start + times[stage]
            engine_free[stage] = end
            ready = end
            ops.append(TimelineOp(s, ENGINES[stage], f"{labels[stage]} {c}", start, end))
        stream_free[s] = ready
    total = max((op.end for op in ops), default=0.0)
    return StreamTimeline(n_streams=n, chunks=k, ops=tuple(ops), total=total,
                          serial_total=float(h2d) + float(compute) + float(d2h))
