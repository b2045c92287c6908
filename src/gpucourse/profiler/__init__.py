"""A memory-traffic profiler on the CPU emulator: what a kernel's warps really touch.

``profile(kernel, grid, block, args, shared_mem=0)`` runs one launch of a course kernel (or
a learner's, from ``gc.kernels.from_source``) on the emulator in an instrumented build and
returns a :class:`Profile`: per warp-level request, the 32-byte sectors and 128-byte lines
of global memory and the efficiency; shared-memory bank conflicts and replays; atomics and
how many lanes of a warp hit one address; active lanes per warp-level basic block and the
barriers executed; and all of it per line of the ``.cu`` file::

    mod = gc.kernels.load("transpose")
    args = (a, out, np.int32(256), np.int32(256))      # a: 256 x 256 float32
    p = gc.profiler.profile(mod.transpose_v1_naive, (8, 8), (32, 8), args)
    p                                   # a table in a notebook; print(p) as text
    p.global_store.sectors_per_request  # 32.0: every lane of a store in its own sector
    p.line(26)                          # the rows of one source line
    p.model_time("T4")                  # a modelled time on a GPU of the spec table

The counts are measured, not modelled: they follow from the addresses the kernel computes,
grouped as a GPU groups them (the k-th execution of an instruction by each lane of a warp
since the last ``__syncthreads`` is one request). They come from the CPU build of the
kernel, so where g++ compiles differently from nvcc (a branch turned into a select, a loop
left rolled that nvcc unrolls) the branches can differ; the addresses cannot. Caches are not
simulated: a sector counts once per request that touches it. Arrays passed as arguments
are taken to start on a 256-byte boundary, as ``cudaMalloc`` places them. Grouping by
occurrence is exact for the usual shapes of divergence (if/else, loops whose lanes stop at
different counts); when lanes skip an instruction in different iterations of one loop,
their occurrences are grouped as if they had run in step. The accesses of a warp between
two barriers are kept until the barrier, so memory grows with a warp's accesses per epoch.

How: the kernel is compiled with ``-fsanitize=thread`` (every load and store calls a hook
with its address) and ``-fsanitize-coverage=trace-pc`` (every basic block calls a hook),
linked with this package's ``hooks.cpp`` instead of the sanitizer's runtime; debug
information maps each instruction to its line. Linux (ELF, GNU-compatible linker) only.
"""
from __future__ import annotations

import ctypes
import html
import os
from dataclasses import dataclass, field

import numpy as np

from .. import models, specs
from ..emulator import DEFAULT_STACK_KB
from ..emulator.launch import check_args, check_launch, format_dims
from ..emulator.source import defines_key
from .build import (_STATS, _TOTALS, K_ATOMIC, K_BLOCK, K_READ, K_WRITE, ProfilerError, _Build,
                    _builds, _lock, _toolchain_check)
from .shared_trace import (TRACE_SLOTS, TRACE_THREADS, TraceError, instrument_shared,
                    trace_shared_accesses, traced_module)

__all__ = ["profile", "Profile", "Counters", "Divergence", "LineStat", "ModelTime",
           "ProfilerError", "LAUNCH_OVERHEAD_S", "trace_shared_accesses", "instrument_shared",
           "traced_module", "TraceError", "TRACE_THREADS", "TRACE_SLOTS"]

#: Fixed cost of one kernel launch in the time model (the models' own round figure).
LAUNCH_OVERHEAD_S = models.LAUNCH_OVERHEAD_S
_S = {name: i for i, name in enumerate(_STATS)}


# --------------------------------------------------------------------------- records

