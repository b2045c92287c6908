"""The chapter without a notebook: ``run_all`` for ``python -m gpucourse run`` and
``gpu_check`` for ``make gpu-check`` (the ladder on a GPU, saved as reference data)."""
from __future__ import annotations

import contextlib

from ... import check, device
from ...bench import cpu_threads
from . import attention, compiling, ladder
from .model import GPTConfig, Setup
from .profile import profile_trainer
from .step import Trainer

#: The GPU check's model: still small (a few million parameters) but with a sequence long
#: enough for attention's T x T scores to matter and batches that keep an H200 busy.
GPU_CONFIG = GPTConfig(vocab=8192, seq=1024, d=512, heads=8, layers=4, batch=16)
GPU_SEQS = (1024, 2048, 4096, 8192)


def profile_naive(cfg: GPTConfig = GPTConfig(), dev: str | None = None, steps: int = 3) -> dict:
    """Step 0: where the naive step's time goes (a dict; ``StepProfile.table()`` shows it)."""
    dev = dev or device.torch_device()
    with cpu_threads() if dev == "cpu" else contextlib.nullcontext():
        return profile_trainer(Trainer(cfg, Setup(), dev), steps=steps).to_dict()


def run_all(quick: bool = True, progress=None) -> dict:
    """Every experiment of the chapter, as JSON-ready results (for the headless runner)."""
    t = 0.05 if quick else 0.2
    steps = [("profile", lambda: profile_naive()),
             ("ladder", lambda: ladder.run_ladder(min_time_s=t)),
             ("attention_memory", lambda: attention.attention_memory(
                 seqs=(128, 256, 512) if quick else (128, 256, 512, 1024, 2048))),
             ("graph_breaks", lambda: compiling.graph_break_demo()),
             ("optimizers", lambda: ladder.optimizer_comparison(min_time_s=t))]
    out = {}
    for i, (name, fn) in enumerate(steps):
        out[name] = fn()
        if progress:
            progress((i + 1) / len(steps))
    out["compile"] = compiling.compile_summary(out["ladder"])
    return out


def _compact(row: dict) -> dict:
    """A ladder row as reference data: the figures, not the samples."""
    keep = ("rung", "label", "skipped", "median_ms", "p20_ms", "p80_ms", "tokens_per_s",
            "peak_bytes", "kernels", "first_call_s", "time_vs_naive", "memory_vs_naive")
    out = {k: row[k] for k in keep if k in row}
    if "check" in row:
        out["loss_rel_error"] = row["check"]["loss_rel_error"]
        out["grad_rel_error"] = row["check"]["grad_rel_error"]
        out["tolerance"] = row["check"]["tolerance"]
    return out


def gpu_check(dev: str = "cuda", cfg: GPTConfig | None = None, seqs=None) -> dict:
    """The ladder, the attention memory sweep and the compile figures on this GPU, with each
    threshold's pass/fail.

    ``dev="cpu"`` takes the same steps on the CPU (with the CPU's small model unless ``cfg``
    is given), for the tests of this function on machines without a GPU; its figures and
    verdicts mean nothing there.
    """
    if dev == "cuda":
        device.require_cuda("chapter 7's GPU check", needs="torch")
    cfg = cfg or (GPU_CONFIG if dev == "cuda" else GPTConfig())
    seqs = seqs or (GPU_SEQS if dev == "cuda" else (128, 256))
    lad = ladder.run_ladder(cfg, dev, min_time_s=0.3)
    mem = attention.attention_memory(seqs=seqs, heads=8, head_dim=64, dev=dev)
    comp = compiling.compile_summary(lad)
    ran = [r for r in lad["rows"] if "median_ms" in r]
    naive = ran[0]["median_ms"]
    best = min(r["median_ms"] for r in ran if r["rung"] != "triton" or dev == "cuda")
    longest = mem["rows"][-1]
    graphs = next((r for r in lad["rows"] if r["rung"] == "cuda_graphs"), {})
    checks = {
        "ladder_speedup": check.at_least(naive / best, 2.0, "naive step time / fastest rung's "
                                         "step time (x)"),
        "sdpa_memory_saving": check.at_least(longest["naive"] / max(longest["sdpa"], 1), 4.0,
                                             f"naive / SDPA peak memory of attention forward + "
                                             f"backward at T={longest['T']} (x)"),
        "compile_fewer_kernels": check.at_most(
            comp.get("kernels_after", 0) / max(comp.get("kernels_before", 1), 1), 0.7,
            "kernels per step with torch.compile / without"),
        "cuda_graphs_replay_checked": check.threshold(
            None, None, bool(graphs.get("check", {}).get("replay", {}).get("passed")),
            "a replayed CUDA Graph of the whole step matches eager mode on a new batch"),
    }
    return {"checks": checks, "passed": all(c["passed"] for c in checks.values()),
            "config": dict(cfg.__dict__), "ladder": [_compact(r) for r in lad["rows"]],
            "attention_memory": {"rows": mem["rows"], "heads": mem["heads"],
                                 "head_dim": mem["head_dim"],
                                 "chosen_op": mem["sdpa_backends"]["chosen_op"]},
            "compile": {k: v for k, v in comp.items() if k != "cache"}}
