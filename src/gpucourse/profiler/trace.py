"""Every access of one launch, thread by thread: what the access pictures (``gc.draw``) and
the kernel puzzles' read and write budgets are made of.

``trace(kernel, grid, block, args)`` runs one launch in the profiler's instrumented build
(the same build and hooks as :func:`gpucourse.profiler.profile`), with the hooks also
logging each load, store and atomic of the kernel: which thread of which block, which array
argument or ``__shared__`` array, which element, which source line, and between which
barriers. Warp-level requests are grouped as the profiler groups them (the k-th execution
of an instruction by each lane of a warp since the last barrier), so each access also
carries its request's 32-byte sectors (global memory) or n-way bank conflict (shared).

The launch runs on guarded copies of the arrays (``emulator.checks.GuardedArrays``): an
index out of bounds is logged, then stops the launch; the trace keeps what ran before it
and ``Trace.error`` says what happened. Results are copied back to ``args`` when the
launch completes, as after ``kernel(...)``.
"""
from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass

import numpy as np

from . import K_ATOMIC, ProfilerError, _Build, _builds, _lock, _prepare
from ..emulator import build as _emu_build, checks as _checks, instrument
from ..errors import CourseError

__all__ = ["trace", "Trace", "ArrayInfo", "TRACE_LIMIT"]

#: Accesses a trace keeps; a launch that makes more is summarised by its first ones.
TRACE_LIMIT = 2_000_000
KIND_NAMES = ("read", "write", "atomic")
_REC = np.dtype([("addr", np.uint64), ("id", np.uint32), ("rank", np.uint32),
                 ("block", np.uint32), ("epoch", np.uint32)])
#: One access of a trace (fields of ``Trace.records``).
RECORD = np.dtype([("kind", np.int8), ("array", np.int16), ("element", np.int64),
                   ("block", np.int32), ("thread", np.int32), ("line", np.int32),
                   ("phase", np.int32), ("request", np.int64), ("sectors", np.int16),
                   ("ideal_sectors", np.int16), ("ways", np.int16), ("oob", np.bool_)])


