"""Chapter 5, section 1 on the CPU: one matrix multiply from Python loops to a row of NumPy
at a time to BLAS (NumPy, PyTorch), each checked at awkward shapes, then timed on one thread."""
from __future__ import annotations

import numpy as np

from ... import bench, check, device
from ...errors import LaunchError
from ...kernels import matmul
from . import sgemm
from .common import load_torch


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
    torch = load_torch()
    for M, N, K in shapes:
        A = check.random_array((M, K), seed=seed + M)
        B = check.random_array((K, N), seed=seed + N + 1)
        ref = matmul.reference(A, B)
        rtol, atol = matmul.tolerance(A, B)
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
    with bench.cpu_threads():
        return _cpu_ladder(n, n_python, min_time_s, seed, include_python)


def _cpu_ladder(n, n_python, min_time_s, seed, include_python) -> bench.Timings:
    torch = load_torch()
    check_cpu_ladder(seed=seed)
    out = bench.Timings()
    if include_python:
        a = check.random_array((n_python, n_python), seed=seed).tolist()
        b = check.random_array((n_python, n_python), seed=seed + 1).tolist()
        out.append(bench.benchmark(matmul_python, a, b, label=f"Python loops (n={n_python})",
                                   flops=matmul.flops(n_python, n_python, n_python),
                                   size=n_python, backend="cpu", min_time_s=min_time_s,
                                   min_samples=3, warmup_s=0.0))
    A = check.random_array((n, n), seed=seed + 2)
    B = check.random_array((n, n), seed=seed + 3)
    tA, tB = torch.from_numpy(A), torch.from_numpy(B)
    for label, fn, args in ((f"NumPy, one row at a time (n={n})", matmul_numpy_rows, (A, B)),
                            (f"np.matmul, BLAS (n={n})", matmul_numpy_blas, (A, B)),
                            (f"torch.matmul, BLAS (n={n})", matmul_torch_blas, (tA, tB))):
        out.append(bench.benchmark(fn, *args, label=label, flops=matmul.flops(n, n, n), size=n,
                                   backend="cpu", min_time_s=min_time_s, min_samples=3))
    return out


def matmul_size_point(n: int, min_time_s: float = 0.05) -> bench.Timings:
    """The size widget's experiment: the CPU ladder at n (Python loops only while n <= 64),
    or on a GPU the hand-written v2, v3, v6 and cuBLAS at n."""
    if int(n) < 1:
        raise LaunchError(f"matrix size {n} must be at least 1 (e.g. 256).")
    if device.on_gpu():
        res = sgemm.sgemm_ladder(n=n, versions=("matmul_v2_coalesced", "matmul_v3_shared",
                                                "matmul_v6_vectorized"), min_time_s=min_time_s)
        return res["timings"]
    return cpu_ladder(n=n, n_python=min(n, 48), min_time_s=min_time_s, include_python=n <= 64)

