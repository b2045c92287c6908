"""Figures of chapter 3 (parallelism): scaling, all-reduce against the ring model, bucketing,
DDP and pipeline timelines against the GPipe model, memory per device."""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from .. import models, reference
from ..bench import Timings, format_bytes
from ..experiments.ch3 import AllReduceSweep, Bucketing, DDPTimeline, Pipeline, Scaling
from . import CEILING, NAIVE, OPTIMIZED, PALETTE, ladder, new_figure, sweep, title

OP_COLOURS = {"forward": PALETTE[0], "backward": PALETTE[3], "all-reduce": PALETTE[2],
              "wait + optimizer": "#bbbbbb", "idle": "#ffffff"}


def _gantt(ax, events, unit_scale: float = 1e3, model: bool = False) -> None:
    """(lane, op, start s, end s) bars coloured by op; lanes top to bottom in first-seen order."""
    lanes = list(dict.fromkeys(e[0] for e in events))
    seen = []
    for lane, op, a, b in events:
        y = lanes.index(lane)
        colour = OP_COLOURS.get(op, PALETTE[len(seen) % len(PALETTE)])
        ax.barh(y, (b - a) * unit_scale, left=a * unit_scale, height=0.7, color=colour,
                edgecolor="white", linewidth=0.6, hatch="//" if model else None,
                alpha=0.55 if model else 1.0,
                label=(f"{op} (model)" if model else op) if op not in seen else None)
        if op not in seen:
            seen.append(op)
    ax.set_yticks(range(len(lanes)), lanes)
    ax.set_ylim(len(lanes) - 0.5, -0.5)


def _ref_label(ref) -> str:
    return f"{ref.gpu}, {ref.date}, `{ref.command}`"


# --------------------------------------------------------------------------- concept

def concept(stages: int = 4, microbatches: Sequence[int] = (1, 4)):
    """The GPipe schedule (model) with 1 and with m micro-batches: the bubble shrinks."""
    fig, axes = new_figure(len(microbatches), 1, figsize=(8, 1.3 + 1.25 * len(microbatches)
                                                          * max(1, stages / 3)), sharex=True)
    axes = np.atleast_1d(axes)
    for ax, m in zip(axes, microbatches):
        pb = models.pipeline_bubble(stages, m)
        scale = 1.0 / m  # one micro-batch is 1/m of the batch: same total work in each row
        events = [(f"device {op.stage}", op.phase, op.start * scale, op.end * scale)
                  for op in sorted(pb.schedule, key=lambda o: o.stage)]
        _gantt(ax, events, unit_scale=1.0, model=False)
        ax.set_title(f"{m} micro-batch{'es' if m > 1 else ''}: bubble "
                     f"(p-1)/(m+p-1) = {pb.bubble_fraction:.0%} of each device's time",
                     fontsize=9, loc="left")
        ideal = 3.0  # forward 1 + backward 2, in units of one whole-batch forward on a stage
        ax.axvline(ideal, color=CEILING, ls="--", lw=1.0,
                   label="no bubble: only each device's own work" if ax is axes[0] else None)
    axes[-1].set_xlabel("time (units of one stage's forward pass over the whole batch)")
    # Below the panels: inside the first one it hid device 0's backward pass.
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=7)
    fig.suptitle(f"Pipeline parallelism over {stages} devices, GPipe schedule (model)",
                 fontsize=11)
    return fig


# --------------------------------------------------------------------------- data parallel

