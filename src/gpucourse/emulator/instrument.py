"""Instrumented emulator builds, shared by the profiler and the race detector.

The kernel is compiled with ``-fsanitize=thread``, so that every load and store calls a
hook with its address, and linked with a tool's own hooks instead of the sanitizer's
runtime; ``atomic_marks.h`` marks each atomic, and debug information maps each instruction
to its line of the ``.cu`` file (``addr2line``). Linux (ELF, GNU-compatible linker) only.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from . import build
from .build import HERE

ATOMIC_MARKS = HERE / "atomic_marks.h"

#: Compiler flags of an instrumented kernel: one source-level access, one hook call, as nvcc
#: issues them: no merging of scalars into vector accesses, and no splitting of a float4
#: copy into four float accesses (scalar replacement of aggregates).
TSAN_FLAGS = ("-g", "-fsanitize=thread", "-fno-tree-vectorize", "-fno-tree-slp-vectorize",
              "-fno-tree-sra")


@functools.lru_cache(maxsize=None)
def addr2line() -> str | None:
    """The addr2line found on PATH, or None."""
    return shutil.which("addr2line") or shutil.which("llvm-addr2line") or shutil.which("eu-addr2line")


@functools.lru_cache(maxsize=None)
def nm() -> str | None:
    """The nm found on PATH, or None."""
    return shutil.which("nm") or shutil.which("llvm-nm")


def symbols(library: Path) -> list[tuple[int, int, str]]:
    """(offset from the library's base, size, mangled name) of each sized symbol ``library``
    defines; [] where nm is missing or fails."""
    tool = nm()
    if not tool:
        return []
    try:
        text = subprocess.run([tool, "-S", "--defined-only", str(library)], capture_output=True,
                              text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [(int(parts[0], 16), int(parts[1], 16), parts[3])
            for parts in (line.split() for line in text.splitlines()) if len(parts) == 4]


def supported_platform() -> bool:
    """Whether this system can make instrumented builds (Linux: ELF and GNU ld)."""
    return sys.platform.startswith("linux")


def stub_runtime_dir() -> Path:
    """A folder holding an empty libtsan.a.

    g++ links the sanitizer's runtime into every -fsanitize=thread build, even a shared
    library; that runtime cannot be loaded into a running Python. An empty archive found
    first on the library path satisfies the link, and the tool's hooks supply the functions.
    """
    folder = build.cache_dir().parent / "profiler-lib"
    folder.mkdir(parents=True, exist_ok=True)
    stub = folder / "libtsan.a"
    if not stub.exists():
        tmp = folder / f".libtsan.{os.getpid()}.{threading.get_ident()}.tmp"
        tmp.write_bytes(b"!<arch>\n")
        os.replace(tmp, stub)
    return folder


def link_flags() -> tuple[str, ...]:
    """The flags that link an instrumented kernel without the sanitizer's runtime."""
    return ("-L", str(stub_runtime_dir()))


def parse_addr2line(text: str) -> dict[int, list[tuple[str, str, int]]]:
    """{address: [(function, file, line), ...] innermost first} from ``addr2line -f -i -a``."""
    out: dict[int, list] = {}
    lines = text.splitlines()
    i, current = 0, None
    while i < len(lines):
        t = lines[i].strip()
        if re.fullmatch(r"0x[0-9a-fA-F]+", t):
            current = int(t, 16)
            out[current] = []
            i += 1
            continue
        if current is not None and i + 1 < len(lines):
            func, loc = t, lines[i + 1].strip()
            m = re.match(r"^(.*):(\d+|\?)(?: \(discriminator \d+\))?$", loc)
            path, num = (m.group(1), m.group(2)) if m else (loc, "0")
            out[current].append((re.sub(r"<.*$", "", func).strip(), os.path.basename(path),
                                 int(num) if num.isdigit() else 0))
            i += 2
            continue
        i += 1
    return out


def call_sites(tool: str, library: Path, offsets) -> tuple[dict, str]:
    """({offset: frames}, error) for return addresses given as offsets into ``library``.

    A return address follows its call, so the byte before it is looked up; ``error`` is
    addr2line's complaint when it failed, else ''.
    """
    offsets = list(offsets)
    if not offsets:
        return {}, ""
    proc = subprocess.run([tool, "-e", str(library), "-f", "-i", "-C", "-a",
                           *(hex(o - 1) for o in offsets)], capture_output=True, text=True)
    if proc.returncode != 0:
        return {}, proc.stderr.strip()[:200] or f"exit code {proc.returncode}"
    chains = parse_addr2line(proc.stdout)
    return {o: chains.get(o - 1, []) for o in offsets}, ""
