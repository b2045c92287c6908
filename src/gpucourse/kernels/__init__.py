"""The course's CUDA C kernels, callable from Python on a GPU (CuPy) or on the CPU emulator.

Each ``<op>.cu`` file in this folder holds every version of one operation, named
``<op>_v<N>_<idea>``. ``load`` compiles a file for the active backend and returns a module
whose attributes are its ``extern "C" __global__`` functions, called with CuPy's launch
signature::

    import numpy as np, gpucourse as gc
    mod = gc.kernels.load("vector_add")
    a = gc.device.asarray(np.random.default_rng(0).random(n, dtype=np.float32))
    ...
    mod.vector_add_v1_naive((n + 255) // 256, 256, (a, b, out, np.int32(n)))

``load(name, defines={"TILE": 16})`` prepends ``#define TILE 16`` (one build per distinct
set); ``from_source(code)`` does the same for a source string, e.g. a learner's lab cell.
Before a launch the grid, block, dynamic shared memory and every argument are checked
against the device's limits and the kernel's signature, on both backends: an ``int``
parameter wants ``np.int32``, a ``float*`` a float32 array (a Python int would be passed
as 64 bits and silently misread). A kernel call also takes ``race_check=True``,
``isolate=True`` and ``timeout=`` (seconds), for the emulator: see ``gpucourse.emulator``
for what they do and for the defaults (a learner's ``from_source`` code gets a 10 s limit,
the course's own kernels none). On the emulator an index out of bounds raises
``emulator.OutOfBounds``, naming the line.

``mod.get_global(name)`` reaches a ``__constant__`` or ``__device__`` variable as CuPy's
``RawModule.get_global`` does (a NumPy view on the emulator, a CuPy array on a GPU) and
``mod.set_global(name, values)`` sets it on either; a struct passed by value is a NumPy
structured scalar, whose pointer fields take ``pointer(array)``. docs/emulator.md lists the
CUDA C the emulator runs.
"""
from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import numpy as np

from .. import device, paths
from ..emulator import build_library, checks, racecheck
from ..emulator import launch as emulator_launch
from ..emulator.build import SHARED_MEM_LIMIT, source_line
from ..emulator.globals import _missing as _missing_global, array as global_array
from ..emulator.globals import declared, declared_names
from ..emulator.isolate import run_isolated, safe_timeout
from ..emulator.launch import _is_cupy, _what
from ..emulator.source import KernelSignature, c_string, define_lines, defines_key, find_kernels
from ..errors import CompileError, CourseError, DeviceError, InputError, LaunchError

__all__ = ["load", "from_source", "available", "KernelModule", "Kernel",
           "UnknownKernelError", "KernelFileNotFoundError", "Source", "source_of", "BLOCK_SIZES",
           "pointer"]

#: The block sizes the course's block-size sweeps and sliders offer: multiples of 32 and a
#: few that are not (48, 100, 200), whose last warp runs with idle lanes.
BLOCK_SIZES = (32, 48, 64, 96, 100, 128, 192, 200, 256, 384, 512, 768, 1024)


class UnknownKernelError(LaunchError, AttributeError):
    """A kernel name that the source does not define."""


class KernelFileNotFoundError(CourseError, FileNotFoundError):
    """A kernel file name that the course does not have."""


def available() -> list[str]:
    """Names of the course's kernel files, e.g. ``["copy", "reduce", ...]``."""
    return sorted(p.stem for p in paths.KERNEL_DIR.glob("*.cu"))


def pointer(array) -> int:
    """The device address of ``array`` (a NumPy array on the emulator, a CuPy array on a
    GPU), for a pointer field of a struct passed by value."""
    if _is_cupy(array):
        return int(array.data.ptr)
    if isinstance(array, np.ndarray):
        return int(array.ctypes.data)
    raise InputError(f"pointer() takes an array (NumPy on the emulator, CuPy on a GPU), not "
                     f"{_what(array)}.")


# --------------------------------------------------------------------------- backends

