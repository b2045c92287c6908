"""The ladder: rung after rung switched on, each checked against the naive version, then
timed (``gpucourse.bench``), its peak memory measured and its kernels counted.

On a CPU the CUDA Graphs rung cannot run: its row says so and gives a labelled model instead,
the kernels the profiler counted times a per-launch cost (``models.LAUNCH_OVERHEAD_S``), which
is what replaying a graph would save a GPU's CPU side at most.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import torch

from ... import bench, models
from ... import device as gdev
from ...bench import cpu_threads
from ...check import ch7 as check7
from ...display import Table
from ...errors import CourseError, whole_number
from ...precision import availability
from . import checks, custom_op, triton_fusion
from .model import GPTConfig, Setup
from .profile import profile_trainer
from .step import Trainer, make_optimizer


@dataclass(frozen=True)
class Rung:
    name: str
    label: str
    switch: dict


def amp_precision(dev: str) -> str:
    """bf16 where it is the right choice (a CPU, a GPU of compute capability 8.0 or newer),
    else fp16 with loss scaling."""
    if dev == "cuda" and torch.cuda.get_device_capability() < (8, 0):
        return "fp16"
    return "bf16"


def rungs(dev: str = "cpu") -> list[Rung]:
    """The rungs in the order the chapter climbs them."""
    amp = amp_precision(dev)
    return [
        Rung("naive", "naive: fp32, softmax(QK^T)V, eager, AdamW loop", {}),
        Rung("amp", f"+ autocast {amp}" + (" + GradScaler" if amp == "fp16" else ""),
             {"precision": amp}),
        Rung("sdpa", "+ scaled_dot_product_attention", {"attention": "sdpa"}),
        Rung("compile", "+ torch.compile (each block)", {"compile": True}),
        Rung("cuda_graphs", "+ CUDA Graphs (whole step)", {"cuda_graphs": True}),
        Rung("checkpoint", "+ activation checkpointing", {"checkpoint": True}),
        Rung("fused_adamw", "+ fused AdamW", {"optimizer": "fused"}),
        Rung("custom_op", "+ bias+GELU: course kernel as custom op", {"bias_gelu": "custom_op"}),
        Rung("triton", "+ bias+GELU: Triton kernel", {"bias_gelu": "triton"}),
    ]


RUNG_NAMES = tuple(r.name for r in rungs())


def why_not_here(rung: Rung, dev: str, setup: Setup = Setup()) -> str | None:
    """One sentence when ``rung`` cannot run on ``dev`` after ``setup``, else None."""
    if rung.switch.get("cuda_graphs") and dev != "cuda":
        return "no CUDA GPU here: CUDA Graphs capture GPU work (modelled below instead)"
    if rung.switch.get("cuda_graphs") and setup.precision == "fp16":
        return ("GradScaler reads found_inf on the CPU every step, which a CUDA Graph cannot "
                "capture (GPUs with BF16 need no scaler)")
    if rung.switch.get("bias_gelu") == "triton":
        return triton_fusion.missing_reason()
    return None


def measure(trainer: Trainer, label: str, min_time_s: float = 0.2,
            min_samples: int = 5) -> dict:
    """Time the trainer's step (after its check), count its kernels and its peak memory."""
    dev = trainer.device
    prof = profile_trainer(trainer, steps=2 if min_samples >= 5 else 1)
    t = bench.benchmark(trainer.step, label=label, backend=dev, min_time_s=min_time_s,
                        min_samples=min_samples, warmup_s=0.0 if min_samples < 5 else None,
                        size=trainer.cfg.tokens)
    return {"timing": t.to_dict(), "median_ms": t.median_s * 1e3, "p20_ms": t.p20_s * 1e3,
            "p80_ms": t.p80_s * 1e3, "spread": t.spread,
            "tokens_per_s": trainer.cfg.tokens / t.median_s, "peak_bytes": prof.peak_bytes,
            "peak_how": prof.peak_how, "kernels": prof.kernels,
            "profile_ms": prof.ms_by_category, "device": t.device}


