"""Chapter 2 without a notebook: every experiment for the headless runner (``run_all``) and
the GPU acceptance check of ``make gpu-check`` (``gpu_check``) with its thresholds."""
from __future__ import annotations

import time

from ... import check, device
from .allocation import allocation_experiment, pool_demo, toy_pool_run
from .common import MiB
from .loops import GPU_LOOP_CONFIG, check_loops, loop_timelines, time_loops
from .memory_footprint import footprints, peak_memory
from .transfers import GPU_SIZES, QUICK_GPU_SIZES, pinned_over_pageable, transfer_sweep
from .transpose import emulator_problem, tile_access_conflicts, transpose_ladder, transpose_summary


THRESHOLDS = {"padded_pct_of_copy": 80.0, "padded_over_naive": 2.0, "pinned_over_pageable": 1.0,
              "pinned_from_bytes": 64 * MiB}


def gpu_check() -> dict:
    """The chapter's GPU figures, measured, with the pass/fail of each threshold of the issue:
    padded transpose >= 80 % of the copy kernel and >= 2x the naive one; pinned beats
    pageable host-to-device copies at 64 MiB and above. About 30-40 s on a GPU."""
    device.require_cuda("The chapter-2 GPU check", needs="cupy")  # transpose.cu through CuPy
    t0 = time.perf_counter()
    out: dict = {"device": device.describe().short_name, "notes": []}
    problem = emulator_problem()
    if problem:
        out["notes"].append(f"emulator race check and shared-memory trace skipped: {problem}")
    lad = transpose_ladder(min_time_s=0.3)
    summ = transpose_summary(lad)
    out["transpose"] = {"side": lad["side"], "tile": lad["tile"], "gbps": summ["gbps"],
                        "ceiling": summ["ceiling"], "padded_pct_of_copy": summ["padded_pct_of_copy"],
                        "padded_pct_of_each_copy": summ["padded_pct_of_each_copy"],
                        "padded_over_naive": summ["padded_over_naive"],
                        "shared_over_naive": summ["shared_over_naive"],
                        "spec_gbps": lad["spec_gbps"], "conflicts": lad["conflicts"]}
    pct, over = summ["padded_pct_of_copy"], summ["padded_over_naive"]
    checks = {"padded_pct_of_copy": check.at_least(
                  pct, THRESHOLDS["padded_pct_of_copy"],
                  "padded transpose GB/s as % of the tile-shaped copy kernel"),
              "padded_over_naive": check.at_least(
                  over, THRESHOLDS["padded_over_naive"], "padded transpose GB/s / naive transpose GB/s")}
    if device.torch_cuda_works():
        sweep = transfer_sweep(sizes=GPU_SIZES, min_time_s=0.1)
        ratios = pinned_over_pageable(sweep, THRESHOLDS["pinned_from_bytes"])
        out["transfers"] = {k: sweep[k] for k in ("gpu", "sizes", "series", "link_peak_gbps", "model")}
        out["transfers"]["pinned_over_pageable"] = {str(k): v for k, v in ratios.items()}
        worst = min(ratios.values()) if ratios else None
        checks["pinned_over_pageable"] = check.threshold(
            worst, THRESHOLDS["pinned_over_pageable"],
            worst is not None and worst > THRESHOLDS["pinned_over_pageable"],
            rule="more than", what=f"pinned / pageable host-to-device GB/s, smallest ratio at >= "
            f"{THRESHOLDS['pinned_from_bytes'] // MiB} MiB")
        loops = time_loops(min_time_s=0.2)
        out["loops"] = {t.label: {"per_step_ms": t.median_s / t.size * 1e3, "epoch_ms": t.median_s * 1e3}
                        for t in loops}
        out["loops"]["config"] = dict(GPU_LOOP_CONFIG)
        out["peak_memory"] = [peak_memory(dt) for dt in ("fp32", "bf16")]
    else:
        out["notes"].append("transfers, training loops and peak memory skipped: PyTorch has no CUDA here")
    alloc = allocation_experiment(min_time_s=0.1)
    out["allocation"] = {"n": alloc["n"], "median_ms": {d["label"]: d["median_s"] * 1e3
                                                      for d in alloc["timings"]}}
    out["pool"] = pool_demo()
    out["checks"] = checks
    out["passed"] = all(c["passed"] for c in checks.values())
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def run_all(quick: bool = True, progress=None) -> dict:
    """Every experiment of the chapter, as JSON-ready results (for the headless runner)."""
    steps = 6
    done = 0

    def tick():
        nonlocal done
        done += 1
        if progress:
            progress(done / steps)

    out = {"transfers": transfer_sweep(sizes=QUICK_GPU_SIZES if quick and device.is_cuda() else None,
                                       min_time_s=0.05 if quick else 0.2)}
    tick()
    out["loops_model"] = loop_timelines()
    if device.is_cuda() and device.torch_cuda_works():
        out["loops_measured"] = [t.to_dict() for t in time_loops(min_time_s=0.1 if quick else 0.5)]
    else:
        check_loops()
    tick()
    out["bank_conflicts"] = [tile_access_conflicts(t, p) for t in (16, 32) for p in (False, True)]
    out["transpose"] = transpose_ladder(quick=quick)
    tick()
    out["allocation"] = allocation_experiment(min_time_s=0.05 if quick else 0.2)
    out["toy_pool"] = toy_pool_run()
    tick()
    out["footprint"] = footprints()
    tick()
    if device.is_cuda() and device.torch_cuda_works():
        out["peak_memory"] = [peak_memory(dt) for dt in ("fp32", "bf16")]
    tick()
    return out
