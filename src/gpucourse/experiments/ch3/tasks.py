"""The tasks that run in the workers: ``Workers.run(task, ...)`` calls ``task(ctx, ...)`` on
every rank, and each returns plain data (timings, events, gradients as NumPy) for the parent to
combine; those that time something check it first. They travel by reference (module and name,
``worker.function_payload``), so each lives at a module's top level.
"""
from __future__ import annotations

import copy
import time
from typing import Sequence

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ...bench import format_bytes as _fmt_bytes
from ...check.compare import random_array
from .bounds import U64, _check_all_reduce, _check_grads, mlp_grad_bound
from .data import (CHECK_WIDTH, batch, grads_numpy, loss_sum, mlp, mlp_blocks, split_stages,
                   tensor_bytes)
from .worker import Stamper, WorkerContext, _resolve_function


def _task_hello(ctx: WorkerContext) -> dict:
    """Each rank's view of the group, and an all-reduce of the ranks (sum 0..n-1)."""
    t = torch.tensor([float(ctx.rank)], device=ctx.torch_device)
    dist.all_reduce(t)
    return {**ctx.info(), "sum_of_ranks": float(t.item())}


def _task_sleep_collectives(ctx: WorkerContext, seconds: float) -> int:
    """All-reduces in a loop for ``seconds`` (used to test that a killed peer does not hang)."""
    t_end = time.monotonic() + seconds
    x = torch.ones(1024, device=ctx.torch_device)
    n = 0
    while time.monotonic() < t_end:
        dist.all_reduce(x)
        x.fill_(1.0)
        n += 1
    return n


def _task_skip_collective(ctx: WorkerContext, rank: int) -> int:
    """Every rank but ``rank`` enters an all-reduce: they must time out, not hang."""
    if ctx.rank != rank:
        t = torch.ones(1, device=ctx.torch_device)
        dist.all_reduce(t)
    return ctx.rank


def _task_ddp_grads(ctx: WorkerContext, width: int, depth: int, per_worker: int,
                    seed: int) -> dict:
    """DDP gradients of each rank's shard, and (rank 0) the single-process full-batch ones
    with their rounding-error bound; all in float64 (see ``ddp_check``)."""
    dev = ctx.torch_device
    model = mlp(width, depth, seed).to(device=dev, dtype=torch.float64)
    ref = copy.deepcopy(model)
    rows = per_worker * ctx.world_size
    x, y = (t.to(device=dev, dtype=torch.float64) for t in batch(rows, width, seed))
    ddp = DDP(model, device_ids=[dev.index] if ctx.is_cuda else None)
    shard = slice(ctx.rank * per_worker, (ctx.rank + 1) * per_worker)
    # Each rank's loss is the mean over its shard; DDP averages the ranks' gradients.
    loss = nn.functional.mse_loss(ddp(x[shard]), y[shard])
    loss.backward()
    out = {"rank": ctx.rank, "ddp": grads_numpy(model),
           "names": [n for n, _ in model.named_parameters()]}
    if ctx.rank == 0:
        nn.functional.mse_loss(ref(x), y).backward()
        out["reference"] = grads_numpy(ref)
        # The mean over the whole batch's elements: DDP's mean of the shards' means.
        bound = mlp_grad_bound(list(ref), x, y, 1.0 / y.numel(), U64)
        out["bound"] = [b.cpu().numpy() for b in bound]
    return out


def _task_manual_average(ctx: WorkerContext, payload, width: int, depth: int,
                         per_worker: int, seed: int) -> dict:
    """A learner's ``average_gradients(model, world_size)`` after a plain backward on each shard."""
    fn = _resolve_function(payload)
    dev = ctx.torch_device
    model = mlp(width, depth, seed).to(dev)
    ref = copy.deepcopy(model).double()
    x, y = batch(per_worker * ctx.world_size, width, seed)
    shard = slice(ctx.rank * per_worker, (ctx.rank + 1) * per_worker)
    nn.functional.mse_loss(model(x[shard].to(dev)), y[shard].to(dev)).backward()
    local = grads_numpy(model)
    fn(model, ctx.world_size)
    out = {"rank": ctx.rank, "manual": grads_numpy(model), "local": local,
           "names": [n for n, _ in model.named_parameters()], "world_size": ctx.world_size}
    nn.functional.mse_loss(ref(x.double()), y.double()).backward()
    out["reference"] = grads_numpy(ref)
    return out