def graphs_model(kernels: int, step_ms: float) -> dict:
    """What CUDA Graphs would save a GPU's CPU side at most (a model): one launch cost each."""
    saved_ms = kernels * models.LAUNCH_OVERHEAD_S * 1e3
    return {"kernels": kernels, "launch_cost_us": models.LAUNCH_OVERHEAD_S * 1e6,
            "saved_ms": saved_ms,
            "label": f"model: {kernels} kernel launches x {models.LAUNCH_OVERHEAD_S * 1e6:g} us "
                     f"(models.LAUNCH_OVERHEAD_S) = {saved_ms:.3g} ms of launch cost per step "
                     "that a replay would remove on a GPU"}


def run_ladder(cfg: GPTConfig = GPTConfig(), dev: str | None = None, names=None,
               min_time_s: float = 0.2, compile_backend: str = "inductor", progress=None) -> dict:
    """Climb the ladder: each rung's setup is the previous one plus its switch. Every setup is
    checked (loss, gradients, optimizer) before it is timed; one that cannot run here is
    listed with the reason and the later rungs go on without it."""
    dev = dev or gdev.torch_device()
    todo = [r for r in rungs(dev) if names is None or r.name in names]
    setup, rows, last_kernels = Setup(), [], None
    with cpu_threads() if dev == "cpu" else contextlib.nullcontext():
        for i, rung in enumerate(todo):
            reason = why_not_here(rung, dev, setup)
            row = {"rung": rung.name, "label": rung.label}
            if reason:
                row["skipped"] = reason
                if rung.name == "cuda_graphs" and last_kernels:
                    row["model"] = graphs_model(last_kernels, rows[-1].get("median_ms", 0.0))
                rows.append(row)
                if progress:
                    progress((i + 1) / len(todo))
                continue
            setup = setup.with_(**rung.switch)
            row.update(run_setup(cfg, setup, dev, rung.name, min_time_s, compile_backend))
            last_kernels = row["kernels"]
            rows.append(row)
            if progress:
                progress((i + 1) / len(todo))
    naive = next((r for r in rows if r["rung"] == "naive" and "median_ms" in r), None)
    for r in rows:
        if naive and "median_ms" in r:
            r["time_vs_naive"] = r["median_ms"] / naive["median_ms"]
            if r.get("peak_bytes") and naive.get("peak_bytes"):
                r["memory_vs_naive"] = r["peak_bytes"] / naive["peak_bytes"]
    return {"config": cfg.__dict__, "backend": dev, "device": rows[0].get("device", dev)
            if rows else dev, "rows": rows, "tolerances": {p: check7.tolerance_text(cfg, p)
                                                           for p in ("fp32", "bf16", "fp16")},
            "custom_op_runs": custom_op.where_it_runs(dev),
            "triton_runs": triton_fusion.how_it_runs()}


def run_setup(cfg: GPTConfig, setup: Setup, dev: str, label: str, min_time_s: float = 0.2,
              compile_backend: str = "inductor") -> dict:
    """Check one setup, then measure it; the result row (``compile_s``: its first call)."""
    from torch._dynamo.utils import counters

    t0 = time.perf_counter()
    hits = counters["inductor"]["fxgraph_cache_hit"]
    misses = counters["inductor"]["fxgraph_cache_miss"]
    trainer = Trainer(cfg, setup, dev, compile_backend=compile_backend)
    report = checks.check_trainer(trainer)
    first_call_s = trainer.first_call_s
    # Graphs inductor compiled for this setup, and how many came from its on-disk cache.
    cache = {"graphs_from_cache": counters["inductor"]["fxgraph_cache_hit"] - hits,
             "graphs_compiled": counters["inductor"]["fxgraph_cache_miss"] - misses}
    if setup.cuda_graphs:
        trainer.capture()
        report["replay"] = checks.check_replay(trainer)
    slow = setup.bias_gelu == "triton" and dev != "cuda"  # the interpreter: a few steps only
    row = {"setup": setup.changes(), "check": report, "compile_cache": cache,
           "first_call_s": first_call_s, "setup_s": time.perf_counter() - t0}
    row.update(measure(trainer, label, min_time_s, min_samples=3 if slow else 5))
    if slow:
        row["note"] = "Triton's interpreter runs this rung: its time is NumPy's, not a kernel's"
    return row


