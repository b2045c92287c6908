"""Chapter 2, section 2: training loops that copy every batch from pageable memory, prefetch
from pinned memory on a side stream, or keep the data on the device: checked to train alike,
measured on a GPU and drawn from the stream-timeline model everywhere."""
from __future__ import annotations

import math

import numpy as np

from ... import bench, check, device, models
from .common import target_gpu, torch_module


LOOP_CONFIG = {"batches": 6, "batch": 64, "features": 96, "hidden": 128, "classes": 10}
GPU_LOOP_CONFIG = {"batches": 16, "batch": 8192, "features": 1024, "hidden": 1024, "classes": 16}


def make_data(batches: int, batch: int, features: int, classes: int, seed: int = 0):
    """Host tensors X (float32, non-uniform) and labels Y from a random linear teacher."""
    torch = torch_module()
    n = batches * batch
    x = check.random_array((n, features), np.float32, seed=seed, kind="uniform")
    x *= check.rng(seed + 1).uniform(0.2, 3.0, size=(1, features)).astype(np.float32)
    teacher = check.rng(seed + 2).standard_normal((features, classes)).astype(np.float32)
    y = np.argmax(x @ teacher, axis=1).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def make_model(features: int, hidden: int, classes: int, seed: int = 0, dtype=None, device_=None):
    """A two-layer MLP with seeded weights."""
    torch = torch_module()
    g = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, classes))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (1.0 / math.sqrt(p.shape[-1])))
    return model.to(device=device_, dtype=dtype)


def _train_step(model, opt, xb, yb):
    torch = torch_module()
    opt.zero_grad(set_to_none=False)
    loss = torch.nn.functional.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()
    return loss


def loop_copy_every_step(model, opt, X, Y, batch: int, dev):
    """Naive: every step copies its batch from pageable host memory, synchronously."""
    loss = None
    for i in range(0, len(X), batch):
        xb = X[i:i + batch].to(dev)
        yb = Y[i:i + batch].to(dev)
        loss = _train_step(model, opt, xb, yb)
    return loss


def loop_pinned_prefetch(model, opt, X, Y, batch: int, dev, pinned=None):
    """Pinned host memory, non-blocking copies on a side stream, the next batch copied while
    the current one computes. ``pinned`` is (X, Y) already page-locked (pinning is a one-off
    cost: do it once, outside the loop)."""
    torch = torch_module()
    dev = torch.device(dev)
    if dev.type != "cuda":  # nothing to overlap with: the same loop, minus the streams
        return loop_copy_every_step(model, opt, X, Y, batch, dev)
    Xp, Yp = pinned if pinned is not None else (X.pin_memory(), Y.pin_memory())
    side = torch.cuda.Stream()
    main = torch.cuda.current_stream()

    def fetch(i):
        side.wait_stream(main)  # the buffers we overwrite must be free
        with torch.cuda.stream(side):
            return (Xp[i:i + batch].to(dev, non_blocking=True),
                    Yp[i:i + batch].to(dev, non_blocking=True))

    loss = None
    nxt = fetch(0)
    for i in range(0, len(X), batch):
        main.wait_stream(side)
        xb, yb = nxt
        # Tensors made on the side stream are used on the main one: tell the allocator.
        xb.record_stream(main)
        yb.record_stream(main)
        if i + batch < len(X):
            nxt = fetch(i + batch)
        loss = _train_step(model, opt, xb, yb)
    return loss


def loop_resident(model, opt, X, Y, batch: int, dev, resident=None):
    """The whole data set copied to the device once (``resident``), batches are views."""
    Xd, Yd = resident if resident is not None else (X.to(dev), Y.to(dev))
    loss = None
    for i in range(0, len(Xd), batch):
        loss = _train_step(model, opt, Xd[i:i + batch], Yd[i:i + batch])
    return loss


LOOPS = {"copy every step (pageable)": loop_copy_every_step,
         "pinned + non_blocking + prefetch": loop_pinned_prefetch,
         "resident on the device": loop_resident}