def _task_ddp_throughput(ctx: WorkerContext, width: int, depth: int, per_worker: int,
                         samples: int, seed: int) -> dict:
    """Training steps per second: rank 0 alone (the 1-worker baseline), then DDP on all ranks."""
    dev = ctx.torch_device
    x, y = batch(per_worker, width, seed + ctx.rank)  # each worker its own shard of data
    x, y = x.to(dev), y.to(dev)

    def stepper(model):
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)

        def step():
            opt.zero_grad(set_to_none=True)
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        return step

    single = None
    ctx.barrier()
    if ctx.rank == 0:  # the others wait at the barrier below: one worker, one device
        single = ctx.benchmark(stepper(mlp(width, depth, seed).to(dev)), label="1 worker",
                               samples=samples, size=per_worker)
    ctx.barrier()
    ddp = DDP(mlp(width, depth, seed).to(dev), device_ids=[dev.index] if ctx.is_cuda else None)
    multi = ctx.benchmark(stepper(ddp), label=f"{ctx.world_size} workers (DDP)",
                          samples=samples, size=per_worker * ctx.world_size)
    params = sum(p.numel() for p in ddp.parameters())
    return {"single": single, "ddp": multi, "params": params}


def _ring_check(ctx: WorkerContext, sizes=(1, 7, 4099)) -> float:
    """All-reduce of per-rank random data equals the sum computed locally, within float32's
    rounding bound (``_check_all_reduce``); the worst error as a fraction of that bound."""
    worst = 0.0
    for n in sizes:
        mine = random_array(n, np.float32, seed=1000 * n + ctx.rank)
        t = torch.from_numpy(mine).to(ctx.torch_device)
        dist.all_reduce(t)
        terms = [random_array(n, np.float64, seed=1000 * n + r)
                 for r in range(ctx.world_size)]
        worst = max(worst, _check_all_reduce(t.cpu().double().numpy(), terms,
                                             f"all_reduce of {n} floats"))
    return worst


