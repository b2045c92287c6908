"""Chapter 2, section 5: memory footprint by precision. Weights, gradients, master copy, Adam
state and activations of an MLP: the model (``models.training_memory``) against the real
tensors, the largest batch a budget holds, and the peak memory of training on a GPU."""
from __future__ import annotations

import numpy as np

from ... import check, device, models, precision
from ...errors import PrecisionError, whole_number
from ...display import Table
from .common import MiB, torch_module


FOOTPRINT_WIDTHS = (256, 512, 512, 10)
FOOTPRINT_BATCH = 512


def _torch_dtype(name: str):
    """The torch dtype of one of the storage precisions the chapter offers."""
    if name not in precision.STORAGE:
        raise PrecisionError(f"dtype {name!r} is not one of {', '.join(precision.STORAGE)}; "
                             "pick one of those.")
    return precision.torch_dtype(name)


def mlp(widths=FOOTPRINT_WIDTHS, dtype: str = "fp32", seed: int = 0, device_=None):
    """Linear/ReLU stack with the given layer widths, seeded, in ``dtype``."""
    torch = torch_module()
    torch.manual_seed(seed)
    layers = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        layers.append(torch.nn.Linear(a, b))
        if i < len(widths) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).to(device=device_, dtype=_torch_dtype(dtype))


def mlp_counts(widths=FOOTPRINT_WIDTHS, batch: int = FOOTPRINT_BATCH) -> dict:
    """Parameters and saved activations of the MLP, by formula.

    A Linear keeps its input for backward and a ReLU its output, which is also the next
    Linear's input (one tensor): batch x (input width + every hidden width).
    """
    params = sum(a * b + b for a, b in zip(widths[:-1], widths[1:]))
    activations = batch * (widths[0] + sum(widths[1:-1]))
    return {"params": params, "activations": activations}


def _saved_activation_bytes(model, x) -> tuple[int, int, object]:
    """(bytes, elements) of the tensors autograd keeps for backward, parameters excluded."""
    torch = torch_module()
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (saved.append(t), t)[1], lambda t: t):
        out = model(x)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = {}
    for t in saved:
        ptr = t.untyped_storage().data_ptr()
        if ptr in params:
            continue
        seen[(ptr, t.storage_offset(), tuple(t.shape), t.dtype)] = t
    return (sum(t.nbytes for t in seen.values()), sum(t.numel() for t in seen.values()), out)


def footprint(dtype: str = "fp32", master_weights: bool | None = None, widths=FOOTPRINT_WIDTHS,
              batch: int = FOOTPRINT_BATCH, seed: int = 0, device_=None) -> dict:
    """Bytes of weights, gradients, master copy, Adam state and activations: the model
    (``models.training_memory``) next to the real tensors' ``nbytes`` after one step."""
    torch = torch_module()
    batch = whole_number(batch, "batch", FOOTPRINT_BATCH)
    counts = mlp_counts(widths, batch)
    model_mem = models.training_memory(counts["params"], counts["activations"], dtype=dtype,
                                       optimizer="adam", master_weights=master_weights)
    net = mlp(widths, dtype, seed, device_)
    x = torch.from_numpy(check.random_array((batch, widths[0]), np.float32, seed=seed)).to(
        device=device_, dtype=_torch_dtype(dtype))
    y = torch.from_numpy(check.rng(seed).integers(0, widths[-1], batch)).to(device_)
    act_bytes, act_elems, out = _saved_activation_bytes(net, x)
    loss = torch.nn.functional.cross_entropy(out.float(), y)
    loss.backward()
    params = list(net.parameters())
    if model_mem.master_weights:
        # Mixed precision by hand: fp32 master weights own the optimizer; the 16-bit copy runs.
        master = [p.detach().float().requires_grad_() for p in params]
        for m, p in zip(master, params):
            m.grad = p.grad.float()
        opt = torch.optim.Adam(master, lr=1e-3)
        opt.step()
        for m in master:
            m.grad = None  # the fp32 gradient only lives for the optimizer step
        master_bytes = sum(m.nbytes for m in master)
    else:
        opt = torch.optim.Adam(params, lr=1e-3)
        opt.step()
        master_bytes = 0
    state = sum(v.nbytes for s in opt.state.values() for k, v in s.items()
                if k in ("exp_avg", "exp_avg_sq"))
    measured = {"weights": sum(p.nbytes for p in params),
                "gradients": sum(p.grad.nbytes for p in params),
                "master_copy": master_bytes, "optimizer_state": state, "activations": act_bytes}
    modelled = {k: getattr(model_mem, k) for k in measured}
    measured["total"] = sum(measured.values())
    modelled["total"] = model_mem.total
    return {"dtype": dtype, "master_weights": model_mem.master_weights, "widths": list(widths),
            "batch": batch, "params": counts["params"], "activations": counts["activations"],
            "saved_elements": act_elems, "model": modelled, "measured": measured,
            "match": modelled == measured}


