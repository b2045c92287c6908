"""Analytic models of GPU behaviour: occupancy, memory sectors, bank conflicts, roofline,
transfers, streams, all-reduce, pipeline bubbles, training memory, warp divergence, bytes in
flight (Little's law); and the rounding-error bounds that float checks use as tolerances.

Pure functions of their arguments (no GPU needed). Each model returns a small frozen record
whose printed and HTML forms say "model", so a learner never mistakes one for a measurement;
the error bounds return plain numbers.
"""
from __future__ import annotations

import html
import math
import numbers
from dataclasses import dataclass, field
from typing import Iterable, Mapping, NamedTuple

import numpy as np

from . import specs
from .errors import InputError, SpecError

WARP_SIZE = 32
SECTOR_BYTES = 32
LINE_BYTES = 128
SHARED_BANKS = 32
BANK_WORD_BYTES = 4
# Per-call cost of a host<->device copy (driver call + DMA setup). Measured values range from
# a few to a few tens of microseconds; 10 us is a round order of magnitude.
TRANSFER_LATENCY_S = 10e-6
#: Fixed cost of one kernel launch where a model includes it: measured launch overheads on
#: current GPUs are a few microseconds; 3 us is a round order of magnitude, not a measurement.
LAUNCH_OVERHEAD_S = 3e-6


class ModelInputError(InputError):
    """An argument a model cannot use (a negative size, an empty address list, ...)."""


# --------------------------------------------------------------------------- display

class _ModelResult:
    """Shared display: a one-line headline and a table, both labelled as a model."""

    def _headline(self) -> str:
        raise NotImplementedError

    def _rows(self) -> list[tuple[str, str]]:
        return []

    def __str__(self) -> str:
        rows = self._rows()
        lines = [f"model: {self._headline()}"]
        if rows:
            width = max(len(k) for k, _ in rows)
            lines += [f"  {k:<{width}}  {v}" for k, v in rows]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                       f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
                       for k, v in self._rows())
        return (f"<div><span style='background:#eee;border-radius:3px;padding:0 4px;"
                f"font-size:85%'>model</span> {html.escape(self._headline())}"
                f"<table>{body}</table></div>")


