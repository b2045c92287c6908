"""Section 5 of chapter 4, the reduction ladder: every reduce.cu version checked exactly; on a
GPU timed with the library sums against a device copy (the ceiling), on the CPU the library
sums against the faster of a copy and a read-only dot product on every core."""
from __future__ import annotations

import math

import numpy as np

from ... import bench, check, device, reference
from ...display import Table
from ...emulator.launch import ceil_div
from ...errors import whole_number
from ...kernels import reduce as reduce_cu
from ...specs import model_gpu
from ..cpu import dot_on_every_core, exact_sum_data
from .common import copy_ceiling, references


def check_reduce(sizes=(1, 31, 33, 1000 + 1, 65_537), seed: int = 9) -> int:
    """Every reduce.cu version against a float64 sum at awkward sizes."""
    launches = 0
    for n in sizes:
        # Random +-1: every order of a float32 sum of them is exact (exact_sum_data), so each
        # version must give exactly the float64 sum, and one element lost or added shows.
        x = exact_sum_data(n, seed=seed + n)
        want = reduce_cu.reference(x)
        dx = device.asarray(x)
        for v in reduce_cu.VERSIONS:
            got = float(device.to_host(reduce_cu.run(v, dx, n, sm_count=4))[0])
            if got != want:
                raise AssertionError(f"{v} with n={n}: got {got!r}, expected exactly {want!r} "
                                     "(a sum of +-1 values is exact in float32).")
            launches += 1
    return launches


def reduction_references() -> list[dict]:
    """The ladder on real GPUs: each reference file's ch4/reduction, else the reduce.cu rows of its
    kernel sweep (labelled with that sweep's date and command) against the same file's library
    device-to-device copy (chapter 1's check), or the sweep's best copy.cu where it has none."""
    out = references("reduction", "gbps")
    if out:
        return out
    for ref, rows in reference.find("kernels", "rows"):
        if not isinstance(rows, list):
            continue
        red = [r for r in rows if isinstance(r, dict) and r.get("file") == "reduce" and r.get("gbps")]
        copies = [r for r in rows if isinstance(r, dict) and r.get("file") == "copy" and r.get("gbps")]
        if not red or not copies:
            continue
        # The ceiling the chapter names is a library copy: a copy kernel of our own can fall well
        # short of it (copy_v1_coalesced reached 59 % of it on an H200), flattering the ladder.
        library = ref.results.get("ch1", {}).get("stride_sweep", {})
        library_gbps = library.get("ceiling_gbps") if isinstance(library, dict) else None
        if library_gbps:
            copy_gbps, copy_label = library_gbps, "library device-to-device copy (chapter 1's check)"
        else:
            best = max(copies, key=lambda r: r["gbps"])
            copy_gbps, copy_label = best["gbps"], f"{best['kernel']}, same sweep"
        out.append({"label": f"{ref.label}, kernel sweep", "gpu": ref.gpu, "command": ref.command,
                    "source": "kernel sweep", "labels": [r["kernel"] for r in red],
                    "gbps": [r["gbps"] for r in red], "median_s": [r["median_s"] for r in red],
                    "n": red[0].get("size"), "copy_gbps": copy_gbps, "copy_label": copy_label})
    return out


def reduction(n: int | None = None, min_time_s: float = 0.1) -> dict:
    """Check every version; on a GPU time them, the library sums and a device copy (the ceiling);
    on the CPU time the library sums against the faster of a copy and a read-only dot product
    on every core."""
    check_reduce()
    versions = list(reduce_cu.VERSIONS)
    out = {"device": device.describe().short_name, "backend": device.backend(),
           "versions": versions, "measured": None,
           "reference": reduction_references()}
    if device.on_gpu():
        out.update(_gpu_ladder(versions, int(n or (1 << 28)), min_time_s))
    else:
        out.update(_cpu_library_sums(int(n or (1 << 24)), min_time_s))
    return out


