"""The hazard detector behind ``race_check``: shadow memory over an instrumented build.

Thread orders alone miss a lost update: on the emulator ``out[0] += x[i]`` or
``s_bins[d]++`` runs from load to store without another thread in between, so every order
gives the exact answer. The detector compiles the kernel once more with every load, store
and atomic observed (``instrument``, hooks in ``racecheck.cpp``), runs one launch and
reports the first two accesses of different threads to the same bytes that nothing orders
(a ``__syncthreads()`` in their block, a ``__syncwarp()`` of their warp), where at least
one is a plain write, or one is atomic and the other plain, or both are atomics of
different blocks and one is block-scoped (``atomicAdd_block``: atomic only among the
threads of its block): read-after-write, write-after-read and write-after-write hazards in
shared and global memory. Threads of different blocks are never ordered. An access
out of bounds is reported too, before any race: to global memory outside every array (the
launch's copies of its arrays lie between inaccessible pages, ``checks.GuardedArrays``, so
that such an access is seen before it happens, and faults after), past a static
``__shared__`` array, or to dynamic shared memory past the launch's ``shared_mem``.
``Detector.run(..., bounds_only=True)`` looks for those alone, without shadow memory: a
plain launch that went out of bounds runs again that way to name its line.

:func:`detector` returns the instrumented build of a kernel's source (cached), or None
where it cannot be made (not Linux, no addr2line, a compiler without -fsanitize=thread);
a warning then says once that only thread orders are checked.
"""
from __future__ import annotations

import ctypes
import hashlib
import re
import threading
import warnings
from dataclasses import dataclass

import numpy as np

from ..errors import CourseError
from . import build, checks, instrument
from .build import KernelError, Library, build_library
from .declarations import file_globals
from .globals import copy_values, declared_names, info
from .source import _SCALARS, _VECTORS, defines_key, view

HOOKS = instrument.HERE / "racecheck.cpp"
# Kinds of access and spaces of memory, as racecheck.cpp numbers them.
READ, WRITE, ATOMIC = 1, 2, 3
ATOMIC_BLOCK = 5  # a block-scoped atomic (atomicAdd_block...)
GLOBAL, SHARED, DYNAMIC, OUTSIDE, SHARED_GUARD, PLACED_GUARD, CONSTANT_GUARD = range(7)
RACE, BOUNDS, UNINITIALIZED = 1, 2, 3  # what was found
#: Guard bytes after each static __shared__ array in the detector's build (cuda_emu.h), and
#: before and after each __constant__ variable (emulator/rewrite.py).
SHARED_GUARD_BYTES = 256
_RESULT_WORDS = 15
CELL_BYTES = 100      # sizeof(Cell) in racecheck.cpp: the shadow of each 4-byte word
#: Most shadow memory one launch may take (lazily committed; 25x the arrays it watches).
MAX_SHADOW_BYTES = 2 << 30
#: Where guarded copies cannot be made: zeroed bytes before and after each array's copy,
#: where an access is out of bounds: the array's own size, within these limits.
OUT_OF_BOUNDS_ROOM, MAX_ROOM = 4096, 16 << 20
#: How the warning about a missing detector starts (a child process's is issued again here).
WARNING_START = "race_check runs without its hazard detector"

_lock = threading.Lock()
_detectors: dict = {}
_warned = False


def detector(kernel, warn: bool = True) -> "Detector | None":
    """The race detector's build of ``kernel``'s source, or None where it cannot be made
    (``warn``: say so once, as a RuntimeWarning)."""
    module = kernel.module
    key = (module.source, module.filename, defines_key(module.defines))
    with _lock:
        if key in _detectors:
            return _detectors[key]
    found = None
    problem = toolchain_problem()
    if not problem:
        try:
            found = Detector(detector_library(module), module.source, instrument.addr2line(),
                             defines=module.defines, plain=module._emulator_library())
        except (CourseError, OSError) as exc:
            problem = f"its instrumented build failed ({str(exc).splitlines()[0][:200]})"
    if problem and warn:
        _warn_once(problem)
    with _lock:
        return _detectors.setdefault(key, found)


def detector_library(module) -> Library:
    """The race detector's build of a kernel module's source (compiled, or from the cache)."""
    return build_library(module.source, filename=module.filename, defines=module.defines,
                         extra_flags=_flags(), extra_sources=(HOOKS,), guards=SHARED_GUARD_BYTES)


