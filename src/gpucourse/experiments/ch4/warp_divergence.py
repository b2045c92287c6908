"""Section 2 of chapter 4, warp divergence: the three divergence.cu versions checked, timed on
a GPU, and the warp-efficiency model of each everywhere."""
from __future__ import annotations

import numpy as np

from ... import bench, check, device, kernels, models
from ...emulator.launch import ceil_div
from ...kernels import divergence as divergence_cu
from ...models import WARP_SIZE
from .common import references, xp


def branch_lanes(version: str, n: int, block: int = divergence_cu.BLOCK) -> list[list[int]]:
    """Per warp, the number of active lanes on each branch path (v3 has one path)."""
    grid = divergence_cu.launch(version, n, block).grid
    g = np.arange(grid * block)
    i = divergence_cu.element_of_thread(version, g)
    active = i < n
    out = []
    for w in range(ceil_div(g.size, WARP_SIZE)):
        sl = slice(w * WARP_SIZE, (w + 1) * WARP_SIZE)
        act, idx = active[sl], i[sl]
        if not act.any():
            continue
        if version == "divergence_v3_branch_free":
            out.append([int(act.sum())])
        else:
            odd = (idx % 2 == 1) & act
            even = (idx % 2 == 0) & act
            out.append([int(even.sum()), int(odd.sum())])
    return out


def divergence_model(n: int = 1 << 16, block: int = divergence_cu.BLOCK) -> dict:
    """Warp efficiency (models.warp_efficiency) averaged over all warps, and the modelled passes per warp."""
    out = {}
    for v in divergence_cu.VERSIONS:
        effs = [models.warp_efficiency(lanes) for lanes in branch_lanes(v, n, block)]
        out[v] = {"efficiency": float(np.mean([e.efficiency for e in effs])),
                  "passes": float(np.mean([e.passes for e in effs])),
                  "example": str(effs[0])}
    return out


def check_divergence(sizes=(1, 63, 1000 + 3), blocks=(64, 256), k: int = 6, seed: int = 7) -> int:
    """All three divergence kernels against the float64 reference at awkward sizes."""
    mod = kernels.load("divergence")
    launches = 0
    for n in sizes:
        x = check.random_array(n, np.float32, seed=seed + n, kind="uniform")
        want, tol = divergence_cu.reference(x, k), divergence_cu.tolerance(x, k)
        for bs in blocks:
            for v in divergence_cu.VERSIONS:
                y = device.empty(n, np.float32)
                divergence_cu.launch(v, n, bs).run(getattr(mod, v),
                                                   divergence_cu.args(device.asarray(x), y, n, k))
                check.assert_close(device.to_host(y), want, rtol=0, atol=tol,
                                   name=f"{v} with n={n}, block {bs}")
                launches += 1
    return launches


def divergence(n: int | None = None, k: int | None = None, block: int = divergence_cu.BLOCK,
               min_time_s: float = 0.1) -> dict:
    """Check the three kernels; time them on a GPU; the warp-efficiency model everywhere."""
    check_divergence()
    n = int(n or ((1 << 24) if device.on_gpu() else 1 << 16))
    k = int(k or 256)
    out = {"device": device.describe().short_name, "backend": device.backend(), "n": n, "k": k,
           "block": block, "versions": list(divergence_cu.VERSIONS),
           "model": divergence_model(min(n, 1 << 16), block), "measured": None,
           "reference": references("divergence", "median_s")}
    if device.on_gpu():
        mod = kernels.load("divergence")
        cp = xp()
        x = cp.random.default_rng(1).random(n, dtype=np.float32)
        y = cp.empty(n, dtype=cp.float32)
        args = divergence_cu.args(x, y, n, k)
        times = [bench.benchmark(lambda f=getattr(mod, v), s=divergence_cu.launch(v, n, block):
                                 s.run(f, args),
                                 label=v, flops=divergence_cu.flops(n, k), size=n,
                                 min_time_s=min_time_s)
                 for v in divergence_cu.VERSIONS]
        out["measured"] = {"median_s": [t.median_s for t in times],
                           "p20_s": [t.p20_s for t in times], "p80_s": [t.p80_s for t in times],
                           "gflops": [t.gflops for t in times], "method": times[0].method}
    return out
