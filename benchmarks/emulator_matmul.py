"""How fast is the CPU emulator? A 256x256 shared-memory tiled matmul, against Numba's simulator.

    PYTHONPATH=src python3 benchmarks/emulator_matmul.py [--numba-python PY] [--numba-size N]

The emulator runs the kernel below (16x16 tiles: 256 blocks of 256 threads, 32 barriers
per thread) from an already compiled library, pinned to one CPU core; the compile time of
a cold cache is reported separately. Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1) runs
the same algorithm, if numba is importable by this Python or by --numba-python. The
simulator is slow: --numba-size below 256 runs it on a smaller matrix and scales the time
by (256 / size)^3 (threads grow as size^2 and each one's tile loop as size), and says so.
Results are checked against NumPy before anything is timed.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import pin_to_one_core  # benchmarks/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

N = 256
TILE = 16

KERNEL = r"""
#define TILE 16
// C = A B for n x n row-major matrices; block (TILE, TILE), grid (n / TILE, n / TILE) rounded up.
extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C, int n) {
  __shared__ float sA[TILE][TILE];
  __shared__ float sB[TILE][TILE];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int t = 0; t < (n + TILE - 1) / TILE; t++) {
    const int a_col = t * TILE + tx, b_row = t * TILE + ty;
    sA[ty][tx] = (row < n && a_col < n) ? A[row * n + a_col] : 0.0f;
    sB[ty][tx] = (b_row < n && col < n) ? B[b_row * n + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < TILE; k++) acc += sA[ty][k] * sB[k][tx];
    __syncthreads();
  }
  if (row < n && col < n) C[row * n + col] = acc;
}
"""

NUMBA_SCRIPT = r"""
import os, sys, time, json
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
import numpy as np
from numba import cuda, float32
TILE = 16
n = int(sys.argv[1])

@cuda.jit
def matmul_tiled(A, B, C, n):
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0.0)
    for t in range((n + TILE - 1) // TILE):
        a_col, b_row = t * TILE + tx, t * TILE + ty
        sA[ty, tx] = A[row, a_col] if (row < n and a_col < n) else float32(0.0)
        sB[ty, tx] = B[b_row, col] if (b_row < n and col < n) else float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < n and col < n:
        C[row, col] = acc

rng = np.random.default_rng(1)
A = rng.standard_normal((n, n), dtype=np.float32)
B = rng.standard_normal((n, n), dtype=np.float32)
C = np.full((n, n), np.nan, dtype=np.float32)
blocks = ((n + TILE - 1) // TILE, (n + TILE - 1) // TILE)
# One run: the simulator is too slow to repeat. Wall clock, as it is CPU work.
t0 = time.perf_counter()
matmul_tiled[blocks, (TILE, TILE)](A, B, C, n)
seconds = time.perf_counter() - t0
ok = bool(np.allclose(C, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-4, atol=1e-3))
import numba

print(json.dumps({"seconds": seconds, "correct": ok, "numba": numba.__version__}))
"""


def emulator_figures(runs: int) -> dict:
    import gpucourse as gc
    from gpucourse.bench import benchmark

    # Compile time: a cold cache, so the runtime and the kernel are both built.
    before = os.environ.get("GPUCOURSE_CACHE")
    with tempfile.TemporaryDirectory() as cold:
        os.environ["GPUCOURSE_CACHE"] = cold
        t0 = time.perf_counter()
        gc.emulator.runtime_object()
        runtime_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        gc.emulator.build_library(KERNEL, filename="matmul_bench.cu")
        kernel_s = time.perf_counter() - t0
    if before is None:  # back to the cache the rest of the run (and the user) expects
        os.environ.pop("GPUCOURSE_CACHE", None)
    else:
        os.environ["GPUCOURSE_CACHE"] = before
    mod = gc.kernels.from_source(KERNEL, name="matmul_bench", backend="cpu")
    k = mod.matmul_tiled
    rng = np.random.default_rng(0)
    A = rng.standard_normal((N, N), dtype=np.float32)
    B = rng.standard_normal((N, N), dtype=np.float32)
    C = gc.emulator.empty((N, N))
    grid, block = ((N + TILE - 1) // TILE, (N + TILE - 1) // TILE), (TILE, TILE)
    args = (A, B, C, np.int32(N))
    k(grid, block, args)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    if not np.allclose(C, ref, rtol=1e-4, atol=1e-3):
        raise SystemExit("the emulator's matmul is wrong: not timing it")
    timing = benchmark(k, grid, block, args, label="emulator matmul 256x256", backend="cpu",
                       warmup_s=0.2, min_time_s=0.0, min_samples=runs, max_samples=runs, batch=1)
    return {"compile_runtime_s": runtime_s, "compile_kernel_s": kernel_s,
            "run_median_s": timing.median_s, "run_p20_s": timing.p20_s, "run_p80_s": timing.p80_s,
            "runs": timing.count, "switch": mod._emulator_library().switch_kind}


def numba_figures(python: str, size: int) -> dict | None:
    probe = subprocess.run([python, "-c", "import numba"], capture_output=True)
    if probe.returncode != 0:
        return None
    proc = subprocess.run([python, "-c", NUMBA_SCRIPT, str(size)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the Numba simulator run failed:\n{proc.stderr[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if not out["correct"]:
        raise SystemExit("the Numba simulator's matmul is wrong: not reporting its time")
    out["size"] = size
    out["scale"] = (N / size) ** 3
    out["seconds_at_256"] = out["seconds"] * out["scale"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed emulator runs (median reported)")
    parser.add_argument("--numba-python", default=sys.executable,
                        help="a Python that can import numba (default: this one)")
    parser.add_argument("--numba-size", type=int, default=N,
                        help="matrix size for the simulator (scaled to 256 if smaller)")
    parser.add_argument("--skip-numba", action="store_true")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()

    pinned = pin_to_one_core()
    emu = emulator_figures(args.runs)
    print(f"CPU emulator, {N}x{N} tiled matmul ({(N // TILE) ** 2} blocks of {TILE * TILE} threads), "
          f"{pinned}, {emu['switch']} context switch")
    print(f"  compile: runtime {emu['compile_runtime_s']:.2f} s once, kernel file "
          f"{emu['compile_kernel_s']:.2f} s (cold cache)")
    print(f"  run: median {emu['run_median_s'] * 1e3:.1f} ms of {emu['runs']} runs "
          f"(20th-80th percentile {emu['run_p20_s'] * 1e3:.1f}-{emu['run_p80_s'] * 1e3:.1f} ms)")
    result = {"emulator": emu, "pinned": pinned, "date": time.strftime("%Y-%m-%d"),
              "command": " ".join([Path(sys.executable).name, *sys.argv])}
    if not args.skip_numba:
        sim = numba_figures(args.numba_python, args.numba_size)
        if sim is None:
            print(f"  Numba simulator: skipped, numba is not importable by {args.numba_python} "
                  f"(pass --numba-python)")
        else:
            scaled = (f", scaled x{sim['scale']:.0f} from {sim['size']}x{sim['size']}"
                      if sim["size"] != N else "")
            print(f"Numba {sim['numba']} CUDA simulator, same algorithm: "
                  f"{sim['seconds']:.1f} s at {sim['size']}x{sim['size']} (one run){scaled}")
            print(f"  emulator speed-up: {sim['seconds_at_256'] / emu['run_median_s']:,.0f}x"
                  + (" (from the scaled time)" if scaled else ""))
            result["numba_simulator"] = sim
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
