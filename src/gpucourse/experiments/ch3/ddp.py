"""Experiment 1, data parallelism with DDP: its gradients equal the single-process full-batch
gradients (``ddp_check``), then one worker against n (``ddp_scaling``)."""
from __future__ import annotations

from dataclasses import dataclass

from ... import bench
from ...bench import format_time as _fmt_s
from ...errors import whole_number
from .bounds import _check_grads
from .common import _size, _slowest, _table
from .data import CHECK_DEPTH, CHECK_WIDTH, DDP_DEPTH, DDP_WIDTH
from .pool import Workers, _pool
from .tasks import _task_ddp_grads, _task_ddp_throughput


@dataclass
class GradientCheck:
    """Gradients of a parallel run against the single-process full-batch gradients."""

    what: str
    workers: int
    tensors: int
    max_rel_error: float

    def __str__(self) -> str:
        return (f"{self.what} on {self.workers} workers match the single-process full-batch "
                f"gradients ({self.tensors} tensors in float64, every element within its "
                "rounding-error bound).")

    __repr__ = __str__


def ddp_check(pool: Workers | int | None = None, per_worker: int = 37, seed: int = 0) -> GradientCheck:
    """DDP's averaged gradients equal the single-process gradients of the full batch.

    Each of the ``n`` workers takes an equal shard of ``per_worker`` rows (an awkward size)
    of one seeded batch; rank 0 also runs the whole batch without DDP. Both run in float64:
    sharding only regroups the sum over rows, so each element may differ by float64's
    rounding (``mlp_grad_bound``, a worst case for any order and core count), while a rank
    that skips the averaging or sees one shard only is off by far more. Float32's worst-case
    bound on the same model would be wider than some gradients.
    """
    pool = _pool(pool)
    res = pool.run(_task_ddp_grads, CHECK_WIDTH, CHECK_DEPTH, per_worker, seed)
    ref, bound, names = res[0]["reference"], res[0]["bound"], res[0]["names"]
    worst = 0.0
    for r in res:
        worst = max(worst, _check_grads(r["ddp"], ref, bound, names,
                                        f"DDP gradient on rank {r['rank']}",
                                        "DDP did not average the shards' gradients"))
    return GradientCheck("DDP gradients", pool.n, len(names), worst)


@dataclass
class Scaling:
    """Throughput of 1 worker against n DDP workers (weak scaling: same batch per worker)."""

    single: bench.Timing
    multi: bench.Timing
    workers: int
    per_worker: int
    params: int
    backend: str
    device: str

    @property
    def single_throughput(self) -> float:
        """Samples per second of one worker."""
        return self.per_worker / self.single.median_s

    @property
    def multi_throughput(self) -> float:
        return self.per_worker * self.workers / self.multi.median_s

    @property
    def speedup(self) -> float:
        return self.multi_throughput / self.single_throughput

    @property
    def efficiency(self) -> float:
        """Speed-up divided by the number of workers (1.0 is perfect scaling)."""
        return self.speedup / self.workers

    def to_dict(self) -> dict:
        return {"single": self.single.to_dict(), "multi": self.multi.to_dict(),
                "workers": self.workers, "per_worker": self.per_worker, "params": self.params,
                "backend": self.backend, "device": self.device,
                "single_throughput": self.single_throughput,
                "multi_throughput": self.multi_throughput, "efficiency": self.efficiency}

    @classmethod
    def from_dict(cls, d: dict) -> "Scaling":
        return cls(bench.Timing.from_dict(d["single"]), bench.Timing.from_dict(d["multi"]),
                   d["workers"], d["per_worker"], d["params"], d["backend"], d["device"])

    def __str__(self) -> str:
        return (f"1 worker: {self.single_throughput:.0f} samples/s; {self.workers} workers "
                f"(DDP, {self.backend}): {self.multi_throughput:.0f} samples/s; speed-up "
                f"{self.speedup:.2f}x, scaling efficiency {self.efficiency:.0%}")

    __repr__ = __str__

    def _repr_html_(self) -> str:
        rows = [(t.label, _fmt_s(t.median_s), f"{_fmt_s(t.p20_s)} – {_fmt_s(t.p80_s)}",
                 f"{tp:.0f}", f"{tp / self.single_throughput:.2f}×")
                for t, tp in ((self.single, self.single_throughput),
                              (self.multi, self.multi_throughput))]
        return _table(("", "median step", "p20 – p80", "samples/s", "speed-up"), rows,
                      f"{self.per_worker} samples per worker per step, {self.params:,} parameters, "
                      f"{self.backend} on {self.device}; scaling efficiency {self.efficiency:.0%}")


def ddp_scaling(pool: Workers | int | None = None, per_worker: int | None = None,
                samples: int = 5, seed: int = 0, verify: bool = True) -> Scaling:
    """Check DDP (unless the caller just did: ``verify=False``), then time a training step of
    1 worker and of n DDP workers.

    ``per_worker`` samples per worker and step: 256 on the CPU, 8192 on GPUs by default.
    """
    whole_number(samples, "samples", 5)
    pool = _pool(pool)
    per_worker = _size(pool, 256, 8192, per_worker)
    if verify:
        ddp_check(pool, seed=seed)
    res = pool.run(_task_ddp_throughput, DDP_WIDTH, DDP_DEPTH, per_worker, samples, seed)
    # The step ends when the slowest rank is done: report the slowest rank's DDP timing.
    multi = _slowest(r["ddp"] for r in res)
    return Scaling(res[0]["single"], multi, pool.n, per_worker, res[0]["params"], pool.backend,
                   pool.device_name)
