"""Chapter 1, section 3: host transfer against on-device compute. A vector add and a matmul
computed on the CPU (measured), their inputs sent over the host link and computed on a GPU
(measured where PyTorch has one), and the transfer and roofline models of a GPU."""
from __future__ import annotations

import numpy as np

from ... import bench, check, device, models
from ...errors import whole_number
from ...kernels import vector_add as vector_add_home
from ...precision import matmul_error_bound
from .common import MiB, big_random, minimum_work, model_spec, torch_cuda


def _work(op: str, nbytes: int, matmul_n: int, elem_bytes: int = 4) -> dict:
    """FLOPs, device bytes, bytes sent to the device and brought back, for one operation.

    Vector add: two inputs of ``nbytes`` each and one output. Matmul: two square
    ``matmul_n`` x ``matmul_n`` matrices and their product.
    """
    if op not in ("vector add", "matmul"):
        raise ValueError(f"op {op!r} is not modelled here; use 'vector add' or 'matmul'.")
    n, m = nbytes // elem_bytes, int(matmul_n)
    flops, dev_bytes = minimum_work(n, m, elem_bytes)[op]
    b, size = (nbytes, n) if op == "vector add" else (m * m * elem_bytes, m)
    return {"flops": flops, "dev_bytes": dev_bytes, "input_bytes": b, "up": 2 * b, "down": b,
            "size": size}


