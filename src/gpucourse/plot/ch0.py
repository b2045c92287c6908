"""Figures of chapter 0 from ``experiments.ch0.run_all`` results."""
from __future__ import annotations

from ..bench import Timing, Timings
from . import ladder, sweep


def figures(results: dict) -> dict:
    timings = Timings(Timing.from_dict(d) for d in results["loop_vs_vectorized"])
    s = results["size_sweep"]
    return {
        "loop_vs_vectorized": ladder(timings, metric="gflops",
                                         title_text="Sum of squares: loop vs vectorized"),
        "size_sweep": sweep(s["sizes"], {k: [t * 1e3 for t in v] for k, v in s.items()
                                              if k != "sizes"},
                                xlabel="elements", ylabel="median time per call (ms)",
                                title_text="Python loop vs vectorized", logx=True, logy=True),
    }
