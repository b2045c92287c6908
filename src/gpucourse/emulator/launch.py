"""Launch shapes and their checks, for both backends: the limits of a device, a grid and block
as 3-tuples, each argument against the kernel's signature; ``ceil_div`` gives the blocks a grid
needs. Every error is one sentence naming the limit or the argument."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import LaunchError
from .build import SHARED_MEM_LIMIT
from .source import BFLOAT16_TYPES, Param


def ceil_div(a: int, b: int) -> int:
    """Whole ``b``-sized pieces needed to cover ``a`` (blocks for a grid, tiles for a matrix)."""
    return -(-a // b)


@dataclass(frozen=True)
class Limits:
    """Launch limits of a device (per block, per grid) for one kernel."""

    max_threads: int = 1024
    max_block: tuple[int, int, int] = (1024, 1024, 64)
    max_grid: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    max_dynamic_shared: int = SHARED_MEM_LIMIT
    where: str = "on the emulator"


#: The emulator's limits: those of every CUDA GPU since compute capability 3.0, with the
#: default 48 KB of dynamic shared memory.
EMULATOR_LIMITS = Limits()


def format_dims(dims: tuple) -> str:
    """A launch dimension as written in code: (128, 1, 1) -> "128", (4, 2, 1) -> "(4, 2)"."""
    while len(dims) > 1 and dims[-1] == 1:
        dims = dims[:-1]
    return str(dims[0]) if len(dims) == 1 else str(tuple(dims))


def _dims(value, what: str) -> tuple[int, int, int]:
    def whole(v):
        return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))

    if whole(value):
        dims = (int(value),)
    elif isinstance(value, (tuple, list)) and 1 <= len(value) <= 3 and all(whole(v) for v in value):
        dims = tuple(int(v) for v in value)
    else:
        raise LaunchError(f"{what} must be an int or a tuple of 1 to 3 ints, not {value!r} "
                          f"(e.g. {what}=256 or {what}=(16, 16)).")
    return dims + (1,) * (3 - len(dims))


def check_launch(kernel: str, grid, block, shared_mem, limits: Limits = EMULATOR_LIMITS):
    """(grid, block, shared_mem) as 3-tuples and an int, or LaunchError naming the limit."""
    g, b = _dims(grid, "grid"), _dims(block, "block")
    for what, dims in (("grid", g), ("block", b)):
        for axis, v in zip("xyz", dims):
            if v < 1:
                hint = (": round the grid up, (n + block - 1) // block blocks for n elements"
                        if what == "grid" and v == 0 else "")
                raise LaunchError(f"{kernel}: {what} {format_dims(dims)} has {axis} = {v}, but every grid "
                                  f"and block dimension must be at least 1{hint}.")
    threads = b[0] * b[1] * b[2]
    if threads > limits.max_threads:
        raise LaunchError(f"{kernel}: block {format_dims(b)} has {threads} threads, but a block may hold "
                          f"at most {limits.max_threads} {limits.where}; use fewer threads per "
                          f"block and more blocks.")
    for what, dims, lim in (("block", b, limits.max_block), ("grid", g, limits.max_grid)):
        for axis, v, m in zip("xyz", dims, lim):
            if v > m:
                raise LaunchError(f"{kernel}: {what} {axis} is {v}, but may be at most {m} (the "
                                  f"{what} limits are x <= {lim[0]}, y <= {lim[1]}, z <= {lim[2]} "
                                  f"{limits.where}).")
    if not isinstance(shared_mem, (int, np.integer)) or isinstance(shared_mem, bool) or shared_mem < 0:
        raise LaunchError(f"{kernel}: shared_mem must be a whole number of bytes, at least 0, "
                          f"not {shared_mem!r}.")
    if shared_mem > limits.max_dynamic_shared:
        lim = limits.max_dynamic_shared
        raise LaunchError(f"{kernel}: shared_mem={int(shared_mem)} bytes of dynamic shared memory is "
                          f"over the {lim} bytes ({lim / 1024:g} KB) a block may use {limits.where}; "
                          f"use a smaller tile or fewer threads per block.")
    return g, b, int(shared_mem)


def _is_cupy(a) -> bool:
    return type(a).__module__.startswith("cupy") and hasattr(a, "dtype")


def _article(word: str) -> str:
    return "an" if word[:1] in "aeio" else "a"  # a uint16: the u sounds as "you"


def _what(a) -> str:
    if a is None:
        return "None"
    if isinstance(a, bool):
        return "a Python bool"
    if isinstance(a, int):
        return "a Python int"
    if isinstance(a, float):
        return "a Python float"
    if isinstance(a, np.generic):
        return f"np.{a.dtype.name}"
    if isinstance(a, np.ndarray) or _is_cupy(a):
        return f"{_article(a.dtype.name)} {a.dtype.name} array"
    return f"a {type(a).__name__}"


def check_args(kernel: str, params: tuple[Param, ...], args, backend: str,
               sizes: list[int] | None = None) -> None:
    """LaunchError, in one sentence, for the first argument that does not fit the signature
    (``sizes``: the bytes of each parameter where known, for a struct passed by value)."""
    if not isinstance(args, (tuple, list)):
        raise LaunchError(f"{kernel}: args must be a tuple of the kernel's arguments, e.g. "
                          f"(a, out, np.int32(n)), not {_what(args)}.")
    if len(args) != len(params):
        names = ", ".join(p.name for p in params)
        raise LaunchError(f"{kernel} takes {len(params)} arguments ({names}), but "
                          f"{len(args)} {'was' if len(args) == 1 else 'were'} passed.")
    for p, a in zip(params, args):
        head = f"argument {p.index + 1} `{p.name}` of {kernel} is `{p.decl}`"
        if p.problem:
            raise LaunchError(f"{head}: {p.problem}.")
        if p.struct:
            _check_struct(head, p, a, sizes[p.index] if sizes else p.size)
            continue
        if p.pointer:
            want = "an array" if p.dtype is None else f"{_article(p.dtype.name)} {p.dtype.name} array"
            convert = f".astype(np.{p.dtype.name})" if p.dtype is not None else ""
            if p.base in BFLOAT16_TYPES:  # NumPy has no bfloat16: its bits travel in uint16
                want += " of bfloat16 bits (gc.emulator.bfloat16(values) makes them)"
                convert = "gc.emulator.bfloat16(...)"
            if not (isinstance(a, np.ndarray) or _is_cupy(a)):
                raise LaunchError(f"{head}: pass {want}, not {_what(a)}.")
            if backend == "cuda" and isinstance(a, np.ndarray):
                raise LaunchError(f"{head}: pass {want} on the GPU, not a NumPy array in host "
                                  f"memory (move it with gc.device.asarray(...)).")
            if backend == "cpu" and _is_cupy(a):
                raise LaunchError(f"{head}: this kernel runs on the CPU emulator, so pass a NumPy "
                                  f"array (gc.device.to_host(...)), not a CuPy array.")
            if p.dtype is not None and a.dtype != p.dtype:
                raise LaunchError(f"{head}: pass {want}, not {_article(a.dtype.name)} {a.dtype.name} "
                                  f"array (convert with {convert}).")
            if not a.flags.c_contiguous:
                raise LaunchError(f"{head}: the array is not C-contiguous (a transposed view, or "
                                  f"a slice with a step?); pass a contiguous copy "
                                  f"(np.ascontiguousarray).")
            continue
        dt = p.dtype
        ok = False
        if isinstance(a, (np.generic,)) and not isinstance(a, np.ndarray):
            ok = a.dtype == dt
        elif isinstance(a, bool):
            ok = dt.kind == "b"
        elif isinstance(a, int):
            # CuPy passes a Python int as a 64-bit integer, which fits only 64-bit parameters.
            ok = dt in (np.dtype(np.int64), np.dtype(np.uint64)) and (dt.kind == "i" or a >= 0)
        elif isinstance(a, float):
            ok = dt == np.dtype(np.float64)  # CuPy passes a Python float as a double
        if not ok:
            if isinstance(a, int) and not isinstance(a, bool):
                why = (" (CuPy would pass it as a 64-bit integer)"
                       if dt.itemsize != 8 else "")
            elif isinstance(a, float):
                why = " (it would be passed as a 64-bit double)"
            else:
                why = ""
            raise LaunchError(f"{head}: pass np.{dt.name}({p.name}), not {_what(a)}{why}.")


def _check_struct(head: str, p: Param, a, size: int | None) -> None:
    """A struct (or vector type) passed by value is a NumPy structured scalar, as CuPy takes
    it, of the struct's size."""
    what = f"{size} bytes" if size else "its bytes"
    if not isinstance(a, np.void):
        raise LaunchError(f"{head}: pass a NumPy structured scalar of {what}, e.g. np.array((...), "
                          f"dtype=np.dtype([(name, type), ...], align=True))[()], with the "
                          f"struct's fields in order, not {_what(a)}.")
    if size and a.dtype.itemsize != size:
        raise LaunchError(f"{head}: the structured scalar has {a.dtype.itemsize} bytes but "
                          f"`{p.base}` has {size}; list the struct's fields in order with their "
                          f"C types, with align=True so that NumPy pads them as C does.")
