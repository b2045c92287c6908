"""Without a notebook: every experiment on one group (``run_all``, for ``python -m gpucourse
run``) and the GPU acceptance check (``gpu_check``, for ``make gpu-check``)."""
from __future__ import annotations

import time
from typing import Any

import torch

from ... import device as _device
from ...check.thresholds import at_least, more_than, threshold
from .allreduce import allreduce_sweep, bucketing, ddp_timeline
from .ddp import ddp_check, ddp_scaling
from .pipelining import pipeline
from .pool import Workers, gpu_count
from .tasks import _task_hello


def run_all(quick: bool = True, progress=None) -> dict:
    """Every experiment of the chapter on one group of workers, as JSON-ready results."""
    samples = 3 if quick else 7
    steps = 6
    done = [0]

    def tick():
        done[0] += 1
        if progress:
            progress(done[0] / steps)

    with Workers() as pool:
        tick()
        check_line = str(ddp_check(pool))
        scaling = ddp_scaling(pool, samples=samples, verify=False)  # checked just above
        tick()
        sweep = allreduce_sweep(pool, samples=samples)
        tick()
        buck = bucketing(pool, samples=samples)
        tick()
        timelines = [ddp_timeline(pool, cap, samples=2) for cap in (1.0, 25.0)]
        tick()
        pipe = pipeline(pool, microbatches=(1, 4, 8), samples=samples)
        tick()
    return {"workers": pool.n, "backend": pool.backend, "device": pool.device_name,
            "ddp_check": check_line, "scaling": scaling.to_dict(), "allreduce": sweep.to_dict(),
            "bucketing": buck.to_dict(), "ddp_timelines": [t.to_dict() for t in timelines],
            "pipeline": pipe.to_dict()}


def gpu_check(backend: str = "nccl") -> dict:
    """On a GPU machine: NCCL is chosen, DDP is exact on GPUs, and the multi-GPU figures.

    With one GPU only single-GPU DDP over NCCL can be measured; the multi-GPU figures
    (all-reduce bus bandwidth, scaling efficiency, pipeline bubble) need two or more GPUs
    and are reported as not measured. ``backend="gloo"`` takes the same steps on two CPU
    workers, for the tests of this function on machines without a GPU; its figures and
    verdicts mean nothing there.
    """
    if backend == "nccl":
        _device.require_cuda("chapter 3's GPU check", needs="torch")  # NCCL on the GPUs
        gpus, name = gpu_count(), torch.cuda.get_device_name(0)
    else:
        gpus, name = 2, _device.describe("cpu").short_name
    out: dict[str, Any] = {"gpus": gpus, "device": name}
    t_start = time.perf_counter()
    with Workers(gpus, backend=backend) as pool:
        out["backend"] = pool.backend
        hello = pool.run(_task_hello)
        # Whole numbers below 2^24 add exactly in float32, in any order: equality is the bound.
        out["sum_of_ranks_ok"] = all(h["sum_of_ranks"] == gpus * (gpus - 1) / 2 for h in hello)
        out["ddp_check"] = str(ddp_check(pool))
        scaling = ddp_scaling(pool, per_worker=1024, samples=7, verify=False)  # checked above
        out["ddp_step_s"] = scaling.multi.median_s
        out["single_step_s"] = scaling.single.median_s
        # ddp_check above raises unless DDP's gradients equal the full-batch float64 ones
        checks = {"nccl_selected": threshold(None, None, pool.backend == "nccl",
                                             "torch.distributed chose NCCL on the GPUs"),
                  "ddp_exact": threshold(None, None, True, "DDP gradients equal full-batch "
                                                           "float64 gradients (ddp_check)"),
                  "all_reduce_correct": threshold(None, None, out["sum_of_ranks_ok"],
                                                  "all-reduce of the ranks gives their sum")}
        if gpus >= 2:
            out["scaling_efficiency"] = scaling.efficiency
            sweep = allreduce_sweep(pool, samples=5)
            out["allreduce"] = {"sizes": sweep.sizes, "busbw_GBps": sweep.busbw_GBps,
                                "algbw_GBps": sweep.algbw_GBps,
                                "median_s": [t.median_s for t in sweep.allreduce]}
            pipe = pipeline(pool, microbatches=(1, 8), rows=4096, samples=5)
            out["pipeline"] = {"stages": pipe.stages,
                               "bubble_measured": [r.bubble for r in pipe.runs],
                               "bubble_model": [pipe.model(r.microbatches).bubble_fraction
                                                for r in pipe.runs],
                               "speedup": pipe.speedup}
            checks["scaling_efficiency"] = at_least(
                scaling.efficiency, 0.8, "DDP throughput on all GPUs / (GPUs x one GPU's throughput)")
            checks["pipeline_speedup"] = more_than(
                pipe.speedup, 1.0, "pipeline step time, 1 micro-batch / 8 micro-batches")
        else:
            out["multi_gpu"] = ("not measured: this machine has 1 GPU; all-reduce bandwidth, "
                                "scaling efficiency and the pipeline bubble need 2 or more")
    out["seconds"] = time.perf_counter() - t_start
    out["checks"] = checks
    out["passed"] = all(c["passed"] for c in checks.values())
    return out
