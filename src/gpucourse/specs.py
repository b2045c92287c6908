"""Datasheet figures of GPUs and occupancy limits per compute capability, each with its source.

``lookup("NVIDIA H100 80GB HBM3")`` accepts the name a device reports or a short name
("H100", "T4"); ``for_active_device()`` describes the GPU in use, falling back to
properties read from the device when the table does not know it.
"""
from __future__ import annotations

import functools
import html
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Mapping

from . import device
from .precision import PRECISIONS as _PRECISIONS  # the names live in precision
from .errors import DeviceError, PrecisionError, SpecError

# Host link model (used by link_bandwidth_Bps and models.transfer_time). PCIe gen 3-5 move
# 8, 16, 32 GT/s per lane with 128b/130b encoding; packet headers and flow control cost a
# further ~10 % at the usual 256-byte payload, and DMA engines commonly sustain 80-90 % of
# the encoded rate for large pinned copies, so we assume 85 %. Pageable copies go through a
# pinned staging buffer with an extra host memcpy; half the pinned rate is a typical figure
# and it varies widely with the host.
PCIE_GTPS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
PINNED_EFFICIENCY = 0.85
PAGEABLE_FRACTION_OF_PINNED = 0.5

ESTIMATED_SOURCE = "estimated from device properties"
# The GPU the models describe when the course runs without one: the GPU the shipped reference
# measurements come from, so that models and measurements in one figure are of the same GPU.
DEFAULT_GPU = "H200"


class ReadOnlyDict(dict):
    """A dict that refuses changes, so frozen records stay frozen, yet copies and pickles."""

    def _read_only(self, *args, **kwargs):
        raise TypeError("This mapping is read-only; copy it with dict(...) to change it.")

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self):
        return type(self), (dict(self),)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


def _data(name: str) -> dict:
    return json.loads(resources.files("gpucourse").joinpath("data", name).read_text())


def _norm(name: str) -> str:
    """Name key that ignores case, punctuation and the vendor words devices add."""
    s = name.lower()
    s = re.sub(r"\b(nvidia|tesla|geforce)\b", " ", s)
    return re.sub(r"[^a-z0-9]", "", s)


def parse_cc(cc) -> tuple[int, int]:
    """Read a compute capability given as "8.6", "sm_86", 8.6 or (8, 6)."""
    if isinstance(cc, GPUSpec):
        return cc.compute_capability
    if isinstance(cc, tuple) and len(cc) == 2 and all(isinstance(v, int) for v in cc):
        return cc
    if isinstance(cc, float):
        cc = f"{cc:.1f}"
    if isinstance(cc, str):
        m = re.fullmatch(r"\s*(\d+)\.(\d)\s*", cc) or re.fullmatch(r"\s*sm_?(\d+?)(\d)[af]?\s*", cc)
        if m:
            return int(m.group(1)), int(m.group(2))
    raise SpecError(f"{cc!r} is not a compute capability; write it like '8.6', 'sm_86' or (8, 6).")


def _cc_str(cc: tuple[int, int]) -> str:
    return "%d.%d" % cc


# --------------------------------------------------------------------------- GPUs