def _active_backend() -> str:
    return device.backend()


class _Emulated:
    """The CPU emulator build of a module."""

    def __init__(self, module: "KernelModule"):
        self.module = module
        self.library = build_library(module.source, filename=module.filename,
                                     defines=module.defines)
        self.static_shared = {s.name: self.library.kernel_static_shared(s.name)
                              for s in module.signatures}
        self.sizes = {s.name: self.library.param_sizes(s.name) for s in module.signatures}
        for name, size in self.static_shared.items():
            # Arrays count used or not (a compiler may drop an unused one), so the message
            # states the limit, not what a compiler would do.
            if size > SHARED_MEM_LIMIT:
                raise CompileError(
                    f"{module.filename}: kernel {name} uses more than the 48 KB of static shared "
                    f"memory a block may have ({size} __shared__ bytes, {SHARED_MEM_LIMIT} "
                    f"allowed); use a smaller tile, or on a GPU dynamic shared memory (extern "
                    f"__shared__) after cudaFuncSetAttribute(kernel, "
                    f"cudaFuncAttributeMaxDynamicSharedMemorySize, bytes).")

    def limits(self, name: str) -> emulator_launch.Limits:
        static = self.static_shared[name]
        if not static:
            return emulator_launch.EMULATOR_LIMITS
        # Static shared memory comes off the dynamic allowance, as on a GPU.
        return emulator_launch.Limits(max_dynamic_shared=SHARED_MEM_LIMIT - static,
                      where=f"on the emulator beside its {static} bytes of static __shared__ memory")

    def launch(self, name, grid, block, args, shared_mem, stream=None, timeout=None) -> None:
        kernel = self.module._kernels[name]
        checks.launch(self.library, name, grid, block, args, shared_mem, timeout=timeout,
                      detector=lambda: racecheck.detector(kernel, warn=False))


_NVRTC_ERROR = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?:catastrophic )?error: (?P<msg>.*)$")


def explain_nvrtc_errors(log: str, filename: str, source: str | None = None) -> str:
    """The first error of an NVRTC log, at the kernel file's own line."""
    lines = log.splitlines()
    for text in lines:
        m = _NVRTC_ERROR.match(text.strip())
        if m:
            mine = os.path.basename(m.group("file")) == filename
            code = source_line(source, m.group("line")) if mine else ""
            where = f"{filename} line {m.group('line')}" if mine else filename
            return f"{where}: {m.group('msg')}" + (f"\n    {code}" if code else "")
    useful = [t for t in lines if "error" in t.lower()] or lines[-1:] or ["no log"]
    return f"{filename}: NVRTC could not compile it: {useful[0].strip()}"


