"""The course's kernels with NumPy references, shared by the emulator and the GPU tests.

Each case launches one kernel on fresh random, non-uniform data at an awkward size (1,
primes, sizes that are not multiples of the block) and compares with NumPy. Outputs
start poisoned (NaN), so an element a kernel forgets to write fails the comparison.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import gpucourse.kernels as gk
from gpucourse.kernels import bias_gelu as bias_gelu_home
from gpucourse.kernels import copy as copy_home
from gpucourse.kernels import transpose as transpose_home
from gpucourse.kernels import vector_add as vector_add_home
from gpucourse.kernels import reduce as reduce_home
from gpucourse.emulator import empty as poisoned

SIZES = (1, 7, 1000, 4099, 100_003)
TRANSPOSE_SHAPES = ((1, 1), (1, 7), (17, 33), (64, 65), (129, 257))
TRANSPOSE_DEFINES = ({}, {"TILE": 16, "BLOCK_ROWS": 16}, {"TILE": 8, "BLOCK_ROWS": 2})

#: The defines each file is built with in the tests (the nvcc check compiles the same).
DEFINE_SETS = {"transpose": TRANSPOSE_DEFINES}
#: The files whose every kernel must have a case here.
FILES = ("vector_add", "copy", "transpose", "reduce", "bias_gelu", "bias_gelu_backward")
BIAS_GELU_SHAPES = ((1, 1), (7, 13), (33, 96), (129, 257))


class Backend:
    """Loading kernels and moving arrays for one backend, so that cases run on both."""

    def __init__(self, name: str):
        self.name = name
        if name == "cuda":
            import cupy

            self.cp = cupy

    def load(self, file: str, defines: dict | None = None):
        return gk.load(file, defines or None, backend=self.name)

    def put(self, a: np.ndarray):
        return a.copy() if self.name == "cpu" else self.cp.asarray(a)

    def get(self, a) -> np.ndarray:
        return np.array(a) if self.name == "cpu" else a.get()

    def empty(self, shape, dtype=np.float32):
        """A poisoned array: NaN (floats) or all bits set (ints)."""
        host = poisoned(shape, dtype)
        return host if self.name == "cpu" else self.cp.asarray(host)


@dataclass(frozen=True)
class Case:
    file: str
    kernel: str
    check: Callable
    params: dict = field(default_factory=dict)
    defines: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        parts = [self.kernel] + [f"{k}{v}" for k, v in self.params.items()]
        parts += [f"{k}={v}" for k, v in self.defines.items()]
        return "-".join(str(p).replace(" ", "") for p in parts)

    def run(self, backend: Backend) -> None:
        mod = backend.load(self.file, self.defines)
        self.check(backend, getattr(mod, self.kernel), **self.params)


def _rng(*seed) -> np.random.Generator:
    return np.random.default_rng([zlib.crc32(str(s).encode()) for s in seed])


# --------------------------------------------------------------------------- references

def check_vector_add(b: Backend, k, n: int, block: int, grid: int | None = None):
    rng = _rng(k.name, n, block)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32) + 2.0
    out = b.empty(n)
    k(grid or vector_add_home.launch(k.name, n, block).grid, block,
      (b.put(x), b.put(y), out, np.int32(n)))
    np.testing.assert_array_equal(b.get(out), vector_add_home.reference(x, y))


def check_copy(b: Backend, k, n: int, block: int, stride: int | None = None,
               grid: int | None = None):
    x = _rng(k.name, n, block, stride).standard_normal(n, dtype=np.float32)
    out = b.empty(n)
    k(grid or copy_home.launch(k.name, n, stride, block).grid, block,
      copy_home.args(k.name, b.put(x), out, n, stride))
    np.testing.assert_array_equal(b.get(out), copy_home.reference(x))


def check_transpose(b: Backend, k, rows: int, cols: int, tile: int = 32, block_rows: int = 8):
    x = _rng(k.name, rows, cols, tile).standard_normal((rows, cols), dtype=np.float32)
    out = b.empty((cols, rows))
    transpose_home.run(k, b.put(x), out, tile, block_rows)
    np.testing.assert_array_equal(b.get(out), transpose_home.reference(x))


def check_reduce(b: Backend, k, n: int, block: int, grid: int | None = None, exact: bool = True):
    rng = _rng(k.name, n, block, grid, exact)
    if exact:
        # Multiples of 1/8 in [-8, 8]: every partial sum is exact in float32, so any
        # summation order gives exactly the true sum and one missing element shows.
        x = (rng.integers(-64, 65, n) / 8).astype(np.float32)
    else:
        x = rng.standard_normal(n, dtype=np.float32)
    out = b.put(np.zeros(1, np.float32))  # the kernels accumulate into out[0]
    shape = reduce_home.launch(k.name, n, block=block)
    if grid:  # a small grid makes the grid-stride versions loop
        shape = shape._replace(grid=grid)
    shape.run(k, (b.put(x), out, np.int32(n)))
    got, want = float(b.get(out)[0]), reduce_home.reference(x)
    if exact:
        assert got == want, f"{k.name}: sum {got} != {want}"
    else:
        # A term passes through at most three float32 chains, each in any order: its thread's
        # elements, the block's partial sums, the blocks' results (v1: one chain of n atomics).
        tol = reduce_home.tolerance(x, k.name, shape)
        assert abs(got - want) <= tol, f"{k.name}: sum {got} != {want} (tolerance {tol:g})"


def check_bias_gelu(b: Backend, k, rows: int, cols: int, block: int):
    """gelu(x + bias[col]) (backward: dy * gelu'(x + bias[col])) against float64, within 16
    float32 roundings of the terms' size: an addition, erf or exp (libm: 1-2 ulp), a few
    multiplies."""
    rng = _rng(k.name, rows, cols, block)
    n = rows * cols
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    bias = rng.standard_normal(cols).astype(np.float32)
    out = b.empty(n)
    if "backward" in k.name:
        dy = rng.standard_normal(n).astype(np.float32)
        want = bias_gelu_home.reference_backward(dy, x, bias)
        scale = bias_gelu_home.scale(x, bias, dy)
        args = (b.put(dy), b.put(x), b.put(bias), out)
    else:
        want = bias_gelu_home.reference(x, bias)
        scale = bias_gelu_home.scale(x, bias)
        args = (b.put(x), b.put(bias), out)
    bias_gelu_home.launch(k.name, n, block).run(k, (*args, np.int32(n), np.int32(cols)))
    err = np.abs(b.get(out) - want)
    assert np.all(err <= bias_gelu_home.bound(scale)), f"{k.name}: off by up to {err.max():.3g}"


# --------------------------------------------------------------------------- the cases

def _cases() -> list[Case]:
    cases = []
    for kernel in ("vector_add_v1_naive", "vector_add_v2_grid_stride", "vector_add_v3_float4"):
        for n in SIZES:
            for block in (256, 96):
                # Fixed small grids make the grid-stride versions loop.
                grid = None if kernel.endswith("naive") else 3
                cases.append(Case("vector_add", kernel, check_vector_add,
                                  {"n": n, "block": block, "grid": grid}))
    # A grid of one thread: the float4 versions' tail (n % 4 elements) must loop too.
    cases.append(Case("vector_add", "vector_add_v3_float4", check_vector_add,
                      {"n": 7, "block": 1, "grid": 1}))
    cases.append(Case("copy", "copy_v3_float4", check_copy, {"n": 7, "block": 1, "grid": 1}))
    for n in SIZES[:4]:
        for block in (128, 33):
            cases.append(Case("copy", "copy_v1_coalesced", check_copy, {"n": n, "block": block}))
            for grid in (None, 3):  # a small grid makes the float4 version loop
                cases.append(Case("copy", "copy_v3_float4", check_copy,
                                  {"n": n, "block": block, "grid": grid}))
            for stride in (1, 2, 7, 32, 33):
                cases.append(Case("copy", "copy_v2_strided", check_copy,
                                  {"n": n, "block": block, "stride": stride}))
    for kernel in ("transpose_v1_naive", "transpose_v2_shared", "transpose_v3_padded"):
        for defines in TRANSPOSE_DEFINES:
            tile, rows_per = defines.get("TILE", 32), defines.get("BLOCK_ROWS", 8)
            for rows, cols in TRANSPOSE_SHAPES:
                cases.append(Case("transpose", kernel, check_transpose,
                                  {"rows": rows, "cols": cols, "tile": tile, "block_rows": rows_per},
                                  defines))
    for kernel in ("reduce_v1_atomic", "reduce_v2_shared_tree", "reduce_v3_warp_shuffle",
                   "reduce_v4_grid_stride"):
        for n in SIZES:
            for block in (256, 96, 33, 1024):
                grid = 5 if kernel.endswith("grid_stride") else None
                cases.append(Case("reduce", kernel, check_reduce,
                                  {"n": n, "block": block, "grid": grid}))
        cases.append(Case("reduce", kernel, check_reduce,
                          {"n": 30_011, "block": 128, "grid": 7 if "stride" in kernel else None,
                           "exact": False}))
    # v5 needs whole warps: block sizes that are multiples of 32.
    for n in SIZES:
        for block in (256, 96, 1024):
            cases.append(Case("reduce", "reduce_v5_float4_unrolled", check_reduce,
                              {"n": n, "block": block, "grid": 5}))
    cases.append(Case("reduce", "reduce_v5_float4_unrolled", check_reduce,
                      {"n": 30_011, "block": 128, "grid": 7, "exact": False}))
    for kernel, file in bias_gelu_home.FILES.items():
        for rows, cols in BIAS_GELU_SHAPES:
            for block in (256, 96):
                cases.append(Case(file, kernel, check_bias_gelu,
                                  {"rows": rows, "cols": cols, "block": block}))
    return cases


CASES = _cases()