def _int(value, what: str, minimum: int | None = 0) -> int:
    """An integer argument at least ``minimum`` (None: any), or a clear error."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not float(value).is_integer():
        raise ModelInputError(f"{what} must be a whole number, got {value!r}.")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ModelInputError(f"{what} must be at least {minimum}, got {value}.")
    return value


def _nonneg(value, what: str) -> float:
    value = float(value)
    if not value >= 0 or math.isinf(value):
        raise ModelInputError(f"{what} must be a finite number >= 0, got {value!r}.")
    return value


def _positive(value, what: str) -> float:
    value = float(value)
    if not value > 0 or math.isinf(value):
        raise ModelInputError(f"{what} must be a finite number > 0, got {value!r}.")
    return value


def ceil_div(a: int, b: int) -> int:
    """Whole ``b``-sized pieces needed to cover ``a`` (blocks for a grid, tiles for a matrix)."""
    return -(-a // b)


def _round_up(x: int, unit: int) -> int:
    return ceil_div(x, unit) * unit


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def _seconds(t: float) -> str:
    for unit, size in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if t >= size:
            return f"{t / size:.3g} {unit}"
    return f"{t * 1e9:.3g} ns"


# --------------------------------------------------------------------------- occupancy

OCCUPANCY_LIMITS = ("warps", "registers", "shared memory", "blocks")


@dataclass(frozen=True)
class Occupancy(_ModelResult):
    """Resident blocks and warps per SM for one launch configuration.

    ``block_limits`` gives the blocks per SM each resource allows (inf: no limit from it);
    ``limited_by`` names the binding ones.
    """

    cc: str
    block_size: int
    regs_per_thread: int
    smem_per_block: int
    warps_per_block: int
    active_blocks: int
    active_warps: int
    max_warps: int
    occupancy: float
    limited_by: str
    block_limits: Mapping[str, int] = field(hash=False)
    registers_per_block: int
    smem_allocated_per_block: int

    @property
    def active_threads(self) -> int:
        return self.active_blocks * self.block_size

    def _headline(self) -> str:
        return (f"{self.active_blocks} block(s) x {self.warps_per_block} warp(s) = "
                f"{self.active_warps}/{self.max_warps} warps per SM, occupancy "
                f"{self.occupancy:.0%} (limited by {self.limited_by}; cc {self.cc})")

    def _rows(self):
        lim = ", ".join(f"{k} {'no limit' if math.isinf(v) else v}" for k, v in self.block_limits.items())
        return [("launch", f"{self.block_size} threads/block, {self.regs_per_thread} regs/thread, "
                           f"{self.smem_per_block} B shared/block"),
                ("blocks per SM allowed by", lim),
                ("registers allocated per block", f"{self.registers_per_block:,}"),
                ("shared memory allocated per block", f"{self.smem_allocated_per_block:,} B")]


def occupancy_by_block(cc, block_sizes, regs_per_thread: int = 32,
                       smem_per_block: int = 0) -> dict[int, float]:
    """{block size: occupancy} for the block sizes that can launch; one over a register or
    shared-memory limit of a block is left out (``occupancy`` says why for one size)."""
    out = {}
    for b in block_sizes:
        try:
            out[b] = occupancy(cc, b, regs_per_thread, smem_per_block).occupancy
        except SpecError:
            continue
    return out


def occupancy(cc, block_size: int, regs_per_thread: int = 32, smem_per_block: int = 0) -> Occupancy:
    """Blocks/warps per SM by the CUDA occupancy calculator's rules (warp-granular registers in 256s over 4 sub-partitions, shared memory in allocation units plus the per-block reserve, full shared-memory carveout).

    ``cc`` is a compute capability ("8.0", (9, 0)), a GPU name or a GPUSpec;
    ``smem_per_block`` is static plus dynamic shared memory in bytes.
    """
    lim = specs.occupancy_limits(cc)
    block_size = _int(block_size, "block_size", None)  # range checked below, naming the limit
    if not 1 <= block_size <= lim.max_threads_per_block:
        raise SpecError(f"A block of {block_size} threads is outside 1..{lim.max_threads_per_block}, "
                        f"the threads-per-block limit on cc {lim.cc}; pick a block size in that range "
                        "(a multiple of 32 wastes no lanes).")
    regs = _int(regs_per_thread, "regs_per_thread")
    if regs > lim.max_registers_per_thread:
        raise SpecError(f"{regs} registers per thread is over the limit of "
                        f"{lim.max_registers_per_thread} on cc {lim.cc}; the compiler caps a thread at "
                        f"{lim.max_registers_per_thread} (and spills the rest to local memory).")
    smem = _int(smem_per_block, "smem_per_block")
    if smem > lim.max_shared_memory_per_block:
        raise SpecError(f"{smem:,} B of shared memory per block is over the "
                        f"{lim.max_shared_memory_per_block:,} B a block may use on cc {lim.cc}; "
                        "use smaller tiles.")

    no_limit = math.inf
    warps_per_block = -(-block_size // lim.warp_size)
    by_warps = lim.max_warps_per_sm // warps_per_block

    # Registers go to whole warps in units of 256, and each of the SM's sub-partitions holds
    # a quarter of the register file, so a warp must fit inside one sub-partition.
    regs_per_warp = _round_up(regs * lim.warp_size, lim.register_allocation_unit)
    regs_per_block = regs_per_warp * warps_per_block
    if regs_per_warp == 0:
        by_regs = no_limit
    else:
        # The launch check assumes warps spread over all sub-partitions at once.
        checked = regs_per_warp * _round_up(warps_per_block, lim.register_sub_partitions)
        if checked > lim.max_registers_per_block:
            raise SpecError(
                f"A block of {block_size} threads at {regs} registers each needs {checked:,} "
                f"registers, over the {lim.max_registers_per_block:,} a block may use on cc {lim.cc}; "
                "use fewer threads per block or cap registers (__launch_bounds__, -maxrregcount).")
        per_partition = lim.registers_per_sm // lim.register_sub_partitions // regs_per_warp
        by_regs = per_partition * lim.register_sub_partitions // warps_per_block

    smem_alloc = _round_up(smem + lim.reserved_shared_memory_per_block,
                           lim.shared_memory_allocation_unit)
    by_smem = lim.shared_memory_per_sm // smem_alloc if smem_alloc else no_limit

    limits = {"warps": by_warps, "registers": by_regs, "shared memory": by_smem,
              "blocks": lim.max_blocks_per_sm}
    active = min(limits.values())
    if active == 0:  # only reachable with inconsistent limits; never report 0 % silently
        raise SpecError(f"No block of this configuration fits on an SM of cc {lim.cc}; "
                        "reduce threads, registers or shared memory per block.")
    binding = " and ".join(k for k in OCCUPANCY_LIMITS if limits[k] == active)
    active_warps = active * warps_per_block
    return Occupancy(cc=lim.cc, block_size=block_size, regs_per_thread=regs, smem_per_block=smem,
                     warps_per_block=warps_per_block, active_blocks=active,
                     active_warps=active_warps, max_warps=lim.max_warps_per_sm,
                     occupancy=active_warps / lim.max_warps_per_sm, limited_by=binding,
                     block_limits=specs.ReadOnlyDict(limits), registers_per_block=regs_per_block,
                     smem_allocated_per_block=smem_alloc)


# --------------------------------------------------------------------------- waves

@dataclass(frozen=True)
class Waves(_ModelResult):
    """How a grid's blocks fill the GPU in waves."""

    grid_blocks: int
    blocks_per_wave: int
    full_waves: int
    tail_blocks: int
    waves: int
    utilization: float

    def _headline(self) -> str:
        tail = f" + a tail wave of {self.tail_blocks}" if self.tail_blocks else ""
        return (f"{self.grid_blocks} blocks = {self.full_waves} full wave(s) of "
                f"{self.blocks_per_wave}{tail}; {self.utilization:.0%} of the block slots "
                f"of {self.waves} wave(s) are used")

    def _rows(self):
        return [("waves (rounded up)", str(self.waves)),
                ("slot utilization over all waves", f"{self.utilization:.1%}")]