class _Cupy:
    """The GPU build of a module, through cupy.RawModule (NVRTC, for this GPU's architecture)."""

    def __init__(self, module: "KernelModule"):
        try:
            import cupy  # optional: only the GPU backend has it
        except ImportError as exc:
            raise DeviceError("The cuda backend needs CuPy (pip install -e .[gpu]); or set "
                              "GPUCOURSE_DEVICE=cpu to use the emulator.") from exc
        from cupy.cuda.compiler import CompileException  # optional, as above

        self.cupy = cupy
        code = "\n".join([*define_lines(module.defines),
                          f'#line 1 "{c_string(module.filename)}"', module.source])
        self.module = module
        self.raw = cupy.RawModule(code=code, options=("-std=c++17",))
        try:
            self.functions = {n: self.raw.get_function(n) for n in module.names}
        except CompileException as exc:
            err = CompileError(explain_nvrtc_errors(str(exc), module.filename, module.source))
            err.log = str(exc)
            raise err from None
        attrs = cupy.cuda.Device().attributes
        self.device_limits = emulator_launch.Limits(
            max_threads=attrs["MaxThreadsPerBlock"],
            max_block=(attrs["MaxBlockDimX"], attrs["MaxBlockDimY"], attrs["MaxBlockDimZ"]),
            max_grid=(attrs["MaxGridDimX"], attrs["MaxGridDimY"], attrs["MaxGridDimZ"]),
            max_dynamic_shared=attrs.get("MaxSharedMemoryPerBlockOptin",
                                         attrs["MaxSharedMemoryPerBlock"]),
            where="on this GPU")

    def limits(self, name: str) -> emulator_launch.Limits:
        f, lim = self.functions[name], self.device_limits
        # Registers cap a kernel's block size below the device's; static shared memory
        # comes off the dynamic allowance.
        return emulator_launch.Limits(
            max_threads=min(lim.max_threads, f.max_threads_per_block),
            max_block=lim.max_block, max_grid=lim.max_grid,
            max_dynamic_shared=lim.max_dynamic_shared - f.shared_size_bytes,
            where=f"for {name} on this GPU")

    def get_global(self, name: str):
        """A CuPy array over a global variable: typed and shaped as declared where the
        declaration says so in numbers, else its bytes."""
        ptr = self.raw.get_global(name)
        m = self.module
        found = declared(m.source, name, m.defines, m.arch)
        size = getattr(getattr(ptr, "mem", None), "size", None)
        if found is not None:
            dtype, shape = found
            if size is None or int(np.prod(shape)) * dtype.itemsize <= size:
                return self.cupy.ndarray(shape, dtype, memptr=ptr)
        return self.cupy.ndarray((int(size or 0),), np.uint8, memptr=ptr)

    def launch(self, name, grid, block, args, shared_mem, stream=None, timeout=None) -> None:
        f = self.functions[name]
        if shared_mem > 48 * 1024 and f.max_dynamic_shared_size_bytes < shared_mem:
            f.max_dynamic_shared_size_bytes = shared_mem  # opt in beyond the default 48 KB
        f(grid, block, tuple(args), shared_mem=shared_mem, stream=stream)


# --------------------------------------------------------------------------- modules

class Kernel:
    """One ``__global__`` function: ``k(grid, block, args, shared_mem=0)``."""

    def __init__(self, module: "KernelModule", signature: KernelSignature):
        self.module = module
        self.signature = signature
        self.name = signature.name
        self.params = signature.params

    @property
    def backend(self) -> str:
        return self.module.backend

    @property
    def num_regs(self) -> int | None:
        """Registers per thread the GPU's compiler gave this kernel; None on the emulator,
        which has no register file to count."""
        if self.backend == "cpu":
            return None
        regs = getattr(self.module._impl.functions[self.name], "num_regs", None)  # old CuPy: none
        return None if regs is None else int(regs)

    def __repr__(self) -> str:
        where = "the CPU emulator" if self.backend == "cpu" else "the GPU"
        return f"<kernel {self.signature} from {self.module.filename} on {where}>"

    def _validate(self, grid, block, args, shared_mem):
        limits = self.module._impl.limits(self.name)
        checked = emulator_launch.check_launch(self.name, grid, block, shared_mem, limits)
        sizes = self.module._emulated.sizes[self.name] if self.module._emulated else None
        emulator_launch.check_args(self.name, self.params, args, self.backend, sizes)
        return checked

    def _emulator_library(self):
        return self.module._emulator_library()

    def __call__(self, grid, block, args, shared_mem=0, *, stream=None, race_check=False,
                 isolate=False, timeout=None) -> None:
        """Launch on the module's backend (``stream``: a CuPy stream; the emulator runs in order).

        ``race_check``: on the emulator, in three thread orders and under a hazard detector,
        in a child process. ``isolate``: on the emulator in a child process. ``timeout``:
        seconds each emulator launch may take (None: 10 for a launch of ``from_source`` code
        or one in a child process, no limit for a course kernel in this process)."""
        race_check = _flag(race_check, "race_check")
        isolate = _flag(isolate, "isolate")
        if race_check or isolate:
            timeout = safe_timeout(timeout, checks.DEFAULT_TIMEOUT_S)
            run_isolated(self, grid, block, args, shared_mem, timeout=timeout,
                         race_check=race_check)
            return
        timeout = safe_timeout(
            timeout, None if self.module.course else checks.DEFAULT_TIMEOUT_S)
        grid3, block3, shared = self._validate(grid, block, args, shared_mem)
        self.module._impl.launch(self.name, grid3, block3, args, shared, stream, timeout=timeout)


