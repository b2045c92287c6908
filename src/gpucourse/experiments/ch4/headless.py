"""Chapter 4 without a notebook: every experiment for the headless runner, and the figures
its issue names measured on a GPU with each threshold's pass or fail (``make gpu-check``)."""
from __future__ import annotations

from ... import check, device
from .atomics import histogram
from .block_size import block_size_sweep, measure_saxpy
from .reduce_ladder import reduction
from .stream_overlap import streams
from .warp_divergence import divergence


def run_all(quick: bool = True, progress=None) -> dict:
    """Every experiment of the chapter, as JSON-ready results (for the headless runner)."""
    t = 0.05 if quick else 0.2
    steps = []

    def step(name, fn):
        steps.append(name)
        r = fn()
        if progress:
            progress(len(steps) / 5)
        return r

    out = {"block_size_sweep": step("sweep", lambda: block_size_sweep(min_time_s=t))}
    out["divergence"] = step("divergence", lambda: divergence(min_time_s=t))
    out["streams"] = step("streams", lambda: streams())
    out["histogram"] = step("histogram", lambda: histogram(min_time_s=t))
    out["reduction"] = step("reduction", lambda: reduction(min_time_s=t))
    return out


def gpu_check() -> dict:
    """The figures chapter 4's issue names, measured on this GPU, with each threshold's pass/fail."""
    device.require_cuda("chapter 4's GPU check", needs="cupy")
    sweep = block_size_sweep(min_time_s=0.05)
    times = sweep["measured"]["median_s"]
    best = min(times)
    rec = sweep["recommended"]
    if rec in sweep["block_sizes"]:
        rec_time = times[sweep["block_sizes"].index(rec)]
    else:
        rec_time = measure_saxpy(rec, sweep["n"], min_time_s=0.05).median_s
        best = min(best, rec_time)
    hist = histogram(skews=(0.0, 1.0), min_time_s=0.05)
    st = streams(n_streams=4, chunks=32)
    red = reduction(min_time_s=0.05)
    best_red = max((t for t in red["measured"] if t["label"].startswith("reduce_v")),
                   key=lambda t: t["gbps"])
    copy_gbps = red["copy"]["gbps"]
    div = divergence(min_time_s=0.05)
    checks = {
        "block_size": check.at_most(rec_time / best, 1.10,
                                    f"time at the recommended block {rec} / best time of the sweep"),
        "histogram_skewed_speedup": check.at_least(hist["measured"]["speedup"][-1], 3.0,
                                                   "privatized vs global atomics on skewed data (x)"),
        "streams_overlap": check.at_most(st["overlap_vs_bound"], 1.20,
                                         "multi-stream total / max(copy, compute), copy = " +
                                         ("in and out measured together" if st["copy_engines"] >= 2
                                          else "in, then out (one copy engine)")),
        "reduction_vs_copy": check.at_least(best_red["gbps"] / copy_gbps, 0.80,
                                            f"best reduction ({best_red['label']}) GB/s / copy GB/s"),
    }
    return {
        "checks": checks,
        "passed": all(c["passed"] for c in checks.values()),
        "block_sweep": {"block_sizes": sweep["block_sizes"], "gbps": sweep["measured"]["gbps"],
                        "median_s": times, "n": sweep["n"], "recommended": rec,
                        "regs_per_thread": sweep["regs_per_thread"],
                        "regs_source": sweep["regs_source"]},
        "divergence": {"versions": div["versions"], "median_s": div["measured"]["median_s"],
                       "n": div["n"], "k": div["k"]},
        "histogram": {"skews": hist["skews"], "v1_s": hist["measured"]["v1_s"],
                      "v2_s": hist["measured"]["v2_s"], "speedup": hist["measured"]["speedup"],
                      "n": hist["n"]},
        "streams": {k: st[k] for k in ("n_streams", "chunks", "bytes", "h2d_s", "compute_s",
                                        "d2h_s", "duplex_s", "copy_s", "bound_s", "bound_isolated_s",
                                        "copy_engines", "overlap_vs_bound",
                                        "overlap_vs_isolated_bound")}
        | {"serial_s": st["serial"]["total_s"], "synced_s": st["synced"]["total_s"],
           "multi_s": st["multi"]["total_s"], "multi_ops": st["multi"]["ops"]},
        "reduction": {"labels": [t["label"] for t in red["measured"]],
                      "gbps": [t["gbps"] for t in red["measured"]],
                      "median_s": [t["median_s"] for t in red["measured"]],
                      "copy_gbps": copy_gbps, "n": red["n"]},
    }