@dataclass(frozen=True)
class Counters:
    """Warp-level requests of one kind of access (global loads, shared stores, ...), summed."""

    requests: int = 0
    lanes: int = 0               # thread-level accesses
    sectors: int = 0             # global: 32-byte sectors touched, summed over requests
    lines: int = 0               # global: 128-byte lines touched, summed over requests
    requested_bytes: int = 0     # global: distinct bytes the lanes asked for, summed
    wavefronts: int = 0          # shared: passes the banks needed
    ideal_wavefronts: int = 0    # shared: passes without conflicts (one per phase)
    ways_sum: int = 0            # shared: n of the n-way conflict, summed over requests
    max_ways: int = 0
    distinct_addresses: int = 0  # distinct addresses per request, summed
    same_address_sum: int = 0    # most lanes on one address per request, summed
    same_address_max: int = 0

    def __add__(self, other: "Counters") -> "Counters":
        maxed = ("max_ways", "same_address_max")
        return Counters(**{f: (max if f in maxed else int.__add__)(getattr(self, f), getattr(other, f))
                           for f in self.__dataclass_fields__})

    def _per_request(self, total: int) -> float:
        return total / self.requests if self.requests else 0.0

    @property
    def active_lanes(self) -> float:
        """Lanes per request (32 for a full warp)."""
        return self._per_request(self.lanes)

    @property
    def sectors_per_request(self) -> float:
        return self._per_request(self.sectors)

    @property
    def lines_per_request(self) -> float:
        return self._per_request(self.lines)

    @property
    def bytes_moved(self) -> int:
        """Sector bytes: what the memory system moves for these requests (no cache reuse)."""
        return 32 * self.sectors

    @property
    def efficiency(self) -> float:
        """Bytes the lanes asked for / bytes in the sectors touched (global memory)."""
        return self.requested_bytes / self.bytes_moved if self.sectors else 0.0

    @property
    def conflict_ways(self) -> float:
        """Average n of the n-way bank conflict per request (1: conflict-free)."""
        return self._per_request(self.ways_sum)

    @property
    def replays(self) -> int:
        """Extra shared-memory wavefronts caused by bank conflicts."""
        return self.wavefronts - self.ideal_wavefronts

    @property
    def same_address_lanes(self) -> int:
        """Lanes whose address another lane of the same request also used."""
        return self.lanes - self.distinct_addresses

    @property
    def same_address_per_request(self) -> float:
        """Average of the most lanes on one address in a request."""
        return self._per_request(self.same_address_sum)


@dataclass(frozen=True)
class Divergence:
    """Active lanes per warp-level basic block, and barriers."""

    warp_blocks: int         # basic blocks executed by a warp (one per group of lanes)
    lane_blocks: int         # basic blocks executed by a thread
    barriers: int            # __syncthreads executed, counted once per block
    warp_barriers: int       # ... counted once per warp

    @property
    def active_lanes(self) -> float:
        """Average active lanes of a warp-level basic block (32: no divergence)."""
        return self.lane_blocks / self.warp_blocks if self.warp_blocks else 0.0

    @property
    def efficiency(self) -> float:
        """Active lanes / 32: the share of lane slots doing work."""
        return self.active_lanes / models.WARP_SIZE


@dataclass(frozen=True)
class LineStat:
    """What one line of the kernel does: one access kind (or its branches) and the counts."""

    line: int
    code: str
    access: str          # "global load", "shared store", "global atomic", "local", "branch"
    counters: Counters = field(default_factory=Counters)
    warp_blocks: int = 0
    lane_blocks: int = 0
    local_accesses: int = 0

    @property
    def active_lanes(self) -> float:
        if self.access == "branch":
            return self.lane_blocks / self.warp_blocks if self.warp_blocks else 0.0
        return self.counters.active_lanes


_ACCESS_ORDER = ("global load", "global store", "global atomic", "shared load", "shared store",
                 "shared atomic", "local", "branch")


