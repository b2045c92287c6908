"""A fake CuPy for tests: the GPU code paths of the course, run on the CPU (a smoke test only).

``install(monkeypatch)`` puts fake ``cupy``, ``cupy.cuda``, ``cupy.cuda.compiler``, ``cupyx``
and ``cupyx.scipy.sparse`` modules into ``sys.modules`` and selects the ``cuda`` backend, so
that ``gpucourse.device`` reports a GPU (an NVIDIA H200 by its reported properties) and code
that runs only on a GPU runs here. Everything is undone by the monkeypatch fixture;
``uninstall_caches()`` clears the caches that saw the fake (``testing.installed()`` does both).

What is real and what is not:

- Kernels are real: ``cupy.RawModule`` builds the CUDA C source it is given with the course's
  CPU emulator and a launch runs it there, so results are correct and the code's own checks
  of them run. So is ``cupy.ElementwiseKernel``: its C body is wrapped in a kernel of one
  thread per element and run on the emulator the same way.
- Device arrays are NumPy arrays in host memory behind an object that is NOT a
  ``numpy.ndarray``. As with CuPy, mixing them with NumPy arrays raises ``TypeError``
  (``np.asarray(device_array)``, ``device_array + numpy_array``, a NumPy array passed to a
  kernel), so host/device mix-ups in GPU code paths fail here too.
- Everything runs at once, in order: streams, events and ``synchronize`` only keep the API.
  Events record ``time.perf_counter()``, so timings are host times of the emulator and mean
  nothing about any GPU. Never assert on them.
- The default memory pool (``cupy.get_default_memory_pool()``) is a model: it counts the bytes
  of the device arrays alive (``used_bytes``) and keeps the bytes of freed ones as cached blocks
  (``total_bytes``) until ``free_all_blocks()``; ``cupy.cuda.set_allocator(None)`` turns it
  off for new arrays, ``set_allocator(pool.malloc)`` back on. No memory is really pooled.
- ``cupyx.scipy.sparse.csr_matrix`` holds real CSR arrays; its product with a device matrix
  is computed by NumPy.

Only what the course's code calls is implemented; anything else raises ``AttributeError``,
which is what a test of a new GPU path should see first.
"""
from __future__ import annotations

import builtins
import ctypes
import re
import sys
import time
import types
import weakref

import numpy as np

# ----------------------------------------------------------------------------- the device

#: Properties as cudaGetDeviceProperties reports them on an H200 (see src/gpucourse/data/gpus.json:
#: 132 SMs, 60 MiB L2, 3201 MHz x 6016-bit HBM3e). Like a CUDA 13 runtime, the memory clock
#: and bus width are absent here and come from deviceGetAttribute instead.
PROPERTIES = {
    "name": b"NVIDIA H200",
    "major": 9,
    "minor": 0,
    "multiProcessorCount": 132,
    "totalGlobalMem": 150_006_054_912,
    "l2CacheSize": 62_914_560,
    "sharedMemPerBlock": 49_152,
    "sharedMemPerBlockOptin": 232_448,
    "maxThreadsPerBlock": 1024,
    "warpSize": 32,
    "asyncEngineCount": 2,  # two or more copy engines, as on data-centre GPUs
    "clockRate": 1_980_000,
}
MEMORY_CLOCK_KHZ = 3_201_000
MEMORY_BUS_WIDTH_BITS = 6016

#: cupy.cuda.Device().attributes (CUDA's cudaDevAttr names without the prefix).
ATTRIBUTES = {
    "MaxThreadsPerBlock": 1024,
    "MaxBlockDimX": 1024, "MaxBlockDimY": 1024, "MaxBlockDimZ": 64,
    "MaxGridDimX": 2**31 - 1, "MaxGridDimY": 65535, "MaxGridDimZ": 65535,
    "MaxSharedMemoryPerBlock": 49_152,
    "MaxSharedMemoryPerBlockOptin": 232_448,
    "MultiProcessorCount": 132,
    "L2CacheSize": 62_914_560,
    "WarpSize": 32,
    "ComputeCapabilityMajor": 9, "ComputeCapabilityMinor": 0,
    "AsyncEngineCount": 2,
}

#: Registers per thread the fake compiler reports for every kernel (no real compiler runs).
NUM_REGS = 16

_HOST_ONLY = ("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to "
              "construct a NumPy array explicitly.")


# ----------------------------------------------------------------------------- arrays

def _poisoned(shape, dtype) -> np.ndarray:
    """Fresh device memory: every byte 0xFF (NaN for floats), so reading it unwritten shows."""
    out = np.empty(shape, dtype=dtype)
    out.reshape(-1).view(np.uint8).fill(0xFF)
    return out