def _flag(value, what: str) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise LaunchError(f"{what}={value!r} is not a switch: pass {what}=True or {what}=False.")


class KernelModule:
    """The kernels of one CUDA C source, built for one backend; kernels are attributes."""

    def __init__(self, source: str, filename: str, defines: dict | None, backend: str,
                 course: bool = False):
        self.source, self.filename, self.backend = source, filename, backend
        self.course = course  # one of the course's own files (load), not from_source code
        self.defines = dict(defines or {})
        self.arch = _arch(backend)
        self.signatures = find_kernels(source, filename, self.defines, self.arch)
        if not self.signatures:
            raise CompileError(f"{filename} defines no kernel: write "
                               f"`extern \"C\" __global__ void name(...) {{ ... }}`.")
        self._kernels = {s.name: Kernel(self, s) for s in self.signatures}
        self._emulated = None
        if backend == "cpu":
            self._impl = _Emulated(self)
            self._emulated = self._impl
        elif backend == "cuda":
            self._impl = _Cupy(self)
        else:
            raise DeviceError(f"backend {backend!r} is not one of 'cpu' or 'cuda'.")

    @property
    def names(self) -> list[str]:
        """The kernels' names, in source order."""
        return list(self._kernels)

    def _emulator_library(self):
        if self._emulated is None:
            self._emulated = _Emulated(self)
        return self._emulated.library

    def get_global(self, name: str):
        """A ``__constant__`` or ``__device__`` variable of this source, as CuPy's
        ``RawModule.get_global`` reaches it: on the emulator a NumPy array over the variable
        (typed and shaped as declared), on a GPU a CuPy array over CuPy's device pointer.
        Writing it sets the variable for the launches that follow::

            g = mod.get_global("c_filter")   # __constant__ float c_filter[9];
            g[...] = weights                 # on the emulator (NumPy)
            g.set(weights)                   # on a GPU (CuPy copies no NumPy array implicitly)

        :meth:`set_global` does either.
        """
        if not isinstance(name, str):
            raise InputError(f"get_global takes a variable's name as a string, not {_what(name)}.")
        known = declared_names(self.source, self.defines, self.arch)
        if name not in known:
            raise InputError(_missing_global(name, self.filename, known))
        if self.backend == "cpu":
            return global_array(self._emulator_library(), name, self.filename, known)
        return self._impl.get_global(name)

    def set_global(self, name: str, values) -> None:
        """Set variable ``name`` (see :meth:`get_global`) to ``values``, an array of its
        shape (or a number, for every element), on either backend."""
        target = self.get_global(name)
        host = np.asarray(values)
        if host.dtype.kind == "O" or (host.shape != () and host.shape != target.shape):
            raise InputError(f"{name} holds {target.shape or 'one value'} of {target.dtype}, so "
                             f"set it from an array of that shape, not {_what(values)} "
                             f"of shape {host.shape}.")
        host = np.broadcast_to(host, target.shape).astype(target.dtype, copy=False)
        if isinstance(target, np.ndarray):
            target[...] = host
        else:
            target.set(np.array(host, order="C"))  # (ascontiguousarray makes a 0-d array 1-d)

    def emulator_limits(self, name: str) -> emulator_launch.Limits:
        """The emulator's launch limits of kernel ``name`` (its static shared memory counted)."""
        self._emulator_library()
        return self._emulated.limits(name)

    def __getattr__(self, name: str) -> Kernel:
        kernels = self.__dict__.get("_kernels", {})
        if name in kernels:
            return kernels[name]
        if name.startswith("_"):
            raise AttributeError(name)
        raise UnknownKernelError(f"{self.filename} has no kernel {name!r}; it has: "
                                 f"{', '.join(kernels)}.")

    def __getitem__(self, name: str) -> Kernel:
        return getattr(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._kernels))

    def __iter__(self):
        return iter(self._kernels.values())

    def __repr__(self) -> str:
        where = "CPU emulator" if self.backend == "cpu" else "GPU"
        return f"<kernels of {self.filename} on the {where}: {', '.join(self._kernels)}>"


