"""The kernel puzzles' (lab 0b) reference answers as a learner would write them, and each
puzzle's table of plausible wrong answers with the words its rejection must say.

One table for two readers: test_puzzles_checkers.py runs every row, and
test_wrong_answers_ch0.py shows them as Exercises 0.3 to 0.14 of the chapter's tables
(``TABLES``) without running them again."""
from gpucourse.check.puzzles import exercise_number
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
    "dot_shared_total": """extern "C" __global__ void dot(const float* a, const float* b, float* out, int n) {
  __shared__ float total;
  int i = blockIdx.x * TPB + threadIdx.x;
  if (threadIdx.x == 0) total = 0.0f;
  __syncthreads();
  if (i < n) total += a[i] * b[i];
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(out, total);
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
    (1, "gridDim for blockDim in the index", [("blockIdx.x * blockDim.x", "blockIdx.x * gridDim.x")],
     "race (write-after-write hazard in global memory"),
    (2, "adds a to itself", [("a[i] + b[i]", "a[i] + a[i]")], "wrong result"),
    (2, "reads b one on", [("b[i]", "b[i + 1]")], "out of bounds"),
    (2, "accumulates in global memory", [("out[i] = a[i] + b[i];", "out[i] = a[i]; out[i] += b[i];")],
     "writes global memory 2 times"),
    (2, "forgets blockIdx", [("blockIdx.x * blockDim.x + threadIdx.x", "threadIdx.x")],
     "race (write-after-write hazard in global memory"),
    (2, "blockIdx and threadIdx swapped", [("blockIdx.x * blockDim.x + threadIdx.x", "threadIdx.x * blockDim.x + blockIdx.x")],
     "reads `a` out of bounds"),
    (3, "no guard", [("if (i < n) ", "")], "out of bounds"),
    (3, "guard one too far", [("i < n", "i <= n")], "out of bounds"),
    (3, "guard one too short", [("i < n", "i < n - 1")], "NaN"),
    (3, "guards the read, not the write", [("if (i < n) out[i] = a[i] + 10.0f;", "out[i] = i < n ? a[i] + 10.0f : 0.0f;")],
     "writes `out` out of bounds"),
    (3, "guards threadIdx.x, not the global index", [("if (i < n)", "if (threadIdx.x < n)")],
     "reads `a` out of bounds"),
    (4, "walks down columns (correct but uncoalesced)", [("r * cols + c", "c * rows + r")], "sectors"),
    (4, "guards the rows only", [("r < rows && c < cols", "r < rows")], "out of bounds"),
    (4, "x for rows", [("int c = blockIdx.x * blockDim.x + threadIdx.x;", "int c = blockIdx.y * blockDim.y + threadIdx.y;"),
                       ("int r = blockIdx.y * blockDim.y + threadIdx.y;", "int r = blockIdx.x * blockDim.x + threadIdx.x;")],
     "NaN"),
    (4, "|| for && in the guard", [("r < rows && c < cols", "r < rows || c < cols")], "reads `a` out of bounds"),
    (4, "blockDim.x in the row index", [("int r = blockIdx.y * blockDim.y", "int r = blockIdx.y * blockDim.x")],
     "NaN: were they ever written?"),
    (5, "a and b swapped", [("a[r] + b[c]", "a[c] + b[r]")], "out of bounds"),
    (5, "no guard", [("if (r < rows && c < cols) ", "")], "out of bounds"),
    (5, "accumulates in global memory", [("out[r * cols + c] = a[r] + b[c];", "{ out[r * cols + c] = a[r]; out[r * cols + c] += b[c]; }")],
     "writes global memory 2 times"),
    (5, "indexes a by the element", [("a[r] + b[c]", "a[r * cols + c] + b[c]")], "reads `a` out of bounds"),
    (5, "writes the transposed element", [("out[r * cols + c] =", "out[c * rows + r] =")],
     "out[r * cols + c] is the element written"),
    (6, "steps by the block only", [("i += gridDim.x * blockDim.x", "i += blockDim.x")], "race"),
    (6, "no loop", [("for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)",
                     "int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n)")], "NaN"),
    (6, "contiguous chunks", "grid_stride_chunks", "sectors"),
    (6, "starts at threadIdx.x", [("int i = blockIdx.x * blockDim.x + threadIdx.x;", "int i = threadIdx.x;")],
     "race (write-after-write hazard in global memory"),
    (6, "loops while i <= n", [("i < n;", "i <= n;")], "reads `a` out of bounds"),
    (7, "no barrier", [("  __syncthreads();", "")], "race"),
    (7, "reads its neighbours from global memory", "pool3", "reads global memory 3 times"),
    (7, "forgets the left halo", [("  if (threadIdx.x == 0) tile[0] = i > 0 && i - 1 < n ? a[i - 1] : 0.0f;\n", "")],
     "before any thread"),
    (7, "returns early past the end, before the barrier", [("  int t = threadIdx.x + 1;\n", "  int t = threadIdx.x + 1;\n  if (i >= n) return;\n")],
     "guard the work with an if instead of returning early"),
    (7, "no end check on the right halo", [("i + 1 < n ? a[i + 1] : 0.0f", "a[i + 1]")], "reads `a` out of bounds"),
    (8, "no barrier in the tree", [("    __syncthreads();                          // this step", "    // this step")], "race"),
    (8, "thread 0 sums from global memory", "block_sum", "reads global memory 64 times"),
    (8, "starts at a quarter", [("half = TPB / 2", "half = TPB / 4")], "wrong result"),
    (8, "barrier inside the branch", [("    if (t < half) s[t] += s[t + half];\n    __syncthreads();",
                                        "    if (t < half) {\n      s[t] += s[t + half];\n      __syncthreads();\n    }")],
     "reached by only some threads"),
    (8, "every thread writes the sum", [("if (t == 0) out[blockIdx.x]", "out[blockIdx.x]")],
     "two threads write the same element"),
    (9, "starts the shuffles at 8", [("offset = 16", "offset = 8")], "wrong result"),
    (9, "no zero past the end", [("float v = i < n ? a[i] : 0.0f;", "float v = a[i];")], "out of bounds"),
    (9, "sums in shared memory", "warp_sum_shared", "shared"),
    (9, "returns past the end, before the shuffles", [("float v = i < n ? a[i] : 0.0f;", "if (i >= n) return;\n  float v = a[i];")],
     "a warp shuffle read a lane that had returned"),
    (9, "only lane 0 of the block writes", [("threadIdx.x % 32 == 0", "threadIdx.x == 0")], "NaN: was it ever written?"),
    (10, "plain += instead of atomicAdd", [("atomicAdd(out, s[0]);", "*out += s[0];")], "race"),
    (10, "an atomic per thread", "dot_every_thread", "atomicAdd calls"),
    (10, "no barrier before the tree", [("  __syncthreads();\n  for", "  for")], "race"),
    (10, "writes the block's sum to out[blockIdx.x]", [("atomicAdd(out, s[0]);", "out[blockIdx.x] = s[0];")],
     "writes `out` out of bounds"),
    (10, "adds into one __shared__ total", "dot_shared_total", "several threads update one value"),
    (11, "no barrier between read and write", [("    __syncthreads();                          // everyone has read", "    // everyone has read")], "race"),
    (11, "sums from global memory", "scan", "reads global memory"),
    (11, "stops at half", [("d < TPB", "d < TPB / 2")], "wrong result"),
    (11, "an exclusive scan", [("if (i < n) out[i] = s[t];", "if (i < n) out[i] = t > 0 ? s[t - 1] : 0.0f;")],
     "exclusive scan"),
    (11, "t > d for t >= d", [("t >= d ?", "t > d ?")], "read s[t - d] (if t >= d)"),
    (12, "no barrier before the next tiles", [("    __syncthreads();                          // both tiles used", "    // both tiles used")], "race"),
    (12, "reads A and B from global memory", "matmul", "reads global memory 34 times"),
    (12, "no zero outside the matrix", [("row < n && k0 + tx < n ? A[row * n + k0 + tx] : 0.0f", "A[row * n + k0 + tx]")], "out of bounds"),
    (12, "the product's operands swapped", [("As[ty][k] * Bs[k][tx]", "As[k][tx] * Bs[ty][k]")], "C equals B A"),
    (12, "whole tiles only", [("k0 < n;", "k0 + TILE <= n;")], "lacks the products of the last, partial tile"),
]


def wrong_source(p, edits) -> str:
    if isinstance(edits, str):
        return NAIVE[edits]
    src = reference(p.kernel)
    for old, new in edits:
        assert old in src, f"the edit {old!r} does not apply to {p.kernel}"
        src = src.replace(old, new)
    return src


def table(number: int) -> list[tuple[str, str, str]]:
    """Puzzle ``number``'s wrong answers as (what is wrong, the wrong source, words)."""
    p = P.puzzle(number)
    return [(what, wrong_source(p, edits), words) for k, what, edits, words in WRONG if k == number]


#: Exercise number ("0.3" ...) -> its rows (what, wrong source, words).
TABLES = {exercise_number(p.number): table(p.number) for p in P.PUZZLES}