@dataclass(frozen=True)
class GPUSpec:
    """One GPU's datasheet figures. Peaks are dense, at NVIDIA's boost clock; see ``notes``."""

    key: str
    name: str
    architecture: str
    compute_capability: tuple[int, int]
    sm_count: int
    memory_bytes: int
    memory_type: str
    memory_bandwidth_GBps: float
    l2_bytes: int | None
    peak_tflops: Mapping[str, float] = field(hash=False)
    pcie_gen: int | None
    pcie_lanes: int | None
    nvlink_GBps: float | None
    boost_clock_mhz: int | None
    device_names: tuple[str, ...]
    aliases: tuple[str, ...]
    notes: str
    source: str
    source_url: str
    estimated: bool = False

    @property
    def cc(self) -> str:
        """Compute capability as text, e.g. "9.0"."""
        return _cc_str(self.compute_capability)

    @property
    def precisions(self) -> tuple[str, ...]:
        """The precisions this part has a peak for, in the order of ``precision.PRECISIONS``."""
        return tuple(p for p in _PRECISIONS if p in self.peak_tflops)

    def peak_flops(self, precision: str = "fp32") -> float:
        """Dense peak in operations per second for a precision ("fp32", "bf16", ...)."""
        key = str(precision).lower()
        if key not in self.peak_tflops:
            have = ", ".join(self.precisions) or "none known"
            what = "is not a precision" if key not in _PRECISIONS else "has no peak listed"
            raise PrecisionError(f"{precision!r} {what} for the {self.name}; "
                                 f"choose one of: {have}.")
        return self.peak_tflops[key] * 1e12

    @property
    def bandwidth_Bps(self) -> float:
        """Peak device-memory bandwidth in bytes per second."""
        return self.memory_bandwidth_GBps * 1e9

    @property
    def pcie_bandwidth_Bps(self) -> float | None:
        """Theoretical PCIe rate per direction in bytes per second (after 128b/130b encoding)."""
        if not self.pcie_gen or not self.pcie_lanes:
            return None
        encoding = 128 / 130 if self.pcie_gen >= 3 else 8 / 10
        return PCIE_GTPS[self.pcie_gen] * 1e9 * self.pcie_lanes * encoding / 8

    def link_bandwidth_Bps(self, pinned: bool = True) -> float:
        """Modelled host<->device copy rate per direction: 85 % of PCIe if pinned, half that if pageable."""
        theoretical = self.pcie_bandwidth_Bps
        if theoretical is None:
            raise SpecError(f"The host link of the {self.name} is not known; "
                            "pass the link's bandwidth explicitly (bandwidth=... in bytes/s).")
        rate = theoretical * PINNED_EFFICIENCY
        return rate if pinned else rate * PAGEABLE_FRACTION_OF_PINNED

    def ridge_point(self, precision: str = "fp32") -> float:
        """Arithmetic intensity (FLOP/byte) where the roofline turns from memory- to compute-bound."""
        return self.peak_flops(precision) / self.bandwidth_Bps

    # ---- display
    def rows(self) -> list[tuple[str, str]]:
        """(label, value) pairs for a table."""
        rows = [("GPU", self.name), ("architecture", f"{self.architecture}, cc {self.cc}"),
                ("SMs", str(self.sm_count)),
                ("memory", f"{self.memory_bytes / 2**30:.0f} GiB {self.memory_type}".strip()),
                ("memory bandwidth", f"{self.memory_bandwidth_GBps:,.0f} GB/s")]
        if self.l2_bytes:
            rows.append(("L2", f"{self.l2_bytes / 2**20:.0f} MiB"))
        for p in self.precisions:
            unit = "TOP/s" if p == "int8" else "TFLOP/s"
            rows.append((f"peak {p} (dense)", f"{self.peak_tflops[p]:,.1f} {unit}"))
        if self.pcie_gen:
            rows.append(("host link", f"PCIe gen {self.pcie_gen} x{self.pcie_lanes} "
                                      f"({self.pcie_bandwidth_Bps / 1e9:.1f} GB/s per direction)"))
        if self.nvlink_GBps:
            rows.append(("NVLink", f"{self.nvlink_GBps:g} GB/s total"))
        rows.append(("source", self.source))
        return rows

    def __str__(self) -> str:
        width = max(len(k) for k, _ in self.rows())
        return "\n".join(f"{k:<{width}}  {v}" for k, v in self.rows())

    def _repr_html_(self) -> str:
        label = "estimated from device properties" if self.estimated else "datasheet"
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                       f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
                       for k, v in self.rows())
        return f"<table><caption>{html.escape(label)}</caption>{body}</table>"


def _row_to_spec(row: dict) -> GPUSpec:
    peaks = {p: float(v) for p, v in row["peak_tflops"].items() if v is not None}
    src = row["source"]
    return GPUSpec(
        key=row["key"], name=row["name"], architecture=row["architecture"],
        compute_capability=parse_cc(row["compute_capability"]), sm_count=int(row["sm_count"]),
        memory_bytes=int(row["memory_gib"] * 2**30), memory_type=row["memory_type"],
        memory_bandwidth_GBps=float(row["memory_bandwidth_GBps"]),
        l2_bytes=int(row["l2_mib"] * 2**20) if row.get("l2_mib") else None,
        peak_tflops=ReadOnlyDict(peaks), pcie_gen=row.get("pcie_gen"),
        pcie_lanes=row.get("pcie_lanes"), nvlink_GBps=row.get("nvlink_GBps"),
        boost_clock_mhz=row.get("boost_clock_mhz"),
        device_names=tuple(row.get("device_names", ())), aliases=tuple(row.get("aliases", ())),
        notes=row.get("notes", ""), source=f"{src['name']} <{src['url']}>", source_url=src["url"])


