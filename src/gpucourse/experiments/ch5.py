"""Chapter 5 (accelerated libraries): the SGEMM ladder against cuBLAS, convolution against
cuDNN/oneDNN, dense against sparse, fusion of an elementwise chain, and tensor-core precisions.

Every experiment checks before it times, on fresh random non-uniform data. On a CUDA GPU the
hand-written matmuls (``kernels/matmul.cu``) run through CuPy and everything is timed with
CUDA events at sizes that fill the device. On the CPU the kernels run on the course's emulator
for correctness only; the PyTorch/NumPy experiments (a matmul ladder from Python loops to
BLAS, convolution, sparse vs dense, torch.compile fusion) are measured for real, and GPU
figures come from labelled models or reference measurements (``gpucourse.reference``, key
``"ch5"``).
"""
from __future__ import annotations

import contextlib
import time

import numpy as np

from .. import bench, check, device, models, reference, specs
from ..display import Note, Table
from ..errors import LaunchError, PrecisionError, fraction, whole_number
from ..models import ceil_div

SECTION = "ch5"
# The GPU the models describe when no GPU is present (any name from specs.names()).
DEFAULT_GPU = specs.DEFAULT_GPU


# --------------------------------------------------------------------------- helpers

def on_gpu() -> bool:
    """True when CUDA C kernels run on a real GPU (the backend is cuda and CuPy works)."""
    return device.is_cuda() and device.cupy_works()


def torch_on_gpu() -> bool:
    """True when PyTorch experiments run on a CUDA GPU."""
    return device.torch_device() == "cuda"


def target_gpu(gpu=None) -> specs.GPUSpec:
    """The GPU the models describe: the given one, the active GPU, or DEFAULT_GPU."""
    if gpu is not None:
        return specs.lookup(gpu)
    if device.is_cuda():
        return specs.for_active_device()
    return specs.lookup(DEFAULT_GPU)


def reference_for(*keys: str) -> list[dict]:
    """Reference measurements of this chapter: [{"label", "gpu", "date", "value"}, ...]."""
    return [{"label": r.label, "gpu": r.gpu, "date": r.date, "command": r.command, "value": v}
            for r, v in reference.find(SECTION, *keys)]


def no_reference_note(what: str) -> str:
    """What the notebook says when there is neither a GPU nor reference data for ``what``."""
    return (f"No GPU here and no reference measurement of {what} in "
            "src/gpucourse/data/reference/ yet: run `make gpu-check` on a GPU to record one. "
            "No numbers are shown rather than invented ones.")


def _torch():
    import torch

    return torch


def _sync() -> None:
    device.synchronize()


def kernel_source(name: str, file: str = "matmul"):
    """The source of one ``__global__`` function of a course kernel file."""
    from .. import kernels

    return kernels.source_of(file, name)


def library_table() -> Table:
    """Which library does the work behind each operation here (read from the installed builds)."""
    torch = _torch()
    gpu = torch_on_gpu()
    rows = []
    if gpu:
        cudnn = torch.backends.cudnn.version()
        rows += [["torch.matmul, torch.nn.Linear", "cuBLAS / cuBLASLt (dense matrices)", torch.version.cuda],
                 ["torch.nn.functional.conv2d", "cuDNN (convolutions, normalization)",
                  f"{cudnn // 10000}.{cudnn // 100 % 100}.{cudnn % 100}" if cudnn else "not available"],
                 ["torch.sparse_csr_tensor @ dense", "cuSPARSE (sparse matrices)", torch.version.cuda]]
    else:
        rows += [["torch.matmul, torch.nn.Linear",
                  "MKL" if torch.backends.mkl.is_available() else "torch's BLAS", "CPU"],
                 ["torch.nn.functional.conv2d",
                  "oneDNN (mkldnn)" if torch.backends.mkldnn.is_available() else "torch's own loops", "CPU"],
                 ["torch.sparse_csr_tensor @ dense",
                  "MKL sparse BLAS" if torch.backends.mkl.is_available() else "torch's own loops", "CPU"]]
    blas = "OpenBLAS" if _openblas() else "the BLAS NumPy was built with"
    rows.append(["numpy.matmul (@)", blas, "CPU"])
    if on_gpu():
        import cupy as cp

        rows += [["cupy.matmul", "cuBLAS", cp.__version__],
                 ["cupyx.scipy.sparse.csr_matrix @ dense", "cuSPARSE", cp.__version__],
                 ["cupy.ElementwiseKernel / RawKernel", "your own CUDA C, compiled by NVRTC", cp.__version__]]
    else:
        rows.append(["cupy.*, cupyx.scipy.sparse", "cuBLAS, cuSPARSE (needs a GPU and CuPy)", "not here"])
    return Table.from_lists(["call", "runs in", "version / device"], rows,
                            caption="Libraries behind the calls on this machine "
                                    f"({device.describe().short_name})")


def peak_table(gpu=None) -> Table:
    """A GPU's datasheet peaks per precision and the speed-up over FP32 each implies."""
    spec = target_gpu(gpu)
    fp32 = spec.peak_tflops.get("fp32")
    rows = []
    for p in PRECISIONS:
        v = spec.peak_tflops.get(p)
        unit = "CUDA cores" if p == "fp32" else "tensor cores"
        rows.append([p, f"{v:g}" if v else "none", unit if v else "–",
                     f"{v / fp32:.1f}×" if v and fp32 else "–"])
    return Table.from_lists(["precision", "peak TFLOP/s (dense)", "units", "vs FP32"], rows,
                            caption=f"{spec.name}, datasheet ({spec.source})")


# On a shared machine a multi-threaded CPU timing jumps by whole scheduler time slices
# whenever one of its threads is preempted (the others wait at the next barrier), which
# makes ratios meaningless. CPU work is therefore timed on one thread: GFLOP/s per core.
CPU_THREADS = 1


def _openblas():
    """NumPy's OpenBLAS (to set its thread count), or None if it cannot be found."""
    import ctypes

    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for suffix in ("64_", ""):
            for prefix in ("scipy_openblas", "openblas"):
                setter = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
                getter = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
                if setter is not None and getter is not None:
                    return setter, getter
    return None


@contextlib.contextmanager
def cpu_threads(n: int | None = None):
    """Run PyTorch and NumPy's BLAS on ``n`` threads (default CPU_THREADS), then restore."""
    n = CPU_THREADS if n is None else n
    torch = _torch()
    old = torch.get_num_threads()
    blas = _openblas()
    old_blas = blas[1]() if blas else None
    torch.set_num_threads(n)
    if blas:
        blas[0](n)
    try:
        yield
    finally:
        torch.set_num_threads(old)
        if blas:
            blas[0](old_blas)


def _threads_for(backend: str):
    """cpu_threads() for CPU work, nothing for GPU work."""
    return cpu_threads() if backend == "cpu" else contextlib.nullcontext()


# =========================================================================== 1. SGEMM ladder

MATMUL_VERSIONS = ("matmul_v1_naive", "matmul_v2_coalesced", "matmul_v3_shared",
                   "matmul_v4_1d_blocking", "matmul_v5_2d_blocking", "matmul_v6_vectorized")