@dataclass(frozen=True)
class ArrayInfo:
    """One array a trace saw: a kernel argument (``global``) or a ``__shared__`` array."""

    name: str
    space: str           # "global" or "shared"
    shape: tuple
    itemsize: int

    @property
    def size(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 0


@dataclass(frozen=True)
class Trace:
    """The accesses of one launch in the order they ran (``records``, a NumPy record array
    of :data:`RECORD`), and the arrays they touched (``arrays``, indexed by ``records.array``)."""

    kernel: str
    grid: tuple
    block: tuple
    arrays: tuple
    records: np.ndarray
    source_lines: tuple = ()
    error: str = ""            # why the launch stopped early ('' when it completed)
    truncated: bool = False    # more accesses than TRACE_LIMIT: only the first are kept
    label: str = ""            # what the run was, for a picture's title ("Puzzle 3, your kernel")

    @property
    def threads_per_block(self) -> int:
        return int(np.prod(self.block))

    @property
    def blocks(self) -> int:
        return int(np.prod(self.grid))

    def array(self, name: str) -> int:
        """The index of the array called ``name`` in ``arrays``."""
        for i, a in enumerate(self.arrays):
            if a.name == name:
                return i
        raise KeyError(f"the kernel touched no array called {name!r}; it touched "
                       f"{', '.join(a.name for a in self.arrays) or 'none'}.")

    def of(self, name: str | None = None, kind: str | None = None, block: int | None = None):
        """The records of one array (by name), one kind ("read", "write", "atomic"), one block."""
        r = self.records
        keep = np.ones(len(r), bool)
        if name is not None:
            keep &= r["array"] == self.array(name)
        if kind is not None:
            keep &= r["kind"] == KIND_NAMES.index(kind)
        if block is not None:
            keep &= r["block"] == block
        return r[keep]

    def global_thread(self, records=None) -> np.ndarray:
        """blockIdx-major thread numbers (block * threads per block + thread) of ``records``."""
        r = self.records if records is None else records
        return r["block"].astype(np.int64) * self.threads_per_block + r["thread"]

    def per_thread(self, space: str = "global") -> tuple[np.ndarray, np.ndarray]:
        """(reads, writes) of each thread of the launch in ``space``; an atomic is a write."""
        n = self.blocks * self.threads_per_block
        spaces = np.array([a.space == space for a in self.arrays] + [False])
        r = self.records[spaces[self.records["array"]]]
        t = self.global_thread(r)
        reads = np.bincount(t[r["kind"] == 0], minlength=n)
        writes = np.bincount(t[r["kind"] != 0], minlength=n)
        return reads, writes

    def out_of_bounds(self):
        """The records that fell outside their array."""
        return self.records[self.records["oob"]]

    def oob_sentence(self) -> str:
        """The first access out of bounds in words ('' when there was none)."""
        bad = self.out_of_bounds()
        if not len(bad):
            return ""
        r = bad[0]
        info = self.arrays[int(r["array"])]
        verb = ("read", "wrote", "updated")[int(r["kind"])]
        return (f"thread {int(r['thread'])} of block {int(r['block'])} {verb} {info.name}"
                f"[{int(r['element'])}], outside its {info.size} elements, at line "
                f"{int(r['line'])}: {self.code(int(r['line']))}")

    def code(self, line: int) -> str:
        return self.source_lines[line - 1].strip() if 0 < line <= len(self.source_lines) else ""


# --------------------------------------------------------------------------- the run

def _setup(build: _Build) -> None:
    dll = build.dll
    if getattr(build, "_trace_ready", False):
        return
    dll.gcprof_trace.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
    dll.gcprof_trace_count.restype = ctypes.c_uint64
    dll.gcprof_shared_range.argtypes = [ctypes.c_void_p]
    where = (ctypes.c_uint64 * 3)()
    dll.gcprof_shared_range(where)
    build._shared_range = tuple(int(w) for w in where)
    build._trace_ready = True
    build._shared = _shared_symbols(build.library.path)


def _shared_symbols(path) -> list[tuple[int, int, str]]:
    """(offset from the library's base, bytes, name) of each static __shared__ array."""
    out = []
    for start, size, symbol in instrument.symbols(path):
        m = re.match(r"_ZZ.*?E(\d+)", symbol) or re.match(r"_ZL(\d+)", symbol)
        if m:
            name = symbol[m.end():m.end() + int(m.group(1))].removesuffix("__gcemu_guarded")
            out.append((start, size, name))
    return out


def trace(kernel, grid, block, args, shared_mem: int = 0, *, limit: int = TRACE_LIMIT,
          timeout: float | None = _checks.DEFAULT_TIMEOUT_S) -> Trace:
    """Run one launch on the emulator, logging every access; returns a :class:`Trace`.

    ``timeout``: seconds the launch may take (an endless loop stops there; None: no limit)."""
    (module, signature, name, grid3, block3, shared, host, copies, tool, key,
     stack_kb) = _prepare(kernel, grid, block, args, shared_mem)
    params = signature.params
    buf = np.zeros(max(1, int(limit)), _REC)
    error = ""
    with _lock:
        build = _builds.get(key)
        if build is None:
            build = _builds[key] = _Build(module, tool)
        _setup(build)
        arena = _checks.guarded(params, host)
        run_args = arena.args if arena else host
        try:
            flat = []
            for a, p in zip(run_args, params):
                if p.pointer:
                    start = a.__array_interface__["data"][0]
                    flat += [start, start + a.nbytes, 0]
            ranges = (ctypes.c_uint64 * max(1, len(flat)))(*flat)
            if build.dll.gcprof_reset(ranges, len(flat) // 3, stack_kb * 1024) != 0:
                raise ProfilerError("The profiler could not allocate its tables (out of memory?).")
            build.dll.gcprof_trace(buf.ctypes.data, len(buf))
            try:
                with _emu_build._lock:  # the time limit belongs to this launch
                    _checks.set_timeout(build.library, timeout)
                    try:
                        build.library.launch(name, grid3, block3, run_args, shared, echo=False)
                    finally:
                        _checks.set_timeout(build.library, None)
            except CourseError as exc:
                error = str(exc)
            finally:
                count = int(build.dll.gcprof_trace_count())
                build.dll.gcprof_trace(None, 0)
                build.dll.gcprof_finish()
            if not error and arena:
                arena.copy_back()
            spans = [(p.name, a.__array_interface__["data"][0], a) for a, p in zip(run_args, params)
                     if p.pointer]
            n = build.dll.gcprof_count()
            pcs = np.zeros(n, np.uint64)
            kinds = np.zeros(n, np.uint8)
            sizes = np.zeros(n, np.uint32)
            skips = np.zeros(n, np.uint8)
            stats = np.zeros((n, 17), np.uint64)
            build.dll.gcprof_read(pcs.ctypes.data, kinds.ctypes.data, sizes.ctypes.data,
                                  skips.ctypes.data, stats.ctypes.data, n)
            offsets = [int(p) - build.base for p in pcs[1:]]
            build.resolve(offsets, {o: int(k) for o, k in zip(offsets, kinds[1:])})
            raw = buf[:min(count, len(buf))].copy()
            # Arrays live in the guarded arena; other addresses are the emulator's own.
            arena_span = (arena.base, arena.base + arena.total) if arena else None
            records, arrays = _records(build, raw, offsets, kinds, sizes, spans, shared,
                                       arena_span)
        finally:
            if arena:
                arena.close()
    for i, h in copies.items():
        args[i].set(h)
    if error and "out of bounds" not in error.lower() and not records["oob"].any():
        raise ProfilerError(f"The launch of {name} failed under the tracer: {error}")
    return Trace(kernel=name, grid=grid3, block=block3, arrays=tuple(arrays), records=records,
                 source_lines=tuple(build.source_lines), error=error, truncated=count > len(buf))


def _records(build, raw, offsets, kinds, sizes, spans, shared_bytes, arena_span=None):
    """Turns the hooks' log into :data:`RECORD` rows and the list of arrays touched."""
    line_of = np.zeros(len(kinds), np.int32)
    counted = np.zeros(len(kinds), bool)
    for i, off in enumerate(offsets, start=1):
        line, role, _ = build.sites.get(off, (0, "internal", ""))
        line_of[i], counted[i] = line, role == "kernel" and int(kinds[i]) <= K_ATOMIC
    raw = raw[counted[raw["id"]]]
    addr = raw["addr"].astype(np.int64)
    size = sizes[raw["id"]].astype(np.int64)
    arrays: list[ArrayInfo] = []
    array = np.full(len(raw), -1, np.int16)
    element = np.zeros(len(raw), np.int64)
    oob = np.zeros(len(raw), bool)
    # Global arrays: the argument whose span holds the address, else the nearest one.
    starts = []
    for pname, start, a in spans:
        arrays.append(ArrayInfo(pname, "global", tuple(a.shape), a.itemsize))
        starts.append((start, start + a.nbytes, a.itemsize))
    # Static __shared__ arrays, then dynamic shared memory.
    base = build.base
    s_lo, s_hi = build._shared_range[:2]
    sh = [(base + s, base + s + b, nm) for s, b, nm in build._shared if s_lo <= base + s < s_hi]
    dyn = build._shared_range[2]
    for lo, hi, nm in sh:
        inside = (addr >= lo) & (addr < hi) & (array < 0)
        if inside.any():
            isz = int(np.min(size[inside]))
            arrays.append(ArrayInfo(nm, "shared", ((hi - lo) // isz,), isz))
            array[inside] = len(arrays) - 1
            element[inside] = (addr[inside] - lo) // isz
    if dyn:
        inside = (addr >= dyn) & (addr < dyn + 48 * 1024) & (array < 0)
        if inside.any():
            isz = int(np.min(size[inside]))
            arrays.append(ArrayInfo("extern __shared__", "shared",
                                    (max(1, shared_bytes // isz),), isz))
            array[inside] = len(arrays) - 1
            element[inside] = (addr[inside] - dyn) // isz
            oob[inside] = addr[inside] >= dyn + shared_bytes
    rest = array < 0
    if arena_span:
        rest &= (addr >= arena_span[0]) & (addr < arena_span[1])
    if rest.any() and starts:
        lo = np.array([s[0] for s in starts], np.int64)
        hi = np.array([s[1] for s in starts], np.int64)
        isz = np.array([s[2] for s in starts], np.int64)
        a = addr[rest][:, None]
        gap = np.where(a < lo, lo - a, np.where(a >= hi, a - hi + 1, 0))
        which = np.argmin(gap, axis=1)
        array[rest] = which
        element[rest] = (addr[rest] - lo[which]) // isz[which]
        oob[rest] = gap[np.arange(len(which)), which] > 0
        if not arena_span:  # no arena to tell: far from every array is not the kernel's
            array[rest] = np.where(gap.min(axis=1) < (1 << 20), array[rest], -1)
    keep = array >= 0
    raw, addr, size = raw[keep], addr[keep], size[keep]
    out = np.zeros(len(raw), RECORD)
    out["kind"] = kinds[raw["id"]]
    out["array"], out["element"], out["oob"] = array[keep], element[keep], oob[keep]
    out["block"], out["thread"] = raw["block"], raw["rank"]
    out["line"] = line_of[raw["id"]]
    first = {}
    for b in np.unique(raw["block"]):
        first[int(b)] = int(raw["epoch"][raw["block"] == b].min())
    out["phase"] = raw["epoch"] - np.vectorize(first.get, otypes=[np.int64])(raw["block"]) \
        if len(raw) else 0
    _requests(out, raw, addr, size, [a.space for a in arrays])
    return out, arrays


def _requests(out, raw, addr, size, spaces) -> None:
    """Groups accesses into warp-level requests and measures each (sectors, bank ways)."""
    if not len(out):
        return
    warp = raw["rank"] // 32
    # k-th execution of an instruction by a thread within its epoch.
    key_t = (raw["block"].astype(np.int64) << 42) ^ (raw["epoch"].astype(np.int64) << 24) \
        ^ (raw["id"].astype(np.int64) << 11) ^ raw["rank"]
    order = np.argsort(key_t, kind="stable")
    ks = key_t[order]
    starts = np.r_[0, np.flatnonzero(ks[1:] != ks[:-1]) + 1]
    occ = np.arange(len(ks)) - np.repeat(starts, np.diff(np.r_[starts, len(ks)]))
    k = np.empty(len(ks), np.int64)
    k[order] = occ
    req_key = np.stack([raw["block"].astype(np.int64), raw["epoch"].astype(np.int64),
                        raw["id"].astype(np.int64), warp.astype(np.int64), k], axis=1)
    _, req = np.unique(req_key, axis=0, return_inverse=True)
    req = req.ravel()
    out["request"] = req
    shared = np.array([s == "shared" for s in spaces])[out["array"]]
    order = np.argsort(req, kind="stable")
    bounds = np.r_[0, np.flatnonzero(np.diff(req[order])) + 1, len(order)]
    for s, e in zip(bounds[:-1], bounds[1:]):
        idx = order[s:e]
        a, z = addr[idx], int(size[idx[0]])
        if shared[idx[0]]:
            out["ways"][idx] = _ways(a, z, out["kind"][idx[0]] == 2)
        else:
            dev = a - (a.min() // 256) * 256   # arrays start 256-byte aligned on a GPU
            sectors = len(np.unique(np.concatenate([dev // 32, (dev + z - 1) // 32])))
            distinct = len(np.unique(dev)) * z
            lo = int(dev.min())
            out["sectors"][idx] = sectors
            out["ideal_sectors"][idx] = (lo % 32 + distinct + 31) // 32


def _ways(a, size, atomic) -> int:
    """The n of the n-way bank conflict of one shared-memory request (as hooks.cpp counts)."""
    width = max(4, size)
    per_phase = max(1, min(32, 128 // width))
    most = 1
    for s in range(0, len(a), per_phase):
        words = np.concatenate([np.arange(x >> 2, ((x + size - 1) >> 2) + 1) for x in a[s:s + per_phase]])
        if not atomic:
            words = np.unique(words)
        most = max(most, int(np.bincount(words & 31, minlength=32).max()))
    return most
