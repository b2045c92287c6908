"""The kernel puzzles of lab 0b: each puzzle's spec, launch shape, NumPy reference and budget.

``puzzles.cu`` beside this file holds the reference answers (``load("puzzles",
defines=DEFINES)``). A puzzle's ``cases`` are the sizes its checker launches: awkward ones
(1, one past a block, a prime), always with the same grid rule the lab states. ``reads``
and ``writes`` are the most global-memory accesses one thread may make (an atomic counts
as a write): a kernel that re-reads global memory where the puzzle wants it read once into
shared memory or a register is told so.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


#: Threads per block of the shared-memory puzzles, and the matmul's tile (as #defines).
TPB = 64
TILE = 8
DEFINES = {"TPB": TPB, "TILE": TILE}
WARP = 32


def ceil_div(a: int, b: int) -> int:
    """a / b rounded up (kernels sit below models, which has the same)."""
    return -(-int(a) // int(b))


@dataclass(frozen=True)
class Puzzle:
    """One puzzle: what to write, how it is launched, what it must give, and its budget."""

    number: int
    title: str
    kernel: str
    params: str                 # the kernel's parameter list, as the learner writes it
    spec: str                   # the puzzle in one sentence
    inputs: tuple               # names of the input arrays, in parameter order
    cases: tuple                # sizes: n, or (rows, cols)
    example: object             # the size drawn in the lab
    reads: Callable             # case -> most global reads per thread
    writes: object              # most global writes (or atomics) per thread: int or case -> int
    hint: str                   # what usually fixes a wrong result
    budget_hint: str            # what fixes too many global accesses
    shared: bool = False        # whether the answer needs a __shared__ array

    def write_budget(self, case) -> int:
        return self.writes(case) if callable(self.writes) else self.writes

    @property
    def signature(self) -> str:
        return f'extern "C" __global__ void {self.kernel}({self.params})'


def _n(case):
    return case if np.isscalar(case) else int(np.prod(case))


PUZZLES = (
    Puzzle(1, "map", "map_add10", "const float* a, float* out, int n",
           "Add 10 to every element: out[i] = a[i] + 10, one thread per element.",
           ("a",), (32, 96, 256), 64, lambda c: 1, 1,
           "thread i should handle element i = blockIdx.x * blockDim.x + threadIdx.x.",
           "each thread needs a[i] once."),
    Puzzle(2, "zip", "zip_add", "const float* a, const float* b, float* out, int n",
           "Add two arrays element by element: out[i] = a[i] + b[i].",
           ("a", "b"), (32, 96, 256), 64, lambda c: 2, 1,
           "thread i should read a[i] and b[i] and write out[i].",
           "each thread needs a[i] and b[i] once."),
    Puzzle(3, "guard", "guard_add10", "const float* a, float* out, int n",
           "out[i] = a[i] + 10 when n is not a multiple of the block: the last block has threads "
           "with nothing to do.",
           ("a",), (1, 31, 33, 100), 40, lambda c: 1, 1,
           "guard the access with if (i < n) so that threads past the end do nothing.",
           "each thread needs a[i] once."),
    Puzzle(4, "2-D map", "map2d_add10", "const float* a, float* out, int rows, int cols",
           "Add 10 to every element of a rows x cols matrix (row-major) with a 2-D grid: x runs "
           "along a row (columns), y down the rows.",
           ("a",), ((1, 1), (5, 19), (17, 8), (20, 33)), (10, 12), lambda c: 1, 1,
           "column c = blockIdx.x * blockDim.x + threadIdx.x, row r from the y parts, element "
           "r * cols + c, guarded by r < rows && c < cols.",
           "each thread needs its one element once."),
    Puzzle(5, "broadcast", "outer_sum",
           "const float* a, const float* b, float* out, int rows, int cols",
           "out[r][c] = a[r] + b[c] for a column a (rows) and a row b (cols): an outer sum.",
           ("a", "b"), ((1, 1), (5, 19), (17, 8), (20, 33)), (10, 12), lambda c: 2, 1,
           "row r indexes a and column c indexes b; out[r * cols + c] is the element written.",
           "each thread needs a[r] and b[c] once."),
    Puzzle(6, "grid-stride loop", "grid_stride", "const float* a, float* out, int n",
           "out[i] = 2 a[i] + 1 with a grid too small for n: each thread loops, i += gridDim.x * "
           "blockDim.x, so neighbouring threads touch neighbouring elements on every pass.",
           ("a",), (1, 50, 64, 1000), 150, lambda c: ceil_div(_n(c), 2 * WARP),
           lambda c: ceil_div(_n(c), 2 * WARP),
           "start at the thread's global index and step by the number of threads in the grid "
           "(gridDim.x * blockDim.x) while i < n.",
           "each element is read once, by one thread."),
    Puzzle(7, "pooling window", "pool3", "const float* a, float* out, int n",
           "out[i] = a[i-1] + a[i] + a[i+1] (0 past either end), each block loading its TPB "
           "elements and one more on each side into shared memory once.",
           ("a",), (1, 63, 64, 65, 200), 100, lambda c: 2, 1,
           "load tile[threadIdx.x + 1] = a[i] (0 past the end), thread 0 and thread TPB-1 also "
           "load the neighbours on either side, then __syncthreads() before summing.",
           "load each element into a __shared__ tile once, __syncthreads(), then read the "
           "three neighbours from the tile.", shared=True),
    Puzzle(8, "block sum", "block_sum", "const float* a, float* out, int n",
           "out[b] = the sum of block b's TPB elements (0 past the end), as a tree in shared "
           "memory: halve the active threads each step.",
           ("a",), (1, 64, 65, 200), 100, lambda c: 1, 1,
           "each step t < half adds s[t + half] into s[t], with __syncthreads() after every "
           "step; thread 0 writes s[0] to out[blockIdx.x].",
           "each thread loads one element into a __shared__ array and the tree sums there.",
           shared=True),
    Puzzle(9, "warp sum", "warp_sum", "const float* a, float* out, int n",
           "out[w] = the sum of the 32 elements of warp w (0 past the end), with "
           "__shfl_down_sync and no shared memory; lane 0 of each warp that has an element "
           "writes out[i / 32].",
           ("a",), (1, 32, 33, 200), 100, lambda c: 1, 1,
           "every lane (also those past the end, with 0) adds __shfl_down_sync(0xffffffff, v, "
           "offset) for offset 16, 8, 4, 2, 1; lane 0 then holds the warp's sum.",
           "each lane loads one element into a register; the shuffles do the rest."),
    Puzzle(10, "dot product", "dot", "const float* a, const float* b, float* out, int n",
           "*out += the sum of a[i] * b[i]: each block sums its products as a tree in shared "
           "memory, then thread 0 adds the block's sum with one atomicAdd.",
           ("a", "b"), (1, 64, 65, 1000), 100, lambda c: 2, 1,
           "blocks run in any order, so thread 0 of each block adds its sum with atomicAdd(out, "
           "s[0]) after the tree.",
           "each thread reads a[i] and b[i] once; only thread 0 of a block touches *out, once.",
           shared=True),
    Puzzle(11, "prefix sum", "block_scan", "const float* a, float* out, int n",
           "out[i] = a[s] + ... + a[i] with s the first element of i's block: an inclusive scan "
           "within each block, in shared memory.",
           ("a",), (1, 63, 64, 65, 200), 100, lambda c: 1, 1,
           "step d = 1, 2, 4, ...: read s[t - d] (if t >= d), __syncthreads(), add it to s[t], "
           "__syncthreads().",
           "load each element into a __shared__ array once and scan there.", shared=True),
    Puzzle(12, "tiled matmul", "matmul_tiled", "const float* A, const float* B, float* C, int n",
           "C = A B for n x n matrices, each block of TILE x TILE threads computing one tile of C "
           "from TILE x TILE tiles of A and B staged in shared memory.",
           ("A", "B"), (1, 7, 8, 17), 12, lambda c: 2 * ceil_div(_n(c), TILE), 1,
           "load As[ty][tx] and Bs[ty][tx] (0 outside the matrix), __syncthreads(), add the TILE "
           "products, __syncthreads() again before the next tiles.",
           "each thread loads one element of A and one of B per tile; the products read the "
           "__shared__ tiles.", shared=True),
)


def puzzle(number: int) -> Puzzle:
    """Puzzle ``number`` (1, 2, ...)."""
    for p in PUZZLES:
        if p.number == number:
            return p
    raise KeyError(f"there is no puzzle {number}; the puzzles are 1 to {len(PUZZLES)}.")


def launch(p: Puzzle, case) -> tuple:
    """(grid, block) of puzzle ``p`` at size ``case``, as the lab states it."""
    if p.number in (1, 2):
        return case // WARP, WARP
    if p.number == 3:
        return ceil_div(case, WARP), WARP
    if p.number in (4, 5):
        rows, cols = case
        return (ceil_div(cols, WARP), ceil_div(rows, 4)), (WARP, 4)
    if p.number == 6:
        return 2, WARP                        # 64 threads, whatever n
    if p.number == 9:
        return ceil_div(case, 2 * WARP), 2 * WARP
    if p.number == 12:
        return (ceil_div(case, TILE), ceil_div(case, TILE)), (TILE, TILE)
    return ceil_div(case, TPB), TPB


def shapes(p: Puzzle, case) -> tuple[dict, tuple, tuple]:
    """({input: shape}, output shape, scalar arguments) of puzzle ``p`` at size ``case``."""
    if p.number in (4, 5):
        rows, cols = case
        ins = {"a": (rows, cols)} if p.number == 4 else {"a": (rows,), "b": (cols,)}
        return ins, (rows, cols), (rows, cols)
    if p.number == 12:
        return {"A": (case, case), "B": (case, case)}, (case, case), (case,)
    out = {8: (ceil_div(case, TPB),), 9: (ceil_div(case, WARP),), 10: (1,)}.get(p.number, (case,))
    return {name: (case,) for name in p.inputs}, out, (case,)


def reference(p: Puzzle, inputs: dict, case) -> np.ndarray:
    """What puzzle ``p`` must give, in float64."""
    x = {k: v.astype(np.float64) for k, v in inputs.items()}
    a = x.get("a")
    if p.number in (1, 3, 4):
        return a + 10
    if p.number == 2:
        return a + x["b"]
    if p.number == 5:
        return a[:, None] + x["b"][None, :]
    if p.number == 6:
        return 2 * a + 1
    if p.number == 7:
        padded = np.concatenate([[0.0], a, [0.0]])
        return padded[:-2] + padded[1:-1] + padded[2:]
    if p.number in (8, 9):
        size = TPB if p.number == 8 else WARP
        padded = np.zeros(ceil_div(a.size, size) * size)
        padded[:a.size] = a
        return padded.reshape(-1, size).sum(axis=1)
    if p.number == 10:
        return np.array([np.dot(a, x["b"])])
    if p.number == 11:
        padded = np.zeros(ceil_div(a.size, TPB) * TPB)
        padded[:a.size] = a
        return np.cumsum(padded.reshape(-1, TPB), axis=1).ravel()[:a.size]
    return x["A"] @ x["B"]


def terms(p: Puzzle, inputs: dict, case) -> tuple[int, np.ndarray]:
    """(most terms summed into one output, sum of their magnitudes per output): the float32
    error bound of the sums (precision.sum_error_bound), 1 term for the maps."""
    ab = {k: np.abs(v.astype(np.float64)) for k, v in inputs.items()}
    if p.number in (7, 8, 9, 10, 11, 12):
        mags = reference(p, ab, case)
        depth = {7: 3, 8: TPB, 9: WARP, 10: _n(case), 11: TPB, 12: max(1, _n(case))}[p.number]
        return depth, mags
    return 1, np.abs(reference(p, inputs, case))