def _gpu_ladder(versions: list[str], n: int, min_time_s: float) -> dict:
    """Every version, cupy.sum (and torch.sum where PyTorch has CUDA) and a device copy, timed."""
    import cupy as cp  # optional: installed only where there is a GPU

    # Random +-1: v1's chain of n atomics has no useful float32 bound on other data (n*u =
    # 16 at 2^28), but on these every order gives the exact sum (exact_sum_data).
    x = exact_sum_data(n, seed=2, xp=cp)
    sms = device.describe().sm_count
    res = cp.zeros(1, dtype=cp.float32)
    want = float(cp.sum(x, dtype=cp.float64))

    def checked(label, got):
        if float(got) != want:
            raise AssertionError(f"{label} at n={n} on the GPU: got {got}, expected exactly "
                                 f"{want} (a sum of +-1 values is exact in float32).")

    timings = []
    for v in versions:
        checked(v, reduce_cu.run(v, x, n, res, sms).get()[0])
        # v1 queues n atomics on one address: a few samples are enough, and slow.
        few = {"min_samples": 3, "warmup_s": 0.0} if v.startswith("reduce_v1") else {}
        timings.append(bench.benchmark(lambda v=v: reduce_cu.run(v, x, n, res, sms), label=v,
                                       bytes=reduce_cu.bytes_moved(n), size=n,
                                       min_time_s=min_time_s, **few))
    libraries = [("ref: cupy.sum", x, cp.sum)]
    if device.torch_cuda_works():  # CuPy alone is enough for the kernels
        import torch  # optional on a GPU: the kernels need only CuPy

        libraries.append(("ref: torch.sum", torch.as_tensor(x, device="cuda"), torch.sum))
    for label, data, fn in libraries:
        checked(label, fn(data))
        timings.append(bench.benchmark(fn, data, label=label, bytes=reduce_cu.bytes_moved(n),
                                       size=n, min_time_s=min_time_s))
    copy = copy_ceiling(x)
    out = {"measured": [t.to_dict() for t in timings], "copy": copy.to_dict(), "n": n}
    del x, libraries
    return out


def _cpu_library_sums(n: int, min_time_s: float) -> dict:
    """numpy.sum and torch.sum on the CPU, against the faster of a copy and a dot product."""
    import torch  # heavy: loaded only when the CPU ladder runs

    # Random +-1: a float32 sum of 2^24 terms has no useful worst-case bound (n * 2^-24 = 1)
    # and each library picks its own order and thread split; on these values every order
    # is exact (exact_sum_data), so the check demands equality. Values do not change speed.
    x = exact_sum_data(n, seed=3)
    tx = torch.from_numpy(x)
    want = reduce_cu.reference(x)
    for got in (float(np.sum(x)), float(torch.sum(tx))):
        check.assert_close(np.float64(got), np.float64(want), rtol=0, atol=0,
                           name="library sum on the CPU")
    timings = [bench.benchmark(np.sum, x, label="numpy.sum", bytes=reduce_cu.bytes_moved(n),
                               size=n, min_time_s=min_time_s, backend="cpu"),
               bench.benchmark(torch.sum, tx, label="torch.sum", bytes=reduce_cu.bytes_moved(n),
                               size=n, min_time_s=min_time_s, backend="cpu")]
    return {"cpu_measured": [t.to_dict() for t in timings],
            "copy": max(copy_ceiling(x), dot_on_every_core(x, min_time_s=min_time_s),
                        key=lambda t: t.gbps).to_dict(),
            "n": n}


def reduce_counts(n: int, gpu=None) -> Table:
    """Per launch of each rung at ``n`` elements: blocks, global atomics, barriers per block (counted from the launch shape, not timed)."""
    whole_number(n, "n", "1 << 28")
    spec = model_gpu(gpu)
    rows = []
    for v in reduce_cu.VERSIONS:
        grid, block, _ = reduce_cu.launch(v, n, spec.sm_count)
        atomics = n if v.startswith("reduce_v1") else grid
        barriers = {"reduce_v1": 0, "reduce_v2": int(math.log2(block)) + 1}.get(v[:9], 1)
        rows.append((v, f"{grid:,} blocks of {block}, {ceil_div(n, grid * block)} element(s) "
                        f"per thread, {atomics:,} global atomics, {barriers} barrier(s) per block"))
    return Table.pairs(rows, caption=f"Launch shape of each rung for n = {n:,} on {spec.name} (counted)")
