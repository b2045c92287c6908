"""Experiments 3 and 4, model and pipeline parallelism: the MLP split over the workers, checked
against the whole model, then timed and traced with 1 and m micro-batches (``pipeline``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ... import bench, models
from ...bench import format_time as _fmt_s
from ...errors import whole_number
from .common import _size, _slowest, _table
from .data import CHECK_WIDTH, PIPE_DEPTH, PIPE_ROWS, PIPE_WIDTH, split_stages
from .pool import Workers, _pool
from .tasks import _task_pipeline
from .worker import DistributedError


@dataclass
class PipelineRun:
    """One micro-batch count: step time, one step's timeline per stage, measured bubble."""

    microbatches: int
    timing: bench.Timing
    events: list[list[tuple[int, str, float, float]]]  # per stage: (micro-batch, phase, start, end)

    def __repr__(self) -> str:
        return (f"{self.microbatches} micro-batch(es): median step {_fmt_s(self.timing.median_s)}, "
                f"idle {self.bubble:.0%}")

    @property
    def span(self) -> float:
        starts = [a for ev in self.events for _, _, a, _ in ev]
        ends = [b for ev in self.events for _, _, _, b in ev]
        return max(ends) - min(starts)

    def busy(self, stage: int) -> float:
        return sum(b - a for _, _, a, b in self.events[stage])

    @property
    def bubble(self) -> float:
        """Measured idle share of the step, averaged over stages: 1 - busy / span."""
        span = self.span
        return float(np.mean([1 - self.busy(s) / span for s in range(len(self.events))]))

    def idle(self) -> list[float]:
        """Idle share of each stage in this step."""
        span = self.span
        return [1 - self.busy(s) / span for s in range(len(self.events))]

    @property
    def backward_ratio(self) -> float:
        f = [b - a for ev in self.events for _, ph, a, b in ev if ph == "forward"]
        bw = [b - a for ev in self.events for _, ph, a, b in ev if ph == "backward"]
        return float(np.median(bw) / np.median(f)) if f and bw and np.median(f) > 0 else 2.0


@dataclass
class Pipeline:
    """The model split over ``stages`` workers, run with several micro-batch counts."""

    stages: int
    rows: int
    runs: list[PipelineRun]
    stage_param_bytes: list[int]
    whole_param_bytes: int
    layers: list[list[int]]
    peak_bytes: list[int | None]
    backend: str
    device: str

    def check_line(self) -> str:
        """The deterministic line that says the split was checked before it was timed."""
        ms = " and ".join(str(r.microbatches) for r in self.runs)
        return (f"Every stage's gradients match the whole model's full-batch gradients "
                f"({self.stages} stage(s), {ms} micro-batch(es)): checked on a float64 copy of "
                f"the split with layers of {CHECK_WIDTH}, within float64's rounding-error bound.")

    def run_for(self, m: int) -> PipelineRun:
        return next(r for r in self.runs if r.microbatches == m)

    def model(self, m: int) -> models.PipelineBubble:
        r = self.run_for(m)
        return models.pipeline_bubble(self.stages, m, backward_ratio=max(r.backward_ratio, 1e-3))

    @property
    def speedup(self) -> float:
        """Step time with 1 micro-batch over the step time with the most micro-batches."""
        return self.runs[0].timing.median_s / self.runs[-1].timing.median_s

    def memory_rows(self) -> list[tuple[str, int]]:
        rows = [("one device holds the whole model", self.whole_param_bytes)]
        rows += [(f"stage {s} (layers {a}–{b - 1})", n)
                 for s, ((a, b), n) in enumerate(zip(self.layers, self.stage_param_bytes))]
        return rows

    def to_dict(self) -> dict:
        return {"stages": self.stages, "rows": self.rows,
                "runs": [{"microbatches": r.microbatches, "timing": r.timing.to_dict(),
                          "events": r.events, "bubble": r.bubble} for r in self.runs],
                "stage_param_bytes": self.stage_param_bytes,
                "whole_param_bytes": self.whole_param_bytes, "layers": self.layers,
                "peak_bytes": self.peak_bytes, "backend": self.backend, "device": self.device}

    @classmethod
    def from_dict(cls, d: dict) -> "Pipeline":
        runs = [PipelineRun(r["microbatches"], bench.Timing.from_dict(r["timing"]),
                            [[tuple(e) for e in ev] for ev in r["events"]]) for r in d["runs"]]
        return cls(d["stages"], d["rows"], runs, d["stage_param_bytes"], d["whole_param_bytes"],
                   d["layers"], d["peak_bytes"], d["backend"], d["device"])

    def __repr__(self) -> str:
        return (f"pipeline over {self.stages} stage(s) ({self.backend}): "
                + "; ".join(repr(r) for r in self.runs))

    def _repr_html_(self) -> str:
        base = self.runs[0].timing
        rows = [(r.timing.label, _fmt_s(r.timing.median_s),
                 f"{_fmt_s(r.timing.p20_s)} – {_fmt_s(r.timing.p80_s)}",
                 f"{r.timing.speedup_over(base):.2f}×", f"{r.bubble:.0%}",
                 f"{self.model(r.microbatches).bubble_fraction:.0%}") for r in self.runs]
        return _table(("micro-batches", "median step", "p20 – p80", "speed-up",
                       "bubble (measured)", "bubble (model)"), rows,
                      f"{self.stages} stages, batch of {self.rows} rows, {self.backend} on "
                      f"{self.device}")


def pipeline(pool: Workers | int | None = None, microbatches: Sequence[int] = (1, 4),
             rows: int | None = None, samples: int = 3, seed: int = 0) -> Pipeline:
    """Split the MLP over the workers; check, time and trace 1 and m micro-batches.

    With 1 micro-batch this is plain model parallelism: each stage waits for the others.
    ``rows`` in the batch: 250 on the CPU, 8192 on GPUs by default.
    """
    whole_number(samples, "samples", 5)
    pool = _pool(pool)
    rows = _size(pool, PIPE_ROWS, 8192, rows)
    ms = [int(m) for m in ((microbatches,) if isinstance(microbatches, int) else microbatches)]
    if any(m < 1 or m > rows for m in ms):
        raise DistributedError(f"micro-batch counts must be between 1 and the batch's {rows} rows, "
                               f"got {ms}.")
    split_stages(PIPE_DEPTH, pool.n)  # a clear error before any process works
    res = pool.run(_task_pipeline, PIPE_WIDTH, PIPE_DEPTH, rows, ms, samples, seed)
    t0s = [min(e[2] for r in res for e in r["runs"][i]["events"]) for i in range(len(ms))]
    runs = []
    for i, m in enumerate(ms):
        timing = _slowest(r["runs"][i]["timing"] for r in res)
        events = [[(j, ph, a - t0s[i], b - t0s[i]) for j, ph, a, b in r["runs"][i]["events"]]
                  for r in res]
        runs.append(PipelineRun(m, timing, events))
    out = Pipeline(pool.n, rows, runs, [r["stage_param_bytes"] for r in res],
                   res[0]["whole_param_bytes"], [r["layers"] for r in res],
                   [r["runs"][-1]["peak_bytes"] for r in res], pool.backend,
                   res[0]["device_name"])
    return out