def _fresh(config: dict, dev, seed: int = 0):
    torch = torch_module()
    model = make_model(config["features"], config["hidden"], config["classes"], seed=seed,
                       device_=dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return model, opt


def check_loops(config: dict | None = None, seed: int = 0) -> None:
    """The three loops train to the same weights (same data, same order, same steps)."""
    config = dict(config or LOOP_CONFIG)
    dev = device.torch_device()
    X, Y = make_data(config["batches"], config["batch"], config["features"], config["classes"],
                     seed=seed)
    weights = {}
    for name, loop in LOOPS.items():
        model, opt = _fresh(config, dev, seed)
        loop(model, opt, X, Y, config["batch"], dev)
        weights[name] = [p.detach().cpu() for p in model.parameters()]
    first, *others = LOOPS
    start, _ = _fresh(config, "cpu", seed)
    moved = sum(float((a - b.detach()).abs().sum()) for a, b in zip(weights[first], start.parameters()))
    if moved == 0:
        raise AssertionError("training did not change the weights: the loops were not exercised")
    # The loops differ only in where the batches come from: the same kernels on the same values
    # in the same order give the same bits, so any difference is a wrong batch or step.
    for name in others:
        for a, b in zip(weights[name], weights[first]):
            check.assert_close(a, b, rtol=0, atol=0, name=f"weights after {name!r}")


def step_model(config: dict | None = None, gpu=None) -> dict:
    """Per-step times from the models: H2D copy (pageable and pinned) and compute (roofline)."""
    c = dict(config or GPU_LOOP_CONFIG)
    spec = target_gpu(gpu)
    b, f, h, k = c["batch"], c["features"], c["hidden"], c["classes"]
    batch_bytes = b * f * 4 + b * 8
    weights = f * h + h + h * k + k
    flops = 6.0 * b * (f * h + h * k)  # forward 2 x MACs, backward 4 x MACs
    # Memory traffic of one step: activations written and read back, weights, grads, momentum.
    traffic = 4.0 * (3 * b * (f + 2 * h + k) + 6 * weights)
    compute = models.roofline(flops, traffic, spec, "fp32").time
    return {"gpu": spec.name, "batch_bytes": batch_bytes, "compute_s": compute,
            "h2d_pageable_s": models.transfer_time(batch_bytes, spec, pinned=False).time,
            "h2d_pinned_s": models.transfer_time(batch_bytes, spec, pinned=True).time,
            "steps": c["batches"]}


def loop_timelines(config: dict | None = None, gpu=None) -> dict:
    """Stream-timeline model of the three loops: ops (lane, op, start ms, end ms) and totals."""
    m = step_model(config, gpu)
    steps = m["steps"]
    plans = {"copy every step (pageable)": models.stream_timeline(
                 1, steps * m["h2d_pageable_s"], steps * m["compute_s"], 0.0, chunks=steps),
             "pinned + non_blocking + prefetch": models.stream_timeline(
                 2, steps * m["h2d_pinned_s"], steps * m["compute_s"], 0.0, chunks=steps),
             "resident on the device": models.stream_timeline(
                 1, 0.0, steps * m["compute_s"], 0.0, chunks=steps)}
    out = {"gpu": m["gpu"], "step": m, "versions": {}}
    for name, tl in plans.items():
        ops = [(op.engine, op.op.split()[0], op.start * 1e3, op.end * 1e3) for op in tl.ops
               if op.end > op.start]
        out["versions"][name] = {"total_ms": tl.total * 1e3, "per_step_ms": tl.total * 1e3 / steps,
                                 "ops": ops}
    return out


def time_loops(config: dict | None = None, min_time_s: float = 0.3, seed: int = 0) -> bench.Timings:
    """Measured time per epoch of the three loops on a GPU (checked first at a small size)."""
    device.require_cuda("Timing the training loops", needs="torch")
    check_loops(seed=seed)
    c = dict(config or GPU_LOOP_CONFIG)
    X, Y = make_data(c["batches"], c["batch"], c["features"], c["classes"], seed=seed)
    pinned = (X.pin_memory(), Y.pin_memory())
    resident = (X.to("cuda"), Y.to("cuda"))
    extra = {"pinned + non_blocking + prefetch": {"pinned": pinned},
             "resident on the device": {"resident": resident}}
    out = bench.Timings()
    for name, loop in LOOPS.items():
        model, opt = _fresh(c, "cuda", seed)
        kw = extra.get(name, {})
        out.append(bench.benchmark(loop, model, opt, X, Y, c["batch"], "cuda", label=name,
                                   bytes=X.nbytes + Y.nbytes, size=c["batches"],
                                   min_time_s=min_time_s, min_samples=3, **kw))
    return out