def _host_inputs(op: str, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    if op == "vector add":
        return big_random(size, seed), big_random(size, seed + 1)
    return (check.random_array((size, size), np.float32, seed=seed, kind="uniform"),
            check.random_array((size, size), np.float32, seed=seed + 1, kind="uniform"))


def _check_result(op: str, a: np.ndarray, b: np.ndarray, out: np.ndarray, where: str) -> None:
    if op == "vector add":  # one rounding of an exact float64 sum: at most 2^-24 of |a + b|
        check.assert_close(out, a.astype(np.float64) + b, *vector_add_home.EXACT_TOLERANCE,
                           name=f"a + b on the {where}")
    else:  # the first rows against float64: enough to catch a wrong product, cheap at any size
        rows = min(64, a.shape[0])
        # Dots of K terms in any order: gamma_K * max(|a| @ |b|) (precision.matmul_error_bound).
        check.assert_close(out[:rows], a[:rows].astype(np.float64) @ b, rtol=0,
                           atol=matmul_error_bound(a[:rows], b), name=f"a @ b on the {where}")


def _cpu_compute(op: str, w: dict, seed: int, min_time_s: float) -> bench.Timing:
    a, b = _host_inputs(op, w["size"], seed)
    out = np.empty_like(a)
    fn = np.add if op == "vector add" else np.matmul
    fn(a, b, out=out)
    _check_result(op, a, b, out, "CPU")
    return bench.benchmark(fn, a, b, out=out, label=f"{op} on the CPU", flops=w["flops"],
                           min_time_s=min_time_s, warmup_s=0.01, backend="cpu")


def _gpu_transfer_and_compute(op: str, w: dict, seed: int, min_time_s: float) -> dict:
    """Measured on the GPU with PyTorch: pinned and pageable H2D, compute, pinned D2H."""
    import torch  # heavy: loaded only where a GPU runs PyTorch

    a, b = _host_inputs(op, w["size"], seed)
    host = [torch.from_numpy(a), torch.from_numpy(b)]
    pinned = [h.pin_memory() for h in host]
    dev = [torch.empty_like(h, device="cuda") for h in host]
    out = torch.empty_like(dev[0])
    out_host = torch.empty_like(host[0]).pin_memory()

    def h2d(src):
        for d, h in zip(dev, src):
            d.copy_(h, non_blocking=True)

    if op == "vector add":
        fn = lambda: torch.add(dev[0], dev[1], out=out)  # noqa: E731
    else:
        fn = lambda: torch.mm(dev[0], dev[1], out=out)  # noqa: E731
    h2d(pinned)
    fn()
    out_host.copy_(out)
    _check_result(op, a, b, out_host.numpy(), "GPU")
    t_pin = bench.benchmark(h2d, pinned, label="H2D pinned", bytes=w["up"], min_time_s=min_time_s)
    t_page = bench.benchmark(h2d, host, label="H2D pageable", bytes=w["up"], min_time_s=min_time_s)
    t_comp = bench.benchmark(fn, label=f"{op} on the GPU", flops=w["flops"], bytes=w["dev_bytes"],
                             min_time_s=min_time_s)
    t_d2h = bench.benchmark(lambda: out_host.copy_(out, non_blocking=True), label="D2H pinned",
                            bytes=w["down"], min_time_s=min_time_s)
    return {"h2d_pinned_s": t_pin.median_s, "h2d_pageable_s": t_page.median_s,
            "compute_s": t_comp.median_s, "d2h_s": t_d2h.median_s,
            "h2d_pinned_gbps": t_pin.gbps, "h2d_pageable_gbps": t_page.gbps}


def transfer_vs_compute(gpu: str | None = None, nbytes: int = 16 * MiB, matmul_n: int = 1024,
                        ops=("vector add", "matmul"), seed: int = 0, min_time_s: float = 0.05) -> dict:
    """Send the inputs over the host link, compute, bring the result back, against computing on the CPU.

    The CPU time is measured here. On a GPU (with PyTorch's CUDA) the transfers and the
    device compute are measured too; the ``models.transfer_time`` and ``models.roofline``
    figures for ``gpu`` come alongside, labelled as a model.
    """
    whole_number(nbytes, "nbytes", "16 * MiB", minimum=4)  # at least one float32 element
    whole_number(matmul_n, "matmul_n", 1024)
    spec = model_spec(gpu)
    rows = []
    for op in ops:
        w = _work(op, nbytes, matmul_n)
        cpu = _cpu_compute(op, w, seed, min_time_s)
        row = {"op": op, "nbytes": w["input_bytes"], "size": w["size"], "flops": w["flops"],
               "cpu_s": cpu.median_s, "gpu": spec.key, "model": {
                   "h2d_pinned_s": 2 * models.transfer_time(w["input_bytes"], spec, pinned=True).time,
                   "h2d_pageable_s": 2 * models.transfer_time(w["input_bytes"], spec, pinned=False).time,
                   "compute_s": models.roofline(w["flops"], w["dev_bytes"], spec,
                                                launch=models.LAUNCH_OVERHEAD_S).time,
                   "d2h_s": models.transfer_time(w["down"], spec, pinned=True).time}}
        if torch_cuda():
            row["measured"] = _gpu_transfer_and_compute(op, w, seed, min_time_s)
        rows.append(row)
    return {"device": device.describe().short_name, "gpu": spec.key, "gpu_name": spec.name,
            "link": f"PCIe gen {spec.pcie_gen} x{spec.pcie_lanes}", "rows": rows}


def transfer_sweep(gpu: str | None = None, sizes=None) -> dict:
    """Model over sizes: moving a vector add's inputs over PCIe against adding them in device
    memory (one launch: its fixed cost + the roofline time)."""
    spec = model_spec(gpu)
    sizes = list(sizes or [2**k for k in range(12, 31, 2)])
    h2d, comp = [], []
    for s in sizes:
        w = _work("vector add", s, 0)
        h2d.append(2 * models.transfer_time(s, spec, pinned=True).time)
        comp.append(models.roofline(w["flops"], w["dev_bytes"], spec,
                                    launch=models.LAUNCH_OVERHEAD_S).time)
    return {"gpu": spec.key, "gpu_name": spec.name, "sizes": sizes, "h2d_s": h2d, "compute_s": comp,
            "ratio": [a / b for a, b in zip(h2d, comp)]}