def _dev(value, what: str = "argument"):
    """The host array behind a device array; a NumPy array is an error, as in CuPy."""
    if isinstance(value, ndarray):
        return value._a
    if isinstance(value, np.ndarray):
        raise TypeError(f"Unsupported type {type(value)} for {what}: a NumPy array where CuPy "
                        "wants a device array (move it with cupy.asarray).")
    if isinstance(value, (list, tuple)):
        return type(value)(_dev(v, what) for v in value)
    return value


def _wrap(result):
    if isinstance(result, np.ndarray):
        return ndarray(result)
    if isinstance(result, np.generic):  # CuPy returns 0-d device arrays, not host scalars
        return ndarray(np.asarray(result))
    if isinstance(result, tuple):
        return tuple(_wrap(r) for r in result)
    return result


class MemoryPointer:
    """``array.data``: the start of an array's memory (``mem.size``: its bytes)."""

    def __init__(self, array: "ndarray"):
        self._array = array
        self.mem = types.SimpleNamespace(size=array.nbytes)

    @property
    def ptr(self) -> int:
        return int(self._array._a.__array_interface__["data"][0])

    def _bytes(self) -> np.ndarray:
        a = self._array._a
        if not a.flags.c_contiguous:
            raise ValueError("fake cupy: a memory pointer of a non-contiguous view")
        return a.reshape(-1).view(np.uint8)

    def copy_from_device_async(self, src: "MemoryPointer", size: int, stream=None) -> None:
        if not isinstance(src, MemoryPointer):
            raise TypeError(f"copy_from_device_async wants a MemoryPointer, not {type(src)}")
        dst, s = self._bytes(), src._bytes()
        if size > dst.size or size > s.size:
            raise ValueError(f"copy of {size} bytes is past the end of an allocation")
        dst[:size] = s[:size]

    def copy_from_device(self, src: "MemoryPointer", size: int) -> None:
        self.copy_from_device_async(src, size)

    def copy_from_host_async(self, mem, size: int, stream=None) -> None:
        """Copy ``size`` bytes from the host address ``mem`` (an int or ``ctypes.c_void_p``)."""
        if isinstance(mem, ctypes.c_void_p):
            mem = mem.value
        if not isinstance(mem, int) or isinstance(mem, bool) or not mem:
            raise TypeError(f"copy_from_host_async wants a host address (int or ctypes.c_void_p), "
                            f"not {type(mem)}")
        if stream is not None and not isinstance(stream, Stream):
            raise TypeError(f"copy_from_host_async: stream must be a cupy.cuda.Stream, not "
                            f"{type(stream)}")
        dst = self._bytes()
        if size > dst.size:
            raise ValueError(f"copy of {size} bytes is past the end of an allocation")
        ctypes.memmove(dst.ctypes.data, mem, size)

    def copy_from_host(self, mem, size: int) -> None:
        self.copy_from_host_async(mem, size)