@dataclass(frozen=True)
class ModelTime(models._ModelResult):
    """Modelled kernel time on one GPU, from a profile's counters. A model, not a measurement."""

    gpu: str
    kernel: str
    time_s: float
    bound: str
    launch_s: float
    dram_s: float
    dram_bytes: int
    cached_dram_s: float
    unique_bytes: int
    shared_s: float
    shared_wavefronts: int
    atomic_s: float
    hottest_atomic_ops: int
    clock_hz: float
    sms_used: int
    notes: str

    def _headline(self) -> str:
        return (f"{self.kernel} on the {self.gpu}: {models._seconds(self.time_s)} "
                f"(bound by {self.bound})")

    def _rows(self):
        rows = [
            ("launch overhead", models._seconds(self.launch_s)),
            ("global memory", f"{models._seconds(self.dram_s)}: {models._bytes(self.dram_bytes)} in "
                              f"sectors over the DRAM bandwidth, every request's sectors moved"),
            ("  with perfect caching", f"{models._seconds(self.cached_dram_s)}: each of the "
                                       f"{models._bytes(self.unique_bytes)} touched moved once"),
        ]
        if self.shared_wavefronts:
            rows.append(("shared memory", f"{models._seconds(self.shared_s)}: "
                                          f"{self.shared_wavefronts:,} wavefronts, one per clock "
                                          f"on each of {self.sms_used} SMs"))
        if self.hottest_atomic_ops:
            rows.append(("same-address atomics", f"{models._seconds(self.atomic_s)}: "
                                                 f"{self.hottest_atomic_ops:,} on the busiest "
                                                 f"address, one after another at one per clock"))
        return rows + [("assumes", self.notes)]


# --------------------------------------------------------------------------- the profile