def waves(grid_blocks: int, blocks_per_sm: int, sm_count: int) -> Waves:
    """Waves of a grid, assuming every SM holds ``blocks_per_sm`` blocks and all blocks take equal time."""
    grid = _int(grid_blocks, "grid_blocks", 1)
    per_sm = _int(getattr(blocks_per_sm, "active_blocks", blocks_per_sm), "blocks_per_sm", 1)
    sms = _int(sm_count, "sm_count", 1)
    per_wave = per_sm * sms
    full, tail = divmod(grid, per_wave)
    n = full + (1 if tail else 0)
    return Waves(grid_blocks=grid, blocks_per_wave=per_wave, full_waves=full, tail_blocks=tail,
                 waves=n, utilization=grid / (n * per_wave))


# --------------------------------------------------------------------------- global memory sectors

def strided_addresses(stride: int, elem_bytes: int = 4, base: int = 0, lanes: int = WARP_SIZE) -> list[int]:
    """Byte addresses a warp reads when lane i reads element ``i * stride`` of an array at ``base``."""
    return [base + i * stride * elem_bytes for i in range(lanes)]


@dataclass(frozen=True)
class Sectors(_ModelResult):
    """Memory traffic of one warp-wide load or store."""

    lanes: int
    elem_bytes: int
    requested_bytes: int
    sectors: int
    lines: int
    transferred_bytes: int
    efficiency: float

    def _headline(self) -> str:
        return (f"{self.lanes} lanes x {self.elem_bytes} B touch {self.sectors} sectors of 32 B "
                f"in {self.lines} lines of 128 B; efficiency {self.efficiency:.0%}")

    def _rows(self):
        return [("bytes requested", str(self.requested_bytes)),
                ("bytes moved (sectors x 32 B)", str(self.transferred_bytes))]


