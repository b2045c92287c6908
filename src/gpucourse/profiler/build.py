"""The profiler's build of a kernel: compiled with ``-fsanitize=thread`` and
``-fsanitize-coverage=trace-pc``, linked with ``hooks.cpp``, and the map from each counted
instruction to its line of the ``.cu`` file."""
from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import threading
from pathlib import Path

from ..emulator import build_library, instrument
from ..emulator.build import extra_object
from ..errors import CourseError

HERE = Path(__file__).resolve().parent
HOOKS = HERE / "hooks.cpp"
PRELUDE = HERE / "profile_prelude.h"
# Counters per instruction, in the order of enum Stat in hooks.cpp.
_STATS = ("g_requests", "g_lanes", "g_sectors", "g_lines", "g_bytes",
          "s_requests", "s_lanes", "s_wavefronts", "s_phases", "s_ways_sum", "s_ways_max",
          "local_lanes", "distinct_sum", "same_sum", "same_max", "b_groups", "b_lanes")
# Launch-wide totals, in the order of enum Total in hooks.cpp.
_TOTALS = ("blocks", "barriers", "warp_barriers", "atomic_hot", "overflow", "mixed")
K_READ, K_WRITE, K_ATOMIC, K_BLOCK = 0, 1, 2, 3


class ProfilerError(CourseError, RuntimeError):
    """The profiler cannot run here, or was handed something it cannot profile."""


_lock = threading.RLock()
_builds: dict = {}


@functools.lru_cache(maxsize=None)
def _toolchain_check() -> str:
    if not instrument.supported_platform():
        raise ProfilerError("The profiler needs Linux (it links with GNU ld's --wrap and reads "
                            "ELF debug information); on this system use the models in gc.models.")
    tool = instrument.addr2line()
    if not tool:
        raise ProfilerError("The profiler needs addr2line to map instructions to source lines: "
                            "install binutils (Debian/Ubuntu: apt install binutils; conda: "
                            "conda install -c conda-forge binutils).")
    return tool


def profiling_library(module):
    """The profiler's build of a kernel module's source (compiled, or from the cache)."""
    version = hashlib.sha256(HOOKS.read_bytes() + PRELUDE.read_bytes()
                             + instrument.ATOMIC_MARKS.read_bytes()).hexdigest()[:12]
    flags = (*instrument.TSAN_FLAGS, "-fsanitize-coverage=trace-pc",
             "-include", str(PRELUDE), f"-DGCPROF_VERSION={version}",
             *instrument.link_flags(), "-Wl,--wrap=__gcemu_block_barrier")
    return build_library(module.source, filename=module.filename, defines=module.defines,
                         extra_flags=flags, extra_sources=(HOOKS,))


def hooks_object():
    """The profiler's hooks compiled once per machine (cached), as its builds link them."""
    return extra_object(HOOKS)


class _Build:
    """The profiling build of one kernel source, and what is known about its instructions."""

    def __init__(self, module, addr2line: str):
        try:
            self.library = profiling_library(module)
        except OSError as exc:
            why = ("the kernel uses something the profiler cannot observe"
                   if "undefined symbol" in str(exc) else "check the cache folder and the compiler")
            raise ProfilerError(f"{module.filename}: the profiling build does not load ({exc}); "
                                f"{why}.") from None
        self.filename = module.filename
        self.source_lines = module.source.splitlines()
        self.addr2line = addr2line
        self.dll = dll = ctypes.CDLL(str(self.library.path))
        dll.gcprof_reset.restype = ctypes.c_int
        dll.gcprof_reset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
        dll.gcprof_base.restype = ctypes.c_uint64
        dll.gcprof_read.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int]
        dll.gcprof_skip.argtypes = [ctypes.c_void_p, ctypes.c_int]
        for name in ("gcprof_totals", "gcprof_unique_sectors"):
            getattr(dll, name).argtypes = [ctypes.c_void_p]
        if dll.gcprof_nstat() != len(_STATS) or dll.gcprof_ntotal() != len(_TOTALS):
            raise ProfilerError("The profiler's hooks.cpp and __init__.py disagree on the "
                                "counters; reinstall the gpucourse package.")
        self.base = int(dll.gcprof_base())
        self.sites_file = self.library.path.with_suffix(".sites.json")
        self.sites: dict[int, tuple] = {}  # offset -> (line or 0, role, detail)
        try:
            self.sites = {int(k): tuple(v) for k, v in json.loads(self.sites_file.read_text()).items()}
        except (OSError, ValueError):
            pass
        self._skip([o for o, s in self.sites.items() if s[1] == "internal"])

    def _skip(self, offsets) -> None:
        if offsets:
            arr = (ctypes.c_uint64 * len(offsets))(*offsets)
            self.dll.gcprof_skip(arr, len(offsets))

    def resolve(self, offsets: list[int], kinds: dict[int, int]) -> None:
        """Map new instructions to source lines (addr2line), remember them, skip internals."""
        new = [o for o in offsets if o not in self.sites]
        if not new:
            return
        chains, error = instrument.call_sites(self.addr2line, self.library.path, new)
        if error:
            raise ProfilerError(f"addr2line could not read the profiling build's line table "
                                f"({error}); check that binutils works.")
        own = {self.filename, self.library.path.with_suffix(".cpp").name}
        for o in new:
            self.sites[o] = _classify(chains[o], kinds[o], own)
        self._skip([o for o in new if self.sites[o][1] == "internal"])
        try:
            tmp = self.sites_file.with_name(f".{self.sites_file.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({str(k): list(v) for k, v in self.sites.items()}))
            os.replace(tmp, self.sites_file)
        except OSError:
            pass  # a read-only cache: resolve again next time

    def code(self, line: int) -> str:
        return self.source_lines[line - 1].strip() if 0 < line <= len(self.source_lines) else ""


def _classify(chain, kind: int, own: set) -> tuple:
    """(line, role, detail) of one instruction: role "kernel" (counted) or "internal".

    Internal: the emulator's own work (reading launch arguments, warp-shuffle slots, the
    read and write inside an atomic, which is counted once at its call), and branches of
    the prelude (a GPU does them in hardware).
    """
    user = [f for f in chain if f[1] in own and f[2] > 0]
    if not user or not chain:
        return (0, "internal", "")
    inner = chain[0]
    line = user[0][2]
    if kind == K_ATOMIC:
        return (line, "kernel", inner[0].replace("__gcemu_marked_", ""))
    if inner[1] in own:
        return (line, "kernel", "")
    if kind == K_BLOCK or inner[0].startswith(("__gcemu", "__gcprof", "atomic")):
        return (line, "internal", inner[0])
    return (line, "kernel", inner[0])  # e.g. __ldg: a load at its caller's line
