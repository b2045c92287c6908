"""``__constant__`` and ``__device__`` variables seen from Python: CuPy's
``RawModule.get_global(name)`` for the emulator.

On a GPU, CuPy's ``get_global`` gives a device pointer to a variable, which code writes with
``cupy.ndarray(shape, dtype, memptr=ptr)[...] = values``. On the emulator the variable lives
in the loaded library: :func:`array` returns a NumPy array over its memory, typed and shaped
as declared (``__constant__ float F[5][5]`` gives a 5 x 5 float32 array), so that
``mod.get_global("F")[...] = f`` sets it for the launches that follow. Each build of a source
has its own variables: a module's ``get_global`` reaches those of its own build, and a race
check copies them into its detector's build before it runs.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .declarations import file_globals
from .preprocess import evaluate
from .source import _SCALARS, _VECTORS, view

_MAX_RANK = 8


@dataclass(frozen=True)
class GlobalInfo:
    """Where a global variable lies in an emulator build, and how NumPy sees it."""

    address: int
    nbytes: int
    dtype: np.dtype
    shape: tuple[int, ...]
    elem: int  # bytes of one element of the C declaration (a float4: 16)


def info(library, name: str) -> GlobalInfo | None:
    """The :class:`GlobalInfo` of variable ``name`` in ``library``, or None where the build has
    no such file-scope variable."""
    try:
        fn = getattr(library._dll, f"__gcemu_global_{name}")
    except AttributeError:
        return None
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.POINTER(ctypes.c_char_p)]
    words = (ctypes.c_ulonglong * (4 + _MAX_RANK))()
    kind = ctypes.c_char_p()
    address = fn(words, ctypes.byref(kind))
    nbytes, elem, rank, lanes = (int(w) for w in words[:4])
    dims = tuple(int(d) for d in words[4:4 + min(rank, _MAX_RANK)])
    name_of_kind = (kind.value or b"").decode()
    if name_of_kind:
        dtype = np.dtype("uint16" if name_of_kind == "bfloat16" else name_of_kind)
        shape = dims + ((lanes,) if lanes > 1 else ())
    else:  # a struct: its bytes, which a structured dtype can view
        dtype = np.dtype((np.void, elem))
        shape = dims
    return GlobalInfo(int(address), nbytes, dtype, shape, elem)


def array(library, name: str, filename: str = "kernel.cu", known=()) -> np.ndarray:
    """A NumPy array over variable ``name`` of an emulator build: writing it sets the
    variable for the launches that follow. ``known``: the names to list in the error."""
    found = info(library, name)
    if found is None:
        raise InputError(_missing(name, filename, known))
    raw = (ctypes.c_char * max(found.nbytes, 1)).from_address(found.address)
    out = np.frombuffer(raw, dtype=np.uint8, count=found.nbytes).view(found.dtype)
    return out.reshape(found.shape)


def _missing(name, filename, known) -> str:
    has = f"; it has: {', '.join(known)}" if known else " (it declares none)"
    return (f"{filename} has no __constant__ or __device__ variable named {name!r} outside "
            f"every namespace{has}.")


def copy_values(source_lib, target_lib, variable_names) -> None:
    """Copy the values of the global variables of one build into another build of the same
    source (the race detector's), so that it runs with what Python set."""
    for n in variable_names:
        a, b = info(source_lib, n), info(target_lib, n)
        if a is not None and b is not None and a.nbytes == b.nbytes:
            ctypes.memmove(b.address, a.address, a.nbytes)


def declared(source: str, name: str, defines: dict | None = None, arch: int | None = None
             ) -> tuple[np.dtype, tuple[int, ...]] | None:
    """(dtype, shape) of variable ``name`` as its declaration reads, where the type is one
    NumPy has and every bound is a number (or a macro of one); else None. For a GPU, where
    CuPy's ``get_global`` gives only a pointer."""
    seen = view(source, defines, arch)
    for g in file_globals(seen.text):
        if g.name != name or g.in_namespace:
            continue
        base = " ".join(g.type_words)
        while base in seen.aliases:
            base = " ".join(seen.aliases[base].words)
        if base in seen.macros and seen.macros[base].params is None:
            base = seen.macros[base].body.strip()
        dims = tuple(evaluate(d, seen.macros) for d in g.dims)
        if any(d is None or d <= 0 for d in dims):
            return None
        if base in _SCALARS:
            return np.dtype(_SCALARS[base]), dims
        if base in _VECTORS:
            elem, lanes = _VECTORS[base]
            return np.dtype(elem), dims + (lanes,)
        return None
    return None


def declared_names(source: str, defines: dict | None = None, arch: int | None = None) -> list[str]:
    """The file-scope ``__constant__`` and ``__device__`` variables of ``source`` (outside
    every namespace), in order."""
    out = []
    for g in file_globals(view(source, defines, arch).text):
        if not g.in_namespace and g.name not in out:
            out.append(g.name)
    return out