class ndarray(np.lib.mixins.NDArrayOperatorsMixin):
    """A device array of the fake: a NumPy array held behind CuPy's interface."""

    # gpucourse recognises CuPy arrays by their type's module (kernels._is_cupy, device.to_host).
    __module__ = "cupy"
    __hash__ = None

    def __init__(self, host, dtype=None, memptr=None, strides=None, order="C"):
        if memptr is not None:  # cupy.ndarray(shape, dtype, memptr=...): a view of that memory
            count = int(np.prod(host))
            raw = memptr._bytes()
            host = raw[:count * np.dtype(dtype).itemsize].view(dtype).reshape(host)
        elif not isinstance(host, np.ndarray):
            raise NotImplementedError("fake cupy: ndarray(shape, dtype) without memptr is not faked")
        self._a = host
        if memptr is None:
            _pool_allocated(host)

    # --- what NumPy must not do implicitly
    def __array__(self, *args, **kwargs):
        raise TypeError(_HOST_ONLY)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        out = kwargs.get("out")
        args = [_dev(i, f"an operand of {ufunc.__name__}") for i in inputs]
        if out is not None:
            kwargs["out"] = tuple(_dev(o, "out") for o in out)
        result = getattr(ufunc, method)(*args, **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return _wrap(result)

    def __array_function__(self, func, types_, args, kwargs):
        # CuPy runs the CuPy version of a NumPy function on device arrays (NEP 18).
        result = func(*_dev(tuple(args), func.__name__),
                      **{k: _dev(v, func.__name__) for k, v in kwargs.items()})
        return _wrap(result)

    # --- attributes
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    size = property(lambda self: self._a.size)
    ndim = property(lambda self: self._a.ndim)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: ndarray(self._a.T))
    data = property(lambda self: MemoryPointer(self))

    def __repr__(self) -> str:
        return f"fake cupy {self._a!r}"

    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __bool__(self) -> bool:
        return bool(self._a)

    def __float__(self) -> float:
        return float(self._a)

    def __int__(self) -> int:
        return int(self._a)

    def __index__(self) -> int:
        return self._a.__index__()

    def __getitem__(self, key):
        key = _dev(key, "an index") if isinstance(key, (ndarray, tuple)) else key
        result = self._a[key]
        if isinstance(result, np.generic):  # a 0-d view, as CuPy gives, not a copy
            result = self._a[(key if isinstance(key, tuple) else (key,)) + (Ellipsis,)]
        return ndarray(result)

    def __setitem__(self, key, value):
        key = _dev(key, "an index") if isinstance(key, (ndarray, tuple)) else key
        if isinstance(value, np.ndarray) and value.shape != ():  # as CuPy: no implicit copy
            raise ValueError("non-scalar numpy.ndarray cannot be used for fill")
        self._a[key] = value._a if isinstance(value, ndarray) else value

    # --- transfers
    def get(self, stream=None, order="C", out=None, blocking=True) -> np.ndarray:
        if out is None:
            return np.array(self._a, order=order, copy=True)
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a numpy.ndarray, not {type(out)}")
        if out.shape != self.shape or out.dtype != self.dtype:
            raise ValueError(f"get(out=...): {out.shape} {out.dtype} where the array is "
                             f"{self.shape} {self.dtype}")
        if not out.flags.c_contiguous:
            raise RuntimeError("get(out=...) needs a contiguous out")
        np.copyto(out, self._a)
        return out

    def set(self, arr, stream=None) -> None:
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"Only numpy.ndarray can be set to cupy.ndarray, not {type(arr)}")
        if arr.shape != self.shape:
            raise ValueError(f"Shape mismatch: {arr.shape} vs {self.shape}")
        if arr.dtype != self.dtype:
            raise TypeError(f"Dtype mismatch: {arr.dtype} vs {self.dtype}")
        np.copyto(self._a, arr)

    # --- methods CuPy shares with NumPy
    def fill(self, value) -> None:
        self._a.fill(value)

    def item(self):
        return self._a.item()

    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        if not copy and np.dtype(dtype) == self.dtype:
            return self
        return ndarray(self._a.astype(dtype, order=order))



def _delegate(name):
    def method(self, *args, **kwargs):
        return _wrap(getattr(self._a, name)(*_dev(args, name),
                                            **{k: _dev(v, name) for k, v in kwargs.items()}))
    method.__name__ = method.__qualname__ = name
    return method


# Methods CuPy shares with NumPy, run on the host array and returned as device arrays.
for _name in ("reshape", "sum", "all"):
    setattr(ndarray, _name, _delegate(_name))
del _name


# ----------------------------------------------------------------------------- cupy functions

_rng = np.random.default_rng(12345)


def _new(a, dtype=None) -> ndarray:
    """cupy.asarray: a device copy of host data; a device array of the same dtype as is."""
    if isinstance(a, ndarray):
        return a if dtype is None or np.dtype(dtype) == a.dtype else a.astype(dtype)
    return ndarray(np.array(a, dtype=dtype, copy=True))


def asarray(a, dtype=None, order=None, blocking=False):
    return _new(a, dtype)


def ascontiguousarray(a, dtype=None):
    a = _new(a, dtype)
    return a if a.flags.c_contiguous else ndarray(np.ascontiguousarray(a._a))


def asnumpy(a, stream=None, order="C", out=None, blocking=True):
    if isinstance(a, ndarray):
        return a.get(stream=stream, order=order, out=out)
    return np.asarray(a, order=order)


def empty(shape, dtype=float, order="C"):
    return ndarray(_poisoned(shape, dtype))


def empty_like(a, dtype=None, order="K", subok=None, shape=None):
    src = _dev(a, "empty_like")
    return ndarray(_poisoned(src.shape if shape is None else shape, dtype or src.dtype))


def zeros(shape, dtype=float, order="C"):
    return ndarray(np.zeros(shape, dtype=dtype))


def full(shape, fill_value, dtype=None, order="C"):
    return ndarray(np.full(shape, fill_value, dtype=dtype))


def arange(start, stop=None, step=1, dtype=None):
    return ndarray(np.arange(start, stop, step, dtype=dtype) if stop is not None
                   else np.arange(start, dtype=dtype))


def copyto(dst, src, casting="same_kind", where=None):
    if not isinstance(dst, ndarray):
        raise TypeError(f"copyto: dst must be a cupy array, not {type(dst)}")
    kw = {} if where is None else {"where": _dev(where, "copyto")}
    np.copyto(dst._a, _dev(src, "copyto"), casting=casting, **kw)


