"""Running a kernel safely: arrays between inaccessible pages, and race checking by thread orders.

Every emulator launch that comes through ``gpucourse.kernels`` runs on copies of its arrays
(:class:`GuardedArrays`), each placed at the end of its own pages with 64 GB of
inaccessible address space before and after it: a write out of bounds never reaches the
Python process's own memory, an access past a page faults at once, and a write into the
rest of a copy's pages (the part that is not the array) changes a known pattern. Either way
the launch stops with a :class:`OutOfBounds` error, whose message the race detector's
instrumented build (``racecheck``) makes exact: it runs the launch once more from the same
inputs with every access observed and names the source line, thread, block, array and
element. A read that stays within the array's first or last page (under 16 bytes past its
end, or less than a page before its start) cannot fault and reads a pattern (NaN as a
float); ``race_check``, whose detector observes every access, names those too.
"""
from __future__ import annotations

import ctypes
import math
import mmap
import signal
import threading
import warnings

import numpy as np

from ..errors import KernelError
from ..precision import gamma
from . import build
from .memory import libc_memory, problem as memory_problem

DEFAULT_TIMEOUT_S = 10.0
#: How many times longer than ``timeout`` the race detector's run may take: its -O0 build
#: calls a hook for every access (about 15 times slower than a plain launch).
DETECTOR_SLOWDOWN = 40
#: Inaccessible address space reserved before and after each array's copy: an index up to
#: 2**32 elements of 8 bytes away from the array (a 32-bit index gone negative) faults.
GUARD_BYTES = 64 << 30
#: The pattern of a copy's bytes that are not its array's (a NaN as a float32).
CANARY = 0x7FBADBAD


class OutOfBounds(KernelError):
    """A kernel accessed global memory outside every array it was given.

    ``named``: whether the message names the source line (the race detector ran)."""

    def __init__(self, message: str, named: bool = False, order: str = "forward", seed: int = 0):
        super().__init__(message)
        self.named, self.order, self.seed = named, order, seed

    def __reduce__(self):
        return OutOfBounds, (str(self), self.named, self.order, self.seed)


# --------------------------------------------------------------------------- guarded memory

def span(a: np.ndarray) -> tuple[int, int]:
    """(first byte, one past the last) of the memory ``a`` covers."""
    start = a.__array_interface__["data"][0]
    if not a.size:
        return start, start
    if a.flags.contiguous:
        return start, start + a.nbytes
    lo = start + sum(min(0, s * (n - 1)) for s, n in zip(a.strides, a.shape))
    hi = start + sum(max(0, s * (n - 1)) for s, n in zip(a.strides, a.shape)) + a.itemsize
    return lo, hi


def merged(spans) -> list[tuple[int, int]]:
    """Spans that overlap or touch, joined; empty ones left out."""
    out: list[list[int]] = []
    for lo, hi in sorted(s for s in spans if s[1] > s[0]):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [tuple(s) for s in out]


class _Copy:
    """One span of the caller's memory (arrays that overlap share one) and its guarded copy."""

    def __init__(self, lo, hi, written):
        self.lo, self.hi, self.written = lo, hi, written
        self.page_lo = self.page_hi = self.at = 0

    @property
    def size(self) -> int:
        return self.hi - self.lo


_warned = False
#: The canary as bytes, from an address that is a multiple of 4 (pages are).
_PATTERN = CANARY.to_bytes(4, "little") * 2048
#: Reserved memory kept from recent launches for the next one of the same layout (pages
#: already there cost much less than new ones): at most this many bytes of pages in all, and
#: at most this many layouts, since each keeps 2 memory mappings per array and a process may
#: map at most vm.max_map_count (65,530) regions.
_REUSE_BYTES = 64 << 20
_REUSE_LAYOUTS = 16
_spare: dict = {}
_spare_lock = threading.Lock()


