"""Occupancy (resident blocks and warps per SM), waves of a grid, and bytes in flight."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

from .. import specs
from ..errors import SpecError
from .base import _int, _ModelResult, _bytes, _positive, _round_up


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