def check_footprint(dtypes=("fp32", "fp16", "bf16")) -> None:
    """The model's byte counts equal the real tensors', for every dtype."""
    for dt in dtypes:
        for master in ((None, False) if dt != "fp32" else (None,)):
            f = footprint(dt, master, widths=(33, 65, 17), batch=7)
            if f["saved_elements"] != f["activations"]:
                raise AssertionError(f"{dt}: autograd kept {f['saved_elements']} activation values "
                                     f"but the formula says {f['activations']}")
            if not f["match"]:
                raise AssertionError(f"{dt} (master={master}): model {f['model']} but tensors "
                                     f"{f['measured']}")


def footprints(dtypes=("fp32", "fp16", "bf16"), widths=FOOTPRINT_WIDTHS,
               batch: int = FOOTPRINT_BATCH) -> list[dict]:
    """Checked footprints for several dtypes (16-bit ones with fp32 master weights)."""
    check_footprint()
    return [footprint(dt, None, widths, batch) for dt in dtypes]


def largest_batch(budget_bytes: int, dtype: str, widths=FOOTPRINT_WIDTHS,
                  master_weights: bool | None = None) -> int:
    """Largest batch whose model footprint (weights, grads, state, activations) fits the budget."""
    per_sample = mlp_counts(widths, 1)["activations"]
    fixed = models.training_memory(mlp_counts(widths, 1)["params"], 0, dtype, "adam",
                                   master_weights).total
    per = models.training_memory(0, per_sample, dtype, "adam", master_weights).total
    return max(0, (int(budget_bytes) - fixed) // per)


def footprint_pair(dtype: str = "bf16", master_weights: bool = True, batch: int = FOOTPRINT_BATCH,
                   widths=FOOTPRINT_WIDTHS) -> list[dict]:
    """fp32 and one other precision at the same batch, for the widget."""
    rows = [footprint("fp32", None, widths, batch)]
    if dtype != "fp32":
        rows.append(footprint(dtype, master_weights, widths, batch))
    return rows


def largest_batches(budget_bytes: int = 64 * MiB, widths=FOOTPRINT_WIDTHS) -> Table:
    """Largest batch whose training footprint fits ``budget_bytes``, by precision (model)."""
    rows = Table([], caption=f"model: largest batch of the MLP {'-'.join(map(str, widths))} with "
                             f"Adam in {budget_bytes / MiB:g} MiB")
    for dt, master, label in (("fp32", None, "fp32"), ("bf16", True, "bf16 + fp32 master"),
                              ("bf16", False, "bf16 only")):
        b = largest_batch(budget_bytes, dt, widths, master)
        rows.append({"precision": label, "largest batch": b,
                     "vs fp32": f"{b / rows[0]['largest batch']:.2f}x" if rows else "1.00x"})
    return rows


def peak_memory(dtype: str = "fp32", widths=(1024, 4096, 4096, 1000), batch: int = 65536,
                seed: int = 0) -> dict:
    """Peak allocated GPU memory over two training steps, against the model's total (GPU only).

    The default MLP and batch make activations most of the memory (about 2.4 GB in fp32 against
    0.4 GB for weights, gradients and Adam state), as in most large-batch training.
    """
    device.require_cuda("Measuring peak GPU memory", needs="torch")
    torch = torch_module()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    net = mlp(widths, dtype, seed, "cuda")
    params = list(net.parameters())
    master = None
    if dtype != "fp32":
        master = [p.detach().float().requires_grad_() for p in params]
    opt = torch.optim.Adam(master or params, lr=1e-4)
    x = torch.randn(batch, widths[0], device="cuda", dtype=_torch_dtype(dtype))
    y = torch.randint(0, widths[-1], (batch,), device="cuda")
    for _ in range(2):  # the second step has the optimizer state in place
        loss = torch.nn.functional.cross_entropy(net(x).float(), y)
        loss.backward()
        if master is not None:
            for m, p in zip(master, params):
                m.grad = p.grad.float()
        opt.step()
        if master is not None:
            with torch.no_grad():
                for m, p in zip(master, params):
                    p.copy_(m)
                    m.grad = None  # the fp32 gradient lives only for the update, as in footprint()
            for p in params:
                p.grad.zero_()
        else:
            opt.zero_grad(set_to_none=False)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    counts = mlp_counts(widths, batch)
    model_total = models.training_memory(counts["params"], counts["activations"], dtype).total
    del net, params, master, opt, x, y, loss
    torch.cuda.empty_cache()
    return {"dtype": dtype, "widths": list(widths), "batch": batch, "peak_bytes": int(peak),
            "model_bytes": int(model_total), "peak_over_model": peak / model_total}

