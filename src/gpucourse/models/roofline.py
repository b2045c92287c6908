"""The roofline: attainable time and FLOP/s of an operation from its FLOPs and bytes."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .. import specs
from .base import ModelInputError, _ModelResult, _nonneg, _positive, _seconds

#: Fixed cost of one kernel launch where a model includes it: measured launch overheads on
#: current GPUs are a few microseconds; 3 us is a round order of magnitude, not a measurement.
LAUNCH_OVERHEAD_S = 3e-6


# --------------------------------------------------------------------------- roofline

@dataclass(frozen=True)
class Roofline(_ModelResult):
    """Where an operation sits under a roofline, and the time that implies."""

    device: str
    precision: str
    flops: float
    bytes: float
    intensity: float
    peak_flops: float
    bandwidth: float
    ridge_point: float
    compute_time: float
    memory_time: float
    time: float
    attainable_flops: float
    bound: str
    launch_time: float = 0.0  # the fixed launch cost included in ``time`` (0: none)

    def _headline(self) -> str:
        return (f"{self.bound}-bound on {self.device} ({self.precision}): "
                f"{self.attainable_flops / 1e12:.3g} TFLOP/s attainable, at least {_seconds(self.time)}")

    def _rows(self):
        return [("arithmetic intensity", f"{self.intensity:.3g} FLOP/byte"),
                ("ridge point", f"{self.ridge_point:.3g} FLOP/byte"),
                ("peak compute", f"{self.peak_flops / 1e12:.3g} TFLOP/s"),
                ("peak bandwidth", f"{self.bandwidth / 1e9:.4g} GB/s"),
                ("compute time / memory time", f"{_seconds(self.compute_time)} / {_seconds(self.memory_time)}")] + (
                    [("launch overhead", _seconds(self.launch_time))] if self.launch_time else [])


def roofline(flops: float, bytes: float, gpu=None, precision: str = "fp32", *,
             peak_flops: float | None = None, bandwidth: float | None = None,
             launch: float = 0.0) -> Roofline:
    """Attainable time = max(flops / peak, bytes / bandwidth), assuming compute and memory traffic overlap perfectly.

    ``gpu`` is a table name or GPUSpec; ``peak_flops`` (FLOP/s) and ``bandwidth`` (bytes/s)
    override it, e.g. for a CPU roofline measured on the spot. ``launch`` (seconds, e.g.
    ``LAUNCH_OVERHEAD_S``) adds a kernel's fixed cost: without it a tiny operation would
    take nanoseconds, which no launch does.
    """
    flops = _nonneg(flops, "flops")
    nbytes = _nonneg(bytes, "bytes")
    if flops == 0 and nbytes == 0:
        raise ModelInputError("An operation with 0 FLOPs and 0 bytes has no place on a roofline.")
    spec = specs.lookup(gpu) if gpu is not None else None
    if spec is None and (peak_flops is None or bandwidth is None):
        raise ModelInputError("Give a GPU (a name from specs.names() or a GPUSpec), "
                              "or both peak_flops= (FLOP/s) and bandwidth= (bytes/s).")
    peak = _positive(peak_flops, "peak_flops") if peak_flops is not None else spec.peak_flops(precision)
    bw = _positive(bandwidth, "bandwidth") if bandwidth is not None else spec.bandwidth_Bps
    device = spec.name if spec is not None else "given ceilings"
    if spec is not None and (peak_flops is not None or bandwidth is not None):
        device += " (with given ceilings)"
    t_compute, t_memory = flops / peak, nbytes / bw
    overhead = _nonneg(launch, "launch")
    t = overhead + max(t_compute, t_memory)
    return Roofline(device=device, precision=str(precision), flops=flops, bytes=nbytes,
                    intensity=flops / nbytes if nbytes else math.inf, peak_flops=peak,
                    bandwidth=bw, ridge_point=peak / bw, compute_time=t_compute,
                    memory_time=t_memory, time=t, attainable_flops=flops / t,
                    bound="compute" if t_compute >= t_memory else "memory", launch_time=overhead)


def roof_share(rate: float, intensity: float, peak_flops: float, bandwidth: float) -> float:
    """A rate (FLOP/s) as a share of the roof at its intensity (FLOP/byte): rate divided by
    min(peak_flops, intensity x bandwidth). 1 is on the roof; a measured point may exceed it
    a little where the ceilings are themselves measurements."""
    return rate / min(peak_flops, intensity * bandwidth)
