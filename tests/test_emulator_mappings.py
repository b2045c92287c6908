"""The emulator's memory mappings stay bounded however long a process runs.

Linux lets a process map at most ``vm.max_map_count`` regions (65,530 by default); past it,
loading a library or starting a thread fails. The whole unit suite in one process, or a
notebook that sweeps a kernel through thousands of launches, once crossed it: every kernel
file kept its own fiber stacks (two mappings per thread of a block), and every launch of a
new array layout could keep guarded copies. These tests count the process's mappings.
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

from gpucourse import kernels, profile

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="counts /proc/self/maps, which only Linux has")

SOURCE = r"""
extern "C" __global__ void add_NAME(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
"""


def mappings() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def add_module(tag: str):
    return getattr(kernels.from_source(SOURCE.replace("NAME", tag), name=f"add_{tag}.cu"),
                   f"add_{tag}")


def launch(kernel, rng, n: int, block: int, *, spare: int = 0, **options) -> None:
    """c = a + b over n elements; each array has up to ``spare`` more elements after them, so
    that launches differ in their memory layout."""
    a, b, c = (rng.standard_normal(n + int(rng.integers(0, spare + 1)), dtype=np.float32)
               for _ in range(3))
    c_tail = c[n:].copy()
    kernel((-(-n // block),), (block,), (a, b, c, np.int32(n)), **options)
    np.testing.assert_array_equal(c[:n], a[:n] + b[:n])  # every launch still right
    np.testing.assert_array_equal(c[n:], c_tail)


def test_launches_of_every_size_leave_no_mappings_behind():
    rng = np.random.default_rng(20)
    kernel = add_module("sizes")
    for block in (32, 1024):  # the stack pool at its largest, the copies' first layouts
        launch(kernel, rng, 1000, block)
    before = mappings()
    for _ in range(1500):  # a new memory layout almost every time, every block size
        launch(kernel, rng, int(rng.integers(1, 5000)), int(rng.choice([1, 32, 96, 256, 1024])),
               spare=200_000)
    grown = mappings() - before
    # A leak of one mapping per launch would add 1,500; the reuse cache may hold a few layouts.
    assert grown < 150, f"1,500 launches left {grown} more memory mappings"


def test_kernel_files_share_one_stack_pool():
    rng = np.random.default_rng(21)
    launch(add_module("first"), rng, 3000, 256)
    before = mappings()
    for k in range(12):
        launch(add_module(f"file{k}"), rng, 3000, 256)
    per_file = (mappings() - before) / 12
    # A loaded library maps about 6 regions; a stack pool of its own would add 512 here.
    assert per_file < 30, f"each kernel file added {per_file:.0f} memory mappings"


def test_race_checks_and_profiles_leave_no_mappings_behind():
    rng = np.random.default_rng(22)
    kernel = add_module("checked")
    launch(kernel, rng, 777, 128, race_check=True)
    n = 900
    arrays = (rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32),
              np.empty(n, np.float32), np.int32(n))
    profile(kernel, (4,), (256,), arrays)
    before = mappings()
    for _ in range(15):
        launch(kernel, rng, int(rng.integers(1, 2000)), 128, race_check=True)
        profile(kernel, (4,), (256,), arrays)
    grown = mappings() - before
    assert grown < 60, f"15 race-checked launches and 15 profiles left {grown} more mappings"