def _arch(backend: str) -> int | None:
    """``__CUDA_ARCH__`` of the device that compiles for ``backend`` (None: the emulator's)."""
    if backend != "cuda":
        return None
    try:
        import cupy

        return int(cupy.cuda.Device().compute_capability) * 10
    except Exception:  # no CuPy or no device: the launch reports it
        return None


_lock = threading.Lock()
_modules: dict[tuple, KernelModule] = {}


def _module(source: str, filename: str, defines, backend, course: bool = False) -> KernelModule:
    backend = backend or _active_backend()
    key = (backend, filename, source, defines_key(defines), course)
    with _lock:
        if key in _modules:
            return _modules[key]
    module = KernelModule(source, filename, defines, backend, course)
    with _lock:
        return _modules.setdefault(key, module)


def load(name: str, defines: dict | None = None, *, backend: str | None = None) -> KernelModule:
    """The kernels of ``src/gpucourse/kernels/<name>.cu``, built for the active backend.

    ``defines={"TILE": 16}`` prepends ``#define TILE 16``; ``backend="cpu"`` forces the
    emulator (``"cuda"`` the GPU).
    """
    path = _kernel_file(name)
    return _module(path.read_text(), path.name, defines, backend, course=True)


def _kernel_file(name: str) -> Path:
    """The path of a course kernel file by name ("copy" or "copy.cu"), or one clear error."""
    if not isinstance(name, str):
        raise InputError(f"a kernel file is named by a string such as \"transpose\", not "
                         f"{_what(name)}; the course has: {', '.join(available())}.")
    stem = name[:-3] if name.endswith(".cu") else name
    path = paths.KERNEL_DIR / f"{stem}.cu"
    if not re.fullmatch(r"[A-Za-z0-9_]+", stem) or not path.is_file():
        raise KernelFileNotFoundError(f"there is no kernel file {stem}.cu; the course has: "
                                      f"{', '.join(available())}.")
    return path


def from_source(code: str, defines: dict | None = None, *, name: str = "kernel.cu",
                backend: str | None = None) -> KernelModule:
    """The kernels of a CUDA C source string; ``name`` is the file name errors show."""
    if not isinstance(code, str):
        raise InputError(f"from_source takes the CUDA C source as a string (e.g. "
                         f"from_source('extern \"C\" __global__ void k(float* x) {{ ... }}')), "
                         f"not {_what(code)}.")
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"name={name!r} is not a file name: give a string such as "
                         f"name=\"my_kernel.cu\" (error messages show it).")
    filename = name if name.endswith(".cu") else f"{name}.cu"
    return _module(code, filename, defines, backend)


class Source:
    """CUDA C text that shows as a highlighted block in a notebook."""

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__

    def _repr_markdown_(self) -> str:
        return f"```cuda\n{self.text}\n```"


def source_of(file: str, kernel: str) -> Source:
    """The source of one ``__global__`` function of a course kernel file, for display."""
    path = _kernel_file(file)
    text = path.read_text()
    m = re.search(rf"\b{re.escape(kernel)}\s*\(", text)
    if m is None:
        names = [s.name for s in find_kernels(text)]
        raise UnknownKernelError(f"{path.name} has no kernel {kernel!r}; it has: {', '.join(names)}.")
    start = text.rindex("extern", 0, m.start())
    depth, i = 0, text.index("{", m.end())
    while True:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            break
        i += 1
    return Source(text[start:i + 1])
