"""Section 3, automatic mixed precision: one training step of feed-forward blocks in FP32 and
under ``torch.autocast``, checked against FP32 and then timed, with its memory (measured on a
GPU, counted tensor by tensor on the CPU) beside the model's; the ceilings it is drawn
against, the dtypes autocast picks, and what the measurement says on this device."""
from __future__ import annotations

import contextlib
import functools

import torch
import torch.nn.functional as F

from ... import bench, device, models, precision, specs
from ...display import Table
from ...errors import PrecisionError
from .common import bench_on, threads_for
from .device_support import cpu_low_precision_support


class FeedForwardBlock(torch.nn.Module):
    """A transformer's feed-forward block: LayerNorm, d → 4d, GELU, 4d → d, residual."""

    def __init__(self, d: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


def amp_model(d: int, blocks: int = 2, seed: int = 0) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return torch.nn.Sequential(*[FeedForwardBlock(d) for _ in range(blocks)])


def amp_sizes(dev: str, quick: bool = True) -> dict:
    """Problem sizes: small on the CPU (half precision can be very slow there), GPU-filling on a GPU."""
    if dev == "cuda":
        return {"tokens": 8192, "d": 2048 if quick else 4096, "blocks": 2}
    return {"tokens": 64, "d": 128, "blocks": 2}


def _saved_bytes(fn, params=()) -> tuple[int, torch.Tensor]:
    """(bytes of the distinct tensors autograd keeps for backward while ``fn()`` runs, its result).

    Tensors that share storage with ``params`` are not counted: a linear layer saves its own
    weight for the backward pass, which takes no memory beyond the weight (a cast copy, as
    autocast makes, is counted)."""
    seen: dict[int, int] = {}
    skip = {q.untyped_storage().data_ptr() for q in params}

    def pack(t):
        try:
            key = t.untyped_storage().data_ptr()
            if key in skip:
                return t
            seen[key] = max(seen.get(key, 0), t.untyped_storage().nbytes())
        except Exception:
            pass
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return sum(seen.values()), out


def amp_training(precisions=("fp32", "bf16", "fp16"), tokens: int | None = None,
                 d: int | None = None, blocks: int | None = None, min_time_s: float = 0.2,
                 dev: str | None = None) -> dict:
    """One training step (forward, backward, AdamW) in FP32 and under autocast: check, then time.

    Check: each precision's loss is within its tolerance of the FP32 loss from the same weights.
    Memory: on a GPU the peak allocated during a step (``torch.cuda.max_memory_allocated``);
    on the CPU the bytes of weights, gradients and optimizer state plus the activations autograd
    saves (counted tensor by tensor). The model ``models.training_memory`` is shown beside it.
    """
    dev = dev or device.torch_device()
    size = amp_sizes(dev)
    tokens, d, blocks = tokens or size["tokens"], d or size["d"], blocks or size["blocks"]
    avail = precision.availability(dev)
    rows, timings = [], bench.Timings()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(tokens, d, generator=g).to(dev)
    target = torch.randn(tokens, d, generator=g).to(dev)
    params = sum(p.numel() for p in amp_model(d, blocks).parameters())
    flops = 3 * 2 * tokens * blocks * 8 * d * d  # forward + backward of the two matmuls
    with threads_for(dev):
        # The reference is FP32 whatever ``precisions`` lists first (same weights, seed 0).
        with torch.no_grad(), device.tf32(False) if dev == "cuda" else contextlib.nullcontext():
            ref_loss = float(F.mse_loss(amp_model(d, blocks).to(dev)(x).float(), target))
        for p in precisions:
            if avail.get(p):
                rows.append({"precision": p, "skipped": avail[p]})
                continue
            model = amp_model(d, blocks).to(dev)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            dtype = precision.torch_dtype(p)

            def loss_fn(model=model, dtype=dtype, p=p):
                with torch.autocast(dev, dtype=dtype, enabled=p in ("fp16", "bf16")):
                    out = model(x)
                return F.mse_loss(out.float(), target)

            def step(model=model, opt=opt, loss_fn=loss_fn):
                loss = loss_fn()
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                return loss

            with device.tf32(p == "tf32") if dev == "cuda" else contextlib.nullcontext():
                with torch.no_grad():
                    loss0 = float(loss_fn())
                rtol = precision.AMP_LOSS_RTOL[p]
                assert abs(loss0 - ref_loss) <= rtol * abs(ref_loss), \
                    f"{p} loss {loss0} differs from fp32 {ref_loss} by more than {rtol:g}"
                step()  # first step creates the optimizer state
                if dev == "cuda":
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    base = torch.cuda.memory_allocated()
                    step()
                    torch.cuda.synchronize()
                    peak = torch.cuda.max_memory_allocated()
                    memory, how = peak, "peak allocated (torch.cuda.max_memory_allocated)"
                    activations = peak - base
                else:
                    saved, loss = _saved_bytes(loss_fn, list(model.parameters()))
                    loss.backward()
                    opt.zero_grad(set_to_none=True)
                    state = sum(t.numel() * t.element_size() for s in opt.state.values()
                                for t in s.values() if torch.is_tensor(t))
                    weights = sum(q.numel() * q.element_size() for q in model.parameters())
                    activations = saved
                    memory = weights * 2 + state + saved
                    how = "weights + gradients + AdamW state + saved activations (counted)"
                t = bench_on(step, p, dev, min_time_s, flops=flops, size=tokens)
            timings.append(t)
            predicted = models.training_memory(params, _activation_count(tokens, d, blocks),
                                               dtype="fp32" if p in ("fp32", "tf32") else p,
                                               optimizer="adamw")
            rows.append({"precision": p, "median_ms": t.median_s * 1e3, "TFLOP/s": t.gflops / 1e3,
                         "memory_MB": memory / 1e6, "activations_MB": activations / 1e6,
                         "model_MB": predicted.total / 1e6, "memory_how": how,
                         "loss_rel_diff": abs(loss0 - ref_loss) / abs(ref_loss)})
            del model, opt
    base = timings.by_label().get("fp32")
    speedups = {t.label: base.median_s / t.median_s for t in timings} if base else {}
    ceilings, how = matmul_ceilings(dev, [t.label for t in timings])
    return {"device": timings[0].device if timings else dev, "backend": dev, "tokens": tokens,
            "d": d, "blocks": blocks, "params": params, "rows": rows,
            "timings": [t.to_dict() for t in timings], "speedup_vs_fp32": speedups,
            "ceiling_gflops": ceilings, "ceiling_how": how,
            "cpu_support": cpu_low_precision_support() if dev == "cpu" else None}


def matmul_ceilings(dev: str, precisions) -> tuple[dict, str]:
    """Ceiling in GFLOP/s per precision: datasheet peaks on a GPU (or the spec table's default
    GPU when the table lacks this one), the measured FP32 matmul rate on the CPU."""
    if dev == "cuda":
        g = specs.for_active_device()
        out = {p: g.peak_flops(p) / 1e9 for p in precisions if p in g.precisions}
        return out, f"datasheet peak ({g.key})"
    how = f"fp32 matmul rate of this CPU, {bench.CPU_THREADS} thread (measured)"
    return {"fp32": cpu_matmul_gflops()}, how


@functools.lru_cache(maxsize=2)
def cpu_matmul_gflops(n: int = 512, min_time_s: float = 0.1) -> float:
    """Measured FP32 matrix-multiply rate of this CPU (n x n x n), on ``bench.CPU_THREADS`` threads."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    with bench.cpu_threads():
        return bench.benchmark(torch.mm, a, b, backend="cpu", flops=2 * n ** 3,
                               min_time_s=min_time_s).gflops


def _activation_count(tokens: int, d: int, blocks: int) -> int:
    """Values a feed-forward block keeps for backward: input, norm output, up output, GELU output."""
    return blocks * tokens * (d + d + 4 * d + 4 * d)


def amp_table(result: dict) -> Table:
    rows = []
    for r in result["rows"]:
        if "skipped" in r:
            rows.append({"precision": r["precision"], "median ms": None, "speed-up vs fp32": None,
                         "memory MB": None, "note": "not run: " + r["skipped"]})
            continue
        rows.append({"precision": r["precision"], "median ms": r["median_ms"],
                     "speed-up vs fp32": result["speedup_vs_fp32"].get(r["precision"]),
                     "memory MB": r["memory_MB"], "note": r["memory_how"]})
    return Table(rows, caption=f"Training step of {result['blocks']} feed-forward blocks, "
                               f"{result['tokens']} tokens x d={result['d']}, on {result['device']}")


def autocast_dtypes(dtype=torch.bfloat16, dev: str | None = None) -> Table:
    """The dtype each common op returns under autocast on this device (measured, not a list).

    ``dtype``: torch.bfloat16 or torch.float16, or their names "bf16" and "fp16"."""
    if isinstance(dtype, str):
        if dtype not in ("bf16", "fp16"):
            raise PrecisionError(f"autocast runs in 'bf16' or 'fp16' (or torch.bfloat16, "
                                 f"torch.float16), not {dtype!r}.")
        dtype = precision.torch_dtype(dtype)
    dev = dev or device.torch_device()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 16, generator=g).to(dev)
    w = torch.randn(16, 16, generator=g).to(dev)
    y_int = torch.randint(0, 16, (8,), generator=g).to(dev)
    norm = torch.nn.LayerNorm(16).to(dev)
    rows = []
    with torch.autocast(dev, dtype=dtype):
        h = F.linear(x, w)  # a low-precision activation, as inside a network
        ops = {"linear / matmul (x @ W)": lambda: F.linear(x, w),
               "gelu(h)": lambda: F.gelu(h), "h + h": lambda: h + h,
               "layer_norm(h)": lambda: norm(h), "softmax(h)": lambda: torch.softmax(h, -1),
               "exp(h)": lambda: torch.exp(h), "h.sum()": lambda: h.sum(),
               "mse_loss(h, target)": lambda: F.mse_loss(h, x),
               "cross_entropy(h, labels)": lambda: F.cross_entropy(h, y_int)}
        for name, fn in ops.items():
            rows.append({"op under autocast": name,
                         "result dtype": str(fn().dtype).replace("torch.", "")})
    return Table(rows, caption=f"torch.autocast('{dev}', dtype={str(dtype).replace('torch.', '')}): "
                               "dtypes measured here")


# --------------------------------------------------------------------------- what the results say

def amp_explanation(result: dict) -> str:
    """What the AMP measurement shows on this device, in a few sentences."""
    sp = result["speedup_vs_fp32"]
    parts = [f"{p}: {v:.2f}x" for p, v in sp.items() if p != "fp32"]
    head = f"Measured speed-up over FP32 on {result['device']}: " + ", ".join(parts) + "."
    if result["backend"] == "cuda":
        return head + (" Tensor cores run the 16-bit matrix products; FP32 runs on the ordinary "
                       "cores unless TF32 is allowed.")
    faster = [p for p, v in sp.items() if p != "fp32" and v > 1.05]
    slower = [p for p, v in sp.items() if p != "fp32" and v < 0.95]
    tail = result["cpu_support"]["sentence"]
    verdict = []
    if faster:
        verdict.append(f"{' and '.join(faster)} ran faster here")
    if slower:
        verdict.append(f"{' and '.join(slower)} ran slower here")
    return (head + " " + tail + (" So " + "; ".join(verdict) + "." if verdict else "")
            + _memory_sentence(result))


def _memory_sentence(result: dict) -> str:
    """The counted memory per precision, and why 16 bits can need more of it at a small step."""
    mem = {r["precision"]: r["memory_MB"] for r in result["rows"] if "memory_MB" in r}
    if "fp32" not in mem or len(mem) < 2:
        return ""
    s = " Memory of a step: " + ", ".join(f"{p} {v:.2f} MB" for p, v in mem.items()) + "."
    if any(v > mem["fp32"] for p, v in mem.items() if p != "fp32"):
        s += (f" Autocast keeps the FP32 weights and adds a 16-bit copy of each for the step; at "
              f"{result['tokens']} tokens the activations it halves weigh less than those copies. "
              "With many tokens per step the activations dominate, and the total falls.")
    return s
