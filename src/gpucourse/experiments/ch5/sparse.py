"""Chapter 5, section 3: dense against sparse (CSR) products across densities, each checked
against the dense result, then timed, and the density where they cross."""
from __future__ import annotations

import warnings

import numpy as np

from ... import bench, check, device, precision
from ...errors import fraction
from .common import load_torch, threads_for, torch_on_gpu


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
        return load_torch().from_numpy(sparse_matrix(n, density, seed=seed))
    torch = load_torch()
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
    for d in densities:  # the fraction of non-zeros
        fraction(d, "density", "0.01, 1 % non-zeros")
    torch = load_torch()
    dev = device.torch_device()
    backend = dev
    cfg = SPARSE_GPU if dev == "cuda" else SPARSE_CPU
    n, k = n or cfg["n"], k or cfg["k"]
    use_cupyx = device.on_gpu() if cupyx is None else cupyx
    D = torch.from_numpy(check.random_array((n, k), seed=seed + 1, kind="uniform")).to(dev)
    out = {"n": n, "k": k, "densities": list(densities), "sparse_s": [], "nnz": [],
           "device": None, "library": "cuSPARSE" if dev == "cuda" else "MKL sparse BLAS"}
    if use_cupyx:
        out["cupyx_s"] = []
    dense_t = None
    for i, dens in enumerate(densities):
        S = _sparse_matrix_torch(n, dens, seed + 7 * i, dev)
        with device.tf32(False), threads_for(backend), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "sparse CSR support is in beta"
            ref = S @ D
            if dense_t is None:
                dense_t = bench.benchmark(lambda: S @ D, label="dense matmul", flops=2.0 * n * n * k,
                                          size=n, backend=backend, min_time_s=min_time_s,
                                          min_samples=3)
            S_csr = S.to_sparse_csr()
            # Two float32 products (CSR and dense), each within gamma_n * max(|S| @ |D|) of
            # the exact one, in whatever order their libraries add.
            allowed = 2 * precision.matmul_error_bound(S, D)
            check.assert_close((S_csr @ D).cpu(), ref.cpu(), rtol=0, atol=allowed,
                               name=f"CSR product at density {dens:g}")
            t = bench.benchmark(lambda: S_csr @ D, label=f"CSR at {dens:g}",
                                flops=2.0 * S_csr._nnz() * k, size=dens, backend=backend,
                                min_time_s=min_time_s, min_samples=3)
        out["sparse_s"].append(t.median_s)
        out["nnz"].append(int(S_csr._nnz()))
        if use_cupyx:
            import cupy as cp  # optional: present only where a GPU is
            import cupyx.scipy.sparse as cps  # optional: CuPy's sparse module

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