def ladder_table(result: dict) -> Table:
    rows = []
    for r in result["rows"]:
        if "skipped" in r:
            rows.append({"rung": r["label"], "check": "not run", "median ms": None,
                         "spread": None, "tokens/s": None, "peak MB": None, "kernels": None,
                         "vs naive": r["skipped"] + (f"; {r['model']['label']}"
                                                     if r.get("model") else "")})
            continue
        c = r["check"]
        rows.append({"rung": r["label"],
                     "check": f"loss {c['loss_rel_error']:.1e}, grads {c['grad_rel_error']:.1e}"
                              f" <= {c['tolerance']:.1e}",
                     "median ms": r["median_ms"], "spread": r["spread"],
                     "tokens/s": r["tokens_per_s"],
                     "peak MB": (r["peak_bytes"] or 0) / 1e6, "kernels": r["kernels"],
                     "vs naive": f"time {r.get('time_vs_naive', 1):.2f}x, memory "
                                 f"{r.get('memory_vs_naive', 1):.2f}x"})
    return Table(rows, caption=f"The ladder on {result['device']} (each rung adds its switch to "
                               "the ones above; checked, then timed with gpucourse.bench)")


def optimizer_comparison(cfg: GPTConfig = GPTConfig(), dev: str | None = None,
                         min_time_s: float = 0.2) -> dict:
    """AdamW's step alone, as a per-parameter loop, foreach and fused, each checked first."""
    dev = dev or gdev.torch_device()
    out = {"backend": dev, "rows": []}
    with cpu_threads() if dev == "cpu" else contextlib.nullcontext():
        t = Trainer(cfg, Setup(), dev)
        t.forward_backward()
        params = [p for p in t.model.parameters()]
        for kind in ("loop", "foreach", "fused"):
            report = {} if kind == "loop" else checks.check_optimizer(kind, cfg, dev)
            opt = make_optimizer(params, kind)
            tm = bench.benchmark(opt.step, label=kind, backend=dev, min_time_s=min_time_s)
            check = "the reference" if kind == "loop" else (
                f"matches the loop: worst element at {report['optimizer_worst_ratio_to_bound']:.2g}"
                " of its rounding bound")
            out["rows"].append({"optimizer": kind, "median ms": tm.median_s * 1e3,
                                "spread": tm.spread, "parameter tensors": len(params),
                                "check": check, "device": tm.device})
    return out


def require_rung(name: str) -> Rung:
    for r in rungs():
        if r.name == name:
            return r
    raise CourseError(f"{name!r} is not a rung of the ladder: use one of {', '.join(RUNG_NAMES)}.")


#: The switches the widget offers (CUDA Graphs and Triton are left to the ladder: one needs a
#: GPU, the other runs in an interpreter here).
WIDGET_RUNGS = {"SDPA": {"attention": "sdpa"}, "torch.compile": {"compile": True},
                "checkpointing": {"checkpoint": True}, "fused AdamW": {"optimizer": "fused"},
                "custom op": {"bias_gelu": "custom_op"}}


def compare(seq: int = 64, precision: str = "fp32", switches=("SDPA",), dev: str | None = None,
            min_time_s: float = 0.1, compile_backend: str = "inductor", progress=None) -> dict:
    """The naive step and the step with ``precision`` and ``switches`` on, at sequence length
    ``seq``: both checked, then measured (what the chapter's widget draws)."""
    dev = dev or gdev.torch_device()
    seq = whole_number(seq, "seq", 64)
    unknown = [s for s in switches if s not in WIDGET_RUNGS]
    if unknown:
        raise CourseError(f"{unknown[0]!r} is not a switch here: use some of "
                          f"{', '.join(WIDGET_RUNGS)}.")
    cfg = GPTConfig().with_(seq=seq)
    setup = Setup(precision=precision)
    for s in switches:
        setup = setup.with_(**WIDGET_RUNGS[s])
    out = {"seq": seq, "precision": precision, "switches": list(switches), "backend": dev}
    with cpu_threads() if dev == "cpu" else contextlib.nullcontext():
        for i, (name, s) in enumerate((("naive", Setup()), ("chosen", setup))):
            out[name] = run_setup(cfg, s, dev, name, min_time_s, compile_backend)
            if progress:
                progress((i + 1) / 2)
    out["device"] = out["naive"]["device"]
    return out


def precision_choices(dev: str | None = None) -> dict:
    """{precision: None where autocast can use it here, else why not} (chapter 6's rule)."""
    avail = availability(dev)
    return {p: avail.get(p) for p in ("fp32", "bf16", "fp16")}
