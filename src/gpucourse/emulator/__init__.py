"""The CPU emulator: runs the course's CUDA C kernels on a machine without a GPU.

It checks correctness, not speed. The same ``.cu`` source is compiled with the system
C++ compiler and a prelude (``cuda_emu.h``) that defines the CUDA built-ins; the library
is cached by a hash of source and flags in ``$GPUCOURSE_CACHE`` (default: the user's cache
folder, ``~/.cache/gpucourse``), made with mode 0700; one that another user owns or could
write is refused (the default then gives way to a fresh private temporary folder, with a
warning), and a cached file loads only if it matches the sha256 recorded when it was built
(else it is rebuilt, with a warning). A launch runs block after block; the threads of a block
are fibers that switch at ``__syncthreads``, warp functions and exit, so a kernel missing
a barrier gives a wrong answer here as it would on a GPU. Shared memory and the arrays of
:func:`empty` are poisoned (all bytes 0xFF: NaN for floats, -1 for ints). A warp function
waits for the lanes of its mask that have not returned, as in CUDA; a shuffle that reads a
lane outside its call (returned, or not in the mask) gets a poison too (NaN, or 0x7ffbadbd
for integers), where CUDA leaves the value undefined. Only ``__syncwarp`` and
``__syncthreads`` order memory between threads, as in CUDA, not shuffles or votes. A block has
48 KB of shared memory, as by default in CUDA: a kernel whose static ``__shared__`` arrays
take more does not compile, and a launch's dynamic ``shared_mem`` gets what they leave.

Most code goes through ``gpucourse.kernels``, whose kernels use this module on the CPU::

    mod = gc.kernels.load("transpose")                  # on the cpu backend: emulated
    mod.transpose_v2_shared(grid, block, (a, out, np.int32(rows), np.int32(cols)))

What lab checkers call (each takes a ``gpucourse.kernels`` kernel of either backend and
the launch of ``kernel(grid, block, args, shared_mem)``; arrays in ``args`` receive the
result; failures raise :class:`KernelError`, a ``CourseError``):

``race_check(kernel, grid, block, args, shared_mem=0, *, seed=0, rtol=1e-4)``
    runs the launch with threads (and blocks) in forward, reverse and shuffled order, then
    once more under a hazard detector (:mod:`.racecheck`) that watches every shared and
    global access, and raises "kernel X has a race" when the results differ (floats
    compared within rtol) or two threads touch the same bytes with nothing ordering them
    (at least one a plain write, or one atomic and one plain). Orders alone miss a lost
    update (``out[0] += x[i]`` runs whole here); the detector names both source lines.
    Where it cannot be built (not Linux, no binutils) a warning says so once and only the
    orders are compared.
``run_isolated(kernel, grid, block, args, shared_mem=0, *, timeout=10.0, race_check=False)``
    runs it in a child process: a crash, a stack overflow or an endless loop becomes a
    KernelError instead of killing or hanging the notebook.

The same two are keywords of a kernel call: ``k(grid, block, args, race_check=True,
isolate=True, timeout=10.0)``.

Without isolation, an invalid memory access or a stack overflow that hits a guard page is
still caught and raised as a KernelError, and an interrupt (Ctrl-C, Jupyter's stop
button) stops a launch; a stray write that lands in valid memory cannot be caught.

Lower level, for tools such as a profiler: :func:`build_library` compiles a source with
extra compiler flags and extra C++ sources linked in, and returns a :class:`Library`
whose ``launch(name, grid3, block3, args, shared_mem, order=..., seed=...)`` runs a
launch without argument checks; :mod:`.instrument` holds what instrumented builds (the
profiler's, the race detector's) share.

Environment: ``GPUCOURSE_EMU_SWITCH=ucontext`` forces the portable context switch (the
fast one is x86-64 only); ``GPUCOURSE_EMU_STACK_KB`` sets each thread's stack (32 KB);
``CXX`` picks the compiler.
"""
from __future__ import annotations

import numpy as np

from .build import (DEFAULT_STACK_KB, SHARED_MEM_LIMIT, KernelError, Library, build_library,
                    cache_dir, compiler, runtime_object, switch_kind_requested)
from .checks import race_check, run_isolated, run_launch
from .source import KernelSignature, Param, check_supported, find_kernels

__all__ = ["KernelError", "Library", "build_library", "race_check", "run_isolated", "empty",
           "empty_like", "switch_kind", "cache_dir", "SHARED_MEM_LIMIT", "DEFAULT_STACK_KB",
           "find_kernels", "check_supported", "KernelSignature", "Param", "compiler",
           "run_launch", "runtime_object"]


def empty(shape, dtype=np.float32) -> np.ndarray:
    """A fresh array as the emulator hands out memory: every byte 0xFF (NaN, or -1)."""
    out = np.empty(shape, dtype=dtype)
    out.reshape(-1).view(np.uint8).fill(0xFF)
    return out


def empty_like(array) -> np.ndarray:
    """:func:`empty` with the shape and dtype of ``array``."""
    return empty(np.shape(array), getattr(array, "dtype", None) or np.asarray(array).dtype)


def switch_kind() -> str:
    """The context switch the emulator uses here: ``"x86-64 assembly"`` or ``"ucontext"``."""
    return build_library('extern "C" __global__ void noop() {}', filename="noop.cu").switch_kind