MATMUL_DEFAULTS = {"TILE": 32, "BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}
# (M, N, K): 1×1×1, primes, sizes just off the tiles, and one that takes v6's float4 path
# (N and K multiples of 4) with a ragged last k-tile and two column blocks.
CHECK_SHAPES = ((1, 1, 1), (3, 5, 7), (31, 33, 17), (97, 61, 33), (4, 8, 12), (64, 132, 36),
                (130, 129, 131))
# v6 tile shapes tried by the GPU check (the best one counts); all valid for 8×8 per thread.
V6_TUNING = ({"BM": 128, "BN": 128, "BK": 8}, {"BM": 128, "BN": 64, "BK": 16},
             {"BM": 64, "BN": 128, "BK": 8})


def _version(name: str) -> int:
    for i, v in enumerate(MATMUL_VERSIONS, 1):
        if name == v or name == f"v{i}":
            return i
    raise ValueError(f"unknown matmul version {name!r}; use one of {', '.join(MATMUL_VERSIONS)}.")


def launch_config(version: str, M: int, N: int, defines: dict | None = None):
    """(grid, block) of a matmul.cu version for an M×N output."""
    d = {**MATMUL_DEFAULTS, **(defines or {})}
    v = _version(version)
    if v == 1:
        return (ceil_div(M, 32), ceil_div(N, 32)), (32, 32)  # x walks rows: uncoalesced on purpose
    if v == 2:
        return (ceil_div(N, 32), ceil_div(M, 32)), (32, 32)
    if v == 3:
        t = d["TILE"]
        return (ceil_div(N, t), ceil_div(M, t)), (t, t)
    if v == 4:
        return (ceil_div(N, 64), ceil_div(M, 64)), 512
    if v == 5:
        return (ceil_div(N, d["BN"]), ceil_div(M, d["BM"])), (d["BM"] // d["TM"]) * (d["BN"] // d["TN"])
    return (ceil_div(N, d["BN"]), ceil_div(M, d["BM"])), (d["BM"] // 8) * (d["BN"] // 8)


def matmul_module(defines: dict | None = None, backend: str | None = None):
    """The kernels of matmul.cu for the active backend (or ``backend``)."""
    from .. import kernels

    return kernels.load("matmul", defines=defines or None, backend=backend)


def run_matmul(version: str, A, B, out=None, module=None, defines: dict | None = None,
               race_check: bool = False):
    """C = A·B with one hand-written version; A, B are float32 arrays of the module's backend."""
    module = module or matmul_module(defines)
    M, K = A.shape
    K2, N = B.shape
    if K != K2:
        raise ValueError(f"inner dimensions differ: A is {M}×{K}, B is {K2}×{N}.")
    if out is None:
        if module.backend == "cuda":
            import cupy as cp

            out = cp.full((M, N), np.nan, dtype=np.float32)
        else:
            out = np.full((M, N), np.nan, dtype=np.float32)  # never-written outputs stay NaN
    grid, block = launch_config(version, M, N, defines)
    getattr(module, version)(grid, block, (A, B, out, np.int32(M), np.int32(N), np.int32(K)),
                             race_check=race_check)
    return out


def matmul_tolerance(A: np.ndarray, B: np.ndarray) -> tuple[float, float]:
    """(rtol, atol) for a float32 matmul against a float64 reference: every element is a dot of K
    terms, in whatever order the kernel adds them: gamma_K * max(|A| @ |B|), no rtol."""
    return 0.0, models.matmul_error_bound(np.asarray(A), np.asarray(B))


def check_matmul(versions=MATMUL_VERSIONS, shapes=CHECK_SHAPES, seed: int = 0,
                 backend: str | None = None, race_check: bool = False) -> Table:
    """Run every version at awkward shapes on the emulator (or the GPU) against float64.

    Raises AssertionError at the first wrong result; returns a table of the relative errors.
    """
    module = matmul_module(backend=backend)
    rows = []
    for s, (M, N, K) in enumerate(shapes):
        A = check.random_array((M, K), seed=seed + 3 * s)
        B = check.random_array((K, N), seed=seed + 3 * s + 1)
        ref = A.astype(np.float64) @ B.astype(np.float64)
        rtol, atol = matmul_tolerance(A, B)
        errs = []
        for v in versions:
            dA, dB = (A, B) if module.backend == "cpu" else (device.asarray(A), device.asarray(B))
            got = device.to_host(run_matmul(v, dA, dB, module=module, race_check=race_check))
            check.assert_close(got, ref, rtol=rtol, atol=atol, name=f"{v} at M={M}, N={N}, K={K}")
            errs.append(float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300)))
        rows.append([f"{M}×{N}×{K}"] + [f"{e:.1e}" for e in errs])
    where = "the CPU emulator" if module.backend == "cpu" else "the GPU"
    return Table.from_lists(["M×N×K"] + [v.replace("matmul_", "") for v in versions], rows,
                            caption=f"Relative error ‖C − C_ref‖/‖C_ref‖ against float64, on "
                                    f"{where}: all pass")


def default_sgemm_n() -> int:
    return 4096 if on_gpu() else 256


def _cublas_matmul(A, B):
    import cupy as cp

    return cp.matmul(A, B)


def sgemm_ladder(n: int | None = None, versions=MATMUL_VERSIONS, tune: bool = False,
                 min_time_s: float = 0.1, seed: int = 0) -> dict:
    """Time every matmul.cu version and cuBLAS (cupy.matmul, FP32) at n×n×n on a GPU.

    Each version is checked against cuBLAS at this size first. ``tune`` also tries the
    tile shapes of V6_TUNING for v6 and keeps the fastest. On the CPU this returns the
    reference measurements instead (``source`` says which).
    """
    if not on_gpu():
        refs = reference_for("sgemm")
        return {"source": "reference" if refs else "none", "reference": refs,
                "note": "" if refs else no_reference_note("the SGEMM ladder")}
    import cupy as cp

    n = n or default_sgemm_n()
    A = device.asarray(check.random_array((n, n), seed=seed, kind="uniform"))
    B = device.asarray(check.random_array((n, n), seed=seed + 1, kind="uniform"))
    flops = 2.0 * n ** 3
    with device.tf32(False):
        ref = _cublas_matmul(A, B)
        cublas = bench.benchmark(_cublas_matmul, A, B, label="ref (cuBLAS, cupy.matmul)",
                                 flops=flops, size=n, min_time_s=min_time_s)
    norm = float(cp.linalg.norm(ref))
    # Both are float32 dots of n terms, each within gamma_n * max(|A| @ |B|) of the exact product.
    allowed = 2 * models.matmul_error_bound(A, B)
    timings, configs = [], {}
    module = matmul_module()
    for v in versions:
        candidates = [None] + (list(V6_TUNING[1:]) if tune and v == MATMUL_VERSIONS[-1] else [])
        best = None
        for d in candidates:
            mod = module if d is None else matmul_module(d)
            C = run_matmul(v, A, B, module=mod, defines=d)
            err = float(cp.linalg.norm(C - ref)) / norm
            worst = float(np.max(cp.abs(C - ref)))  # NumPy hands a CuPy array to CuPy
            if not worst <= allowed:
                raise AssertionError(f"{v} {d or ''} differs from cuBLAS at n={n} by {worst:.3g} "
                                     f"(float32 rounding allows {allowed:.3g}; relative error {err:.2e})")
            slow = _version(v) <= 2
            t = bench.benchmark(run_matmul, v, A, B, C, mod, d, label=v, flops=flops, size=n,
                                min_time_s=min_time_s / (4 if slow else 1), min_samples=3,
                                warmup_s=0.0 if slow else None)
            t.meta.update({"defines": {**MATMUL_DEFAULTS, **(d or {})}, "rel_err": err})
            if best is None or t.median_s < best.median_s:
                best = t
        timings.append(best)
        configs[v] = best.meta["defines"]
    peak = None
    try:
        peak = target_gpu().peak_flops("fp32")
    except Exception:
        pass
    best = max(timings, key=lambda t: t.gflops)
    return {"source": "measured", "n": n, "device": device.describe().short_name,
            "timings": bench.Timings(timings + [cublas]), "cublas_gflops": cublas.gflops,
            "peak_gflops": peak / 1e9 if peak else None, "best": best.label,
            "best_pct_of_cublas": 100.0 * best.gflops / cublas.gflops, "configs": configs}


def sgemm_summary(result: dict) -> "Table | Note":
    """GFLOP/s and % of cuBLAS per version (measured), or the reference data's."""
    if result["source"] == "measured":
        ts = result["timings"]
        rows = [[t.label, f"{t.gflops:,.0f}", f"{100 * t.gflops / result['cublas_gflops']:.1f}%"]
                for t in ts]
        return Table.from_lists(["version", "GFLOP/s", "% of cuBLAS"], rows,
                                caption=f"SGEMM at {result['n']}³ on {result['device']} (measured now)")
    if not result.get("reference"):
        return Note(result.get("note") or no_reference_note("the SGEMM ladder"))
    rows = []
    for r in result.get("reference", []):
        v = r["value"]
        for label, g in zip(v["labels"], v["gflops"]):
            rows.append([r["gpu"], label, f"{g:,.0f}", f"{100 * g / v['cublas_gflops']:.1f}%"])
    return Table.from_lists(["GPU", "version", "GFLOP/s", "% of cuBLAS"], rows,
                            caption="SGEMM reference measurements" if rows else result.get("note", ""))


def reuse_model(tile: int = 32) -> dict:
    """Memory traffic per multiply-add (FMA) of each matmul version: a counting model.

    ``global_bytes_per_fma``: bytes a warp's loads fetch from device memory in whole 32-byte
    sectors, with no cache, per FMA; ``shared_loads_per_fma``: shared-memory load
    instructions per FMA. Coalescing cuts the first by using whole sectors, tiling by reusing
    each loaded value many times; register blocking and float4 loads cut the second.
    """
    d = MATMUL_DEFAULTS
    bm, bn, bk, tm, tn = d["BM"], d["BN"], d["BK"], d["TM"], d["TN"]
    sector = 32

    def tiled(rows, cols, depth):  # a rows×cols×depth block tile, loads coalesced
        return (rows + cols) * depth * 4 / (rows * cols * depth)

    rows = {
        # a warp's 32 lanes are 32 rows: 32 sectors of A for one float each; B broadcast
        "matmul_v1_naive": ((32 * sector + sector) / 32, 0.0),
        # A broadcast (one sector), B 32 consecutive floats (4 sectors), for 32 FMAs
        "matmul_v2_coalesced": ((sector + 4 * sector) / 32, 0.0),
        # each tile element is loaded once and used `tile` times; one A and one B shared
        # load per FMA in the inner loop
        "matmul_v3_shared": (tiled(tile, tile, tile), 2.0),
        # 64×64×8 tiles; 1 B + 8 A shared loads per 8 FMAs
        "matmul_v4_1d_blocking": (tiled(64, 64, 8), (1 + 8) / 8),
        # 128×128×8 tiles; 8×8 outputs per thread from 8 + 8 shared loads
        "matmul_v5_2d_blocking": (tiled(bm, bn, bk), (tm + tn) / (tm * tn)),
        # the same bytes, moved 4 floats per instruction: 4 float4 shared loads per 64 FMAs
        "matmul_v6_vectorized": (tiled(bm, bn, bk), 4 / 64),
    }
    return {"versions": list(rows), "global_bytes_per_fma": [r[0] for r in rows.values()],
            "shared_loads_per_fma": [r[1] for r in rows.values()], "is_model": True,
            "note": "counted from the code: whole 32-byte sectors, no caches"}


# --------------------------------------------------------------------------- CPU ladder

def matmul_python(a: list, b: list) -> list:
    """Three nested Python loops over lists: one multiply-add per interpreter step."""
    n, k, m = len(a), len(b), len(b[0])
    c = [[0.0] * m for _ in range(n)]
    for i in range(n):
        ai, ci = a[i], c[i]
        for j in range(m):
            s = 0.0
            for p in range(k):
                s += ai[p] * b[p][j]
            ci[j] = s
    return c


def matmul_numpy_rows(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """One NumPy vector-matrix product per row of C: compiled, but B is re-read for every row."""
    C = np.empty((A.shape[0], B.shape[1]), dtype=A.dtype)
    for i in range(A.shape[0]):
        C[i] = A[i] @ B
    return C


def matmul_numpy_blas(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """np.matmul: one call into the BLAS library NumPy was built with."""
    return A @ B


def matmul_torch_blas(A, B):
    """torch.matmul on the CPU: oneDNN/MKL's SGEMM."""
    return A @ B


def check_cpu_ladder(shapes=((1, 1, 1), (7, 5, 3), (37, 29, 41)), seed: int = 0) -> None:
    """The CPU versions agree with a float64 reference at awkward shapes."""
    torch = _torch()
    for M, N, K in shapes:
        A = check.random_array((M, K), seed=seed + M)
        B = check.random_array((K, N), seed=seed + N + 1)
        ref = A.astype(np.float64) @ B.astype(np.float64)
        rtol, atol = matmul_tolerance(A, B)
        got = {
            "python loops": np.array(matmul_python(A.tolist(), B.tolist()), dtype=np.float64),
            "numpy rows": matmul_numpy_rows(A, B),
            "numpy BLAS": matmul_numpy_blas(A, B),
            "torch BLAS": matmul_torch_blas(torch.from_numpy(A), torch.from_numpy(B)).numpy(),
        }
        for name, C in got.items():
            check.assert_close(np.asarray(C).reshape(M, N), ref, rtol=rtol, atol=atol,
                               name=f"{name} at {M}×{N}×{K}")


def cpu_ladder(n: int = 512, n_python: int = 48, min_time_s: float = 0.1, seed: int = 0,
               include_python: bool = True) -> bench.Timings:
    """Python loops (at ``n_python``³) → NumPy row at a time → BLAS (NumPy, PyTorch) at n³, in GFLOP/s.

    Checked at awkward shapes first. Python loops run at a smaller size so that one call
    stays under a second; GFLOP/s makes the rungs comparable.
    """
    with cpu_threads():
        return _cpu_ladder(n, n_python, min_time_s, seed, include_python)


def _cpu_ladder(n, n_python, min_time_s, seed, include_python) -> bench.Timings:
    torch = _torch()
    check_cpu_ladder(seed=seed)
    out = bench.Timings()
    if include_python:
        a = check.random_array((n_python, n_python), seed=seed).tolist()
        b = check.random_array((n_python, n_python), seed=seed + 1).tolist()
        out.append(bench.benchmark(matmul_python, a, b, label=f"Python loops (n={n_python})",
                                   flops=2.0 * n_python ** 3, size=n_python, backend="cpu",
                                   min_time_s=min_time_s, min_samples=3, warmup_s=0.0))
    A = check.random_array((n, n), seed=seed + 2)
    B = check.random_array((n, n), seed=seed + 3)
    tA, tB = torch.from_numpy(A), torch.from_numpy(B)
    for label, fn, args in ((f"NumPy, one row at a time (n={n})", matmul_numpy_rows, (A, B)),
                            (f"np.matmul, BLAS (n={n})", matmul_numpy_blas, (A, B)),
                            (f"torch.matmul, BLAS (n={n})", matmul_torch_blas, (tA, tB))):
        out.append(bench.benchmark(fn, *args, label=label, flops=2.0 * n ** 3, size=n,
                                   backend="cpu", min_time_s=min_time_s, min_samples=3))
    return out


def matmul_size_point(n: int, min_time_s: float = 0.05) -> bench.Timings:
    """The size widget's experiment: the CPU ladder at n (Python loops only while n <= 64),
    or on a GPU the hand-written v2, v3, v6 and cuBLAS at n."""
    if int(n) < 1:
        raise LaunchError(f"matrix size {n} must be at least 1 (e.g. 256).")
    if on_gpu():
        res = sgemm_ladder(n=n, versions=("matmul_v2_coalesced", "matmul_v3_shared",
                                          "matmul_v6_vectorized"), min_time_s=min_time_s)
        return res["timings"]
    return cpu_ladder(n=n, n_python=min(n, 48), min_time_s=min_time_s, include_python=n <= 64)


# =========================================================================== 2. convolution

CONV_CPU = {"batch": 8, "channels": 32, "size": 32, "out_channels": 64, "kernel": 3}
CONV_GPU = {"batch": 32, "channels": 64, "size": 56, "out_channels": 128, "kernel": 3}


def conv_taps(x, w, padding: int):
    """Convolution as one small matmul per kernel tap (k·k of them), summed: explicit loops."""
    torch = _torch()
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = torch.nn.functional.pad(x, (padding, padding, padding, padding))
    ho, wo = h + 2 * padding - kh + 1, wd + 2 * padding - kw + 1
    out = x.new_zeros((n, o, ho, wo))
    for dy in range(kh):
        for dx in range(kw):
            patch = xp[:, :, dy:dy + ho, dx:dx + wo]              # (n, c, ho, wo)
            out += torch.einsum("oc,nchw->nohw", w[:, :, dy, dx], patch)
    return out


def conv_unfold(x, w, padding: int):
    """im2col: unfold every k×k patch into a column, then ONE matmul with the weights."""
    torch = _torch()
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    cols = torch.nn.functional.unfold(x, (kh, kw), padding=padding)  # (n, c·kh·kw, ho·wo)
    ho, wo = h + 2 * padding - kh + 1, wd + 2 * padding - kw + 1
    return (w.reshape(o, -1) @ cols).reshape(n, o, ho, wo)


def conv_library(x, w, padding: int):
    """torch.nn.functional.conv2d: cuDNN on a GPU, oneDNN on the CPU."""
    return _torch().nn.functional.conv2d(x, w, padding=padding)


def conv_error_bound(x, w, padding: int = 0, stride: int = 1) -> float:
    """Largest error of a float32 convolution computed as dot products (direct, im2col + GEMM,
    implicit GEMM), any order: each output sums C*kh*kw products, gamma_K * max(|x| conv |w|).

    Winograd and FFT algorithms (cuDNN may pick them) transform the data first; their error is
    not bounded by this derivation.
    """
    torch = _torch()
    k = int(w.shape[1] * w.shape[2] * w.shape[3])
    with torch.no_grad():
        mag = torch.nn.functional.conv2d(x.abs().float(), w.abs().float(), stride=stride,
                                         padding=padding)
    # |x| conv |w| has no cancellation, so its own float32 error is at most gamma_K low.
    top = float(mag.max()) / (1 - models.gamma(k)) if mag.numel() else 0.0
    return models.sum_error_bound(k, top)


def conv_library_name() -> str:
    return "cuDNN" if torch_on_gpu() else "oneDNN"


def _conv_inputs(cfg: dict, seed: int, dev: str):
    torch = _torch()
    x = check.random_array((cfg["batch"], cfg["channels"], cfg["size"], cfg["size"]),
                           seed=seed, kind="uniform")
    w = check.random_array((cfg["out_channels"], cfg["channels"], cfg["kernel"], cfg["kernel"]),
                           seed=seed + 1, kind="uniform")
    return torch.from_numpy(x).to(dev), torch.from_numpy(w).to(dev)


def check_conv(seed: int = 0) -> None:
    """Both hand-built versions agree with conv2d in float64 at an awkward shape."""
    cfg = {"batch": 2, "channels": 3, "size": 11, "out_channels": 5, "kernel": 3}
    x, w = _conv_inputs(cfg, seed, "cpu")
    ref = conv_library(x.double(), w.double(), 1).numpy()
    allowed = conv_error_bound(x, w, 1)  # float32 dots of 3*3*3 terms against float64
    for fn in (conv_taps, conv_unfold, conv_library):
        check.assert_close(fn(x, w, 1).numpy(), ref, rtol=0, atol=allowed,
                           name=f"{fn.__name__} at {tuple(x.shape)}")
    # the same on the device the timing uses, at the timed shape's channel counts
    if torch_on_gpu():
        with device.tf32(False):
            xg, wg = x.cuda(), w.cuda()
            for fn in (conv_taps, conv_unfold, conv_library):
                check.assert_close(fn(xg, wg, 1).cpu().numpy(), ref, rtol=0, atol=allowed,
                                   name=f"{fn.__name__} on the GPU")


def conv_ladder(cfg: dict | None = None, min_time_s: float = 0.1, seed: int = 0) -> dict:
    """Taps loop → unfold + matmul → conv2d (oneDNN/cuDNN), FP32, checked first.

    Returns the timings (GFLOP/s) and the extra memory im2col needs for its columns.
    """
    check_conv(seed=seed)
    dev = device.torch_device()
    cfg = dict(cfg or (CONV_GPU if dev == "cuda" else CONV_CPU))
    x, w = _conv_inputs(cfg, seed, dev)
    k = cfg["kernel"]
    flops = 2.0 * cfg["batch"] * cfg["out_channels"] * cfg["size"] ** 2 * cfg["channels"] * k * k
    backend = dev
    with device.tf32(False), _threads_for(backend):
        ref = conv_library(x, w, k // 2)
        # Two float32 results, each within conv_error_bound of the exact convolution.
        allowed = 2 * conv_error_bound(x, w, k // 2)
        for fn in (conv_taps, conv_unfold):
            check.assert_close(fn(x, w, k // 2).cpu(), ref.cpu(), rtol=0, atol=allowed,
                               name=f"{fn.__name__} at the timed shape")
        timings = bench.Timings(
            bench.benchmark(fn, x, w, k // 2, label=label, flops=flops, size=cfg["batch"],
                            backend=backend, min_time_s=min_time_s, min_samples=3)
            for label, fn in ((f"loop over the {k}×{k} taps ({k * k} matmuls)", conv_taps),
                              ("unfold + one matmul (im2col)", conv_unfold),
                              (f"conv2d ({conv_library_name()})", conv_library)))
    im2col_bytes = cfg["batch"] * cfg["channels"] * k * k * cfg["size"] ** 2 * 4
    return {"config": cfg, "timings": timings, "flops": flops, "im2col_bytes": im2col_bytes,
            "input_bytes": x.numel() * 4, "device": timings[0].device}


CUDNN_SHAPES = (  # (batch, in, out, size, kernel, stride): a few layer shapes of common CNNs
    (32, 64, 128, 56, 3, 1), (32, 3, 64, 224, 7, 2), (32, 256, 256, 14, 3, 1),
    (32, 512, 2048, 7, 1, 1))


def cudnn_benchmark_mode(shapes=CUDNN_SHAPES, min_time_s: float = 0.05, seed: int = 0,
                         dev: str = "cuda") -> dict:
    """conv2d with ``torch.backends.cudnn.benchmark`` off, then on, on a GPU.

    cuDNN caches the algorithm it chose per shape, whichever mode chose it, so each mode is
    timed on its own shape: "on" uses the input with height and width swapped (the same work).
    Each is checked against float64 on the CPU first (one image). Reports the first call
    (benchmark mode tries several algorithms in it) and the steady time. ``dev="cpu"`` takes
    the same steps on the CPU, where the switch does nothing: for the tests of this function.
    """
    if dev == "cuda":
        device.require_cuda("cuDNN's benchmark mode", needs="torch")
    torch = _torch()
    F = torch.nn.functional
    wait = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    rows = []
    old = torch.backends.cudnn.benchmark
    try:
        with device.tf32(False):
            for i, (n, ci, co, s, k, st) in enumerate(shapes):
                g = torch.Generator(device=dev).manual_seed(seed + i)
                w = torch.rand(co, ci, k, k, device=dev, generator=g) - 0.5
                row = {"shape": f"{n}×{ci}×{s}×{s + 1}, {co} filters {k}×{k}, stride {st}",
                       "flops": 2.0 * n * co * ci * k * k * ceil_div(s, st) * ceil_div(s + 1, st)}
                for mode, (h, wd) in (("off", (s, s + 1)), ("on", (s + 1, s))):
                    torch.backends.cudnn.benchmark = mode == "on"
                    x = torch.rand(n, ci, h, wd, device=dev, generator=g)
                    wait()
                    t0 = time.perf_counter()
                    out = F.conv2d(x, w, stride=st, padding=k // 2)
                    wait()
                    row[f"first_call_{mode}_s"] = time.perf_counter() - t0
                    ref = F.conv2d(x[:1].cpu().double(), w.cpu().double(), stride=st, padding=k // 2)
                    # Each output sums ci*k*k products: float32's rounding is relative to the
                    # sum of their magnitudes, not to the (cancelling) result (conv_error_bound).
                    allowed = conv_error_bound(x[:1].cpu(), w.cpu(), k // 2, st)
                    check.assert_close(out[:1].cpu(), ref, rtol=0, atol=allowed,
                                       name=f"conv2d, cudnn.benchmark {mode}, {row['shape']}")
                    t = bench.benchmark(F.conv2d, x, w, stride=st, padding=k // 2,
                                        label=f"benchmark {mode}", min_time_s=min_time_s,
                                        backend=dev)
                    row[f"steady_{mode}_s"] = t.median_s
                row["speedup"] = row["steady_off_s"] / row["steady_on_s"]
                rows.append(row)
    finally:
        torch.backends.cudnn.benchmark = old
    return {"rows": rows, "device": device.describe(dev).short_name}


def cudnn_table(result: dict) -> Table:
    rows = [[r["shape"], f"{r['first_call_off_s'] * 1e3:.1f} / {r['first_call_on_s'] * 1e3:.1f}",
             f"{r['steady_off_s'] * 1e3:.3f} / {r['steady_on_s'] * 1e3:.3f}", f"{r['speedup']:.2f}×"]
            for r in result["rows"]]
    return Table.from_lists(["layer", "first call ms (off / on)", "steady ms (off / on)", "on vs off"], rows,
                            caption=f"cudnn.benchmark on {result['device']} (measured now)")


# =========================================================================== 3. dense vs sparse

DENSITIES = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
SPARSE_CPU = {"n": 2048, "k": 64}
SPARSE_GPU = {"n": 8192, "k": 512}


def sparse_matrix(n: int, density: float, seed: int = 0) -> np.ndarray:
    """An n×n float32 matrix with about ``density``·n² non-zeros at random places."""
    g = check.rng(seed)
    mask = g.random((n, n), dtype=np.float32) < density
    values = (0.5 + g.standard_normal((n, n), dtype=np.float32)).astype(np.float32)
    return np.where(mask, values, np.float32(0.0))


def _sparse_matrix_torch(n: int, density: float, seed: int, dev: str):
    """sparse_matrix built on the device (a GPU draws 8192² random numbers in microseconds)."""
    if dev == "cpu":
        return _torch().from_numpy(sparse_matrix(n, density, seed=seed))
    torch = _torch()
    g = torch.Generator(device=dev).manual_seed(seed)
    mask = torch.rand(n, n, device=dev, generator=g) < density
    values = 0.5 + torch.randn(n, n, device=dev, generator=g)
    return torch.where(mask, values, torch.zeros((), device=dev))


def crossover_density(densities, sparse_s, dense_s) -> float | None:
    """The density where the sparse time meets the dense time, interpolated on log-log axes.

    ``dense_s`` is one time or one per density. None when sparse never wins (or always does)
    in the measured range: the crossover is then outside it.
    """
    d = np.asarray(densities, dtype=float)
    s = np.asarray(sparse_s, dtype=float)
    t = np.broadcast_to(np.asarray(dense_s, dtype=float), s.shape)
    r = np.log(s / t)  # < 0 where sparse wins
    for i in range(len(d) - 1):
        if r[i] < 0 <= r[i + 1]:
            f = -r[i] / (r[i + 1] - r[i])
            return float(np.exp(np.log(d[i]) + f * (np.log(d[i + 1]) - np.log(d[i]))))
    return None


def sparse_sweep(n: int | None = None, k: int | None = None, densities=DENSITIES, seed: int = 0,
                 min_time_s: float = 0.05, cupyx: bool | None = None, progress=None) -> dict:
    """Sparse (CSR) × dense against dense × dense across densities, and the crossover.

    torch.sparse (MKL on the CPU, cuSPARSE on a GPU); on a GPU also cupyx.scipy.sparse.
    Each product is checked against the dense result before it is timed. The dense product
    does not look at the values, so it is timed once.
    """
    import warnings

    for d in densities:  # the fraction of non-zeros
        fraction(d, "density", "0.01, 1 % non-zeros")
    torch = _torch()
    dev = device.torch_device()
    backend = dev
    cfg = SPARSE_GPU if dev == "cuda" else SPARSE_CPU
    n, k = n or cfg["n"], k or cfg["k"]
    use_cupyx = on_gpu() if cupyx is None else cupyx
    D = torch.from_numpy(check.random_array((n, k), seed=seed + 1, kind="uniform")).to(dev)
    out = {"n": n, "k": k, "densities": list(densities), "sparse_s": [], "nnz": [],
           "device": None, "library": "cuSPARSE" if dev == "cuda" else "MKL sparse BLAS"}
    if use_cupyx:
        out["cupyx_s"] = []
    dense_t = None
    for i, dens in enumerate(densities):
        S = _sparse_matrix_torch(n, dens, seed + 7 * i, dev)
        with device.tf32(False), _threads_for(backend), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "sparse CSR support is in beta"
            ref = S @ D
            if dense_t is None:
                dense_t = bench.benchmark(lambda: S @ D, label="dense matmul", flops=2.0 * n * n * k,
                                          size=n, backend=backend, min_time_s=min_time_s,
                                          min_samples=3)
            S_csr = S.to_sparse_csr()
            # Two float32 products (CSR and dense), each within gamma_n * max(|S| @ |D|) of
            # the exact one, in whatever order their libraries add.
            allowed = 2 * models.matmul_error_bound(S, D)
            check.assert_close((S_csr @ D).cpu(), ref.cpu(), rtol=0, atol=allowed,
                               name=f"CSR product at density {dens:g}")
            t = bench.benchmark(lambda: S_csr @ D, label=f"CSR at {dens:g}",
                                flops=2.0 * S_csr._nnz() * k, size=dens, backend=backend,
                                min_time_s=min_time_s, min_samples=3)
        out["sparse_s"].append(t.median_s)
        out["nnz"].append(int(S_csr._nnz()))
        if use_cupyx:
            import cupy as cp
            import cupyx.scipy.sparse as cps

            cS = cps.csr_matrix(cp.asarray(S))
            cD = cp.asarray(D)
            check.assert_close(cp.asnumpy(cS @ cD), ref.cpu().numpy(), rtol=0, atol=allowed,
                               name=f"cupyx CSR product at density {dens:g}")
            ct = bench.benchmark(lambda: cS @ cD, label=f"cupyx CSR at {dens:g}",
                                 min_time_s=min_time_s, min_samples=3)
            out["cupyx_s"].append(ct.median_s)
        del S, S_csr, ref
        if progress:
            progress((i + 1) / len(densities))
    out["dense_s"] = dense_t.median_s
    out["dense_p20_s"], out["dense_p80_s"] = dense_t.p20_s, dense_t.p80_s
    out["device"] = dense_t.device
    out["crossover"] = crossover_density(densities, out["sparse_s"], dense_t.median_s)
    if use_cupyx:
        out["cupyx_crossover"] = crossover_density(densities, out["cupyx_s"], dense_t.median_s)
    return out


def crossover_text(sweep: dict, key: str = "crossover", what: str = "torch.sparse CSR") -> str:
    """One sentence: the measured crossover, or why there is none in the range."""
    c = sweep.get(key)
    lo, hi = sweep["densities"][0], sweep["densities"][-1]
    if c is not None:
        return (f"{what} × dense beats dense × dense below a density of {c:.3g} "
                f"({100 * c:.2g}% non-zeros), measured now on {sweep['device']} "
                f"for a {sweep['n']}×{sweep['n']} matrix times {sweep['n']}×{sweep['k']}.")
    times = sweep["sparse_s"] if key == "crossover" else sweep["cupyx_s"]
    if times[0] >= sweep["dense_s"]:
        return (f"{what} never beat dense here, even at density {lo:g}: the crossover is below "
                f"the measured range on {sweep['device']}.")
    return (f"{what} beat dense at every density up to {hi:g}: the crossover is above the "
            f"measured range on {sweep['device']}.")


def sparse_point(density: float, n: int | None = None, k: int | None = None,
                 min_time_s: float = 0.05, seed: int = 0) -> bench.Timings:
    """The density widget's experiment: dense and CSR at one density, checked then timed."""
    res = sparse_sweep(n=n, k=k, densities=(density,), seed=seed, min_time_s=min_time_s,
                       cupyx=False)
    dev = res["device"]
    backend = device.backend() if torch_on_gpu() else "cpu"
    method = "CUDA events" if backend == "cuda" else "perf_counter"

    def timing(label, s, flops):
        return bench.Timing(label=label, samples_s=[s], batch=1, device=dev, backend=backend,
                            method=method, size=density, flops=flops)

    nn, kk = res["n"], res["k"]
    return bench.Timings([timing("dense × dense", res["dense_s"], 2.0 * nn * nn * kk),
                          timing(f"CSR × dense (density {density:g})", res["sparse_s"][0],
                                 2.0 * res["nnz"][0] * kk)])


# =========================================================================== 4. fusion

FUSION_N_CPU = 1 << 24   # 64 MB of float32: twice a large CPU's L3
CHAIN_TEXT = "y = relu(x·1.5 + 0.25)² − 1: multiply, add, ReLU, square, subtract"


def chain_numpy(x: np.ndarray) -> np.ndarray:
    """The reference: the five operations in float64."""
    y = x.astype(np.float64) * 1.5 + 0.25
    y = np.maximum(y, 0.0)
    return y * y - 1.0


def chain_eager(x):
    """Five separate PyTorch calls as usually written: five kernels and five new tensors."""
    torch = _torch()
    y = x * 1.5
    y = y + 0.25
    y = torch.relu(y)
    y = y * y
    return y - 1.0


def chain_into(x, out):
    """The same five passes over memory, written into one preallocated buffer ``out``."""
    torch = _torch()
    torch.mul(x, 1.5, out=out)
    out.add_(0.25)
    out.relu_()
    out.mul_(out)
    return out.sub_(1.0)


def chain_fused_into(x, out):
    """What torch.compile turns into ONE loop (one kernel) that reads x once and writes out once."""
    out.copy_(chain_eager(x))
    return out


CUPY_CHAIN = "float t = x * 1.5f + 0.25f; t = t > 0.0f ? t : 0.0f; y = t * t - 1.0f;"


def fusion_bytes(n: int, itemsize: int = 4) -> dict:
    """Bytes each version moves through memory (a count, not a measurement): five passes
    that each read and write n values, against one that reads x and writes y once."""
    return {"unfused": 5 * 2 * n * itemsize, "fused": 2 * n * itemsize}


_COMPILED = {}


def compiled_chain():
    """torch.compile of chain_fused_into (one C++/OpenMP loop on the CPU, one Triton kernel on a GPU)."""
    key = ("chain", _torch().get_num_threads())  # the CPU code is generated for a thread count
    if key not in _COMPILED:
        _COMPILED[key] = _torch().compile(chain_fused_into, dynamic=False)
    return _COMPILED[key]


def fusion(n: int | None = None, use_compile: bool = True, min_time_s: float = 0.1,
           seed: int = 0) -> dict:
    """Unfused (eager; five passes into one buffer) against fused (torch.compile; CuPy
    ElementwiseKernel on a GPU), with the bytes each moves and a copy as the floor.

    Every version is checked against float64 NumPy on data of both signs first. The first
    torch.compile call compiles; its time is reported separately (``compile_s``).
    """
    with _threads_for("cuda" if device.torch_device() == "cuda" else "cpu"):
        return _fusion(n, use_compile, min_time_s, seed)


def _fusion(n, use_compile, min_time_s, seed) -> dict:
    torch = _torch()
    dev = device.torch_device()
    backend = dev
    # On a GPU (PyTorch's, or CuPy's alone): 16 x its L2 (device.bandwidth_buffer_bytes), so
    # the chain streams from memory; the CuPy rows are that GPU's figures either way.
    gpu = dev == "cuda" or on_gpu()
    n = whole_number(n, "n", FUSION_N_CPU) if n is not None else (
        device.bandwidth_buffer_bytes(cap=1 << 30) // 4 if gpu else FUSION_N_CPU)
    x_np = check.random_array(n, seed=seed, kind="normal")  # both signs: ReLU matters
    x = torch.from_numpy(x_np).to(dev)
    out_t = torch.empty_like(x)
    sub = slice(None, None, max(1, n // 4099))  # about 4099 values spread over the array
    ref = chain_numpy(x_np[sub])
    small_np = check.random_array(1000 + 3, seed=seed + 1)
    small_ref = chain_numpy(small_np)
    small = torch.from_numpy(small_np).to(dev)
    # (label, function, its argument tuple at size n, at the awkward small size or None, fused?)
    versions = [("eager: 5 ops, 5 new tensors", chain_eager, (x,), (small,), False),
                ("5 ops into one buffer", chain_into, (x, out_t), (small, torch.empty_like(small)),
                 False)]
    out = {"n": n, "bytes": fusion_bytes(n), "chain": CHAIN_TEXT, "compile_s": None,
           "compile_error": None}
    if use_compile:
        t0 = time.perf_counter()
        try:
            f = compiled_chain()
            f(x, out_t)
            _sync()
            out["compile_s"] = time.perf_counter() - t0
            # a second shape would compile again, so the compiled loop is checked at size n only
            versions.append(("fused: torch.compile", f, (x, out_t), None, True))
        except Exception as exc:  # no C++ compiler, no Triton: say so and go on
            out["compile_error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
    if on_gpu():
        import cupy as cp

        ek = cp.ElementwiseKernel("float32 x", "float32 y", CUPY_CHAIN, "gpucourse_chain5")
        cx, cy, cs = cp.asarray(x), cp.empty(n, dtype=cp.float32), cp.asarray(small)

        def cupy_unfused(a):
            y = a * np.float32(1.5)
            y = y + np.float32(0.25)
            y = cp.maximum(y, np.float32(0.0))
            y = y * y
            return y - np.float32(1.0)

        versions += [("CuPy: 5 ops", cupy_unfused, (cx,), (cs,), False),
                     ("fused: CuPy ElementwiseKernel", ek, (cx, cy), (cs, cp.empty_like(cs)), True)]
    timings = bench.Timings()
    # t = x*1.5 + 0.25 is off by at most gamma_2*M (M = 1.5|x| + 0.25), t*t then by about
    # (2*gamma_2 + u)*M^2, and -1 adds u*|y|: first order, |error| <= gamma_6 * (|y| + 2),
    # fused (one multiply-add) or not.
    rtol, atol = models.gamma(6), 2 * models.gamma(6)
    for label, fn, args, small_args, fused in versions:
        if small_args is not None:
            check.assert_close(device.to_host(fn(*small_args)), small_ref, rtol=rtol, atol=atol,
                               name=f"{label} on 1003 values")
        check.assert_close(device.to_host(fn(*args))[sub], ref, rtol=rtol, atol=atol,
                           name=f"{label} on {n} values")
        on = "cuda" if label.startswith(("CuPy", "fused: CuPy")) else backend
        timings.append(bench.benchmark(fn, *args, label=label, size=n, backend=on,
                                       bytes=out["bytes"]["fused" if fused else "unfused"],
                                       min_time_s=min_time_s, min_samples=3))
    # The floor for any version: one read and one write of n values.
    copy = bench.benchmark(out_t.copy_, x, label="copy x into a buffer (one read + one write)",
                           backend=backend, bytes=2 * 4 * n, size=n, min_time_s=min_time_s,
                           min_samples=3)
    out.update(timings=timings, copy=copy, device=copy.device)
    by = timings.by_label()
    base = by["5 ops into one buffer"]
    out["speedup"] = {t.label: base.median_s / t.median_s for t in timings
                      if t.label.startswith("fused: torch")}
    if on_gpu():
        out["cupy_speedup"] = by["CuPy: 5 ops"].median_s / by["fused: CuPy ElementwiseKernel"].median_s
    return out


def fusion_table(result: dict) -> Table:
    b = result["bytes"]
    base = result["timings"].by_label()["5 ops into one buffer"]
    rows = []
    for t in result["timings"]:
        fused = t.label.startswith("fused")
        rows.append([t.label, f"{(b['fused'] if fused else b['unfused']) / 1e6:,.0f}",
                     f"{t.median_s * 1e3:.3g}", f"{t.gbps:.3g}",
                     f"{base.median_s / t.median_s:.2f}×"])
    c = result["copy"]
    rows.append([c.label, f"{c.bytes / 1e6:,.0f}", f"{c.median_s * 1e3:.3g}", f"{c.gbps:.3g}",
                 f"{base.median_s / c.median_s:.2f}×"])
    cap = f"{result['chain']} on {result['n']:,} float32 values, {result['device']}"
    if result.get("compile_s") is not None:
        cap += f"; torch.compile's first call took {result['compile_s']:.1f} s"
    return Table.from_lists(["version", "MB moved (counted)", "ms (median)", "GB/s (counted MB / time)",
                             "speed-up vs 5 ops into one buffer"], rows,
                            caption=cap)


# =========================================================================== 5. tensor cores

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
# Unit roundoff of each format's inputs (TF32 keeps 10 of float32's 23 fraction bits).
UNIT_ROUNDOFF = {"fp32": 2.0 ** -24, "tf32": 2.0 ** -11, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}


def precision_error_bound(precision: str, A: np.ndarray, B: np.ndarray) -> float:
    """Largest ‖C − C_ref‖/‖C_ref‖ of ``A @ B`` in ``precision`` against float64.

    Inputs rounded to the format (u each, so a product is off by at most 2u + u²), products
    summed in float32 (tensor cores and PyTorch's CPU kernels accumulate in FP32): gamma_K of
    |A| @ |B|, whose norm is R times the result's; the FP16/BF16 result rounds once more.
    """
    u = UNIT_ROUNDOFF[precision]
    u_in = 0.0 if precision == "fp32" else u
    g = models.gamma(A.shape[1])
    ref = A.astype(np.float64) @ B.astype(np.float64)
    R = float(np.linalg.norm(np.abs(A).astype(np.float64) @ np.abs(B)) / np.linalg.norm(ref))
    e = ((2 * u_in + u_in ** 2) * (1 + g) + g) * R
    return e + (u * (1 + e) if precision in ("fp16", "bf16") else 0.0)


@contextlib.contextmanager
def _fp32_reductions():
    """cuBLAS may otherwise add split-K partial sums of FP16/BF16 products in the 16-bit format
    (PyTorch allows it by default), outside the FP32-accumulation bound."""
    torch = _torch()
    m = torch.backends.cuda.matmul
    names = [a for a in ("allow_fp16_reduced_precision_reduction",
                         "allow_bf16_reduced_precision_reduction") if hasattr(m, a)]
    old = [getattr(m, a) for a in names]
    try:
        for a in names:
            setattr(m, a, False)
        yield
    finally:
        for a, v in zip(names, old):
            setattr(m, a, v)


def precision_availability() -> dict[str, str | None]:
    """Each precision mapped to None (it runs here) or the reason it does not."""
    if torch_on_gpu():
        cc = device.describe().compute_capability or (0, 0)
        tensor = cc >= (7, 0)
        amp = cc >= (8, 0)
        s = "%d.%d" % cc
        return {"fp32": None,
                "tf32": None if amp else f"TF32 tensor cores need compute capability 8.0 (Ampere) or newer; this GPU is {s}",
                "fp16": None if tensor else f"FP16 tensor cores need compute capability 7.0 or newer; this GPU is {s}",
                "bf16": None if amp else f"BF16 needs compute capability 8.0 (Ampere) or newer; this GPU is {s}"}
    return {"fp32": None,
            "tf32": "TF32 is a mode of NVIDIA tensor cores (compute capability 8.0+); this CPU has none",
            "fp16": None, "bf16": None}


def _torch_dtype(precision: str):
    torch = _torch()
    return {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
            "bf16": torch.bfloat16}[precision]


def _require_precision(precision: str) -> None:
    avail = precision_availability()
    if precision not in avail:
        raise PrecisionError(f"{precision!r} is not one of {', '.join(PRECISIONS)}; pick one of those.")
    if avail[precision]:
        raise PrecisionError(f"{precision} does not run here: {avail[precision]}. Pick fp32, or "
                             "look at the model and the reference data for this precision.")


def check_precision_matmul(precision: str, k: int = 256, seed: int = 0) -> float:
    """One matmul in ``precision`` against float64; returns the relative error (raises if too big)."""
    _require_precision(precision)
    torch = _torch()
    dev = device.torch_device()
    A = check.random_array((67, k), seed=seed, kind="uniform")
    B = check.random_array((k, 45), seed=seed + 1, kind="uniform")
    ref = A.astype(np.float64) @ B.astype(np.float64)
    dt = _torch_dtype(precision)
    with device.tf32(precision == "tf32"), _fp32_reductions():
        C = (torch.from_numpy(A).to(dev, dt) @ torch.from_numpy(B).to(dev, dt)).float().cpu().numpy()
    err = float(np.linalg.norm(C - ref) / np.linalg.norm(ref))
    allowed = precision_error_bound(precision, A, B)
    if not err <= allowed:
        raise AssertionError(f"{precision} matmul is off by {err:.2e} (its rounding allows "
                             f"{allowed:.1e}) against float64")
    return err


def matmul_throughput(precision: str = "fp32", n: int | None = None,
                      min_time_s: float = 0.1, seed: int = 0) -> bench.Timing:
    """TFLOP/s of an n×n×n torch.matmul in ``precision`` on the active device, checked first."""
    torch = _torch()
    err = check_precision_matmul(precision, seed=seed)
    dev = device.torch_device()
    n = whole_number(n, "n", 512) if n is not None else (8192 if dev == "cuda" else 512)
    dt = _torch_dtype(precision)
    g = torch.Generator(device=dev).manual_seed(seed)
    A = torch.rand(n, n, device=dev, generator=g).to(dt) - 0.5
    B = torch.rand(n, n, device=dev, generator=g).to(dt) - 0.5
    with device.tf32(precision == "tf32"), _threads_for(dev):
        t = bench.benchmark(torch.matmul, A, B, label=precision, flops=2.0 * n ** 3, size=n,
                            backend=dev, min_time_s=min_time_s,
                            min_samples=3)
    t.meta["rel_err"] = err
    return t


def precision_model(gpu=None, sizes=tuple(2 ** k for k in range(7, 15))) -> dict:
    """Roofline model of an n×n×n matmul per precision: one launch's fixed cost + max(compute
    time, memory time).

    Inputs and output are read and written once (3·n²·bytes); peaks are the datasheet's; the
    launch cost (``models.LAUNCH_OVERHEAD_S``) keeps small sizes from reaching the peak in
    nanoseconds.
    """
    spec = target_gpu(gpu)
    itemsize = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2}
    out = {"gpu": spec.name, "sizes": list(sizes), "tflops": {}, "peak_tflops": {},
           "bandwidth_GBps": spec.memory_bandwidth_GBps, "is_model": True}
    for p in PRECISIONS:
        if p not in spec.peak_tflops:
            continue
        out["peak_tflops"][p] = spec.peak_tflops[p]
        out["tflops"][p] = [models.roofline(2.0 * n ** 3, 3.0 * n * n * itemsize[p], gpu=spec,
                                            precision=p, launch=models.LAUNCH_OVERHEAD_S
                                            ).attainable_flops / 1e12 for n in sizes]
    return out


def precision_sweep(n: int | None = None, precisions=PRECISIONS, min_time_s: float = 0.1) -> dict:
    """Measured TFLOP/s per precision on the active device next to the datasheet peaks.

    Precisions that cannot run here are listed with the reason instead of a number.
    """
    avail = precision_availability()
    timings, skipped = bench.Timings(), {}
    for p in precisions:
        if avail.get(p):
            skipped[p] = avail[p]
            continue
        timings.append(matmul_throughput(p, n=n, min_time_s=min_time_s))
    peaks = {}
    if torch_on_gpu():
        spec = specs.for_active_device()
        peaks = {p: spec.peak_tflops.get(p) for p in precisions}
    return {"timings": timings, "skipped": skipped, "peak_tflops": peaks,
            "device": timings[0].device if timings else device.describe().short_name,
            "n": timings[0].size if timings else n, "on_gpu": torch_on_gpu()}


def precision_point(precision: str, n: int, min_time_s: float = 0.05) -> dict:
    """The precision widget's experiment: one measured matmul and the model for the target GPU."""
    t = matmul_throughput(precision, n=n, min_time_s=min_time_s)
    model = precision_model(sizes=(n,))
    return {"timing": t, "model_tflops": model["tflops"].get(precision, [None])[0],
            "model_gpu": model["gpu"], "peak_tflops": model["peak_tflops"].get(precision)}


def percent_of_peak(flops: float, seconds: float, gpu, precision: str) -> float:
    """Achieved FLOP/s as a percentage of the datasheet's dense peak for ``precision``."""
    return 100.0 * flops / seconds / specs.lookup(gpu).peak_flops(precision)


def precision_table(result: dict) -> Table:
    rows = []
    for t in result["timings"]:
        peak = result["peak_tflops"].get(t.label) if result["peak_tflops"] else None
        rows.append([t.label, f"{t.gflops / 1e3:.3g}", f"{peak:g}" if peak else "–",
                     f"{100 * t.gflops / 1e3 / peak:.0f}%" if peak else "–",
                     f"{t.meta.get('rel_err', float('nan')):.1e}"])
    for p, why in result["skipped"].items():
        rows.append([p, "not run", "–", "–", why])
    return Table.from_lists(["precision", "TFLOP/s", "peak (datasheet)", "% of peak", "rel. error"], rows,
                            caption=f"{result['n']}³ matmul on {result['device']} (measured now)")


# =========================================================================== headless + GPU

def run_all(quick: bool = True, progress=None) -> dict:
    """Every experiment of the chapter, as JSON-ready results (for the headless runner)."""
    t = 0.05 if quick else 0.2
    steps = 6

    def tick(i):
        if progress:
            progress(i / steps)

    out = {"device": device.describe().short_name}
    out["matmul_check"] = str(check_matmul())
    tick(1)
    out["cpu_ladder"] = [x.to_dict() for x in cpu_ladder(min_time_s=t)]
    sg = sgemm_ladder(min_time_s=t, tune=not quick)
    if sg["source"] == "measured":
        sg = {**sg, "timings": [x.to_dict() for x in sg["timings"]]}
    out["sgemm"] = sg
    out["reuse_model"] = reuse_model()
    tick(2)
    conv = conv_ladder(min_time_s=t)
    out["conv"] = {**conv, "timings": [x.to_dict() for x in conv["timings"]]}
    tick(3)
    out["sparse"] = sparse_sweep(min_time_s=t)
    tick(4)
    fu = fusion(min_time_s=t)
    out["fusion"] = {**fu, "timings": [x.to_dict() for x in fu["timings"]],
                     "copy": fu["copy"].to_dict()}
    tick(5)
    pr = precision_sweep(min_time_s=t, precisions=PRECISIONS if torch_on_gpu() else ("fp32",))
    out["precision"] = {**pr, "timings": [x.to_dict() for x in pr["timings"]]}
    out["precision_model"] = precision_model()
    tick(6)
    return out


def gpu_check() -> dict:
    """The figures chapter 5's issue names, measured on this GPU, with each threshold's pass/fail.

    Best hand-written SGEMM as % of cuBLAS FP32 at 4096³ (>= 50 %, stretch 75 %); fused vs
    unfused elementwise chain (>= 2x); the measured sparse crossover density; matmul TFLOP/s
    per precision; the WMMA kernels beside them (``ch5_tensor_cores``).
    """
    device.require_cuda("chapter 5's GPU check", needs="cupy")
    t0 = time.perf_counter()
    torch_gpu = torch_on_gpu()
    notes = [] if torch_gpu else [
        "PyTorch has no CUDA here: the sparse sweep, the precision sweep and cuDNN were not "
        "measured, and the fusion's torch rows ran on the CPU (only its CuPy rows are this GPU's)"]
    check_matmul(backend="cuda")
    sg = sgemm_ladder(n=4096, tune=True, min_time_s=0.1)
    from . import ch5_tensor_cores  # WMMA beside the FP32 ladder, at the ladder's n
    tc = ch5_tensor_cores.tensor_core_ladder(min_time_s=0.1, sgemm=sg)
    fu = fusion(min_time_s=0.1, use_compile=torch_gpu)
    # Without torch on the GPU these would time the CPU and be saved as this GPU's figures.
    sp = sparse_sweep(min_time_s=0.03) if torch_gpu else None
    pr = precision_sweep(min_time_s=0.1) if torch_gpu else None
    cu = cudnn_benchmark_mode(min_time_s=0.03) if torch_gpu else None
    pct = sg["best_pct_of_cublas"]
    cupy_speedup = fu["cupy_speedup"]
    compile_speedup = fu["speedup"].get("fused: torch.compile")
    checks = {
        "sgemm_vs_cublas": check.at_least(pct, 50.0, f"best hand-written SGEMM ({sg['best']}) as % "
                                                     "of cuBLAS FP32 at 4096³"),
        "sgemm_vs_cublas_stretch": check.at_least(pct, 75.0, "stretch goal: 75 % of cuBLAS"),
        "fusion_speedup": check.at_least(cupy_speedup, 2.0,
                                         "CuPy ElementwiseKernel vs 5 separate CuPy ops (x)"),
    }
    if sp is not None:
        checks["sparse_crossover"] = check.threshold(
            sp["crossover"], None, sp["crossover"] is not None,
            "density where torch CSR × dense meets dense × dense (found in range)")
    if compile_speedup is not None:
        checks["fusion_speedup_torch_compile"] = check.at_least(
            compile_speedup, 2.0, "torch.compile (one kernel) vs the 5 ops into one buffer (x)")
    sgt = sg["timings"]
    out = {
        "checks": checks,
        "passed": all(c["passed"] for name, c in checks.items() if name != "sgemm_vs_cublas_stretch"),
        "sgemm": {"n": sg["n"], "labels": [t.label for t in sgt], "gflops": [t.gflops for t in sgt],
                  "median_s": [t.median_s for t in sgt], "cublas_gflops": sg["cublas_gflops"],
                  "peak_gflops": sg["peak_gflops"], "best": sg["best"],
                  "best_pct_of_cublas": pct, "configs": sg["configs"]},
        "fusion": {"n": fu["n"], "labels": [t.label for t in fu["timings"]],
                   "median_s": [t.median_s for t in fu["timings"]], "bytes": fu["bytes"],
                   "copy_s": fu["copy"].median_s, "speedup": fu["speedup"],
                   "cupy_speedup": cupy_speedup, "compile_s": fu["compile_s"],
                   "compile_error": fu["compile_error"]},
        "notes": notes,
        "tensor_cores": ch5_tensor_cores.gpu_record(tc),
    }
    if sp is not None:
        keys = ("n", "k", "densities", "sparse_s", "dense_s", "crossover", "nnz", "library")
        if "cupyx_s" in sp:  # cupyx.scipy.sparse was timed too
            keys += ("cupyx_s", "cupyx_crossover")
        out["sparse"] = {k: sp[k] for k in keys}
    if pr is not None:
        out.update(precision_tflops={t.label: t.gflops / 1e3 for t in pr["timings"]},
                   precision_peak_tflops=pr["peak_tflops"], precision_n=pr["n"],
                   precision_skipped=pr["skipped"])
    out["cudnn_benchmark"] = cu["rows"] if cu else None
    out["seconds"] = time.perf_counter() - t0
    return out


__all__ = [n for n in dir() if not n.startswith("_")]
