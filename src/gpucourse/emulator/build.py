"""Compiling CUDA C for the CPU emulator (cached), loading it, and running launches."""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import functools
import hashlib
import os
import re
import shlex
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: builds of one entry are not serialized between processes
    fcntl = None

import numpy as np

from ..errors import CompileError, DeviceError, KernelError, LaunchError
from .compile_errors import explain_compiler_errors, source_line  # noqa: F401 (source_line: kernels)
from .memory import lend_stacks
from .rewrite import accessible_globals, rewrite_for_emulator
from .source import KernelSignature, c_string, check_supported, define_lines, find_kernels

HERE = Path(__file__).resolve().parent
PRELUDE = HERE / "cuda_emu.h"
RUNTIME = HERE / "runtime.cpp"

#: Dynamic shared memory one block may ask for on the emulator (the CUDA default limit).
SHARED_MEM_LIMIT = 48 * 1024
#: Stack of each emulated thread, in KB (override with GPUCOURSE_EMU_STACK_KB).
DEFAULT_STACK_KB = 32
ORDERS = {"forward": 0, "reverse": 1, "shuffle": 2}
# Part of every cache key: entries written before builds recorded their digest are never read.
CACHE_FORMAT = 2

# -O2 because the emulator is also a teaching tool for speed-ups on the CPU side; no strict
# aliasing because CUDA code reinterprets float* as float4* freely.
BASE_FLAGS = ("-O2", "-std=c++17", "-fPIC", "-fvisibility=hidden", "-fno-strict-aliasing",
              "-fno-math-errno", "-U_FORTIFY_SOURCE", "-w")

_lock = threading.RLock()          # one launch at a time: the runtime's state is global
_loaded: dict[str, "Library"] = {}


# --------------------------------------------------------------------------- toolchain

class _UnsafeFolder(Exception):
    """A cache folder that others could write: code planted there would run as this user."""

    def __init__(self, folder: Path, why: str):
        super().__init__(f"{folder} {why}")
        self.folder, self.why = folder, why


def _unsafe(folder: Path) -> str:
    """Why ``folder`` may not hold code this process loads, or '' when it may."""
    st = os.stat(folder)
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(folder))
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return "belongs to another user"
    if st.st_mode & 0o022:
        return "is writable by other users"
    return ""


def _private_folder(root: Path) -> Path:
    """``root/emulator``, each created with mode 0700 where missing and checked where not."""
    for folder in (root, root / "emulator"):
        try:
            folder.mkdir(mode=0o700, parents=folder is root)
        except FileExistsError:
            pass
        why = _unsafe(folder)
        if why:
            raise _UnsafeFolder(folder, why)
    return root / "emulator"


_fallback: list[Path] = []  # this process's private temporary cache, once made


def _remove_fallback(root: Path, pid: int) -> None:
    if os.getpid() == pid:  # not in a forked child, which shares the folder
        shutil.rmtree(root, ignore_errors=True)


def _fallback_dir(reason: str) -> Path:
    with _lock:
        if not _fallback:
            root = Path(tempfile.mkdtemp(prefix="gpucourse-"))  # mode 0700, a fresh name
            atexit.register(_remove_fallback, root, os.getpid())
            _fallback.append(_private_folder(root))
            warnings.warn(f"{reason}; the emulator builds kernels in {root} for this session "
                          f"instead (set GPUCOURSE_CACHE to a folder of your own to keep them).",
                          stacklevel=3)
        return _fallback[0]


