"""Kernel puzzles (lab 0b): the references pass, and every puzzle's table of wrong answers is
rejected with a message that names the mistake."""
import re

import numpy as np
import pytest

from gpucourse.check import expect_failure, puzzles as cp
from gpucourse.kernels import puzzles as P
from gpucourse.paths import KERNEL_DIR

SOURCE = (KERNEL_DIR / "puzzles.cu").read_text()


def reference(kernel: str) -> str:
    """One kernel of puzzles.cu, as a learner would write it."""
    start = SOURCE.index(f'extern "C" __global__ void {kernel}(')
    end = SOURCE.find('extern "C"', start + 10)
    return SOURCE[start:end if end > 0 else None]


NAIVE = {
    "pool3": """extern "C" __global__ void pool3(const float* a, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (i > 0 ? a[i - 1] : 0.0f) + a[i] + (i + 1 < n ? a[i + 1] : 0.0f);
}""",
    "block_sum": """extern "C" __global__ void block_sum(const float* a, float* out, int n) {
  if (threadIdx.x != 0) return;
  float v = 0.0f;
  for (int i = blockIdx.x * TPB; i < (blockIdx.x + 1) * TPB && i < n; ++i) v += a[i];
  out[blockIdx.x] = v;
}""",
    "warp_sum_shared": """extern "C" __global__ void warp_sum(const float* a, float* out, int n) {
  __shared__ float s[64];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? a[i] : 0.0f;
  __syncthreads();
  if (threadIdx.x % 32 == 0 && i < n) {
    float v = 0.0f;
    for (int k = 0; k < 32; ++k) v += s[threadIdx.x + k];
    out[i / 32] = v;
  }
}""",
    "dot_every_thread": """extern "C" __global__ void dot(const float* a, const float* b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(out, a[i] * b[i]);
}""",
    "scan": """extern "C" __global__ void block_scan(const float* a, float* out, int n) {
  int i = blockIdx.x * TPB + threadIdx.x;
  if (i >= n) return;
  float v = 0.0f;
  for (int j = blockIdx.x * TPB; j <= i; ++j) v += a[j];
  out[i] = v;
}""",
    "matmul": """extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C, int n) {
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  if (row >= n || col >= n) return;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}""",
    "grid_stride_chunks": """extern "C" __global__ void grid_stride(const float* a, float* out, int n) {
  int threads = gridDim.x * blockDim.x, t = blockIdx.x * blockDim.x + threadIdx.x;
  int per = (n + threads - 1) / threads;
  for (int i = t * per; i < (t + 1) * per && i < n; ++i) out[i] = 2.0f * a[i] + 1.0f;
}""",
}