@dataclass(frozen=True)
class Profile:
    """Counters of one launch measured on the CPU emulator; ``lines`` has them per source line."""

    kernel: str
    filename: str
    grid: tuple
    block: tuple
    shared_mem: int
    global_load: Counters
    global_store: Counters
    global_atomic: Counters
    shared_load: Counters
    shared_store: Counters
    shared_atomic: Counters
    local_accesses: int
    divergence: Divergence
    unique_global_bytes: int
    hottest_atomic_ops: int
    lines: tuple = ()
    warnings: tuple = ()

    @property
    def threads(self) -> int:
        return int(np.prod(self.block)) * self.blocks

    @property
    def blocks(self) -> int:
        return int(np.prod(self.grid))

    @property
    def global_memory(self) -> Counters:
        """Loads, stores and atomics to global memory together."""
        return self.global_load + self.global_store + self.global_atomic

    @property
    def shared_memory(self) -> Counters:
        return self.shared_load + self.shared_store + self.shared_atomic

    def line(self, number: int) -> list[LineStat]:
        """The rows of one source line."""
        return [r for r in self.lines if r.line == number]

    def model_time(self, gpu="T4") -> ModelTime:
        """A modelled time on a GPU of the spec table (``gc.specs.names()``): a model.

        launch overhead + the slowest of: sector bytes over the DRAM bandwidth, shared-memory
        wavefronts at one per clock per SM, and global atomics on the busiest address at one
        per clock. Arithmetic, latency and occupancy are not modelled.
        """
        spec = specs.lookup(gpu)
        clock, how = _clock_hz(spec)
        sms = max(1, min(spec.sm_count, self.blocks))
        dram_bytes = self.global_memory.bytes_moved
        dram = dram_bytes / spec.bandwidth_Bps
        cached = self.unique_global_bytes / spec.bandwidth_Bps
        wavefronts = self.shared_memory.wavefronts
        shared = wavefronts / (sms * clock)
        atomic = self.hottest_atomic_ops / clock
        parts = {"DRAM sectors": dram, "shared-memory wavefronts": shared,
                 "same-address atomics": atomic}
        bound = max(parts, key=parts.get)
        if parts[bound] < LAUNCH_OVERHEAD_S:
            bound = "launch overhead"
        notes = (f"no cache reuse across requests, full DRAM bandwidth, memory pipes overlapping; "
                 f"clock {clock / 1e9:.2f} GHz ({how}); arithmetic not modelled")
        return ModelTime(gpu=spec.name, kernel=self.kernel,
                         time_s=LAUNCH_OVERHEAD_S + max(parts.values()), bound=bound,
                         launch_s=LAUNCH_OVERHEAD_S, dram_s=dram, dram_bytes=dram_bytes,
                         cached_dram_s=cached, unique_bytes=self.unique_global_bytes,
                         shared_s=shared, shared_wavefronts=wavefronts, atomic_s=atomic,
                         hottest_atomic_ops=self.hottest_atomic_ops, clock_hz=clock,
                         sms_used=sms, notes=notes)

    # ---- display
    def _title(self) -> str:
        return (f"profile of {self.kernel} ({self.filename}), grid {format_dims(tuple(self.grid))}, "
                f"block {format_dims(tuple(self.block))}: counted on the CPU emulator")

    def summary(self) -> list[tuple[str, str]]:
        """(what, counts) rows of the launch's totals."""
        rows = []
        for label, c in (("global loads", self.global_load), ("global stores", self.global_store)):
            if c.requests:
                rows.append((label, f"{c.requests:,} requests, {c.sectors_per_request:.2f} sectors "
                                    f"and {c.lines_per_request:.2f} lines per request, "
                                    f"efficiency {c.efficiency:.0%}"))
        for label, c in (("shared loads", self.shared_load), ("shared stores", self.shared_store)):
            if c.requests:
                rows.append((label, f"{c.requests:,} requests, {_ways(c)}, {c.replays:,} replays"))
        for label, c in (("global atomics", self.global_atomic), ("shared atomics", self.shared_atomic)):
            if c.requests:
                rows.append((label, f"{c.lanes:,} operations in {c.requests:,} requests; "
                                    f"{c.same_address_lanes:,} lanes shared an address with another "
                                    f"lane of their warp (up to {c.same_address_max} on one)"))
        if self.hottest_atomic_ops:
            rows.append(("busiest atomic address", f"{self.hottest_atomic_ops:,} operations"))
        if self.local_accesses:
            rows.append(("local memory", f"{self.local_accesses:,} thread accesses to "
                                         f"per-thread arrays"))
        d = self.divergence
        if d.warp_blocks:
            rows.append(("divergence", f"{d.active_lanes:.1f} of 32 lanes active per warp-level "
                                       f"basic block ({d.efficiency:.0%})"))
        rows.append(("barriers", f"{d.barriers:,} __syncthreads per launch "
                                 f"({d.barriers / max(1, self.blocks):g} per block)"))
        rows.append(("global bytes touched", f"{models._bytes(self.unique_global_bytes)} of "
                                             f"distinct sectors in the arguments"))
        return rows

    def shown_lines(self) -> list[LineStat]:
        """The rows worth showing: every access, and branches where lanes sat idle."""
        return [r for r in self.lines if r.access != "branch" or r.active_lanes < models.WARP_SIZE]

    _HEAD = ["line", "access", "requests", "lanes", "sectors/req", "efficiency", "banks",
             "same address", "code"]

    @staticmethod
    def _line_cells(r: LineStat) -> list[str]:
        c = r.counters
        cells = [str(r.line), r.access]
        if r.access == "branch":
            cells += [f"{r.warp_blocks:,}", f"{r.active_lanes:.1f}", "", "", "", ""]
        elif r.access == "local":
            cells += [f"{r.local_accesses:,}", "", "", "", "", ""]
        else:
            cells += [f"{c.requests:,}", f"{c.active_lanes:.1f}"]
            atomic = r.access.endswith("atomic")
            if r.access.startswith("global"):
                # An atomic asks for its bytes to be changed, not moved: no efficiency.
                cells += [f"{c.sectors_per_request:.2f}", "" if atomic else f"{c.efficiency:.0%}", ""]
            else:
                cells += ["", "", _ways(c, short=True)]
            cells.append(f"{c.same_address_per_request:.1f}" if atomic else "")
        return cells + [r.code]

    def __str__(self) -> str:
        out = [self._title()]
        rows = self.summary()
        width = max(len(k) for k, _ in rows)
        out += [f"  {k:<{width}}  {v}" for k, v in rows]
        out += [f"  warning: {w}" for w in self.warnings]
        shown = self.shown_lines()
        if shown:
            table = [self._HEAD] + [self._line_cells(r) for r in shown]
            for row in table:
                if len(row[-1]) > 60:
                    row[-1] = row[-1][:57] + "..."
            widths = [max(len(row[i]) for row in table) for i in range(len(self._HEAD) - 1)]
            out.append("per line (branches only where lanes sat idle):")
            for row in table:
                cells = [row[i].ljust(widths[i]) if i == 1 else row[i].rjust(widths[i])
                         for i in range(len(widths))]
                out.append("  " + "  ".join(cells) + "  " + row[-1])
        return "\n".join(out)

    def __repr__(self) -> str:
        return f"<{self._title()}>"

    def _repr_html_(self) -> str:
        esc = html.escape
        summary = "".join(f"<tr><th style='text-align:left'>{esc(k)}</th>"
                          f"<td style='text-align:left'>{esc(v)}</td></tr>" for k, v in self.summary())
        warn = "".join(f"<p>warning: {esc(w)}</p>" for w in self.warnings)
        head = "".join(f"<th>{esc(h)}</th>" for h in self._HEAD)
        body = "".join(
            "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells[:-1])
            + f"<td style='text-align:left'><code>{esc(cells[-1])}</code></td></tr>"
            for cells in map(self._line_cells, self.shown_lines()))
        return (f"<div><b>{esc(self._title())}</b><table>{summary}</table>{warn}"
                f"<p>per line (branches only where lanes sat idle):</p>"
                f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>")


def _ways(c: Counters, short: bool = False) -> str:
    if c.max_ways <= 1:
        return "no conflict" if short else "no bank conflict"
    avg = c.conflict_ways
    text = f"{avg:.3g}-way"
    return text if short else f"{text} bank conflict on average (up to {c.max_ways}-way)"


def _clock_hz(spec) -> tuple[float, str]:
    if spec.boost_clock_mhz:
        return spec.boost_clock_mhz * 1e6, "boost clock"
    # A clock from the FP32 peak where the table gives none: peak = 2 x lanes x SMs x clock.
    cores = specs.FP32_LANES_PER_SM.get(tuple(spec.compute_capability))
    if cores and "fp32" in spec.peak_tflops:
        clock = spec.peak_flops("fp32") / (2 * cores * spec.sm_count)
        return clock, "derived from the FP32 peak"
    raise ProfilerError(f"The spec table gives no clock for the {spec.name}, so its shared-memory "
                        f"time cannot be modelled; pick another GPU from gc.specs.names().")


# --------------------------------------------------------------------------- profiling

def _kernel_parts(kernel):
    module = getattr(kernel, "module", None)
    signature = getattr(kernel, "signature", None)
    if module is None or signature is None or not hasattr(module, "source"):
        raise ProfilerError(f"profile() takes a kernel from gc.kernels.load(...) or "
                            f"gc.kernels.from_source(...), e.g. mod.transpose_v1_naive, not "
                            f"{type(kernel).__name__}.")
    return module, signature


def _host(args, params):
    """Arguments as the emulator takes them: CuPy arrays copied to the host."""
    if not isinstance(args, (tuple, list)):
        return args, {}
    host, copies = list(args), {}
    for i, (a, p) in enumerate(zip(args, params)):
        if p.pointer and type(a).__module__.startswith("cupy") and hasattr(a, "get"):
            copies[i] = host[i] = np.ascontiguousarray(a.get())
    return host, copies


def _ptr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _root_pointer(a: np.ndarray) -> int:
    """Start of the allocation that ``a`` views (its base chain's first array)."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    return root.__array_interface__["data"][0]


def _prepare(kernel, grid, block, args, shared_mem):
    """What a profiled or traced launch needs before it runs: the kernel's module and
    signature, the checked launch shape, host copies of the arguments (and which were CuPy
    arrays), the toolchain, the build's cache key and the emulator's stack size."""
    module, signature = _kernel_parts(kernel)
    name = signature.name
    # check_launch holds the emulator to its 48 KB of shared memory, static and dynamic.
    grid3, block3, shared = check_launch(name, grid, block, shared_mem,
                                         module.emulator_limits(name))
    host, copies = _host(args, signature.params)
    check_args(name, signature.params, host, "cpu")
    tool = _toolchain_check()
    key = (module.source, module.filename, defines_key(module.defines))
    try:
        stack_kb = int(os.environ.get("GPUCOURSE_EMU_STACK_KB", DEFAULT_STACK_KB))
    except ValueError:
        stack_kb = DEFAULT_STACK_KB  # the launch itself reports the bad value
    return module, signature, name, grid3, block3, shared, host, copies, tool, key, stack_kb


def profile(kernel, grid, block, args, shared_mem=0) -> Profile:
    """Run one launch on the emulator, counting its memory traffic; returns a :class:`Profile`.

    The launch is real: arrays in ``args`` receive the results, as after ``kernel(...)``.
    CuPy arrays are copied to the host for the run and the results copied back.
    """
    (module, signature, name, grid3, block3, shared, host, copies, tool, key,
     stack_kb) = _prepare(kernel, grid, block, args, shared_mem)
    with _lock:
        build = _builds.get(key)
        if build is None:
            build = _builds[key] = _Build(module, tool)
        arrays = [a for a, p in zip(host, signature.params) if p.pointer]
        flat = []
        for a in arrays:
            start = a.__array_interface__["data"][0]
            flat += [start, start + a.nbytes, (-_root_pointer(a)) % 256]
        ranges = (ctypes.c_uint64 * max(1, len(flat)))(*flat)
        if build.dll.gcprof_reset(ranges, len(arrays), stack_kb * 1024) != 0:
            raise ProfilerError("The profiler could not allocate its tables (out of memory?).")
        build.library.launch(name, grid3, block3, host, shared)
        build.dll.gcprof_finish()
        n = build.dll.gcprof_count()
        pcs = np.zeros(n, np.uint64)
        kinds = np.zeros(n, np.uint8)
        sizes = np.zeros(n, np.uint32)
        skips = np.zeros(n, np.uint8)
        stats = np.zeros((n, len(_STATS)), np.uint64)
        build.dll.gcprof_read(_ptr(pcs), _ptr(kinds), _ptr(sizes), _ptr(skips), _ptr(stats), n)
        totals = np.zeros(len(_TOTALS), np.uint64)
        build.dll.gcprof_totals(_ptr(totals))
        unique = np.zeros(max(1, len(arrays)), np.uint64)
        build.dll.gcprof_unique_sectors(_ptr(unique))
        offsets = [int(p) - build.base for p in pcs[1:]]
        build.resolve(offsets, {o: int(k) for o, k in zip(offsets, kinds[1:])})
    for i, h in copies.items():  # results back to the caller's device arrays
        args[i].set(h)
    return _assemble(build, name, grid3, block3, shared, offsets, kinds[1:], stats[1:],
                     dict(zip(_TOTALS, (int(t) for t in totals))), int(unique[:len(arrays)].sum()))


def _counters(row, prefix: str) -> Counters:
    s = lambda k: int(row[_S[k]])  # noqa: E731
    if prefix == "g":
        return Counters(requests=s("g_requests"), lanes=s("g_lanes"), sectors=s("g_sectors"),
                        lines=s("g_lines"), requested_bytes=s("g_bytes"),
                        distinct_addresses=s("distinct_sum") if not s("s_requests") else 0,
                        same_address_sum=s("same_sum") if not s("s_requests") else 0,
                        same_address_max=s("same_max") if not s("s_requests") else 0)
    return Counters(requests=s("s_requests"), lanes=s("s_lanes"), wavefronts=s("s_wavefronts"),
                    ideal_wavefronts=s("s_phases"), ways_sum=s("s_ways_sum"),
                    max_ways=s("s_ways_max"),
                    distinct_addresses=s("distinct_sum") if not s("g_requests") else 0,
                    same_address_sum=s("same_sum") if not s("g_requests") else 0,
                    same_address_max=s("same_max") if not s("g_requests") else 0)


def _assemble(build: _Build, name, grid, block, shared, offsets, kinds, stats, totals,
              unique_sectors) -> Profile:
    kinds_name = {K_READ: "load", K_WRITE: "store", K_ATOMIC: "atomic"}
    total = {f"{space} {what}": Counters() for space in ("global", "shared")
             for what in ("load", "store", "atomic")}
    per_line: dict[tuple, dict] = {}
    local = warp_blocks = lane_blocks = 0
    for off, kind, row in zip(offsets, kinds, stats):
        line, role, _ = build.sites.get(off, (0, "internal", ""))
        if role != "kernel" or not row.any():
            continue
        kind = int(kind)
        if kind == K_BLOCK:
            wb, lb = int(row[_S["b_groups"]]), int(row[_S["b_lanes"]])
            warp_blocks += wb
            lane_blocks += lb
            entry = per_line.setdefault((line, "branch"), {"wb": 0, "lb": 0})
            entry["wb"] += wb
            entry["lb"] += lb
            continue
        if row[_S["local_lanes"]]:
            local += int(row[_S["local_lanes"]])
            entry = per_line.setdefault((line, "local"), {"n": 0})
            entry["n"] += int(row[_S["local_lanes"]])
        for space, prefix in (("global", "g"), ("shared", "s")):
            if row[_S[f"{prefix}_requests"]]:
                c = _counters(row, prefix)
                label = f"{space} {kinds_name[kind]}"
                total[label] = total[label] + c
                entry = per_line.setdefault((line, label), {"c": Counters()})
                entry["c"] = entry["c"] + c
    rows = []
    for (line, access), e in sorted(per_line.items(),
                                    key=lambda kv: (kv[0][0], _ACCESS_ORDER.index(kv[0][1]))):
        rows.append(LineStat(line=line, code=build.code(line), access=access,
                             counters=e.get("c", Counters()), warp_blocks=e.get("wb", 0),
                             lane_blocks=e.get("lb", 0), local_accesses=e.get("n", 0)))
    warnings = []
    if totals["overflow"]:
        warnings.append("the kernel has more instructions than the profiler tracks (4096 "
                        "accesses and branches); the rest are not counted")
    if totals["mixed"]:
        warnings.append(f"{totals['mixed']:,} requests mixed shared and global addresses "
                        f"(a generic pointer); each part is counted with its own memory")
    return Profile(kernel=name, filename=build.filename, grid=tuple(grid), block=tuple(block),
                   shared_mem=shared, global_load=total["global load"],
                   global_store=total["global store"], global_atomic=total["global atomic"],
                   shared_load=total["shared load"], shared_store=total["shared store"],
                   shared_atomic=total["shared atomic"], local_accesses=local,
                   divergence=Divergence(warp_blocks=warp_blocks, lane_blocks=lane_blocks,
                                         barriers=totals["barriers"],
                                         warp_barriers=totals["warp_barriers"]),
                   unique_global_bytes=32 * unique_sectors,
                   hottest_atomic_ops=totals["atomic_hot"], lines=tuple(rows),
                   warnings=tuple(warnings))