def cache_dir() -> Path:
    """Folder of compiled emulator libraries: $GPUCOURSE_CACHE, else the user's cache folder.

    The folder is created with mode 0700; one that another user owns or could write is
    refused, since a library planted there would run here: $GPUCOURSE_CACHE then raises
    DeviceError, the default folder gives way to a fresh private temporary folder.
    """
    chosen = os.environ.get("GPUCOURSE_CACHE")
    if chosen:
        try:
            return _private_folder(Path(chosen))
        except _UnsafeFolder as exc:
            raise DeviceError(
                f"The emulator's cache folder {exc.folder} (GPUCOURSE_CACHE) {exc.why}, so a "
                f"library planted there could run as you: set GPUCOURSE_CACHE to a folder of "
                f"your own that only you can write (chmod 700).") from None
        except OSError as exc:
            raise DeviceError(
                f"The emulator cannot create its cache folder {chosen} (GPUCOURSE_CACHE: "
                f"{exc.strerror or exc}); set GPUCOURSE_CACHE to a folder you can write.") from None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    root = Path(base) / "gpucourse"
    try:
        return _private_folder(root)
    except _UnsafeFolder as exc:
        return _fallback_dir(f"The emulator's cache folder {exc.folder} {exc.why}, so it is "
                             f"not used")
    except OSError as exc:  # a read-only home
        return _fallback_dir(f"The emulator cannot create its cache folder {root} "
                             f"({exc.strerror or exc})")


def compiler(fresh: bool = False) -> tuple[str, str]:
    """(command, identity) of the C++ compiler: $CXX, else g++, c++ or clang++ on PATH.

    $CXX may start with launcher words (``ccache g++``, ``env FOO=1 clang++``), split as a
    shell would. ``fresh`` looks again instead of using what this process found before
    (``doctor``)."""
    find = _compiler.__wrapped__ if fresh else _compiler
    words, identity = find(os.environ.get("CXX"))
    return shlex.join(words) if len(words) > 1 else words[0], identity


def _compiler_words() -> tuple[str, ...]:
    """The compiler command as a list of arguments (launcher words first)."""
    return _compiler(os.environ.get("CXX"))[0]