def scaling(s, refs: bool = True):
    """Samples per second of 1 worker and n DDP workers against perfect scaling."""
    fig, ax = new_figure(figsize=(7, 3.4))
    labels = [s.single.label, s.multi.label]
    values = [s.single_throughput, s.multi_throughput]
    errs = [[v - v * t.median_s / t.p80_s for v, t in zip(values, (s.single, s.multi))],
            [v * t.median_s / t.p20_s - v for v, t in zip(values, (s.single, s.multi))]]
    ax.barh([0, 1], values, color=[NAIVE, OPTIMIZED], xerr=errs, capsize=3)
    ideal = s.workers * s.single_throughput
    ax.axvline(ideal, color=CEILING, ls="--", lw=1.2,
               label=f"perfect scaling: {s.workers} x one worker")
    notes = [f"{values[0]:.0f} samples/s",
             f"{values[1]:.0f} samples/s: {values[1] / values[0]:.2f}x, {values[1] / ideal:.0%} "
             "of perfect"]
    for y, (v, hi, note) in enumerate(zip(values, errs[1], notes)):
        ax.annotate(note, (v + hi, y), xytext=(5, 0), textcoords="offset points", va="center",
                    fontsize=8)
    ax.set_yticks([0, 1], labels)
    ax.set_ylim(1.6, -0.6)
    ax.set_xlim(0, max(values + [ideal]) * 1.6)
    ax.set_xlabel("training throughput (samples/s, median step)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=2)
    title(ax, f"Data parallelism: scaling efficiency {s.efficiency:.0%} ({s.backend})", s.device)
    return fig


def allreduce(sw, refs: bool = True):
    """All-reduce time and bandwidth against message size, with the ring model and its limit."""
    fig, (ax_t, ax_b) = new_figure(1, 2, figsize=(10, 3.8))
    x = sw.sizes
    mod = sw.model()
    ceilings, models_t, models_b = {}, {}, {}
    if mod:
        models_t["ring model, ping-pong fit"] = [m.time * 1e3 for m in mod]
        models_b["ring model, ping-pong fit"] = [m.algorithm_bandwidth / 1e9 for m in mod]
        p = sw.workers
        ceilings[f"ring limit: link bandwidth x p/(2(p-1)) = "
                 f"{sw.bandwidth_Bps * p / (2 * (p - 1)) / 1e9:.3g} GB/s"] = \
            sw.bandwidth_Bps * p / (2 * (p - 1)) / 1e9
    ref_t, ref_b = {}, {}
    if refs:
        for r, v in reference.find("ch3", "allreduce"):
            if isinstance(v, dict) and v.get("sizes") and v.get("algbw_GBps"):
                ref_b[_ref_label(r)] = (v["sizes"], v["algbw_GBps"])
                if v.get("median_s"):
                    ref_t[_ref_label(r)] = (v["sizes"], [t * 1e3 for t in v["median_s"]])
    sweep(x, {f"all-reduce, {sw.workers} workers ({sw.backend})":
              [t.median_s * 1e3 for t in sw.allreduce]},
          "message size (bytes)", "time per all-reduce (ms)", "All-reduce time",
          models=models_t, reference=ref_t, logx=True, logy=True, device=sw.device, ax=ax_t)
    sweep(x, {"algorithm bandwidth (bytes / time)": sw.algbw_GBps},
          "message size (bytes)", "bandwidth (GB/s)", "All-reduce bandwidth",
          ceilings=ceilings, models=models_b, reference=ref_b, logx=True, logy=True,
          device=sw.device, ax=ax_b)
    for ax in (ax_t, ax_b):
        ax.legend(fontsize=7)
    return fig


def bucketing(b, sw=None):
    """Effective bandwidth of one gradient synchronisation: per tensor against buckets."""
    # Relabelled copies: the caller's timings stay as they were.
    timings = Timings(
        dataclasses.replace(t, label=f"{t.label}\n({n} all-reduce call{'s' if n > 1 else ''})")
        for t, n in zip(b.timings, b.buckets))
    ceiling = None
    label = "ceiling"
    if sw is not None and sw.bandwidth_Bps and b.workers > 1:
        p = b.workers
        ceiling = sw.bandwidth_Bps * p / (2 * (p - 1)) / 1e9
        label = "ring limit from the ping-pong fit (no latency)"
    return ladder(timings, metric="gbps", ceiling=ceiling, ceiling_label=label,
                  title_text=f"All-reduce of {b.tensors} gradient tensors "
                             f"({b.total_bytes / 2**20:.1f} MiB, {b.workers} workers)",
                  device=b.device)


def ddp_timeline(tl, ax=None):
    """One DDP step per rank: compute lane and all-reduce lane, buckets as separate bars."""
    if ax is None:
        fig, ax = new_figure(figsize=(9.5, 1.2 + 0.75 * 2 * tl.workers))
    else:
        fig = ax.figure
    events = []
    for r, ev in enumerate(tl.events):
        for name, a, b in ev:
            if name.startswith("all-reduce"):
                events.append((f"rank {r} all-reduce", "all-reduce", a, b))
            else:
                events.append((f"rank {r} compute", name, a, b))
    # Compute lanes first, then communication, per rank.
    events.sort(key=lambda e: (int(e[0].split()[1]), "all-reduce" in e[0]))
    _gantt(ax, events)
    end = max(b for _, _, _, b in events) * 1e3
    ax.axvline(tl.timing.median_s * 1e3, color=CEILING, ls="--", lw=1,
               label=f"median step over {tl.timing.count} timed steps: "
                     f"{tl.timing.median_s * 1e3:.1f} ms")
    ax.set_xlim(0, max(end, tl.timing.median_s * 1e3) * 1.05)
    ax.set_xlabel("time since the step started (ms)")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7)
    title(ax, f"DDP step, buckets of {format_bytes(tl.bucket_cap_mb * 2**20)}: {tl.buckets} bucket(s), "
              f"{tl.overlap_fraction:.0%} of all-reduce overlapped with backward", tl.device)
    return fig