def _calls_for(nbytes: int, target_bytes: float) -> int:
    return int(max(1, min(8, target_bytes // max(nbytes, 1))))


def _task_allreduce_sweep(ctx: WorkerContext, sizes: list[int], samples: int,
                          target_bytes: float) -> dict:
    """Point-to-point ping-pong (ranks 0, 1) and all-reduce time for each message size."""
    dev = ctx.torch_device
    worst = _ring_check(ctx)
    pingpong, allreduce = [], []
    for nbytes in sizes:
        n = max(1, nbytes // 4)
        calls = _calls_for(nbytes, target_bytes)
        buf = torch.from_numpy(random_array(n, np.float32, seed=ctx.rank)).to(dev)
        if ctx.world_size >= 2 and ctx.rank in (0, 1):
            peer = 1 - ctx.rank

            def ping():  # rank 0 sends then receives, rank 1 the reverse: one round trip
                if ctx.rank == 0:
                    dist.send(buf, peer)
                    dist.recv(buf, peer)
                else:
                    dist.recv(buf, peer)
                    dist.send(buf, peer)
            pingpong.append(ctx.benchmark(ping, label=f"ping-pong {nbytes} B", samples=samples,
                                          calls=calls, size=nbytes, bytes=2 * 4 * n))
        ctx.barrier()
        # Repeated sums grow the values; that changes nothing the network moves.
        allreduce.append(ctx.benchmark(lambda: dist.all_reduce(buf), label=f"all-reduce {nbytes} B",
                                       samples=samples, calls=calls, size=nbytes, bytes=4 * n))
    return {"pingpong": pingpong, "allreduce": allreduce, "check_error": worst,
            "device_name": ctx.device_name}


def bucket_indices(nbytes: Sequence[int], cap_bytes: float) -> list[list[int]]:
    """Greedy buckets of tensor indices in REVERSE order (the order backward produces them).

    A bucket closes when adding the next tensor would pass ``cap_bytes``; a tensor larger
    than the cap gets a bucket of its own. ``cap_bytes=0`` gives one tensor per bucket.
    """
    buckets: list[list[int]] = []
    cur: list[int] = []
    size = 0
    for i in reversed(range(len(nbytes))):
        if cur and size + nbytes[i] > cap_bytes:
            buckets.append(cur)
            cur, size = [], 0
        cur.append(i)
        size += nbytes[i]
    if cur:
        buckets.append(cur)
    return buckets


def _allreduce_buckets(grads: list[torch.Tensor], buckets: list[list[int]]) -> None:
    for idx in buckets:
        if len(idx) == 1:
            dist.all_reduce(grads[idx[0]])
            continue
        flat = torch.cat([grads[i].reshape(-1) for i in idx])
        dist.all_reduce(flat)
        for i, part in zip(idx, torch.split(flat, [grads[i].numel() for i in idx])):
            grads[i].copy_(part.view_as(grads[i]))


def _task_bucketing(ctx: WorkerContext, shapes: list[tuple], caps: list[float], samples: int,
                    seed: int) -> dict:
    """One all-reduce per gradient tensor against buckets of several sizes: checked, then timed."""
    dev = ctx.torch_device
    mine = [random_array(s, np.float32, seed=seed + 7 * i + 100_003 * ctx.rank)
            for i, s in enumerate(shapes)]
    terms = [[random_array(s, np.float64, seed=seed + 7 * i + 100_003 * r)
              for r in range(ctx.world_size)] for i, s in enumerate(shapes)]
    nbytes = [m.nbytes for m in mine]
    out = {"timings": [], "buckets": [], "caps": list(caps), "tensors": len(shapes),
           "total_bytes": int(sum(nbytes)), "bucket_bytes": []}
    for cap in caps:
        buckets = bucket_indices(nbytes, cap)
        grads = [torch.from_numpy(m.copy()).to(dev) for m in mine]
        _allreduce_buckets(grads, buckets)  # check before timing
        for i, (g, t) in enumerate(zip(grads, terms)):  # float32 sums of the ranks' tensors
            _check_all_reduce(g.cpu().double().numpy(), t,
                              f"gradient {i} after bucketed all-reduce (cap {cap:g} B)")
        label = ("one all-reduce per tensor" if cap == 0 else
                 f"buckets of {_fmt_bytes(cap)}")
        out["timings"].append(ctx.benchmark(lambda: _allreduce_buckets(grads, buckets),
                                            label=label, samples=samples,
                                            size=len(buckets), bytes=sum(nbytes)))
        out["buckets"].append(len(buckets))
        out["bucket_bytes"].append([int(sum(nbytes[i] for i in b)) for b in buckets])
    return out


def _task_ddp_timeline(ctx: WorkerContext, width: int, depth: int, per_worker: int,
                       bucket_cap_mb: float, samples: int, seed: int) -> dict:
    """One instrumented DDP step: forward, backward, and each bucket's all-reduce on the clock."""
    dev = ctx.torch_device
    x, y = batch(per_worker, width, seed + ctx.rank)
    x, y = x.to(dev), y.to(dev)
    ddp = DDP(mlp(width, depth, seed).to(dev), bucket_cap_mb=bucket_cap_mb,
              device_ids=[dev.index] if ctx.is_cuda else None)
    st = Stamper(ctx)
    records: list = []
    recording = [False]
    world = ctx.world_size

    def hook(state, bucket):  # the default hook's work (divide, then sum), with timestamps
        ready = st.stamp()
        buf = bucket.buffer()
        buf.div_(world)
        fut = dist.all_reduce(buf, async_op=True).get_future()
        nbytes = buf.numel() * buf.element_size()

        def done(f):
            if recording[0]:
                records.append((bucket.index(), ready, st.stamp(), nbytes))
            return f.value()[0]
        return fut.then(done)

    ddp.register_comm_hook(None, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()

    timing = ctx.benchmark(step, label=f"DDP step, {world} workers, buckets {bucket_cap_mb:g} MiB",
                           samples=samples, size=per_worker * world)
    ctx.barrier()
    st.start()
    recording[0] = True
    opt.zero_grad(set_to_none=True)
    f0 = st.stamp()
    loss = nn.functional.mse_loss(ddp(x), y)
    f1 = st.stamp()
    loss.backward()  # returns once every bucket's all-reduce has finished
    b1 = st.stamp()
    opt.step()
    s1 = st.stamp()
    recording[0] = False
    ctx.sync()
    r = st.resolve
    buckets = sorted(((i, r(a), r(b), n) for i, a, b, n in records), key=lambda t: t[1])
    last_ready = max((a for _, a, _, _ in buckets), default=r(b1))
    events = [("forward", r(f0), r(f1)), ("backward", r(f1), last_ready)]
    events += [(f"all-reduce bucket {i}", a, b) for i, a, b, _ in buckets]
    events += [("wait + optimizer", last_ready, r(s1))] if r(s1) > last_ready else []
    return {"rank": ctx.rank, "events": events, "timing": timing,
            "bucket_bytes": [n for *_, n in buckets], "step_s": r(s1) - r(f0),
            "grad_bytes": tensor_bytes(ddp.parameters())}


def _pipeline_step(ctx: WorkerContext, stage: nn.Module, x, y, m: int, width: int,
                   st: Stamper | None = None) -> list:
    """One GPipe step of this rank's stage: all micro-batch forwards, then all backwards.

    Activations go to the next rank and their gradients come back with point-to-point
    send/recv; sends are asynchronous so a stage can start the next micro-batch at once.
    """
    s, p, dev = ctx.rank, ctx.world_size, ctx.torch_device
    rows = [len(c) for c in torch.tensor_split(torch.empty(len(x)), m)]
    xs, ys = torch.tensor_split(x, m), torch.tensor_split(y, m)
    total = x.numel()
    events, sends, saved = [], [], []
    for j in range(m):
        if s == 0:
            inp = xs[j]
        else:
            inp = torch.empty(rows[j], width, device=dev, dtype=x.dtype)
            dist.recv(inp, s - 1)
            inp.requires_grad_()
        t0 = st.stamp() if st else None
        out = stage(inp)
        if s == p - 1:
            out = loss_sum(out, ys[j], total)
        if st:
            events.append((j, "forward", t0, st.stamp()))
        if s < p - 1:
            sends.append(dist.isend(out.detach(), s + 1))
        saved.append((inp, out))
    for j in reversed(range(m)):
        inp, out = saved[j]
        if s == p - 1:
            t0 = st.stamp() if st else None
            out.backward()
        else:
            grad = torch.empty_like(out)
            dist.recv(grad, s + 1)
            t0 = st.stamp() if st else None
            out.backward(grad)
        if st:
            events.append((j, "backward", t0, st.stamp()))
        if s > 0:
            sends.append(dist.isend(inp.grad, s - 1))
    for w in sends:
        w.wait()
    return events


def _whole_batch_grads(blocks, x, y, dtype, layers) -> list[np.ndarray]:
    """The gradients of ``layers`` when a copy of the whole model, in ``dtype``, runs one
    backward pass on the whole batch."""
    whole = nn.Sequential(*copy.deepcopy(blocks)).to(device=x.device, dtype=dtype)
    loss_sum(whole(x.to(dtype)), y.to(dtype), x.numel()).backward()
    return [g for i in layers for g in grads_numpy(whole[i])]


def _check_pipeline(ctx: WorkerContext, depth: int, rows: int, m: int, seed: int) -> None:
    """The pipeline step on a float64 copy of the split, with the chapter's rows and ``m``
    micro-batches but narrow layers (CHECK_WIDTH), against the whole model on the whole batch.

    The bound is ``mlp_grad_bound``'s: micro-batches only regroup the sum over rows. Why not
    the timed model in float32: a worst-case float32 bound through 8 layers of 768 is wider
    than the gradients themselves, while a lost micro-batch or a wrong loss scale moves them
    by 1/m or more, far outside float64's bound on this model.
    """
    dev, width = ctx.torch_device, CHECK_WIDTH
    blocks = [b.to(device=dev, dtype=torch.float64) for b in mlp_blocks(width, depth, seed)]
    mine = split_stages(depth, ctx.world_size)[ctx.rank]
    x, y = (t.to(device=dev, dtype=torch.float64) for t in batch(rows, width, seed))
    ref = _whole_batch_grads(blocks, x, y, torch.float64, mine)
    bound = mlp_grad_bound(blocks, x, y, 1.0 / x.numel(), U64)
    bound = [bound[2 * i + k].cpu().numpy() for i in mine for k in (0, 1)]
    stage = nn.Sequential(*[copy.deepcopy(blocks[i]) for i in mine])
    _pipeline_step(ctx, stage, x, y, m, width)
    names = [f"layer {i} {'weight' if k == 0 else 'bias'}" for i in mine for k in (0, 1)]
    _check_grads(grads_numpy(stage), ref, bound, names,
                 f"stage {ctx.rank} with {m} micro-batch{'es' if m > 1 else ''}",
                 "the micro-batches do not add up to the whole batch")


def _task_pipeline(ctx: WorkerContext, width: int, depth: int, rows: int,
                   microbatches: list[int], samples: int, seed: int) -> dict:
    """The model split over the ranks (one stage each), run with 1 and m micro-batches.

    Checks the split first (``_check_pipeline``: every stage's gradients against the whole
    model on the whole batch), then times a step and records one step's timeline for each
    micro-batch count.
    """
    dev = ctx.torch_device
    blocks = mlp_blocks(width, depth, seed)
    mine = split_stages(depth, ctx.world_size)[ctx.rank]
    stage = nn.Sequential(*[blocks[i] for i in mine]).to(dev)
    x, y = batch(rows, width, seed)
    x, y = x.to(dev), y.to(dev)
    whole_bytes = sum(tensor_bytes(b.parameters()) for b in blocks)  # float32
    out = {"rank": ctx.rank, "layers": [mine.start, mine.stop], "runs": [],
           "stage_param_bytes": tensor_bytes(stage.parameters()),
           "whole_param_bytes": whole_bytes,
           "device_name": ctx.device_name}
    for m in microbatches:
        _check_pipeline(ctx, depth, rows, m, seed)
        stage.zero_grad(set_to_none=True)
        peak = None
        if ctx.is_cuda:
            torch.cuda.reset_peak_memory_stats(dev)
        timing = ctx.benchmark(lambda: (stage.zero_grad(set_to_none=True),
                                        _pipeline_step(ctx, stage, x, y, m, width)),
                               label=f"{m} micro-batch{'es' if m > 1 else ''}",
                               samples=samples, size=m)
        if ctx.is_cuda:
            peak = int(torch.cuda.max_memory_allocated(dev))
        ctx.barrier()
        st = Stamper(ctx)
        stage.zero_grad(set_to_none=True)
        ev = _pipeline_step(ctx, stage, x, y, m, width, st)
        ctx.sync()
        out["runs"].append({"microbatches": m, "timing": timing, "peak_bytes": peak,
                            "events": [(j, ph, st.resolve(a), st.resolve(b)) for j, ph, a, b in ev],
                            "grad_bytes": tensor_bytes(g for g in (p.grad for p in stage.parameters()))})
    return out