@functools.lru_cache(maxsize=None)
def _compiler(cxx_env: str | None) -> tuple[tuple[str, ...], str]:
    # Cached per $CXX, so that setting CXX in a running notebook takes effect.
    words: tuple[str, ...] = ()
    if cxx_env and cxx_env.strip():
        try:
            words = tuple(shlex.split(cxx_env))
        except ValueError as exc:
            raise DeviceError(f"CXX={cxx_env!r} cannot be read as a command ({exc}); set CXX "
                              f"to a compiler, e.g. g++ or 'ccache g++'.") from None
    else:
        found = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
        words = (found,) if found else ()
    if not words:
        raise DeviceError(
            "The CPU emulator needs a C++ compiler and none was found: install g++ "
            "(Debian/Ubuntu: apt install g++; conda: conda install -c conda-forge cxx-compiler; "
            "macOS: xcode-select --install).")
    cxx = shlex.join(words) if len(words) > 1 else words[0]
    try:
        version = subprocess.run([*words, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout.strip().splitlines()[0]
        machine = subprocess.run([*words, "-dumpmachine"], capture_output=True, text=True,
                                 timeout=30).stdout.strip()
    except (OSError, IndexError, subprocess.SubprocessError) as exc:
        raise DeviceError(f"The C++ compiler {cxx} does not run ({exc}); set CXX to a working one.")
    return words, f"{version} {machine}"


def _kernel_flags() -> tuple[str, ...]:
    # Probe the stack page by page, so that a frame too big for a thread's stack hits its
    # guard page (a clear error) instead of silently landing in a neighbour's stack.
    _, ident = compiler()
    return ("-fstack-clash-protection",) if ("GCC" in ident or "g++" in ident) else ()


def _link_flags() -> tuple[str, ...]:
    # A shared library may keep undefined symbols until it is loaded; refuse them at link
    # time instead, where the error can name the missing function.
    return ("-pthread",) if sys.platform == "darwin" else ("-pthread", "-Wl,--no-undefined")


def switch_kind_requested() -> str:
    """``auto`` (the fast switch where there is one) or ``ucontext``, from GPUCOURSE_EMU_SWITCH."""
    value = os.environ.get("GPUCOURSE_EMU_SWITCH", "auto").strip().lower() or "auto"
    if value not in ("auto", "ucontext"):
        raise DeviceError(f"GPUCOURSE_EMU_SWITCH={value!r} is not a choice: use 'auto' or 'ucontext'.")
    return value


def headers_digest() -> str:
    """A digest of every header and runtime part the emulator compiles with (the prelude, the
    CUDA headers it provides, runtime.cpp's parts): a change to any rebuilds the cache."""
    files = sorted(p for p in HERE.rglob("*") if p.suffix in (".h", ".cpp") and p.is_file())
    key = tuple((str(p.relative_to(HERE)), p.stat().st_mtime_ns, p.stat().st_size) for p in files)
    return _headers_digest(key)


@functools.lru_cache(maxsize=8)
def _headers_digest(key: tuple) -> str:
    h = hashlib.sha256()
    for name, _, _ in key:
        h.update(name.encode() + b"\0" + (HERE / name).read_bytes() + b"\0")
    return h.hexdigest()


def _hash(*parts) -> str:
    h = hashlib.sha256()
    for p in (CACHE_FORMAT, *parts):
        h.update(p if isinstance(p, bytes) else repr(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _digest_file(path: Path) -> Path:
    """The sidecar that records the sha256 of cache entry ``path`` when it was built."""
    return path.with_name(path.name + ".sha256")


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _entry_problem(path: Path) -> str | None:
    """None for an entry that matches its recorded digest, '' for a missing one, else what
    is wrong with it."""
    if not path.exists():
        return ""
    if path.stat().st_size == 0:
        return "is empty"
    try:
        recorded = _digest_file(path).read_text().strip()
    except OSError:
        return "has no recorded digest"
    if recorded != _file_digest(path):
        return "does not match the digest recorded when it was built (truncated or changed)"
    return None


@contextlib.contextmanager
def _entry_lock(path: Path):
    """Hold the build of cache entry ``path`` for this thread and process alone."""
    if fcntl is None:
        yield
        return
    fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _cached(out: Path, build) -> str:
    """The sha256 of cache entry ``out``, after ``build(tmp)`` made it where it was missing
    or did not match its recorded digest (never trusted: rebuilt with a warning).

    ``build`` writes a temporary file that is renamed into place, and the digest is
    recorded after it, so a crash mid-build leaves no entry that passes the check.
    """
    with _entry_lock(out):
        problem = _entry_problem(out)
        if problem is None:
            return _file_digest(out)
        if problem:
            warnings.warn(f"The emulator's cached build {out.name} {problem}; rebuilding it.",
                          stacklevel=3)
            out.unlink(missing_ok=True)
        tmp = out.with_name(f".{out.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            build(tmp)
            digest = _file_digest(tmp)
            os.replace(tmp, out)
        finally:
            tmp.unlink(missing_ok=True)
        _write_atomically(_digest_file(out), digest.encode() + b"\n")
        return digest


def _compile(cmd: list[str], out: Path, filename: str, source: str | None = None) -> None:
    """Run the compiler command ``cmd`` with output ``out``; CompileError if it fails."""
    # LC_ALL=C: plain ASCII quotes in messages.
    proc = subprocess.run([*_compiler_words(), *cmd, "-o", str(out)], capture_output=True,
                          text=True, env={**os.environ, "LC_ALL": "C"})
    if proc.returncode != 0:
        err = CompileError(explain_compiler_errors(proc.stderr, filename, source))
        err.log = proc.stderr
        raise err


def _object(source: Path, flags: tuple[str, ...], tag: str) -> Path:
    _, ident = compiler()
    key = _hash(source.read_bytes(), headers_digest(), flags, ident)
    out = cache_dir() / f"{tag}-{key}.o"
    _cached(out, lambda tmp: _compile([*flags, "-I", str(HERE), "-c", str(source)], tmp,
                                      source.name))
    return out


def runtime_object(switch: str | None = None) -> Path:
    """The compiled runtime (cached); ``switch="ucontext"`` forces the portable switch."""
    switch = switch or switch_kind_requested()
    flags = BASE_FLAGS + (("-DGCEMU_FORCE_UCONTEXT",) if switch == "ucontext" else ())
    return _object(RUNTIME, flags, f"runtime-{switch}")


def extra_object(source, flags=()) -> Path:
    """C++ file ``source`` compiled for linking into kernel builds (cached): the hooks that an
    instrumented build calls (the race detector's, the profiler's)."""
    return _object(Path(source), BASE_FLAGS + tuple(flags), "extra")


def build_together(*builds) -> list:
    """Call the zero-argument ``builds`` side by side; each one's result, or the exception it
    raised, in order.

    Threads are enough: a build spends its time in the compiler, a child process. A check
    that needs a kernel built several ways (plain, race-checked, profiled) pays for the
    slowest compile instead of their sum on a machine with as many cores.
    """
    results: list = [None] * len(builds)

    def run(i: int) -> None:
        try:
            results[i] = builds[i]()
        except Exception as exc:  # handed back: the caller decides whose error it shows
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(1, len(builds))]
    for t in threads:
        t.start()
    if builds:
        run(0)  # the first in this thread: one thread fewer to start
    for t in threads:
        t.join()
    return results


# --------------------------------------------------------------------------- building

def translation_unit(source: str, filename: str, defines: dict | None,
                     kernels: list[KernelSignature], guards: int = 0) -> str:
    """The C++ file the emulator compiles: prelude, defines, the kernel source, entry points
    (each kernel's, the sizes of its parameters, and the address and shape of each global
    variable that ``get_global`` can reach). ``guards``: bytes of guard around each
    ``__constant__`` variable (the race detector's build)."""
    head = ['#include "cuda_emu.h"', *define_lines(defines), f'#line 1 "{c_string(filename)}"']
    tail = ['#line 1 "<gpucourse emulator entry points>"']
    for k in kernels:
        tail.append(f"GCEMU_EXPORT void __gcemu_entry_{k.name}(void** a) {{ __gcemu_invoke({k.name}, a); }}")
        tail.append(f"GCEMU_EXPORT void __gcemu_sizes_{k.name}(unsigned long long* s) "
                    f"{{ __gcemu_param_sizes({k.name}, s); }}")
    for name in accessible_globals(source, defines):
        tail.append(f"GCEMU_EXPORT void* __gcemu_global_{name}(unsigned long long* i, const char** k) "
                    f"{{ return __gcemu_global_info({name}, i, k); }}")
    body = rewrite_for_emulator(source, defines, guards)
    return "\n".join(head) + "\n" + body + "\n" + "\n".join(tail) + "\n"


def build_library(source: str, *, filename: str = "kernel.cu", defines: dict | None = None,
                  extra_flags=(), extra_sources=(), extra_source_flags=(),
                  switch: str | None = None, guards: int = 0) -> "Library":
    """Compile CUDA C ``source`` for the emulator (or take it from the cache) and load it.

    ``extra_flags`` go to the kernel's compilation only (e.g. instrumentation);
    ``extra_sources`` are C++ files compiled with the base flags plus
    ``extra_source_flags`` and linked in (e.g. the hooks that instrumentation calls).
    ``switch="ucontext"`` forces the portable context switch; ``guards``: bytes of guard
    around each ``__constant__`` variable (the race detector's build).
    """
    filename = os.path.basename(filename) or "kernel.cu"
    check_supported(source, filename, defines)
    kernels = find_kernels(source, filename, defines)
    tu = translation_unit(source, filename, defines, kernels, guards)
    switch = switch or switch_kind_requested()
    _, ident = compiler()
    runtime = runtime_object(switch)
    extras = [extra_object(p, extra_source_flags) for p in extra_sources]
    flags = BASE_FLAGS + _kernel_flags() + tuple(extra_flags)
    key = _hash(tu, headers_digest(), runtime.name, [e.name for e in extras], flags,
                _link_flags(), ident)
    with _lock:
        if key in _loaded:
            return _loaded[key]
    stem = re.sub(r"[^A-Za-z0-9_]", "_", Path(filename).stem)[:40] or "kernel"
    so = cache_dir() / f"{stem}-{key}.so"

    def link(tmp: Path) -> None:
        cpp = so.with_suffix(".cpp")
        _write_atomically(cpp, tu.encode())
        _compile([*flags, "-I", str(HERE), "-shared", str(cpp), str(runtime),
                  *map(str, extras), *_link_flags()], tmp, filename, source)

    digest = _cached(so, link)
    lib = Library(so, filename, kernels, switch, digest=digest)
    with _lock:
        return _loaded.setdefault(key, lib)


@functools.lru_cache(maxsize=64)
def _shared_symbols(path: Path, digest: str | None = None) -> dict[str, int] | None:
    """{symbol: bytes} of the variables in the "gcshared" section of a 64-bit little-endian
    ELF library (every static ``__shared__`` variable), or None for another format.

    ``digest`` (the library's sha256) keeps a rebuilt library from getting an old answer."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    entsize, count, names_index = struct.unpack_from("<HHH", data, 0x3A)
    # (name, type, flags, addr, offset, size, link, info, addralign, entsize) of each section
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * entsize) for i in range(count)]

    def text(table: int, at: int) -> str:
        start = sections[table][4] + at
        return data[start:data.index(b"\0", start)].decode(errors="replace")

    shared = [i for i, s in enumerate(sections) if text(names_index, s[0]) == "gcshared"]
    symtab = [s for s in sections if s[1] == 2]  # SHT_SYMTAB
    if not shared or not symtab:
        return {} if symtab else None  # no shared memory at all, or a stripped library
    _, _, _, _, offset, size, link, _, _, sym_size = symtab[0]
    out = {}
    for at in range(offset, offset + size, sym_size):
        name, _, _, index, _, nbytes = struct.unpack_from("<IBBHQQ", data, at)
        if index == shared[0] and nbytes:
            out[text(link, name)] = nbytes
    return out


def _reopen(path, filename, kernels, switch, digest=None):
    return Library(path, filename, kernels, switch, digest=digest)


class Library:
    """An emulator build of one CUDA C source: its kernels, ready to launch.

    With ``digest`` (its sha256 when built) the file is checked against it before it loads.
    """

    def __init__(self, path, filename: str, kernels, switch: str = "auto", *,
                 digest: str | None = None):
        self.path = Path(path)
        self.filename = filename
        self.kernels = {k.name: k for k in kernels}
        self.switch = switch
        self.digest = digest
        if digest is not None and _file_digest(self.path) != digest:
            raise DeviceError(f"The emulator's build {self.path} changed after it was built; "
                              f"run the cell again to rebuild it.")
        self._dll = dll = ctypes.CDLL(str(self.path))
        dll.gcemu_launch.restype = ctypes.c_int
        dll.gcemu_launch.argtypes = [
            ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint),
            ctypes.POINTER(ctypes.c_uint), ctypes.c_uint, ctypes.c_int, ctypes.c_ulonglong,
            ctypes.c_uint, ctypes.c_char_p, ctypes.c_uint]
        dll.gcemu_lend_stacks.restype = None
        dll.gcemu_lend_stacks.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        dll.gcemu_output.restype = ctypes.c_size_t
        dll.gcemu_output.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        dll.gcemu_output_clear.restype = ctypes.c_int
        dll.gcemu_switch_kind.restype = ctypes.c_char_p
        dll.gcemu_static_shared_bytes.restype = ctypes.c_size_t
        self._entries = {name: ctypes.cast(getattr(dll, f"__gcemu_entry_{name}"), ctypes.c_void_p)
                         for name in self.kernels}
        self._static: dict[str, int] = {}  # kernel_static_shared of each kernel launched

    def __reduce__(self):
        return _reopen, (str(self.path), self.filename, tuple(self.kernels.values()), self.switch,
                         self.digest)

    def __repr__(self) -> str:
        return f"<emulator library {self.filename}: {', '.join(self.kernels)}>"

    @property
    def switch_kind(self) -> str:
        """The context switch compiled in: ``"x86-64 assembly"`` or ``"ucontext"``."""
        return self._dll.gcemu_switch_kind().decode()

    @property
    def static_shared_bytes(self) -> int:
        """Bytes of all static ``__shared__`` variables of the file together."""
        return int(self._dll.gcemu_static_shared_bytes())

    def kernel_static_shared(self, name: str) -> int:
        """Bytes of static ``__shared__`` memory a block of kernel ``name`` may use: its own
        arrays, and those of the file's ``__device__`` functions and file scope (which kernel
        calls which is not known here, so every kernel is charged with them)."""
        sizes = _shared_symbols(self.path, self.digest)
        if sizes is None:  # not ELF: the whole file's
            return self.static_shared_bytes
        total = 0
        for symbol, size in sizes.items():
            # A function's static local is named _ZZ<length><function>..., e.g. _ZZ5tiledE2As.
            m = re.match(r"_ZZ(\d+)", symbol)
            owner = symbol[m.end():m.end() + int(m.group(1))] if m else ""
            if owner == name or owner not in self.kernels:
                total += size
        return total

    def param_sizes(self, name: str) -> list[int]:
        """The bytes of each parameter of kernel ``name`` (``sizeof``, as compiled)."""
        n = len(self.kernels[name].params)
        out = (ctypes.c_ulonglong * max(n, 1))()
        fn = getattr(self._dll, f"__gcemu_sizes_{name}")
        fn.restype = None
        fn(out)
        return [int(v) for v in out[:n]]

    def _take_output(self) -> str:
        n = self._dll.gcemu_output(None, 0)
        text = ""
        if n:
            buf = ctypes.create_string_buffer(n)
            self._dll.gcemu_output(buf, n)
            text = buf.raw[:n].decode(errors="replace")
        if self._dll.gcemu_output_clear():
            text += "[printf output stopped at 1 MB, as a GPU's printf buffer would]\n"
        return text

    def launch(self, name: str, grid, block, args, shared_mem: int = 0, *,
               order: str = "forward", seed: int = 0, echo: bool = True) -> str:
        """Run one launch. Low level: grid and block are 3-tuples, args already checked.

        ``order`` is ``forward``, ``reverse`` or ``shuffle`` (threads in a block and blocks
        in the grid). Kernel printf output is printed (if ``echo``) and returned.
        """
        sig = self.kernels[name]
        holders = []
        for p, a in zip(sig.params, args):
            if p.pointer:
                holders.append(ctypes.c_void_p(a.__array_interface__["data"][0]))
            else:  # a value's bytes (a scalar of the parameter's type, or a struct's)
                data = a.tobytes() if isinstance(a, np.void) else np.asarray(a, p.dtype).tobytes()
                holders.append(ctypes.create_string_buffer(data, max(len(data), 1)))
        pointers = (ctypes.c_void_p * max(1, len(holders)))(*[ctypes.addressof(h) for h in holders])
        g = (ctypes.c_uint * 3)(*grid)
        b = (ctypes.c_uint * 3)(*block)
        message = ctypes.create_string_buffer(1024)
        try:
            stack_kb = int(os.environ.get("GPUCOURSE_EMU_STACK_KB", DEFAULT_STACK_KB))
        except ValueError:
            raise DeviceError("GPUCOURSE_EMU_STACK_KB must be a whole number of KB, e.g. 256.")
        static = self._static.get(name)  # of the 48 KB that a block's placed arrays share
        if static is None:
            static = self._static[name] = self.kernel_static_shared(name)
        with _lock:
            self._dll.gcemu_set_static_shared(ctypes.c_size_t(static))
            threads = block[0] * block[1] * block[2]
            if 0 < threads <= 1024 and 0 <= stack_kb < (1 << 30):  # else the launch says why
                lend_stacks(self._dll, threads, (stack_kb or DEFAULT_STACK_KB) * 1024)
            rc = self._dll.gcemu_launch(name.encode(), self._entries[name], pointers, g, b,
                                        int(shared_mem), ORDERS[order], int(seed) & (2**64 - 1),
                                        stack_kb, message, len(message))
            output = self._take_output()
        if echo and output:
            sys.stdout.write(output)
            sys.stdout.flush()
        if rc == 0:
            return output
        text = message.value.decode(errors="replace")
        if rc == 3:
            raise KeyboardInterrupt(text)
        err = LaunchError(text) if rc == 4 else KernelError(text)
        err.output = output  # what the kernel printed before it failed
        raise err