# (puzzle, what is wrong, the wrong kernel as (old, new) edits of the reference or a NAIVE key,
#  a fragment the message must contain)
WRONG = [
    (1, "adds 1, not 10", [("a[i] + 10.0f", "a[i] + 1.0f")], "wrong result"),
    (1, "forgets blockIdx", [("blockIdx.x * blockDim.x + threadIdx.x", "threadIdx.x")], "race"),
    (1, "off by one", [("threadIdx.x;", "threadIdx.x + 1;")], "out of bounds"),
    (1, "writes twice", [("out[i] = a[i] + 10.0f;", "out[i] = 0.0f; out[i] = a[i] + 10.0f;")],
     "writes global memory 2 times"),
    (2, "adds a to itself", [("a[i] + b[i]", "a[i] + a[i]")], "wrong result"),
    (2, "reads b one on", [("b[i]", "b[i + 1]")], "out of bounds"),
    (2, "accumulates in global memory", [("out[i] = a[i] + b[i];", "out[i] = a[i]; out[i] += b[i];")],
     "writes global memory 2 times"),
    (3, "no guard", [("if (i < n) ", "")], "out of bounds"),
    (3, "guard one too far", [("i < n", "i <= n")], "out of bounds"),
    (3, "guard one too short", [("i < n", "i < n - 1")], "NaN"),
    (4, "walks down columns (correct but uncoalesced)", [("r * cols + c", "c * rows + r")], "sectors"),
    (4, "guards the rows only", [("r < rows && c < cols", "r < rows")], "out of bounds"),
    (4, "x for rows", [("int c = blockIdx.x * blockDim.x + threadIdx.x;", "int c = blockIdx.y * blockDim.y + threadIdx.y;"),
                       ("int r = blockIdx.y * blockDim.y + threadIdx.y;", "int r = blockIdx.x * blockDim.x + threadIdx.x;")],
     "NaN"),
    (5, "a and b swapped", [("a[r] + b[c]", "a[c] + b[r]")], "out of bounds"),
    (5, "no guard", [("if (r < rows && c < cols) ", "")], "out of bounds"),
    (5, "accumulates in global memory", [("out[r * cols + c] = a[r] + b[c];", "{ out[r * cols + c] = a[r]; out[r * cols + c] += b[c]; }")],
     "writes global memory 2 times"),
    (6, "steps by the block only", [("i += gridDim.x * blockDim.x", "i += blockDim.x")], "race"),
    (6, "no loop", [("for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)",
                     "int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n)")], "NaN"),
    (6, "contiguous chunks", "grid_stride_chunks", "sectors"),
    (7, "no barrier", [("  __syncthreads();", "")], "race"),
    (7, "reads its neighbours from global memory", "pool3", "reads global memory 3 times"),
    (7, "forgets the left halo", [("  if (threadIdx.x == 0) tile[0] = i > 0 && i - 1 < n ? a[i - 1] : 0.0f;\n", "")],
     "before any thread"),
    (8, "no barrier in the tree", [("    __syncthreads();                          // this step", "    // this step")], "race"),
    (8, "thread 0 sums from global memory", "block_sum", "reads global memory 64 times"),
    (8, "starts at a quarter", [("half = TPB / 2", "half = TPB / 4")], "wrong result"),
    (9, "starts the shuffles at 8", [("offset = 16", "offset = 8")], "wrong result"),
    (9, "no zero past the end", [("float v = i < n ? a[i] : 0.0f;", "float v = a[i];")], "out of bounds"),
    (9, "sums in shared memory", "warp_sum_shared", "shared"),
    (10, "plain += instead of atomicAdd", [("atomicAdd(out, s[0]);", "*out += s[0];")], "race"),
    (10, "an atomic per thread", "dot_every_thread", "atomicAdd calls"),
    (10, "no barrier before the tree", [("  __syncthreads();\n  for", "  for")], "race"),
    (11, "no barrier between read and write", [("    __syncthreads();                          // everyone has read", "    // everyone has read")], "race"),
    (11, "sums from global memory", "scan", "reads global memory"),
    (11, "stops at half", [("d < TPB", "d < TPB / 2")], "wrong result"),
    (12, "no barrier before the next tiles", [("    __syncthreads();                          // both tiles used", "    // both tiles used")], "race"),
    (12, "reads A and B from global memory", "matmul", "reads global memory 34 times"),
    (12, "no zero outside the matrix", [("row < n && k0 + tx < n ? A[row * n + k0 + tx] : 0.0f", "A[row * n + k0 + tx]")], "out of bounds"),
]


def wrong_source(p, edits) -> str:
    if isinstance(edits, str):
        return NAIVE[edits]
    src = reference(p.kernel)
    for old, new in edits:
        assert old in src, f"the edit {old!r} does not apply to {p.kernel}"
        src = src.replace(old, new)
    return src


@pytest.mark.parametrize("number", [p.number for p in P.PUZZLES])
def test_reference_passes(number, capsys):
    cp.check_puzzle(number, reference(P.puzzle(number).kernel))
    assert capsys.readouterr().out.startswith(f"Exercise {cp.exercise_number(number)} passed")


@pytest.mark.parametrize("number,why,edits,fragment", WRONG, ids=[f"{w[0]}-{w[1]}" for w in WRONG])
def test_wrong_answer_is_named(number, why, edits, fragment):
    p = P.puzzle(number)
    with expect_failure(fragment):
        cp.check_puzzle(number, wrong_source(p, edits))


def test_every_puzzle_has_three_wrong_answers():
    counts = {p.number: sum(w[0] == p.number for w in WRONG) for p in P.PUZZLES}
    assert min(counts.values()) >= 3, counts


@pytest.mark.parametrize("answer", [None, 42, ["__global__ void k() {}"], len,
                                    b"__global__ void k() {}", False])
def test_a_wrong_typed_answer_is_one_sentence(answer):
    with expect_failure("Exercise 0.3 (map) not yet right:\ngive the CUDA C source as a string"):
        cp.check_puzzle(1, answer)


def test_a_missing_kernel_is_one_sentence():
    with expect_failure("must define `extern \"C\" __global__ void map_add10(...)`"):
        cp.check_puzzle(1, reference("zip_add"))


def _imports(path) -> set[str]:
    import ast

    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
            found.update("." * node.level + a.name for a in node.names if not node.module)
    return found


def test_the_puzzle_modules_keep_to_their_layers():
    """kernels sits below models and check; check sits below draw and plot."""
    src = KERNEL_DIR.parent
    assert not {m for m in _imports(src / "kernels" / "puzzles.py") if m.startswith("..")}
    assert not {m for m in _imports(src / "check" / "puzzles.py")
                if m.lstrip(".").split(".")[0] in ("draw", "plot", "experiments", "widgets")}