def array_equal(a1, a2, equal_nan=False):
    return ndarray(np.asarray(np.array_equal(_dev(a1, "array_equal"), _dev(a2, "array_equal"),
                                             equal_nan=equal_nan)))


def sum(a, axis=None, dtype=None, out=None, keepdims=False):  # noqa: A001 (cupy's name)
    if out is not None:
        np.sum(_dev(a, "sum"), axis=axis, dtype=dtype, out=_dev(out, "out"), keepdims=keepdims)
        return out
    return _wrap(np.sum(_dev(a, "sum"), axis=axis, dtype=dtype, keepdims=keepdims))


def matmul(a, b, out=None, **kwargs):
    if out is not None:
        np.matmul(_dev(a, "matmul"), _dev(b, "matmul"), out=_dev(out, "out"), **kwargs)
        return out
    return _wrap(np.matmul(_dev(a, "matmul"), _dev(b, "matmul"), **kwargs))


def _elementwise(fn):
    def call(*args, **kwargs):
        return fn(*[a if isinstance(a, ndarray) else _dev(a, fn.__name__) for a in args],
                  **kwargs)
    call.__name__ = fn.__name__
    return call


def is_available() -> bool:
    return True


class _Generator:
    """cupy.random.Generator (default_rng)."""

    def __init__(self, seed=None):
        self._g = np.random.default_rng(seed)

    def random(self, size=None, dtype=np.float64, out=None):
        values = self._g.random(size, dtype=dtype)
        if out is not None:
            out[...] = values
            return out
        return ndarray(np.asarray(values))

    def standard_normal(self, size=None, dtype=np.float64, out=None):
        return ndarray(np.asarray(self._g.standard_normal(size, dtype=dtype)))


def _random(size=None, dtype=float):
    return ndarray(np.asarray(_rng.random(size, dtype=dtype)))


# ----------------------------------------------------------------------------- memory pool