def hooks_object():
    """The detector's hooks compiled once per machine (cached), as its builds link them."""
    return build.extra_object(HOOKS)


def toolchain_problem() -> str:
    """Why the detector cannot run here (the profiler needs the same); "" where it can."""
    if not instrument.supported_platform():
        return "it needs Linux"
    if not instrument.addr2line():
        return "it needs addr2line (install binutils)"
    return ""


def _warn_once(problem: str, when: str = "") -> None:
    warn_again(f"{WARNING_START}{' ' + when if when else ''} ({problem}), so only thread "
               f"orders are compared and lost updates go unnoticed.")


def warn_again(text: str) -> None:
    """Warn ``text`` (a missing detector) unless such a warning was given before."""
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(text, RuntimeWarning, stacklevel=5)


def _flags() -> tuple[str, ...]:
    version = hashlib.sha256(HOOKS.read_bytes() + instrument.ATOMIC_MARKS.read_bytes()).hexdigest()[:12]
    # -O0: every access the source writes happens, where it is written. An optimizer may sink
    # `v = x[i]` below `if (i >= n) return;` and hide the read past the end that nvcc emits.
    return ("-O0", *instrument.TSAN_FLAGS, "-include", str(instrument.ATOMIC_MARKS),
            "-DGCEMU_ATOMIC_MARK=__gcrace_atomic", "-DGCEMU_ATOMIC_CAS_MARK=__gcrace_atomic_cas",
            "-DGCEMU_ATOMIC_BLOCK_MARK=__gcrace_atomic_block",
            "-DGCEMU_ATOMIC_CAS_BLOCK_MARK=__gcrace_atomic_cas_block",
            f"-DGCEMU_SHARED_GUARD_BYTES={SHARED_GUARD_BYTES}",
            # The read and write inside an atomic are the atomic: the mark observes them.
            '-DGCEMU_ATOMIC_ATTR=__attribute__((no_sanitize("thread")))',
            f"-DGCRACE_VERSION={version}", *instrument.link_flags())