# --------------------------------------------------------------------------- model / pipeline

def _model_events(p, run) -> list:
    """The GPipe model's schedule scaled to the measured median forward time of a micro-batch."""
    f = [b - a for ev in run.events for _, ph, a, b in ev if ph == "forward"]
    unit = float(np.median(f)) if f else 1.0
    pb = p.model(run.microbatches)
    return [(f"stage {op.stage}", op.phase, op.start * unit, op.end * unit)
            for op in sorted(pb.schedule, key=lambda o: o.stage)]


def pipeline(p, runs: Sequence[int] | None = None):
    """Measured timeline of each micro-batch count, beside the GPipe model scaled to it."""
    chosen = [p.run_for(m) for m in runs] if runs else p.runs
    fig, axes = new_figure(len(chosen), 2, figsize=(11, 0.6 + (0.9 + 0.45 * p.stages) * len(chosen)),
                           squeeze=False)
    xmax = max(max(r.span for r in chosen), max(e[3] for r in chosen for e in _model_events(p, r)))
    for row, run in zip(axes, chosen):
        meas = [(f"stage {s}", ph, a, b) for s, ev in enumerate(run.events) for _, ph, a, b in ev]
        _gantt(row[0], meas)
        mod = p.model(run.microbatches)
        _gantt(row[1], _model_events(p, run), model=True)
        m = run.microbatches
        row[0].set_title(f"measured, {m} micro-batch{'es' if m > 1 else ''}: step "
                         f"{run.timing.median_s * 1e3:.1f} ms median, idle {run.bubble:.0%}",
                         fontsize=9, loc="left")
        row[1].set_title(f"GPipe model: bubble (p-1)/(m+p-1) = {mod.bubble_fraction:.0%}",
                         fontsize=9, loc="left")
        model_end = max(e[3] for e in _model_events(p, run))
        for ax, end, what in ((row[0], run.span, "measured step"), (row[1], model_end, "model step")):
            ax.set_xlim(0, xmax * 1e3 * 1.02)
            ax.axvline(end * 1e3, color=CEILING, ls="--", lw=0.8, label=f"end of {what}")
    for ax in axes[-1]:
        ax.set_xlabel("time since the step started (ms)")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.32), ncols=3, fontsize=7)
    fig.suptitle(f"Pipeline over {p.stages} stage(s), batch of {p.rows} rows ({p.backend})\n"
                 f"{p.device}", fontsize=10)
    return fig


