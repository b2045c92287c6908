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

The source is read as the compiler sees it (``preprocess``: inactive ``#if`` branches left
out, macros and typedefs followed) and CUDA's headers come by their names: ``<cuda_fp16.h>``
and ``<cuda_bf16.h>`` (rounding once per operation, as the GPU does), ``<cooperative_groups.h>``,
``<mma.h>`` (WMMA m16n16k16, one fragment per warp: the runtime's gather) and what nvcc
includes implicitly. The ``__shared__`` variables of templates and inline functions get memory
of the block from the runtime (``rewrite``), ``__constant__`` variables are writable storage
that ``globals`` shows to Python (``get_global``), a warp that returned as a whole no longer
holds a barrier (sm_70 and later), and structs pass by value as structured scalars.
docs/emulator.md lists what runs and what does not.

Most code goes through ``gpucourse.kernels``, whose kernels use this module on the CPU::

    mod = gc.kernels.load("transpose")                  # on the cpu backend: emulated
    mod.transpose_v2_shared(grid, block, (a, out, np.int32(rows), np.int32(cols)))

Every launch runs on copies of its arrays, each between 64 GB of inaccessible address space
(:class:`.checks.GuardedArrays`): an index out of bounds, a read or a write anywhere from
one byte to 64 GB before or past an array, never reaches the Python process's own memory.
It faults, or changes a known pattern around the copy, and the launch raises
:class:`OutOfBounds` (a :class:`KernelError`) naming the source line, thread, block, array
and element: the race detector's build (:mod:`.racecheck`) runs the launch again from the
same inputs and observes every access. The caller's arrays keep their contents. Only a read
that stays in its array's first or last page cannot fault (less than a page before the
start, or under 16 bytes past the end of an array whose size is not a multiple of 16
bytes): it reads a pattern (NaN as a float), and ``race_check`` names it. A stack
overflow, an integer division by zero or a null pointer is a KernelError too, and Ctrl-C
(Jupyter's stop button) stops a launch.

What lab checkers call (each takes a ``gpucourse.kernels`` kernel of either backend and
the launch of ``kernel(grid, block, args, shared_mem)``; arrays in ``args`` receive the
result; failures raise :class:`KernelError`, a ``CourseError``):

``race_check(kernel, grid, block, args, shared_mem=0, *, seed=0, rtol=None, timeout=10.0)``
    runs the launch in a child process with threads (and blocks) in forward, reverse and
    shuffled order, then once more under a hazard detector (:mod:`.racecheck`) that watches
    every shared and global access, and raises "kernel X has a race" when the results
    differ (floats by more than reordering float additions can make, a bound from the
    launch's threads and array sizes, ``checks.order_tolerance``; or by more than ``rtol``
    times an array's largest value) or two threads touch the same bytes with nothing
    ordering them (at least one a plain write, or one atomic and one plain). Orders alone
    miss a lost update (``out[0] += x[i]`` runs whole here); the detector names both source
    lines. Where it cannot be built (not Linux, no binutils) a warning says so once and only
    the orders are compared (and an index out of bounds is named without its line).
``run_isolated(kernel, grid, block, args, shared_mem=0, *, timeout=10.0, race_check=False)`` (:mod:`.isolate`)
    runs it in a child process: nothing the kernel does (an ``abort()``, a write through a
    wild pointer) reaches the caller, and a launch still running after ``timeout`` s stops.

The same are keywords of a kernel call: ``k(grid, block, args, race_check=True,
isolate=True, timeout=10.0)``, each checked (a timeout of 0, -1, ``"5"`` or NaN is a
LaunchError in one sentence).

Defaults. A launch runs in the caller's process (``isolate=False``), where the guarded
copies already turn an index out of bounds into one sentence, and a watchdog stops a
launch of a learner's code (``kernels.from_source``) after 10 s (``timeout``) with "did
not finish within 10 s": a crash or an endless loop is one sentence without a child
process, and ``__device__`` variables keep their values from one launch to the next, as on
a GPU (a child's changes to them are lost). What only a child process stops: an ``abort()``,
or a write through a wild pointer or far past a ``__shared__`` array, which can damage the
emulator's own state. The course's own kernels (``kernels.load``) run without a time
limit, so a long experiment is never cut short. Lab checkers run a learner's kernel
isolated (``check.run_learner_kernel``: isolate=True, 20 s), and ``race_check`` always is. Measured on a 2-core CPU machine shared with other jobs: the
guarded copies add about 0.3 ms of CPU to a launch plus 0.35 ms per MB of arrays (a launch
of 1000 threads takes 0.14 ms without them, a 256x256 tiled matmul 120 ms either way); a
child process adds about 8 ms plus 2.5 ms per MB of arrays.

Lower level, for tools such as a profiler: :func:`build_library` compiles a source with
extra compiler flags and extra C++ sources linked in, and returns a :class:`Library`
whose ``launch(name, grid3, block3, args, shared_mem, order=..., seed=...)`` runs a
launch without argument checks, on the arrays themselves (``checks.launch`` adds the
guarded copies); :mod:`.launch` checks a launch's shape and arguments against the limits, for
both backends; :mod:`.instrument` holds what instrumented builds (the
profiler's, the race detector's) share.

Environment: ``GPUCOURSE_EMU_SWITCH=ucontext`` forces the portable context switch (the
fast one is x86-64 only); ``GPUCOURSE_EMU_STACK_KB`` sets each thread's stack (32 KB);
``CXX`` picks the compiler, and may start with launcher words
(``CXX="ccache g++"``), split as a shell would.
"""
from __future__ import annotations

import numpy as np

from .bfloat16 import bfloat16, bfloat16_to_float
from .build import (DEFAULT_STACK_KB, SHARED_MEM_LIMIT, KernelError, Library, build_library,
                    cache_dir, compiler, runtime_object, switch_kind_requested)
from .checks import OutOfBounds, run_launch
from .isolate import race_check, run_isolated
from .launch import EMULATOR_LIMITS, Limits, ceil_div, check_args, check_launch, format_dims
from .source import KernelSignature, Param, check_supported, find_kernels

__all__ = ["KernelError", "OutOfBounds", "Library", "build_library", "race_check", "run_isolated",
           "empty", "empty_like", "switch_kind", "cache_dir", "SHARED_MEM_LIMIT", "DEFAULT_STACK_KB",
           "find_kernels", "check_supported", "KernelSignature", "Param", "compiler",
           "run_launch", "runtime_object", "Limits", "EMULATOR_LIMITS", "ceil_div", "check_args",
           "check_launch", "format_dims", "bfloat16", "bfloat16_to_float"]


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