def sectors(addresses: Iterable[int], elem_bytes: int = 4) -> Sectors:
    """32-byte sectors and 128-byte lines one warp access touches; efficiency = distinct bytes requested / sector bytes moved.

    ``addresses`` holds the BYTE address each active lane reads or writes (at most 32; leave
    out inactive lanes), each access ``elem_bytes`` long. Ignores caches: every touched
    sector counts as moved once.
    """
    elem = _int(elem_bytes, "elem_bytes", 1)
    if elem not in (1, 2, 4, 8, 16):
        raise ModelInputError(f"elem_bytes must be 1, 2, 4, 8 or 16 (a load a thread can issue), got {elem}.")
    addrs = [_int(a, "a byte address") for a in addresses]
    if not addrs:
        raise ModelInputError("Give at least one lane's byte address.")
    if len(addrs) > WARP_SIZE:
        raise ModelInputError(f"A warp has {WARP_SIZE} lanes; got {len(addrs)} addresses.")
    touched_bytes: set[int] = set()
    secs: set[int] = set()
    lines: set[int] = set()
    for a in addrs:
        touched_bytes.update(range(a, a + elem))
        # A misaligned access may straddle two sectors (or lines); count both.
        for b in (a, a + elem - 1):
            secs.add(b // SECTOR_BYTES)
            lines.add(b // LINE_BYTES)
    moved = len(secs) * SECTOR_BYTES
    return Sectors(lanes=len(addrs), elem_bytes=elem, requested_bytes=len(touched_bytes),
                   sectors=len(secs), lines=len(lines), transferred_bytes=moved,
                   efficiency=len(touched_bytes) / moved)


# --------------------------------------------------------------------------- bytes in flight

@dataclass(frozen=True)
class InFlight(_ModelResult):
    """Loads a full GPU keeps in flight, and the memory latency they can cover (Little's law)."""

    gpu: str
    sm_count: int
    threads_per_sm: int
    bytes_per_thread: int
    bytes_in_flight: int
    bandwidth: float
    covered_latency: float

    def bandwidth_at(self, latency: float) -> float:
        """Bandwidth (bytes/s) these loads sustain when each takes ``latency`` seconds."""
        return min(self.bandwidth, self.bytes_in_flight / _positive(latency, "latency"))

    def _headline(self) -> str:
        return (f"{self.sm_count} SMs x {self.threads_per_sm} threads x {self.bytes_per_thread} B = "
                f"{_bytes(self.bytes_in_flight)} in flight on {self.gpu}; at "
                f"{self.bandwidth / 1e12:.3g} TB/s that is {self.covered_latency * 1e9:.0f} ns of "
                "memory latency covered")

    def _rows(self):
        return [("rule", "bandwidth = bytes in flight / latency (Little's law), at most the peak"),
                ("every thread resident", f"{self.threads_per_sm} per SM, one load of "
                                          f"{self.bytes_per_thread} B outstanding each")]


def bytes_in_flight(gpu, bytes_per_thread: int = 4) -> InFlight:
    """Bytes a GPU has in flight when every resident thread waits on ``bytes_per_thread``.

    Little's law: to stream at bandwidth B with latency L, B x L bytes must be outstanding.
    The covered latency is bytes in flight / peak bandwidth; a memory access that takes longer
    leaves the bus idle, whatever the access pattern.
    """
    spec = specs.lookup(gpu)
    per_thread = _int(bytes_per_thread, "bytes_per_thread", 1)
    threads = specs.occupancy_limits(spec.cc).max_threads_per_sm
    total = spec.sm_count * threads * per_thread
    return InFlight(gpu=spec.name, sm_count=spec.sm_count, threads_per_sm=threads,
                    bytes_per_thread=per_thread, bytes_in_flight=total,
                    bandwidth=spec.bandwidth_Bps, covered_latency=total / spec.bandwidth_Bps)


# --------------------------------------------------------------------------- shared-memory banks

@dataclass(frozen=True)
class BankConflicts(_ModelResult):
    """Bank conflicts of one warp-wide shared-memory access."""

    ways: int
    wavefronts: int
    phases: int
    words_per_bank: tuple[int, ...]

    @property
    def slowdown(self) -> float:
        """Wavefronts relative to a conflict-free access of the same width."""
        return self.wavefronts / self.phases

    def _headline(self) -> str:
        kind = "no bank conflict" if self.ways == 1 else f"{self.ways}-way bank conflict"
        return f"{kind}: {self.wavefronts} wavefront(s) where {self.phases} would do"

    def _rows(self):
        busiest = max(range(SHARED_BANKS), key=lambda b: self.words_per_bank[b])
        return [("distinct words in the busiest bank", f"{self.words_per_bank[busiest]} (bank {busiest})"),
                ("slowdown", f"{self.slowdown:g}x")]


def bank_of(byte_address: int) -> int:
    """The shared-memory bank that serves a byte address (32 banks of 4-byte words)."""
    return (_int(byte_address, "a byte address") // BANK_WORD_BYTES) % SHARED_BANKS


def bank_conflicts(addresses: Iterable[int], word_bytes: int = 4) -> BankConflicts:
    """n-way conflict = most DISTINCT 4-byte words any of the 32 banks must serve (same word = broadcast); accesses wider than 4 B are split into 128-byte phases of 16 (8 B) or 8 (16 B) lanes.

    ``addresses`` holds the BYTE address in shared memory each active lane accesses.
    """
    width = _int(word_bytes, "word_bytes", 1)
    if width not in (1, 2, 4, 8, 16):
        raise ModelInputError(f"word_bytes must be 1, 2, 4, 8 or 16, got {width}.")
    addrs = [_int(a, "a byte address") for a in addresses]
    if not addrs:
        raise ModelInputError("Give at least one lane's byte address.")
    if len(addrs) > WARP_SIZE:
        raise ModelInputError(f"A warp has {WARP_SIZE} lanes; got {len(addrs)} addresses.")
    lanes_per_phase = min(WARP_SIZE, SHARED_BANKS * BANK_WORD_BYTES // max(width, BANK_WORD_BYTES))
    wavefronts, ways, phases = 0, 0, 0
    worst = (0,) * SHARED_BANKS
    for start in range(0, len(addrs), lanes_per_phase):
        words: list[set[int]] = [set() for _ in range(SHARED_BANKS)]
        for a in addrs[start:start + lanes_per_phase]:
            for w in range(a // BANK_WORD_BYTES, (a + width - 1) // BANK_WORD_BYTES + 1):
                words[w % SHARED_BANKS].add(w)
        counts = tuple(len(s) for s in words)
        phases += 1
        wavefronts += max(counts)
        if max(counts) > ways:
            ways, worst = max(counts), counts
    return BankConflicts(ways=ways, wavefronts=wavefronts, phases=phases, words_per_bank=worst)


# --------------------------------------------------------------------------- warp divergence

@dataclass(frozen=True)
class WarpEfficiency(_ModelResult):
    """Lane utilization of a warp whose branches run one after another."""

    active_lanes: tuple[int, ...]
    passes: int
    efficiency: float

    def _headline(self) -> str:
        return (f"{self.passes} branch pass(es) with {list(self.active_lanes)} active lanes: "
                f"{self.efficiency:.0%} of the warp's lanes do useful work")


def warp_efficiency(active_lanes: Iterable[int]) -> WarpEfficiency:
    """Divergence model: each branch with active lanes costs one full warp pass; efficiency = sum(active) / (32 x passes)."""
    if not isinstance(active_lanes, Iterable):
        raise ModelInputError(f"active_lanes={active_lanes!r}: give one count per branch, e.g. "
                              "[16, 16] for an if/else that splits a warp in half.")
    lanes = tuple(_int(n, "active lanes of a branch") for n in active_lanes)
    if any(n > WARP_SIZE for n in lanes):
        raise ModelInputError(f"A branch can have at most {WARP_SIZE} active lanes; got {list(lanes)}.")
    taken = tuple(n for n in lanes if n > 0)  # a branch no lane takes is skipped
    if not taken:
        raise ModelInputError("Give the active-lane count of at least one branch that some lane takes.")
    return WarpEfficiency(active_lanes=taken, passes=len(taken),
                          efficiency=sum(taken) / (WARP_SIZE * len(taken)))


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


# --------------------------------------------------------------------------- training precision

def training_precision(gpu: specs.GPUSpec) -> tuple[str, bool]:
    """(precision, needs loss scaling) for mixed-precision training on ``gpu``, from its peaks:
    BF16 where the part has it, else FP16 with loss scaling where FP16 beats FP32, else FP32."""
    if "bf16" in gpu.precisions:
        return "bf16", False
    if "fp16" in gpu.precisions and gpu.peak_flops("fp16") > gpu.peak_flops("fp32"):
        return "fp16", True
    return "fp32", False


# --------------------------------------------------------------------------- training memory

DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}
OPTIMIZER_STATES = {"sgd": 0, "momentum": 1, "adam": 2, "adamw": 2}


@dataclass(frozen=True)
class TrainingMemory(_ModelResult):
    """Bytes a training step keeps on the device, by kind."""

    params: int
    activations_count: int
    dtype: str
    optimizer: str
    master_weights: bool
    weights: int
    gradients: int
    master_copy: int
    optimizer_state: int
    activations: int

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.master_copy + self.optimizer_state + self.activations

    def _headline(self) -> str:
        mixed = " with fp32 master weights" if self.master_weights else ""
        return (f"{self.params:,} parameters in {self.dtype}{mixed}, {self.optimizer}: "
                f"{_bytes(self.total)} in total")

    def _rows(self):
        rows = [("weights", _bytes(self.weights)), ("gradients", _bytes(self.gradients))]
        if self.master_copy:
            rows.append(("fp32 master weights", _bytes(self.master_copy)))
        rows += [("optimizer state", _bytes(self.optimizer_state)),
                 ("activations", _bytes(self.activations)), ("total", _bytes(self.total))]
        return rows


def training_memory(params: int, activations: int, dtype: str = "fp32", optimizer: str = "adam",
                    master_weights: bool | None = None) -> TrainingMemory:
    """Weights + gradients (in ``dtype``) + optimizer state (sgd 0, momentum 1, adam 2 values per parameter) + activations (``activations`` values kept for backward, in ``dtype``); 16-bit dtypes keep fp32 master weights and fp32 optimizer state unless ``master_weights=False``. Ignores workspace, fragmentation and the CUDA context.
    """
    n = _int(params, "params")
    a = _int(activations, "activations")
    dt = str(dtype).lower()
    if dt not in DTYPE_BYTES:
        raise ModelInputError(f"dtype {dtype!r} is not one of {', '.join(DTYPE_BYTES)}.")
    opt = str(optimizer).lower()
    if opt not in OPTIMIZER_STATES:
        raise ModelInputError(f"optimizer {optimizer!r} is not one of {', '.join(OPTIMIZER_STATES)}.")
    size = DTYPE_BYTES[dt]
    master = (size < 4) if master_weights is None else bool(master_weights)
    state_bytes = 4 if (master or size >= 4) else size
    return TrainingMemory(params=n, activations_count=a, dtype=dt, optimizer=opt,
                          master_weights=master and size < 4, weights=n * size, gradients=n * size,
                          master_copy=n * 4 if (master and size < 4) else 0,
                          optimizer_state=n * OPTIMIZER_STATES[opt] * state_bytes,
                          activations=a * size)


# --------------------------------------------------------------------------- rounding error
# Worst-case bounds (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., 2002,
# Lemma 3.1 and sections 3.1 and 4.2). They hold for every order of the additions (any BLAS
# kernel, SIMD width, thread split or GPU schedule), with or without fused multiply-adds.

#: Unit roundoff of float32 (round to nearest): |fl(x) - x| <= U32 * |x|.
U32 = 2.0 ** -24
#: Unit roundoff of float64: the error of a float64 reference.
U64 = 2.0 ** -53


def gamma(n: int, u: float = U32) -> float:
    """gamma_n = n*u / (1 - n*u): the largest relative error ``n`` roundings of unit roundoff ``u`` add up to."""
    n = _int(n, "n")
    if n * u >= 0.5:
        raise ModelInputError(f"{n} roundings of {u:.3g} can lose every digit (n*u >= 0.5): split "
                              "the sum into blocks and add the block sums in float64.")
    return n * u / (1 - n * u)


def sum_error_bound(depth: int, abs_sum: float, u: float = U32, terms: int | None = None) -> float:
    """Largest |computed - exact| of a sum or dot product whose terms each pass through at most ``depth`` roundings, in any order: gamma_depth * sum|terms|.

    ``depth`` is the longest chain of float32 additions a term goes through: n for n terms added
    one after another (or in any other order), less when float32 partial sums of at most
    ``depth`` terms are added in float64. ``abs_sum`` is sum|x_i| (sum|x_i * y_i| for a dot
    product). The error of a float64 reference over ``terms`` (default ``depth``) terms is added.
    """
    return (gamma(depth, u) + gamma(terms or depth, U64)) * _nonneg(abs_sum, "abs_sum")


def matmul_error_bound(a, b, u: float = U32) -> float:
    """Largest elementwise |computed - exact| of ``a @ b`` in float32 with K = a.shape[-1]: gamma_K * max(|a| @ |b|).

    Works on NumPy, CuPy and torch arrays; |a| @ |b| is computed in the inputs' precision
    (terms >= 0, so it is at most gamma_K below the exact value, which the bound allows for).
    """
    k = int(a.shape[-1])
    if k == 0 or int(a.shape[0]) == 0 or int(b.shape[-1]) == 0:
        return 0.0
    mag = abs(a) @ abs(b)
    # NumPy, CuPy and torch arrays have .max(); the tests' stand-in for CuPy takes np.max.
    top = mag.max() if hasattr(mag, "max") else np.max(mag)
    return sum_error_bound(k, float(top) / (1 - gamma(k, u)), u)


def affine_steps_error_bound(top: float, a: float, b: float, k: int, u: float = U32) -> float:
    """Largest error of ``k`` float32 steps y <- a*y + b from any |y_0| <= ``top`` (|a| < 1).

    Each step rounds at most twice (once with a fused multiply-add): at most
    gamma_2 * (|a|*Y + |b|), Y bounding |y| (max(top, |b| / (1 - |a|))); an earlier step's
    error shrinks by |a| per step, so k steps add up to 1 + |a| + ... + |a|^(k-1) of it. The
    float64 reference's own error (2k roundings of 2^-53) is included. First order in ``u``.
    """
    k = _int(k, "k")
    a, b = float(a), float(b)
    if not abs(a) < 1:
        raise ModelInputError(f"|a| = {abs(a):g} must be below 1 for the error to stay bounded: "
                              "use a contracting step (|a| < 1).")
    y = max(_nonneg(top, "top"), abs(b) / (1 - abs(a)))
    worst = (abs(a) * y + abs(b)) * sum(abs(a) ** j for j in range(k))
    return sum_error_bound(2, worst, u, terms=2 * max(1, k))