@functools.lru_cache(maxsize=1)
def _table() -> tuple[tuple[GPUSpec, ...], dict[str, GPUSpec]]:
    gpus = tuple(_row_to_spec(r) for r in _data("gpus.json")["gpus"])
    index: dict[str, GPUSpec] = {}
    for g in gpus:
        for n in (g.key, g.name, *g.device_names, *g.aliases):
            k = _norm(n)
            if k in index and index[k] is not g:
                raise SpecError(f"The GPU table gives the name {n!r} to both "
                                f"{index[k].key} and {g.key}; make it unique in gpus.json.")
            index[k] = g
    return gpus, index


def all_gpus() -> tuple[GPUSpec, ...]:
    """Every GPU in the table, in table order."""
    return _table()[0]


def names() -> list[str]:
    """The table's GPU keys, the short names ``lookup`` always accepts."""
    return [g.key for g in all_gpus()]


def lookup(name) -> GPUSpec:
    """The table's row for a device-reported or short GPU name ("NVIDIA H100 80GB HBM3", "T4")."""
    if isinstance(name, GPUSpec):
        return name
    gpu = _table()[1].get(_norm(str(name)))
    if gpu is None:
        raise SpecError(f"Unknown GPU {name!r}; known GPUs: {', '.join(names())}. "
                        "For another GPU use specs.for_active_device() or specs.from_device().")
    return gpu


# --------------------------------------------------------------------------- occupancy limits

@dataclass(frozen=True)
class OccupancyLimits:
    """Per-SM and per-block limits of one compute capability (bytes for shared memory)."""

    cc: str
    architecture: str
    max_threads_per_block: int
    warp_size: int
    max_warps_per_sm: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    max_registers_per_block: int
    max_registers_per_thread: int
    register_allocation_unit: int
    register_sub_partitions: int
    shared_memory_per_sm: int
    max_shared_memory_per_block: int
    default_shared_memory_per_block: int
    shared_memory_allocation_unit: int
    reserved_shared_memory_per_block: int
    notes: str
    source: str

    def rows(self) -> list[tuple[str, str]]:
        """(label, value) pairs for a table."""
        kb = 1024
        return [("compute capability", f"{self.cc} ({self.architecture})"),
                ("max threads per block", str(self.max_threads_per_block)),
                ("max warps / threads per SM", f"{self.max_warps_per_sm} / {self.max_threads_per_sm}"),
                ("max blocks per SM", str(self.max_blocks_per_sm)),
                ("registers per SM", f"{self.registers_per_sm:,}"),
                ("max registers per thread / block",
                 f"{self.max_registers_per_thread} / {self.max_registers_per_block:,}"),
                ("register allocation", f"{self.register_allocation_unit} per warp"),
                ("shared memory per SM", f"{self.shared_memory_per_sm // kb} KB"),
                ("max shared memory per block",
                 f"{self.max_shared_memory_per_block // kb} KB "
                 f"({self.default_shared_memory_per_block // kb} KB without opt-in)"),
                ("shared memory allocation", f"{self.shared_memory_allocation_unit} B units, "
                                             f"{self.reserved_shared_memory_per_block} B reserved per block"),
                ("source", self.source)]

    def __str__(self) -> str:
        width = max(len(k) for k, _ in self.rows())
        return "\n".join(f"{k:<{width}}  {v}" for k, v in self.rows())


@functools.lru_cache(maxsize=1)
def _limits() -> dict[str, OccupancyLimits]:
    data = _data("occupancy_limits.json")
    src = f"{data['source']['name']} <{data['source']['url']}>"
    out = {}
    for row in data["limits"]:
        out[row["cc"]] = OccupancyLimits(source=src, **row)
    return out


def known_ccs() -> list[str]:
    """Compute capabilities with occupancy limits in the table."""
    return list(_limits())


def occupancy_limits(cc) -> OccupancyLimits:
    """Occupancy limits of a compute capability ("8.0", (9, 0), a GPU name or a GPUSpec)."""
    if isinstance(cc, str) and not re.fullmatch(r"\s*(\d+\.\d|sm_?\d+[af]?)\s*", cc):
        cc = lookup(cc)  # a GPU name: use its compute capability
    key = _cc_str(parse_cc(cc))
    try:
        return _limits()[key]
    except KeyError:
        raise SpecError(f"No occupancy limits for compute capability {key}; "
                        f"known: {', '.join(known_ccs())}.") from None


# --------------------------------------------------------------------------- unknown devices

