"""Memory the emulator maps itself: the C library's mmap family, and the fiber stacks.

Every kernel file the emulator loads shares one pool of fiber stacks (:func:`lend_stacks`):
a pool of its own in each file kept two memory mappings per thread of a block for the life
of the process (a stack and the inaccessible page below it), and Linux lets a process map at
most ``vm.max_map_count`` regions (65,530 by default). Past that, loading a library or
starting a thread fails, so a notebook that built a few hundred kernels stopped working.
"""
from __future__ import annotations

import ctypes
import mmap
import sys


class Memory:
    """mmap, mprotect, madvise and munmap of the C library."""

    def __init__(self):
        libc = ctypes.CDLL(None, use_errno=True)
        self.mmap = libc.mmap
        self.mmap.restype = ctypes.c_void_p
        self.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        self.mprotect = libc.mprotect
        self.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self.munmap = libc.munmap
        self.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.madvise = libc.madvise
        self.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self.page = mmap.PAGESIZE
        anonymous = getattr(mmap, "MAP_ANONYMOUS", getattr(mmap, "MAP_ANON", 0))
        self.flags = mmap.MAP_PRIVATE | anonymous | getattr(mmap, "MAP_NORESERVE", 0)
        self.failed = ctypes.c_void_p(-1).value

    def reserve(self, nbytes: int) -> int | None:
        """The address of ``nbytes`` of address space no access may touch, or None."""
        at = self.mmap(None, nbytes, 0, self.flags, -1, 0)
        return None if at in (None, self.failed) else at


_memory: Memory | None = None
_problem = ""


def libc_memory() -> Memory | None:
    """The C library's memory calls, or None where there are none (see :func:`problem`)."""
    global _memory, _problem
    if _memory is None and not _problem:
        try:
            if sys.platform == "win32":
                raise OSError("no mmap in the C library")
            _memory = Memory()
        except (OSError, AttributeError) as exc:
            _problem = str(exc)
    return _memory


def problem() -> str:
    """Why :func:`libc_memory` is None ("" when it is not)."""
    return _problem


#: The shared pool: (address, bytes per stack, stacks), or None before the first launch.
_pool: tuple[int, int, int] | None = None


def _stack_pool(threads: int, stack_bytes: int) -> tuple[int, int, int] | None:
    """A pool of at least ``threads`` stacks of ``stack_bytes`` (whole pages), each above an
    inaccessible page; the old pool is given back when a launch needs a larger one."""
    global _pool
    memory = libc_memory()
    if memory is None:
        return None
    page = memory.page
    stack_bytes = -(-stack_bytes // page) * page
    if _pool is not None and threads <= _pool[2] and stack_bytes == _pool[1]:
        return _pool
    count = max(64, threads, _pool[2] if _pool and stack_bytes == _pool[1] else 0)
    count = 1 << (count - 1).bit_length()  # powers of two: few regrowths
    stride = stack_bytes + page
    base = memory.mmap(None, stride * count, mmap.PROT_READ | mmap.PROT_WRITE, memory.flags,
                       -1, 0)
    if base in (None, memory.failed):
        return None  # the kernel file then tries a pool of its own, and says if that fails
    for i in range(count):
        memory.mprotect(base + i * stride, page, 0)  # PROT_NONE
    if _pool is not None:
        memory.munmap(_pool[0], (_pool[1] + page) * _pool[2])
    _pool = (base, stack_bytes, count)
    return _pool


def lend_stacks(dll, threads: int, stack_bytes: int) -> None:
    """Point kernel library ``dll`` at the shared stack pool, sized for a block of ``threads``
    threads. Call it under the launch lock: the pool is one for all launches."""
    pool = _stack_pool(threads, stack_bytes)
    if pool is None:
        dll.gcemu_lend_stacks(None, 0, 0)
    else:
        dll.gcemu_lend_stacks(ctypes.c_void_p(pool[0]), ctypes.c_size_t(pool[1]), pool[2])