class MemoryPool:
    """cupy.cuda.MemoryPool, as a model: bytes of live device arrays allocated through it are
    in use; when such an array dies its (512-byte rounded) block is cached, not freed, and a
    later allocation of the same size takes it back. Nothing is really pooled."""

    ROUND = 512

    def __init__(self):
        self._used = 0
        self._free: dict[int, int] = {}  # rounded size -> cached blocks

    def _alloc(self, nbytes: int) -> int:
        size = -(-nbytes // self.ROUND) * self.ROUND
        if self._free.get(size):
            self._free[size] -= 1
        self._used += size
        return size

    def _release(self, size: int) -> None:
        self._used -= size
        self._free[size] = self._free.get(size, 0) + 1

    def malloc(self, size: int) -> MemoryPointer:
        return ndarray(_poisoned((int(size),), np.uint8)).data

    def used_bytes(self) -> int:
        return self._used

    def free_bytes(self) -> int:
        return builtins.sum(size * k for size, k in self._free.items())

    def total_bytes(self) -> int:
        return self._used + self.free_bytes()

    def n_free_blocks(self) -> int:
        return builtins.sum(self._free.values())

    def free_all_blocks(self, stream=None) -> None:
        self._free.clear()


_pool = MemoryPool()
_allocator = _pool.malloc  # None: no pool, every array is its own cudaMalloc
_tracked: dict[int, weakref.finalize] = {}


def _pool_allocated(host: np.ndarray) -> None:
    """Count a new device array that owns its memory in the pool, while the pool is on."""
    if (host.base is not None or id(host) in _tracked
            or getattr(_allocator, "__self__", None) is not _pool):
        return
    pool, size = _pool, _pool._alloc(host.nbytes)

    def release(key=id(host)):
        _tracked.pop(key, None)
        pool._release(size)

    _tracked[id(host)] = weakref.finalize(host, release)


def get_default_memory_pool() -> MemoryPool:
    return _pool


def set_allocator(allocator=None) -> None:
    """``None`` turns the pool off (raw cudaMalloc per array); ``pool.malloc`` turns it on."""
    global _allocator
    if allocator is not None and not callable(allocator):
        raise TypeError(f"set_allocator wants a callable or None, not {type(allocator)}")
    _allocator = allocator


def _reset_pool() -> None:
    global _pool, _allocator
    for fin in list(_tracked.values()):
        fin.detach()
    _tracked.clear()
    _pool = MemoryPool()
    _allocator = _pool.malloc


# ----------------------------------------------------------------------------- linalg

def _norm(x, ord=None, axis=None, keepdims=False):
    return _wrap(np.linalg.norm(_dev(x, "linalg.norm"), ord=ord, axis=axis, keepdims=keepdims))


# ----------------------------------------------------------------------------- cupy.cuda

class CompileException(Exception):
    """cupy.cuda.compiler.CompileException: what NVRTC would say; here the emulator's build error."""


class CUDARuntimeError(RuntimeError):
    pass


_streams: list = []


class Stream:
    """Work is done when it is queued; a stream keeps only the API (and the current one)."""

    null: "Stream"

    def __init__(self, null=False, non_blocking=False, ptds=False, priority=None):
        self.is_null = null
        self.non_blocking = non_blocking
        self.ptr = 0 if null else id(self)

    def __enter__(self):
        _streams.append(self)
        return self

    def __exit__(self, *exc):
        _streams.pop()

    def use(self):
        _streams[:] = [self]
        return self

    def synchronize(self) -> None:
        pass

    def wait_event(self, event) -> None:
        if not isinstance(event, Event):
            raise TypeError(f"wait_event wants a cupy.cuda.Event, not {type(event)}")

    def record(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    @property
    def done(self) -> bool:
        return True


Stream.null = Stream(null=True)


def get_current_stream(device_id=-1):
    return _streams[-1] if _streams else Stream.null


class Event:
    """Records the host clock: the fake's work is done by the time it is recorded."""

    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.disable_timing = disable_timing
        self._t = None

    def record(self, stream=None) -> None:
        if stream is not None and not isinstance(stream, Stream):
            raise TypeError(f"Event.record wants a cupy.cuda.Stream, not {type(stream)}")
        self._t = time.perf_counter()

    def synchronize(self) -> None:
        pass

    @property
    def done(self) -> bool:
        return True


def get_elapsed_time(start_event: Event, end_event: Event) -> float:
    """Milliseconds between two recorded events (a host time here: meaningless for a GPU)."""
    for e in (start_event, end_event):
        if not isinstance(e, Event):
            raise TypeError(f"get_elapsed_time wants cupy.cuda.Event objects, not {type(e)}")
        if e._t is None:
            raise CUDARuntimeError("cudaErrorInvalidResourceHandle: an event was never recorded")
        if e.disable_timing:
            raise CUDARuntimeError("cudaErrorInvalidResourceHandle: event created with "
                                   "disable_timing=True")
    return (end_event._t - start_event._t) * 1e3


class Device:
    def __init__(self, device=None):
        self.id = 0 if device is None else int(device)
        if self.id != 0:
            raise CUDARuntimeError(f"cudaErrorInvalidDevice: the fake has one GPU, not {self.id}")

    attributes = property(lambda self: dict(ATTRIBUTES))
    compute_capability = property(lambda self: "%d%d" % (PROPERTIES["major"], PROPERTIES["minor"]))
    mem_info = property(lambda self: _mem_get_info())

    def synchronize(self) -> None:
        pass

    def use(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


def _mem_get_info():
    total = PROPERTIES["totalGlobalMem"]
    return (total - 2**30, total)


def _get_device_properties(device_id: int) -> dict:
    Device(device_id)
    return dict(PROPERTIES)


_DEV_ATTRS = {36: MEMORY_CLOCK_KHZ, 37: MEMORY_BUS_WIDTH_BITS, 16: PROPERTIES["multiProcessorCount"],
              38: PROPERTIES["l2CacheSize"]}


def _device_get_attribute(attr: int, device_id: int) -> int:
    Device(device_id)
    if attr not in _DEV_ATTRS:
        raise CUDARuntimeError(f"fake cupy: device attribute {attr} is not faked")
    return _DEV_ATTRS[attr]


class _Function:
    """One kernel of a RawModule: launches run the CUDA C on the course's emulator."""

    def __init__(self, module: "RawModule", name: str):
        self._module, self.name = module, name
        lib = module._library()
        self._lib = lib
        self._params = lib.kernels[name].params
        self.max_threads_per_block = ATTRIBUTES["MaxThreadsPerBlock"]
        self.shared_size_bytes = lib.static_shared_bytes  # of the whole file: an upper bound
        self.num_regs = NUM_REGS
        self.max_dynamic_shared_size_bytes = (ATTRIBUTES["MaxSharedMemoryPerBlock"]
                                              - self.shared_size_bytes)

    def __call__(self, grid, block, args, *, shared_mem=0, stream=None,
                 enable_cooperative_groups=False):
        dims = []
        for what, v in (("grid", grid), ("block", block)):
            if not (isinstance(v, tuple) and 1 <= len(v) <= 3
                    and all(isinstance(d, (int, np.integer)) for d in v)):
                raise ValueError(f"fake cupy: {what} must be a tuple of 1 to 3 ints, not {v!r}")
            dims.append(tuple(int(d) for d in v) + (1,) * (3 - len(v)))
        if not isinstance(args, (tuple, list)):
            raise TypeError(f"fake cupy: args must be a tuple, not {type(args)}")
        if len(args) != len(self._params):
            raise ValueError(f"fake cupy: {self.name} takes {len(self._params)} arguments, "
                             f"{len(args)} were passed")
        if stream is not None and not isinstance(stream, Stream):
            raise TypeError(f"fake cupy: stream must be a cupy.cuda.Stream, not {type(stream)}")
        if shared_mem > self.max_dynamic_shared_size_bytes:
            raise CUDARuntimeError(f"cudaErrorInvalidValue: {shared_mem} bytes of dynamic shared "
                                   "memory without raising max_dynamic_shared_size_bytes")
        host_args = []
        for p, a in zip(self._params, args):
            if isinstance(a, np.ndarray):
                raise TypeError(f"Unsupported type {type(a)} (kernel argument {p.name}: a NumPy "
                                "array, which lives in host memory)")
            if p.pointer and not isinstance(a, ndarray):
                raise TypeError(f"fake cupy: kernel argument {p.name} is a pointer; pass a "
                                f"device array, not {type(a)}")
            host_args.append(a._a if isinstance(a, ndarray) else a)
        self._lib.launch(self.name, dims[0], dims[1], host_args, int(shared_mem))


class RawModule:
    """cupy.RawModule: the source is built by the course's emulator instead of NVRTC."""

    def __init__(self, *, code=None, path=None, options=(), backend="nvrtc",
                 translate_cucomplex=False, enable_cooperative_groups=False, name_expressions=None,
                 jitify=False):
        if code is None:
            raise NotImplementedError("fake cupy: RawModule(path=...) is not faked")
        if not isinstance(code, str) or not isinstance(options, tuple):
            raise TypeError("RawModule wants code as a str and options as a tuple (Cython-typed)")
        self.code, self.options = code, tuple(options)
        m = re.search(r'^#line 1 "([^"]+)"', code, re.M)
        self._filename = m.group(1) if m else "rawmodule.cu"
        self._lib = None

    def _library(self):
        if self._lib is None:
            from gpucourse.emulator import build_library
            from gpucourse.errors import CourseError

            try:
                self._lib = build_library(self.code, filename=self._filename)
            except CourseError as exc:
                # NVRTC's log format, "file(line): error: message", from the emulator's
                # "file line N: message" when it names a line.
                text = str(exc).splitlines()[0]
                m = re.match(r"(?P<file>[^:]+?) line (?P<line>\d+): (?P<msg>.*)", text)
                where, msg = ((m.group("file"), m.group("line")), m.group("msg")) if m else \
                    ((self._filename, "1"), text)
                raise CompileException(f"{where[0]}({where[1]}): error: {msg}") from None
        return self._lib

    def get_function(self, name: str) -> _Function:
        if name not in self._library().kernels:
            raise CUDARuntimeError(f"CUDA_ERROR_NOT_FOUND: named symbol not found: {name}")
        return _Function(self, name)

    def get_global(self, name: str) -> MemoryPointer:
        """A pointer to a ``__constant__`` or ``__device__`` variable: its memory in the
        emulator's build, as raw bytes (CuPy's pointer carries no type)."""
        from gpucourse.emulator.globals import info

        found = info(self._library(), name)
        if found is None:
            raise CUDARuntimeError(f"CUDA_ERROR_NOT_FOUND: named symbol not found: {name}")
        raw = (ctypes.c_char * max(found.nbytes, 1)).from_address(found.address)
        return MemoryPointer(ndarray(np.frombuffer(raw, np.uint8, count=found.nbytes)))


_C_TYPES = {"float32": "float", "float64": "double", "int32": "int", "int64": "long long",
            "uint32": "unsigned int", "uint8": "unsigned char", "int8": "signed char",
            "bool": "bool"}


class ElementwiseKernel:
    """cupy.ElementwiseKernel for typed parameters ("float32 x, float32 y"): the body is put in a
    CUDA C kernel of one thread per element, built and run by the emulator like a RawModule.
    Arrays must share one shape and have the declared dtypes (the fake neither broadcasts nor
    casts); a NumPy array is refused as by CuPy."""

    def __init__(self, in_params: str, out_params: str, operation: str, name: str = "kernel",
                 reduce_dims=True, preamble="", no_return=False, return_tuple=False, **kwargs):
        self.name = name
        self.in_params = self._params(in_params)
        self.out_params = self._params(out_params)
        self.operation, self.preamble = operation, preamble
        self.no_return, self.return_tuple = no_return, return_tuple
        self._fn = None

    @staticmethod
    def _params(text: str) -> list[tuple[np.dtype, str]]:
        out = []
        for item in filter(None, (t.strip() for t in text.split(","))):
            parts = item.split()
            if len(parts) != 2 or parts[0] not in _C_TYPES:
                raise NotImplementedError(f"fake cupy: ElementwiseKernel parameter {item!r} is "
                                          "not faked (only '<type> <name>', a type of "
                                          f"{sorted(_C_TYPES)})")
            out.append((np.dtype(parts[0]), parts[1]))
        return out

    def _kernel(self) -> "_Function":
        if self._fn is None:
            c = {n: _C_TYPES[d.name] for d, n in self.in_params + self.out_params}
            args = ", ".join([f"const {c[n]}* _in_{n}" for _, n in self.in_params]
                             + [f"{c[n]}* _out_{n}" for _, n in self.out_params] + ["long long _n"])
            loads = " ".join(f"const {c[n]} {n} = _in_{n}[i];" for _, n in self.in_params)
            refs = " ".join(f"{c[n]}& {n} = _out_{n}[i];" for _, n in self.out_params)
            code = (f'#line 1 "{self.name}.cu"\n{self.preamble}\n'
                    f'extern "C" __global__ void {self.name}({args}) {{\n'
                    "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
                    f"  if (i < _n) {{ {loads} {refs}\n{self.operation}\n  }}\n}}\n")
            self._fn = RawModule(code=code).get_function(self.name)
        return self._fn

    def __call__(self, *args, size=None, block_size=None, stream=None):
        if size is not None:
            raise NotImplementedError("fake cupy: ElementwiseKernel(..., size=) is not faked")
        n_in, n_out = len(self.in_params), len(self.out_params)
        if len(args) not in (n_in, n_in + n_out):
            raise TypeError(f"Wrong number of arguments for {self.name!r}: {n_in} or "
                            f"{n_in + n_out} expected, {len(args)} given")
        for i, a in enumerate(args):
            if not isinstance(a, ndarray):
                raise TypeError(f"Unsupported type {type(a)} (argument {i} of {self.name!r}; the "
                                "fake takes device arrays only)")
        shape = args[0].shape
        for a, (dtype, pname) in zip(args, self.in_params + self.out_params):
            if a.shape != shape:
                raise ValueError(f"fake cupy: {self.name!r} got shapes {a.shape} and {shape} "
                                 "(broadcasting is not faked)")
            if a.dtype != dtype:
                raise TypeError(f"fake cupy: {self.name!r} parameter {pname} is {dtype}, the "
                                f"array is {a.dtype} (casting is not faked)")
        ins = [a if a.flags.c_contiguous else ascontiguousarray(a) for a in args[:n_in]]
        outs = list(args[n_in:]) or [empty(shape, dtype=d) for d, _ in self.out_params]
        for o in outs:
            if not o.flags.c_contiguous:
                raise ValueError(f"fake cupy: a non-contiguous output of {self.name!r} is "
                                 "not faked")
        n = int(np.prod(shape, dtype=np.int64))
        if n:
            block = int(block_size or 128)
            self._kernel()(((n + block - 1) // block,), (block,), (*ins, *outs, np.int64(n)),
                           stream=stream)
        if self.no_return:
            return None
        return tuple(outs) if (self.return_tuple or n_out > 1) else outs[0]


# ----------------------------------------------------------------------------- cupyx.scipy.sparse

class csr_matrix:
    """cupyx.scipy.sparse.csr_matrix built from a dense 2-D device array (the one form faked)."""

    format = "csr"

    def __init__(self, arg1, shape=None, dtype=None, copy=False):
        if not isinstance(arg1, ndarray) or arg1.ndim != 2:
            raise TypeError(f"fake cupyx: csr_matrix from a 2-D device array only, not "
                            f"{type(arg1)}")
        dense = arg1._a.astype(dtype or arg1.dtype)
        rows, cols = np.nonzero(dense)
        self.shape, self.dtype = dense.shape, dense.dtype
        self.data = ndarray(dense[rows, cols])
        self.indices = ndarray(cols.astype(np.int32))
        self.indptr = ndarray(np.searchsorted(rows, np.arange(dense.shape[0] + 1)).astype(np.int32))

    @property
    def nnz(self) -> int:
        return int(self.data.size)

    def toarray(self) -> ndarray:
        out = np.zeros(self.shape, dtype=self.dtype)
        rows = np.repeat(np.arange(self.shape[0]), np.diff(self.indptr._a))
        out[rows, self.indices._a] = self.data._a
        return ndarray(out)

    def __matmul__(self, other):
        if not isinstance(other, ndarray):
            raise TypeError(f"fake cupyx: csr_matrix @ {type(other)}: a device array is needed")
        if other.ndim not in (1, 2) or other.shape[0] != self.shape[1]:
            raise ValueError(f"dimension mismatch: {self.shape} @ {other.shape}")
        return ndarray(self.toarray()._a @ other._a)


def _empty_pinned(shape, dtype=float, order="C") -> np.ndarray:
    """cupyx.empty_pinned: a NumPy array (in pinned memory on a GPU; uninitialised)."""
    return _poisoned(shape, dtype)


# ----------------------------------------------------------------------------- the modules

def build_modules() -> dict[str, types.ModuleType]:
    """Fresh fake modules: ``{"cupy": ..., "cupy.cuda": ..., ...}`` for sys.modules."""
    cp = types.ModuleType("cupy", "fake CuPy for tests (tests/fakecuda)")
    cp.__version__ = "0.0.0+fakecuda"
    cp.ndarray = ndarray
    for name in ("float32", "float64", "int32", "int64", "uint8", "uint32"):
        setattr(cp, name, getattr(np, name))
    cp.nan = np.nan
    for fn in (asarray, ascontiguousarray, asnumpy, empty, empty_like, zeros, full, arange,
               copyto, array_equal, sum, matmul, is_available, get_default_memory_pool):
        setattr(cp, fn.__name__, fn)
    for name in ("abs", "add", "maximum", "multiply"):
        setattr(cp, name, _elementwise(getattr(np, name)))
    cp.RawModule = RawModule
    cp.ElementwiseKernel = ElementwiseKernel
    linalg = types.ModuleType("cupy.linalg")
    linalg.norm = _norm
    cp.linalg = linalg

    rnd = types.ModuleType("cupy.random")
    rnd.random = _random
    rnd.default_rng = _Generator
    cp.random = rnd

    cuda = types.ModuleType("cupy.cuda")
    cuda.Device, cuda.Event, cuda.Stream = Device, Event, Stream
    cuda.get_elapsed_time = get_elapsed_time
    cuda.get_current_stream = get_current_stream
    cuda.set_allocator = set_allocator
    runtime = types.ModuleType("cupy.cuda.runtime")
    runtime.getDeviceProperties = _get_device_properties
    runtime.deviceGetAttribute = _device_get_attribute
    runtime.cudaDevAttrMemoryClockRate = 36
    runtime.cudaDevAttrGlobalMemoryBusWidth = 37
    runtime.driverGetVersion = lambda: 13000
    runtime.runtimeGetVersion = lambda: 13000
    runtime.memGetInfo = _mem_get_info
    runtime.CUDARuntimeError = CUDARuntimeError  # where CuPy has it
    cuda.runtime = runtime
    compiler = types.ModuleType("cupy.cuda.compiler")
    compiler.CompileException = CompileException
    cuda.compiler = compiler
    cp.cuda = cuda

    cupyx = types.ModuleType("cupyx", "fake cupyx for tests (tests/fakecuda)")
    cupyx.empty_pinned = _empty_pinned
    scipy_ = types.ModuleType("cupyx.scipy")
    sparse = types.ModuleType("cupyx.scipy.sparse")
    sparse.csr_matrix = csr_matrix
    scipy_.sparse = sparse
    cupyx.scipy = scipy_
    return {"cupy": cp, "cupy.random": rnd, "cupy.linalg": linalg, "cupy.cuda": cuda,
            "cupy.cuda.runtime": runtime, "cupy.cuda.compiler": compiler, "cupyx": cupyx,
            "cupyx.scipy": scipy_, "cupyx.scipy.sparse": sparse}


def _clear_device_caches() -> None:
    from gpucourse import device

    device.cupy_works.cache_clear()
    device.torch_cuda_works.cache_clear()
    device._describe.cache_clear()


def install(monkeypatch) -> types.ModuleType:
    """Make this process look like one with a CUDA GPU that CuPy drives; returns the fake cupy.

    Undone by ``monkeypatch`` at teardown, except the caches: call ``uninstall_caches()``
    in the fixture's teardown as well.
    """
    from gpucourse import kernels

    modules = build_modules()
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setenv("GPUCOURSE_DEVICE", "cuda")
    # Kernel modules are cached per backend: keep the fake's "cuda" builds out of the real cache.
    monkeypatch.setattr(kernels, "_modules", {})
    _streams.clear()
    _reset_pool()
    _clear_device_caches()
    return modules["cupy"]


def uninstall_caches() -> None:
    """Forget what the device module cached while the fake was in place."""
    _streams.clear()
    _reset_pool()
    _clear_device_caches()