# FP32 lanes per SM from the programming guide's arithmetic throughput table; used to estimate
# an FP32 peak for a GPU the table does not know, and by the profiler to derive a clock.
FP32_LANES_PER_SM = {(7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128,
                      (8, 9): 128, (9, 0): 128, (10, 0): 128, (12, 0): 128}


def _get(props, *keys):
    for k in keys:
        v = props.get(k) if isinstance(props, Mapping) else getattr(props, k, None)
        if v is not None:
            return v
    return None


def from_device(props: Any) -> GPUSpec:
    """A GPUSpec for a GPU the table lacks, built from its reported properties (labelled estimated).

    ``props`` is a record or dict with ``name``, ``compute_capability``, ``sm_count``,
    ``memory_bytes``, ``memory_clock_khz``, ``memory_bus_width_bits``, ``l2_bytes`` and,
    optionally, the SM clock ``clock_khz`` (``gpucourse.device.describe()`` gives these).
    Bandwidth = 2 x memory clock x bus width / 8 (double data rate); FP32 peak =
    2 x SMs x FP32 lanes per SM x SM clock when the clock is known; no tensor peaks.
    """
    name = _get(props, "name")
    cc = _get(props, "compute_capability")
    if cc is None and _get(props, "major") is not None:
        cc = (int(_get(props, "major")), int(_get(props, "minor")))
    sm = _get(props, "sm_count", "multi_processor_count", "multiProcessorCount")
    clock = _get(props, "memory_clock_khz", "memoryClockRate")
    bus = _get(props, "memory_bus_width_bits", "memoryBusWidth")
    missing = [k for k, v in (("name", name), ("compute_capability", cc), ("sm_count", sm),
                              ("memory_clock_khz", clock), ("memory_bus_width_bits", bus))
               if not v]
    if missing:
        raise SpecError(f"Cannot estimate a GPU's figures without {', '.join(missing)}; "
                        "read them with gpucourse.device.describe() on a CUDA machine.")
    if isinstance(name, bytes):
        name = name.decode()
    cc = parse_cc(tuple(int(v) for v in cc) if not isinstance(cc, str) else cc)
    bandwidth = 2.0 * float(clock) * 1e3 * float(bus) / 8
    peaks: dict[str, float] = {}
    sm_clock = _get(props, "clock_khz", "clockRate")
    if sm_clock and cc in FP32_LANES_PER_SM:
        peaks["fp32"] = 2.0 * int(sm) * FP32_LANES_PER_SM[cc] * float(sm_clock) * 1e3 / 1e12
    mem = _get(props, "memory_bytes", "total_memory", "totalGlobalMem") or 0
    l2 = _get(props, "l2_bytes", "L2_cache_size", "l2CacheSize")
    return GPUSpec(
        key=str(name), name=str(name), architecture="unknown", compute_capability=cc,
        sm_count=int(sm), memory_bytes=int(mem), memory_type="",
        memory_bandwidth_GBps=bandwidth / 1e9, l2_bytes=int(l2) if l2 else None,
        peak_tflops=ReadOnlyDict(peaks), pcie_gen=None, pcie_lanes=None, nvlink_GBps=None,
        boost_clock_mhz=None, device_names=(str(name),), aliases=(),
        notes=("Not in the course's table: bandwidth from memory clock x bus width; "
               "FP32 peak from SM clock x lanes where known; no tensor-core peaks."),
        source=ESTIMATED_SOURCE, source_url="", estimated=True)


def for_active_device() -> GPUSpec:
    """The spec of the GPU in use: the table's row if it knows the name, else estimated from the device."""
    if device.backend() != "cuda":
        raise DeviceError("No CUDA GPU is active here, so there is no device to describe; "
                          f"pick one from the table with specs.lookup(name), e.g. one of {', '.join(names())}.")
    info = device.describe()
    try:
        return lookup(info.name)
    except SpecError:
        return from_device(info)


def model_gpu(gpu=None, fallback=None) -> GPUSpec:
    """The GPU the course's models describe, by one rule for every chapter.

    1. ``gpu``, when given: a GPUSpec, a name from the table (``names()``) or the active GPU's
       own name; so a learner who picks a GPU gets that GPU, on a CUDA machine too.
    2. Else, on a CUDA machine, the GPU in use (``for_active_device()``: the table's row, or
       figures estimated from the device).
    3. Else ``fallback`` (a chapter passes the GPU of its own reference data, so that models
       and measurements in one figure are of one GPU), and without one ``DEFAULT_GPU``, the
       GPU of the shipped reference measurements.
    """
    if isinstance(gpu, GPUSpec):
        return gpu
    if gpu is not None:
        if device.is_cuda():  # the active GPU by its own name, also where the table lacks it
            active = for_active_device()
            if _norm(str(gpu)) in (_norm(active.key), _norm(active.name)):
                return active
        return lookup(gpu)
    if device.is_cuda():
        return for_active_device()
    return lookup(fallback if fallback is not None else DEFAULT_GPU)