def _twin(a: np.ndarray) -> tuple[np.ndarray, tuple[int, int]]:
    """A copy of ``a`` placed as ``a`` is in its allocation, so that reads past its end find
    the same neighbours (checkers put arrays at the start of longer buffers), with zeroed
    room before and after; and the (start, end) address of that whole allocation, where an
    access outside ``a`` is out of bounds."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if (root.base is not None or not (root.flags.c_contiguous or root.flags.f_contiguous)
            or root.nbytes > max(2 * a.nbytes, 1 << 26)):  # a small view of a big buffer
        root = a = a.copy()
    room = min(max(root.nbytes, OUT_OF_BOUNDS_ROOM), MAX_ROOM)
    raw = np.zeros(room + root.nbytes + 64 + room, np.uint8)
    # Keep the original's alignment (64 covers a float4 load and a cache line).
    shift = room + (root.ctypes.data - raw.ctypes.data - room) % 64
    ctypes.memmove(raw.ctypes.data + shift, root.ctypes.data, root.nbytes)
    offset = a.ctypes.data - root.ctypes.data
    twin = np.ndarray(a.shape, a.dtype, buffer=raw, offset=shift + offset, strides=a.strides)
    return twin, (raw.ctypes.data, raw.ctypes.data + raw.nbytes)


_span, _merged = checks.span, checks.merged


def _u64(values) -> ctypes.Array:
    """``values`` as a C array of uint64 (at least one element, so that it has an address)."""
    return (ctypes.c_uint64 * max(1, len(values)))(*values)


def _dims(i: int, dims) -> str:
    x, y = dims[0], dims[1]
    return f"({i % x},{i // x % y},{i // (x * y)})"


class Detector:
    """The instrumented build of one source: runs a launch and names its first hazard."""

    def __init__(self, library: Library, source: str, addr2line: str | None, *,
                 defines: dict | None = None, plain: Library | None = None):
        self.library = library
        self.source = source
        self.source_lines = source.splitlines()
        self.addr2line = addr2line
        self.defines = dict(defines or {})
        self.plain = plain  # the build whose global variables the detector's copy takes
        seen = view(source, defines)
        self.constants = [g.name for g in file_globals(seen.text)
                          if g.space == "constant" and not g.in_namespace]
        self.variables = declared_names(source, defines)
        self._dll = dll = ctypes.CDLL(str(library.path))
        dll.gcrace_reset.restype = ctypes.c_int
        dll.gcrace_reset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_int]
        dll.gcrace_result.argtypes = [ctypes.c_void_p]
        dll.gcrace_shared.argtypes = [ctypes.c_void_p]
        dll.gcrace_bounds.argtypes = [ctypes.c_void_p, ctypes.c_int]
        dll.gcrace_guards.argtypes = [ctypes.c_void_p, ctypes.c_int]
        dll.gcrace_constant_guards.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.guards = _shared_guards(library.path)  # [(start, end, array name)] offsets
        self.shared = _shared_symbols(library.path)  # [(start, size, array name)] offsets

    def __reduce__(self):
        return _detector_again, (self.library, self.source, self.addr2line, self.defines,
                                 self.plain)

    def run(self, name, grid, block, host_args, shared_mem=0, *, order="forward", seed=0,
            bounds_only=False, timeout=None) -> "Hazard | None":
        """Run one launch observed, on copies of the arrays; its first hazard, or None.

        ``bounds_only``: look for accesses out of bounds alone (no shadow memory, so no size
        limit); ``order``, ``seed`` as in a plain launch; ``timeout``: seconds it may take."""
        params = self.library.kernels[name].params
        arena = checks.guarded(params, host_args, align=64)
        try:
            if arena is not None:
                args = arena.args
                zones = {i: arena.zone(i) for i in arena.where}
            else:
                twins = {i: _twin(a) for i, (p, a) in enumerate(zip(params, host_args))
                         if p.pointer}
                args = [twins[i][0] if i in twins else a for i, a in enumerate(host_args)]
                zones = {i: zone for i, (_, zone) in twins.items()}
            return self._run(name, grid, block, params, args, zones, shared_mem, order, seed,
                             bounds_only, timeout)
        finally:
            if arena is not None:
                arena.close()

    def _run(self, name, grid, block, params, args, zones, shared_mem, order, seed, bounds_only,
             timeout):
        bounds = [v for i, zone in zones.items() for v in (*_span(args[i]), *zone)]
        spans = []
        if not bounds_only:
            # Arrays the kernel only reads cannot race, unless they overlap one it writes.
            written = [_span(a) for p, a in zip(params, args) if p.pointer and not p.const]
            spans = _merged(s for p, a in zip(params, args) if p.pointer
                            for s in [_span(a)]
                            if not p.const or any(s[0] < hi and lo < s[1] for lo, hi in written))
            if sum(hi - lo for lo, hi in spans) // 4 * CELL_BYTES > MAX_SHADOW_BYTES:
                _warn_once("the launch's arrays are too large for its shadow memory",
                           "for launches with arrays that large")
                return None
        result = (ctypes.c_uint64 * _RESULT_WORDS)()
        shared = (ctypes.c_uint64 * 3)()
        with build._lock:
            if self._dll.gcrace_reset(_u64([v for s in spans for v in s]), len(spans),
                                      int(shared_mem), int(not bounds_only)) != 0:
                return None  # no memory for the shadow: the thread orders have had their say
            self._dll.gcrace_bounds(_u64(bounds), len(bounds) // 4)
            self._dll.gcrace_guards(_u64([v for lo, hi, _ in self.guards for v in (lo, hi)]),
                                    len(self.guards))
            if self.plain is not None:  # what Python set with get_global
                copy_values(self.plain, self.library, self.variables)
            cguards = self._constant_guards()
            self._dll.gcrace_constant_guards(_u64([v for lo, hi, _, _ in cguards for v in (lo, hi)]),
                                             len(cguards))
            checks.set_timeout(self.library, timeout)
            try:
                self.library.launch(name, grid, block, args, shared_mem, order=order, seed=seed,
                                    echo=False)
            except KernelError:
                pass  # the plain build ran this launch; only a hazard found before counts
            finally:
                checks.set_timeout(self.library, None)
                self._dll.gcrace_result(result)
                self._dll.gcrace_shared(shared)
                self._dll.gcrace_finish()
        if not result[0]:
            return None
        return self._hazard(name, grid, block, params, args, shared_mem, list(result), list(shared))

    def _constant_guards(self) -> list[tuple[int, int, str, object]]:
        """(start, end, name, info) of the guard bytes before and after each __constant__
        variable of the detector's build, as addresses."""
        out = []
        for n in self.constants:
            found = info(self.library, n)
            if found is not None:
                g = SHARED_GUARD_BYTES
                out.append((found.address - g, found.address, n, found))
                out.append((found.address + found.nbytes, found.address + found.nbytes + g, n, found))
        return out

    # ---- the message
    def _sites(self, pcs) -> dict[int, tuple[int, str]]:
        """{pc: (line, code)} of the kernel's own source; line 0 where unknown."""
        chains = {}
        if self.addr2line:
            chains, _ = instrument.call_sites(self.addr2line, self.library.path, set(pcs))
        own = {self.library.filename, self.library.path.with_suffix(".cpp").name}
        out = {}
        for pc in pcs:
            lines = [f[2] for f in chains.get(pc, []) if f[1] in own and f[2] > 0]
            line = lines[0] if lines else 0
            code = (self.source_lines[line - 1].strip()
                    if 0 < line <= len(self.source_lines) else "")
            out[pc] = (line, code)
        return out

    def _hazard(self, name, grid, block, params, args, shared_mem, r, shared) -> "Hazard":
        addr, space = r[1], r[2]
        # A placed __shared__ variable: (name, start address, bytes, element bytes).
        placed = ((ctypes.string_at(r[11]).decode(errors="replace"), r[12], r[13], r[14])
                  if r[11] else None)
        first = dict(zip(("kind", "block", "rank", "pc"), r[3:7]))
        second = dict(zip(("kind", "block", "rank", "pc"), r[7:11]))
        sites = self._sites([a["pc"] for a in (first, second) if a["kind"]])
        filename = self.library.filename

        def who(a):
            return f"thread {_dims(a['rank'], block)} of block {_dims(a['block'], grid)}"

        def at(a, with_file):
            line, code = sites[a["pc"]]
            if not line:
                return "at a line the debug information does not name"
            return (f"at {filename + ' ' if with_file else ''}line {line}"
                    + (f" (`{code}`)" if code else ""))

        verbs = {READ: ("reads", "read"), WRITE: ("writes", "wrote"),
                 ATOMIC: ("atomically updates", "atomically updated"),
                 ATOMIC_BLOCK: ("atomically updates", "atomically updated")}

        def it(a):
            return "it with a block-scoped atomic" if a["kind"] == ATOMIC_BLOCK else "it"

        if r[0] == UNINITIALIZED:
            what = self._shared_element(addr, space, shared, placed)
            return Hazard(
                f"kernel {name}: {who(second)} {verbs[second['kind']][0]} {what} before any thread "
                f"of its block wrote it, {at(second, True)}; shared memory starts undefined in "
                f"every block (the emulator fills it with NaN): write every element a thread "
                f"reads, with a __syncthreads() between the writes and the reads.",
                f"{who(second)} reads {what} before any thread of its block wrote it, "
                f"{at(second, True)}")
        if space == DYNAMIC and not first["kind"]:
            offset = addr - shared[0]
            return Hazard(f"kernel {name}: {who(second)} {verbs[second['kind']][0]} dynamic "
                          f"shared memory (extern __shared__) at byte {offset}, past the "
                          f"{shared_mem} bytes the launch asked for, {at(second, True)}; pass a "
                          f"shared_mem that covers every element the kernel uses.")
        if space == OUTSIDE:
            return Hazard(self._out_of_bounds(name, params, args, addr, who(second),
                                              verbs[second["kind"]][0], at(second, True)))
        if space == SHARED_GUARD:
            offset = addr - shared[2]  # from the library's base, as the guards are
            array, past = next(((n, offset - lo) for lo, hi, n in self.guards
                                if lo <= offset < hi), ("?", 0))
            return Hazard(f"kernel {name}: {who(second)} {verbs[second['kind']][0]} the __shared__ "
                          f"array `{array}` past its end (byte {past} beyond it) "
                          f"{at(second, True)}; size the array for every thread that uses it, or "
                          "guard the index.")
        if space == PLACED_GUARD and placed:
            array, start, nbytes, _ = placed
            side = (f"past its end (byte {addr - start - nbytes} beyond it)"
                    if addr >= start else f"before its start (byte {start - addr} before it)")
            return Hazard(f"kernel {name}: {who(second)} {verbs[second['kind']][0]} the __shared__ "
                          f"array `{array}` {side} {at(second, True)}; size the array for every "
                          "thread that uses it, or guard the index.")
        if space == CONSTANT_GUARD:
            return Hazard(self._constant_out_of_bounds(name, addr, who(second), at(second, True)))
        if second["kind"] == READ:
            kind = "read-after-write"
        elif first["kind"] == READ:
            kind = "write-after-read"
        else:
            kind = "write-after-write"
        where = "shared memory"
        if space == GLOBAL:
            where = "global memory"
            for p, a in zip(params, args):
                if p.pointer and a.size:
                    lo, hi = _span(a)
                    if lo <= addr < hi:
                        where += f", `{p.name}[{(addr - a.ctypes.data) // a.itemsize}]`"
                        break
        same_line = sites[first["pc"]][0] == sites[second["pc"]][0] != 0
        atomic = bool({ATOMIC, ATOMIC_BLOCK} & {first["kind"], second["kind"]})
        if first["block"] != second["block"] and ATOMIC_BLOCK in (first["kind"], second["kind"]):
            fix = ("a _block atomic (atomicAdd_block) is atomic only among the threads of one "
                   "block: where threads of different blocks update one value, use the plain "
                   "atomic (atomicAdd)")
        elif first["block"] != second["block"]:
            # The detector does not model __threadfence() with an atomic ticket (the "last
            # block" pattern), so that correct pattern lands here too; the advice says so.
            fix = ("threads of different blocks are not ordered within a launch: use an atomic "
                   "(atomicAdd) where blocks update one value, or let each block write its own "
                   "elements and combine them in a second launch (a __threadfence() with an "
                   "atomic ticket also orders them on a GPU, but the emulator cannot check that)")
        elif kind == "write-after-write" and space == GLOBAL and not atomic:
            # Two plain writes of one global element in one launch: the usual cause is an index
            # that maps two threads to the same element, which no barrier fixes.
            fix = ("two threads write the same element: check the index that maps threads to "
                   "elements (each element should have one writer); if both must update it, "
                   "use an atomic")
        elif atomic:
            fix = ("put a __syncthreads() between the plain access and the atomics, or make "
                   "every access to it atomic")
        elif same_line and first["kind"] == WRITE and second["kind"] == READ:
            sync = "__syncwarp()" if first["rank"] // 32 == second["rank"] // 32 else "__syncthreads()"
            fix = ("if several threads update one value, use an atomic (atomicAdd) for it; if a "
                   "thread reads a neighbour's element that the neighbour rewrites in the same "
                   f"step, read it into a register, {sync}, then write")
        elif first["rank"] // 32 == second["rank"] // 32:
            fix = ("put a __syncthreads() between the two (a __syncwarp() is enough where only "
                   "the lanes of one warp share the data: they do not run in lockstep)")
        else:
            fix = "put a __syncthreads() between the two"
        what = f"{kind} hazard in {where}"
        pair = ("" if first["block"] != second["block"] else " (lanes of one warp)"
                if first["rank"] // 32 == second["rank"] // 32 else " (in different warps)")
        how = (f"{who(second)} {verbs[second['kind']][0]} {it(second)} {at(second, True)} after "
               f"{who(first)} {verbs[first['kind']][1]} {it(first)} {at(first, False)}{pair}, "
               f"with nothing ordering the two; {fix}")
        return Hazard(f"kernel {name} has a race ({what}): {how}.", f"it is a {what}: {how}")

    def _constant_out_of_bounds(self, name, addr, thread, where) -> str:
        for lo, hi, var, found in self._constant_guards():
            if lo <= addr < hi:
                item = found.elem
                count = found.nbytes // item
                index = (addr - found.address) // item
                side = "before its start" if index < 0 else "past its end"
                return (f"kernel {name}: {thread} reads the __constant__ array `{var}` out of "
                        f"bounds {where}, element {index} of {count} ({side}); on a GPU that "
                        f"reads whatever lies beside it in constant memory: keep the index "
                        f"inside the array.")
        return f"kernel {name}: {thread} reads __constant__ memory out of bounds {where}."

    def _shared_element(self, addr, space, shared, placed) -> str:
        """Names the shared memory at ``addr``: the array and its element."""
        if placed:
            array, start, _, elem = placed
            return f"the __shared__ array `{array}` at element {(addr - start) // max(1, elem)}"
        if space == DYNAMIC:
            names = re.findall(r"\bextern\s+__shared__\s+[^;]*?([A-Za-z_]\w*)\s*\[\s*\]",
                               "\n".join(self.source_lines))
            label = f"`{names[0]}` " if names else ""
            return (f"dynamic shared memory {label}(extern __shared__) at byte "
                    f"{addr - shared[0]}")
        offset = addr - shared[2]
        for start, size, array in self.shared:
            if start <= offset < start + size:
                elem = _element_bytes(self.source, array)
                where = (f"element {(offset - start) // elem}" if elem else
                         f"byte {offset - start}")
                return f"the __shared__ array `{array}` at {where}"
        return "shared memory"

    @staticmethod
    def _out_of_bounds(name, params, args, addr, thread, verb, where) -> str:
        array, index, size = _nearest_array(params, args, addr)
        side = "before its start" if index < 0 else "past its end"
        return (f"kernel {name}: {thread} {verb} `{array}` out of bounds {where}, element "
                f"{index} of {size} ({side}); on a GPU that touches another allocation or "
                "faults: guard the access so that its index stays inside the array.")


def _detector_again(library, source, addr2line, defines, plain):
    return Detector(library, source, addr2line, defines=defines, plain=plain)


def _element_bytes(source: str, array: str) -> int:
    """Bytes of one element of the __shared__ array ``array`` as the source declares it, or
    0 where its type is not one NumPy knows."""
    m = re.search(rf"__shared__\s+(?:__align__\s*\([^)]*\)\s*)?([A-Za-z_][\w\s]*?)\s+"
                  rf"{re.escape(array)}\s*[\[;]", source)
    if not m:
        return 0
    base = " ".join(w for w in m.group(1).split() if w not in ("volatile", "const", "static"))
    if base in _SCALARS:
        return np.dtype(_SCALARS[base]).itemsize
    if base in _VECTORS:
        elem, lanes = _VECTORS[base]
        return np.dtype(elem).itemsize * lanes
    return 0


def _shared_symbols(path) -> list[tuple[int, int, str]]:
    """(start, size, name) of each static __shared__ variable of the detector's build, as
    offsets from the library's base (its guard bytes counted in its size); [] without nm."""
    out = []
    for start, size, symbol in instrument.symbols(path):
        m = re.match(r"_ZZ.*?E(\d+)", symbol) or re.match(r"_ZL(\d+)", symbol)
        if not m:
            continue
        name = symbol[m.end():m.end() + int(m.group(1))]
        if name.endswith("__gcemu_guarded"):
            name = name[:-len("__gcemu_guarded")]
        out.append((start, size, name))
    return out


def _shared_guards(path) -> list[tuple[int, int, str]]:
    """(start, end, array name) of the guard bytes after each static __shared__ array of the
    detector's build, as offsets from the library's base; [] without nm."""
    tag = "__gcemu_guarded"
    out = []
    for start, size, symbol in instrument.symbols(path):
        if tag not in symbol:
            continue
        # A function's static is mangled _ZZ<function>E<length><name>[_<n>]: the length
        # tells where the array's name starts.
        for m in re.finditer(r"E(\d+)", symbol):
            name = symbol[m.end():m.end() + int(m.group(1))]
            if name.endswith(tag):
                out.append((start + size - SHARED_GUARD_BYTES, start + size, name[:-len(tag)]))
                break
    return out


def _nearest_array(params, args, addr):
    """(name, element index, size) of the array argument whose room holds ``addr``."""
    best = None
    for p, a in zip(params, args):
        if p.pointer and isinstance(a, np.ndarray):
            lo, hi = _span(a)
            gap = lo - addr if addr < lo else addr - hi + 1
            if best is None or gap < best[0]:
                best = (gap, p.name, (addr - a.ctypes.data) // a.itemsize, a.size)
    return best[1:]


@dataclass(frozen=True)
class Hazard:
    """The first hazard of a launch: ``message``, one sentence; ``detail``, the same without
    the kernel's name, to follow another description of the race ('' when it is no race)."""

    message: str
    detail: str = ""
