"""Chapter 3 (parallelism): data, model and pipeline parallelism on torch.distributed.

Workers are real processes, started the way ``torchrun`` starts them (environment variables,
the spawn start method, a rendezvous on the loopback address only), in one process group per
launch: NCCL when every worker has a GPU of its own, gloo on the CPU otherwise. The group stays
up, so one launch serves several measurements, and nothing hangs: a dead rank, a failed task or
a collective that some rank never joins stops the group with an error that names the ranks.
Under ``torchrun`` the same tasks run with ``python -m gpucourse.experiments.ch3 ddp``, on one
node or on several with ``--nnodes``.

Modules, lowest first: ``worker`` (inside a worker process: the errors, joining the group,
``WorkerContext``, how a task travels), ``pool`` (the parent's side: ``Workers`` and the
notebook's shared group), ``data`` (models and data), ``bounds`` (the rounding-error bounds of
the checks), ``tasks`` (what runs in the workers), ``common``; one module per experiment:
``ddp`` (1, data parallelism), ``allreduce`` (2, the all-reduce and its buckets),
``pipelining`` (3 and 4, model and pipeline parallelism); then ``lab``, ``widgets``,
``headless`` (``run_all``, ``gpu_check``) and ``torchrun`` (the ``python -m`` entry).

This package exports what the notebook, the lab, the runner, ``make gpu-check`` and
``plot.ch3`` use, and ``Workers``, which its error messages name.
"""
from .allreduce import (AllReduceSweep, Bucketing, DDPTimeline, allreduce_sweep, bucketing,
                        ddp_timeline)
from .ddp import Scaling, ddp_check, ddp_scaling
from .headless import gpu_check, run_all
from .lab import try_average_gradients
from .pipelining import Pipeline, pipeline
from .pool import Workers, close_workers, default_workers, hello, max_workers, workers
from .widgets import explore

__all__ = [
    "AllReduceSweep", "Bucketing", "DDPTimeline", "Pipeline", "Scaling", "Workers",
    "allreduce_sweep", "bucketing", "close_workers", "ddp_check", "ddp_scaling", "ddp_timeline",
    "default_workers", "explore", "gpu_check", "hello", "max_workers", "pipeline", "run_all",
    "try_average_gradients", "workers",
]
