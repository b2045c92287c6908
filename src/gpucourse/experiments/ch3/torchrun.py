"""The torchrun entry: ``torchrun ... -m gpucourse.experiments.ch3 {hello,ddp,allreduce}`` runs
the chapter's tasks in torchrun's own processes, on one node or on several with ``--nnodes``;
without torchrun, ``python -m gpucourse.experiments.ch3`` starts its own workers."""
from __future__ import annotations

import argparse
import json
import os

import torch
import torch.distributed as dist

from .allreduce import allreduce_sweep
from .data import DDP_DEPTH, DDP_WIDTH
from .ddp import ddp_scaling
from .pool import Workers, gpu_count, threads_per_worker
from .tasks import _task_allreduce_sweep, _task_ddp_throughput, _task_hello
from .worker import COLLECTIVE_TIMEOUT_S, WorkerContext, _join_group


TORCHRUN_TASKS = ("hello", "ddp", "allreduce")


def _torchrun_context(timeout_s: float = COLLECTIVE_TIMEOUT_S) -> WorkerContext:
    """Join the group torchrun set up (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT)."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    backend = "nccl" if (gpu_count() >= local_world and dist.is_nccl_available()) else "gloo"
    threads = threads_per_worker(local_world, backend)
    torch.set_num_threads(threads)
    device = _join_group(backend, local, timeout_s)
    return WorkerContext(rank, world, local, backend, device, threads, os.getpid())


def main(argv=None) -> int:
    """``torchrun [--nnodes N --node-rank R --rdzv-endpoint HOST:PORT] --nproc-per-node K
    -m gpucourse.experiments.ch3 {hello,ddp,allreduce}``; without torchrun it starts
    ``--workers`` processes itself."""
    p = argparse.ArgumentParser(prog="python -m gpucourse.experiments.ch3",
                                description=main.__doc__.splitlines()[0])
    p.add_argument("task", choices=TORCHRUN_TASKS)
    p.add_argument("--workers", type=int, default=None,
                   help="processes to start when not run under torchrun")
    args = p.parse_args(argv)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        ctx = _torchrun_context()
        try:
            if args.task == "hello":
                result = _task_hello(ctx)
            elif args.task == "ddp":
                result = _task_ddp_throughput(ctx, DDP_WIDTH, DDP_DEPTH, 64, 5, 0)
                result = {"rank": ctx.rank, "world_size": ctx.world_size,
                          "ddp_step_s": result["ddp"].median_s,
                          "samples_per_s": 64 * ctx.world_size / result["ddp"].median_s}
            else:
                r = _task_allreduce_sweep(ctx, [2**k for k in range(10, 25, 2)], 5, 2 * 2**20)
                result = {"rank": ctx.rank, "sizes": [2**k for k in range(10, 25, 2)],
                          "allreduce_s": [t.median_s for t in r["allreduce"]]}
            if ctx.rank == 0:
                print(json.dumps(result, default=str))
        finally:
            dist.destroy_process_group()
        return 0
    with Workers(args.workers) as pool:
        if args.task == "hello":
            print(json.dumps(pool.run(_task_hello), default=str))
        elif args.task == "ddp":
            print(ddp_scaling(pool))
        else:
            sweep = allreduce_sweep(pool)
            print(json.dumps({"sizes": sweep.sizes, "algbw_GBps": sweep.algbw_GBps}))
    return 0
