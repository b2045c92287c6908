"""The widgets' back end: a DDP step's timeline and a pipeline for the sliders' values."""
from __future__ import annotations

from .allreduce import ddp_timeline
from .data import PIPE_DEPTH
from .pipelining import pipeline
from .pool import _pool


def explore(workers: int = 2, bucket_kib: int = 1024, microbatches: int = 4) -> dict:
    """Widget back end: a DDP step with ``bucket_kib`` buckets and a pipeline over the workers."""
    pool = _pool(int(workers))
    ms = (1, int(microbatches)) if int(microbatches) != 1 else (1,)
    tl = ddp_timeline(pool, bucket_cap_mb=bucket_kib / 1024, samples=2)
    pipe = pipeline(pool, microbatches=ms, samples=2) if pool.n <= PIPE_DEPTH else None
    return {"ddp": tl, "pipeline": pipe, "microbatches": int(microbatches)}