def memory(p):
    """Parameter bytes on each device: the whole model on one device against each stage."""
    rows = p.memory_rows()
    fig, ax = new_figure(figsize=(7, 0.5 * len(rows) + 1.6))
    labels = [r[0] for r in rows]
    values = [r[1] / 2**20 for r in rows]
    ax.barh(range(len(rows)), values, color=[NAIVE] + [OPTIMIZED] * (len(rows) - 1))
    ax.axvline(values[0], color=CEILING, ls="--", lw=1.2,
               label="what one device must hold without a split")
    for y, v in enumerate(values):
        ax.annotate(f"{v:.1f} MiB ({v / values[0]:.0%})", (v, y), xytext=(4, 0),
                    textcoords="offset points", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), labels)
    ax.set_ylim(len(rows) - 0.4, -0.6)
    ax.set_xlim(0, values[0] * 1.45)
    ax.set_xlabel("parameters held per device (MiB, fp32)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25))
    title(ax, f"Model parallelism: memory per device, {p.stages} stages", p.device)
    return fig


def explore(result: dict):
    """The widget's figure: a DDP step's timeline and the pipeline's measured timelines."""
    tl, pipe = result["ddp"], result["pipeline"]
    n_pipe = len(pipe.runs) if pipe else 0
    heights = [0.9 + 0.55 * 2 * tl.workers] + [0.9 + 0.45 * pipe.stages] * n_pipe
    fig, axes = new_figure(1 + n_pipe, 1, figsize=(10, sum(heights) + 0.6), squeeze=False,
                           gridspec_kw={"height_ratios": heights})
    axes = axes[:, 0]
    ddp_timeline(tl, ax=axes[0])
    if pipe:
        xmax = max(r.span for r in pipe.runs) * 1e3 * 1.05
        for ax, run in zip(axes[1:], pipe.runs):
            meas = [(f"stage {s}", ph, a, b) for s, ev in enumerate(run.events)
                    for _, ph, a, b in ev]
            _gantt(ax, meas)
            m = run.microbatches
            mod = pipe.model(m)
            ax.set_xlim(0, xmax)
            ax.set_title(f"pipeline, {pipe.stages} stage(s), {m} micro-batch"
                         f"{'es' if m > 1 else ''}: step {run.timing.median_s * 1e3:.1f} ms, "
                         f"idle {run.bubble:.0%} measured, {mod.bubble_fraction:.0%} in the "
                         "GPipe model (p-1)/(m+p-1)", fontsize=9, loc="left")
        axes[-1].set_xlabel("time since the step started (ms)")
        for ax in axes[1:]:
            ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7)
    return fig


# --------------------------------------------------------------------------- headless

def figures(results: dict) -> dict:
    """Every figure of ``experiments.ch3.run_all``'s results."""
    sc = Scaling.from_dict(results["scaling"])
    sw = AllReduceSweep.from_dict(results["allreduce"])
    bk = Bucketing.from_dict(results["bucketing"])
    tls = [DDPTimeline.from_dict(d) for d in results["ddp_timelines"]]
    pp = Pipeline.from_dict(results["pipeline"])
    out = {"concept": concept(), "scaling": scaling(sc), "allreduce": allreduce(sw),
           "bucketing": bucketing(bk, sw), "pipeline": pipeline(pp), "memory": memory(pp)}
    for tl in tls:
        out[f"ddp_timeline_{tl.bucket_cap_mb:g}MiB"] = ddp_timeline(tl)
    return out


def reference_note() -> str:
    """One line on the GPU reference data the all-reduce figure overlays, or that there is none."""
    found = reference.find("ch3", "allreduce")
    if not found:
        return ("No reference measurement of an all-reduce on GPUs is stored yet (it needs a "
                "machine with 2 or more GPUs and `make gpu-check`), so the figure shows no GPU "
                "numbers.")
    return "Hollow points are reference measurements: " + "; ".join(r.label for r, _ in found) + "."