class GuardedArrays:
    """Copies of a launch's array arguments, each between inaccessible pages.

    ``args`` are the arguments to launch with; after the launch, :meth:`stray_write` finds
    a write into a copy's pages outside its array, :meth:`owner` names the array nearest to
    an address, :meth:`copy_back` copies the arrays the kernel may write into the caller's,
    and :meth:`close` gives the memory back. ``align``: each copy starts at the original's
    address modulo ``align`` (16 keeps a float4's alignment and ends every array whose size
    is a multiple of 16 bytes exactly at an inaccessible page).
    """

    def __init__(self, params, args, *, align: int = 16):
        memory = libc_memory()
        if memory is None:
            raise OSError(memory_problem() or "no guarded memory here")
        self.memory, self.base = memory, None
        pointers = [i for i, p in enumerate(params) if p.pointer]
        spans = {i: span(args[i]) for i in pointers}
        copies = [_Copy(lo, hi, False) for lo, hi in merged(spans.values())]
        copies += [_Copy(lo, lo, False) for lo, hi in spans.values() if lo == hi]
        self.where = {}  # argument index -> its copy
        for i in pointers:
            lo, hi = spans[i]
            c = next(c for c in copies if (c.lo <= lo and hi <= c.hi and c.size) or
                     (c.lo == lo == hi and not c.size))
            c.written |= not params[i].const
            self.where[i] = c
        page = memory.page
        self.layout = tuple(-(-(c.size + align) // page) * page for c in copies)
        self._reserve()
        self.copies = copies
        try:
            offset = self.guard
            for c, pages in zip(copies, self.layout):
                c.page_lo, c.page_hi = self.base + offset, self.base + offset + pages
                offset += pages + self.guard
                end = c.page_hi - c.size
                c.at = end - (end - c.lo) % align
                self._fill(c.page_lo, c.at)
                self._fill(c.at + c.size, c.page_hi)
                if c.size:
                    ctypes.memmove(c.at, c.lo, c.size)
            self.args = [self._copy_of(i, a) if i in self.where else a
                         for i, a in enumerate(args)]
        except BaseException:
            self.close()
            raise

    def _reserve(self) -> None:
        with _spare_lock:
            spare = _spare.pop(self.layout, None)
        if spare is not None:
            self.base, self.total, self.guard, _ = spare
            return
        memory, guard = self.memory, GUARD_BYTES
        while True:
            total = guard + sum(pages + guard for pages in self.layout)
            base = memory.reserve(total)
            if base is not None or guard <= (1 << 20):
                break
            guard //= 16  # a limit on address space (ulimit -v): smaller guards
        if base is None:
            raise OSError("could not reserve address space for guarded copies")
        self.base, self.total, self.guard = base, total, guard
        offset = guard
        for pages in self.layout:
            at = base + offset
            if memory.mprotect(at, pages, mmap.PROT_READ | mmap.PROT_WRITE) != 0:
                self.close()
                raise OSError("mprotect failed")
            if pages >= (4 << 20) and hasattr(mmap, "MADV_HUGEPAGE"):
                memory.madvise(at, pages, mmap.MADV_HUGEPAGE)  # as NumPy does for large arrays
            offset += pages + guard

    @staticmethod
    def _fill(lo: int, hi: int) -> None:
        for at in range(lo, hi, 4096):  # lo is a multiple of 4: a page, or an array's end
            n = min(4096, hi - at)
            ctypes.memmove(at, _PATTERN[at % 4:at % 4 + n], n)

    @staticmethod
    def _changed(lo: int, hi: int) -> int | None:
        for at in range(lo, hi, 4096):
            n = min(4096, hi - at)
            got = ctypes.string_at(at, n)
            want = _PATTERN[at % 4:at % 4 + n]
            if got != want:
                return at + next(k for k in range(n) if got[k] != want[k])
        return None

    def _copy_of(self, i: int, a: np.ndarray) -> np.ndarray:
        c, (lo, hi) = self.where[i], span(a)
        start = c.at + (lo - c.lo)
        raw = (ctypes.c_char * max(hi - lo, 1)).from_address(start)
        return np.ndarray(a.shape, a.dtype, buffer=raw,
                          offset=a.__array_interface__["data"][0] - lo, strides=a.strides)

    def contains(self, addr: int) -> bool:
        """Whether ``addr`` lies in the reserved address space around the copies."""
        return self.base is not None and self.base <= addr < self.base + self.total

    def zone(self, i: int) -> tuple[int, int]:
        """The reserved space around argument ``i``'s copy, where no other array lies."""
        c = self.where[i]
        return max(self.base, c.page_lo - self.guard), min(self.base + self.total,
                                                            c.page_hi + self.guard)

    def stray_write(self) -> int | None:
        """The address of the first byte outside the arrays that the launch changed, or None."""
        for c in self.copies:
            for lo, hi in ((c.page_lo, c.at), (c.at + c.size, c.page_hi)):
                addr = self._changed(lo, hi)
                if addr is not None:
                    return addr
        return None

    def owner(self, addr: int) -> tuple[int, int, int]:
        """(argument index, element index, elements) of the array nearest to ``addr``."""
        best = None
        for i, copy in enumerate(self.args):
            if i not in self.where:
                continue
            lo, hi = span(copy)
            gap = lo - addr if addr < lo else max(0, addr - hi + 1)
            if best is None or gap < best[0]:
                best = (gap, i, (addr - copy.ctypes.data) // copy.itemsize, copy.size)
        return best[1:]

    def copy_back(self) -> None:
        """Copy the arrays the kernel may write into the caller's."""
        for c in self.copies:
            if c.written and c.size:
                ctypes.memmove(c.lo, c.at, c.size)

    def close(self) -> None:
        """Give the reserved memory back, or keep it for the next launch of this layout (the
        copies in ``args`` must not be used after)."""
        if self.base is None:
            return
        mine, self.base = (self.base, self.total, self.guard, sum(self.layout)), None
        gone = [mine]
        if mine[3] <= _REUSE_BYTES:
            with _spare_lock:
                gone = [_spare.pop(self.layout)] if self.layout in _spare else []
                _spare[self.layout] = mine
                while (sum(v[3] for v in _spare.values()) > _REUSE_BYTES
                       or len(_spare) > _REUSE_LAYOUTS):
                    gone.append(_spare.pop(next(iter(_spare))))  # the oldest first
        for base, total, _, _ in gone:
            self.memory.munmap(base, total)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def guarded(params, args, *, align: int = 16) -> GuardedArrays | None:
    """:class:`GuardedArrays` of a launch, or None (with a warning, once) where the system
    has no way to make them."""
    global _warned
    try:
        return GuardedArrays(params, args, align=align)
    except OSError as exc:
        if not _warned:
            _warned = True
            warnings.warn(f"the emulator runs kernels on the arrays themselves here ({exc}), so "
                          "an index far out of bounds can damage this Python process: pass "
                          "isolate=True to run a kernel in a child process.", RuntimeWarning,
                          stacklevel=4)
        return None


# --------------------------------------------------------------------------- one launch

#: In a child process of ``isolate.run_isolated``: tells the parent that a launch starts and how
#: long it may take, so that the parent waits for each launch as long as it may run.
_announce = None


def set_timeout(lib, seconds: float | None) -> None:
    """Time limit of ``lib``'s next launches (None: none), enforced by its watchdog."""
    if seconds and _announce is not None:
        _announce(seconds)
    f = lib._dll.gcemu_set_timeout
    f.argtypes = [ctypes.c_double]
    f.restype = None
    f(float(seconds or 0.0))


def _fault(lib) -> dict:
    out = (ctypes.c_uint64 * 10)()
    lib._dll.gcemu_fault(out)
    v = list(out)
    return {"signal": v[0], "addr": v[1], "kind": {1: "read", 2: "write"}.get(v[2]),
            "thread": tuple(v[4:7]) if v[3] else None, "block": tuple(v[7:10])}


def _fault_message(name, params, arena, stray) -> str:
    """The out-of-bounds sentence from what the launch itself saw (no source line)."""
    i, index, size = arena.owner(stray["addr"])
    side = "before its start" if index < 0 else "past its end"
    verb = {"read": "reads", "write": "writes"}.get(stray.get("kind"), "accesses")
    if stray.get("thread") is not None:
        who = (f"thread ({','.join(map(str, stray['thread']))}) of block "
               f"({','.join(map(str, stray['block']))})")
    else:
        who = "a thread"
    return (f"kernel {name}: {who} {verb} `{params[i].name}` out of bounds, element {index} of "
            f"{size} ({side}); on a GPU that touches another allocation or faults: guard the "
            "access so that its index stays inside the array.")


def launch(lib, name, grid, block, args, shared_mem=0, *, order="forward", seed=0, echo=True,
           timeout=None, detector=None) -> str:
    """One emulator launch on guarded copies of the arrays (:class:`GuardedArrays`).

    Low level: grid and block are 3-tuples, args already checked. On success the arrays in
    ``args`` hold the result and the kernel's printf output is returned (and printed, if
    ``echo``). An access out of bounds raises :class:`OutOfBounds`; ``detector`` (a
    ``racecheck.Detector`` of the same source, or a function that returns one or None)
    names its source line. ``timeout``: seconds the launch may take (None: no limit).
    """
    params = lib.kernels[name].params
    arena = guarded(params, args)
    stray, output = None, ""
    try:
        with build._lock:  # the time limit belongs to this launch
            set_timeout(lib, timeout)
            try:
                output = lib.launch(name, grid, block, arena.args if arena else args, shared_mem,
                                    order=order, seed=seed, echo=echo)
            except KernelError as exc:
                fault = _fault(lib) if arena else None
                if not (fault and fault["signal"] in (signal.SIGSEGV, signal.SIGBUS)
                        and arena.contains(fault["addr"])):
                    raise
                stray, output = fault, getattr(exc, "output", "")
            finally:
                set_timeout(lib, None)
        if arena and stray is None:
            addr = arena.stray_write()
            if addr is None:
                arena.copy_back()
                return output
            stray = {"addr": addr, "kind": "write", "thread": None}
        fallback = _fault_message(name, params, arena, stray)
    finally:
        if arena:
            arena.close()
    err = _diagnosed(lib, name, grid, block, args, shared_mem, order, seed, timeout, detector,
                     fallback)
    err.output = output
    raise err


def _diagnosed(lib, name, grid, block, args, shared_mem, order, seed, timeout, detector,
               fallback) -> OutOfBounds:
    """The OutOfBounds error of a launch that went out of bounds, its line named where the
    race detector can run it again (from the same inputs: the launch wrote only copies)."""
    if callable(detector) and not hasattr(detector, "run"):
        detector = detector()
    hazard = None
    if detector is not None:
        hazard = detector.run(name, grid, block, list(args), shared_mem, order=order, seed=seed,
                              bounds_only=True,
                              timeout=None if timeout is None else timeout * DETECTOR_SLOWDOWN)
    if hazard is not None and not hazard.detail:
        return OutOfBounds(hazard.message, named=True, order=order, seed=seed)
    return OutOfBounds(fallback, named=False, order=order, seed=seed)


# --------------------------------------------------------------------------- race check

def order_tolerance(threads: int, arrays, dtype) -> float:
    """Largest |difference| / (the array's largest |value|) that reordering float additions
    can make between two thread orders of a correct kernel with ``threads`` threads and
    ``arrays`` (its array arguments), in an output of ``dtype``; inf where rounding may lose
    every digit.

    Float atomics add in thread order, so a correct sum comes out different in each order.
    Added in any order, n terms are within gamma_n * sum|terms| of their exact sum
    (gamma_n = n*u / (1 - n*u)), so two orders differ by at most 2 * gamma_n * sum|terms|.
    The checker knows neither n nor the terms, so it bounds them by what it does know:
    - n: a thread adds its share of the largest array (N elements over T threads: N / T
      terms), and the T threads' sums meet by atomics (T roundings; a tree of them fewer):
      N / T + T <= max(N, T) + 1 roundings for any T.
    - sum|terms|: for terms of one sign it is the exact sum, at most |computed| / (1 - gamma_n);
      the array's largest |value| stands in for it (terms of both signs are not bounded here).
    - u: the output's unit roundoff, or float32's where that is coarser (a float sum may be
      stored in a double).
    """
    u = max(float(np.finfo(dtype).eps) / 2, 2.0 ** -24)
    n = max([int(threads)] + [int(a.size) for a in arrays]) + 1
    if n * u >= 0.5:
        return math.inf  # precision.gamma refuses these: no bound holds
    g = gamma(n, u)
    return 2 * g / (1 - g)


def _difference(first: np.ndarray, other: np.ndarray, rtol: float) -> str:
    """'' when the two results agree, else how they differ (floats within ``rtol`` of the
    largest finite |value| of either, NaN and infinities alike)."""
    a, b = first.reshape(-1), other.reshape(-1)
    bad = np.flatnonzero(a != b)  # most results agree bit for bit: one pass
    if bad.size and a.dtype.kind in "fc":
        x, y = a[bad], b[bad]
        finite = np.isfinite(a) & np.isfinite(b)
        scale = float(max(np.abs(a[finite]).max(initial=0), np.abs(b[finite]).max(initial=0)))
        with np.errstate(invalid="ignore", over="ignore"):
            close = np.abs(x - y) <= rtol * scale if math.isfinite(rtol) else True
        both_finite = np.isfinite(x) & np.isfinite(y)
        bad = bad[~((both_finite & close) | (np.isnan(x) & np.isnan(y)))]
    if not bad.size:
        return ""
    k = int(bad[0])
    beyond = (f" by more than {rtol:.2g} x the largest |value| (more than rounding explains)"
              if a.dtype.kind in "fc" and math.isfinite(rtol) else "")
    return (f"{bad.size} of {a.size} elements differ{beyond}, the first at flat index {k}: "
            f"{a[k]!r} in forward order against {b[k]!r}")


def run_launch(lib, name, grid, block, host_args, shared_mem=0, *, race_check=False,
               seed=0, rtol=None, echo=True, detector=None, timeout=None) -> str:
    """One guarded launch on the emulator (:func:`launch`), or three (forward, reverse,
    shuffled) with ``race_check``.

    With ``race_check`` the arrays end up holding the forward-order result, and a
    KernelError says "this kernel has a race" when another order gives another result
    (floats: beyond ``rtol`` times the array's largest |value|; None: what reordering float
    additions can make, :func:`order_tolerance`), or when ``detector`` (a
    ``racecheck.Detector`` of the same source) finds a hazard in one more launch from the
    same inputs. ``timeout`` limits each launch (the detector's run gets
    ``DETECTOR_SLOWDOWN`` times as long).
    """
    if not race_check:
        return launch(lib, name, grid, block, host_args, shared_mem, echo=echo, timeout=timeout,
                      detector=detector)
    params = lib.kernels[name].params
    arrays = [i for i, p in enumerate(params) if p.pointer]
    before = {i: host_args[i].copy() for i in arrays}
    results, output = {}, ""
    for order in ("forward", "reverse", "shuffle"):
        for i in arrays:  # every order starts from the same inputs (outputs may accumulate)
            np.copyto(host_args[i], before[i])
        text = launch(lib, name, grid, block, host_args, shared_mem, order=order, seed=seed,
                      echo=echo and order == "forward", timeout=timeout, detector=detector)
        output = output or text
        results[order] = {i: host_args[i].copy() for i in arrays}
    for i in arrays:
        np.copyto(host_args[i], results["forward"][i])
    # The detector runs from the same inputs; where the orders disagree too, it says why.
    hazard = None if detector is None else detector.run(
        name, grid, block, [before.get(i, a) for i, a in enumerate(host_args)], shared_mem,
        timeout=None if timeout is None else timeout * DETECTOR_SLOWDOWN)
    if hazard and not hazard.detail:  # memory the launch does not have: that comes first
        raise OutOfBounds(hazard.message, named=True)
    # Float atomics add in thread order: a float output may differ by what reordering its
    # additions can make, and no more.
    threads, given = math.prod(grid) * math.prod(block), [host_args[j] for j in arrays]
    tols = {}
    for i in arrays:
        dtype = host_args[i].dtype
        tols[i] = (rtol if rtol is not None or dtype.kind not in "fc"
                   else order_tolerance(threads, given, dtype))
    for order in ("reverse", "shuffle"):
        for i in arrays:
            diff = _difference(results["forward"][i], results[order][i], tols[i])
            if diff:
                why = (hazard.detail if hazard and hazard.detail else
                       "a thread reads memory that another thread writes without a "
                       "__syncthreads() (or __syncwarp()) between them")
                raise KernelError(
                    f"kernel {name} has a race: argument `{params[i].name}` comes out different "
                    f"when the threads run in {order} order ({diff}); {why}.")
    if hazard:
        raise KernelError(hazard.message)
    return output
