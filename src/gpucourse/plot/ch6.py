"""Figures of chapter 6 (mixed precision and quantization) from ``experiments.ch6`` results."""
from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import NullFormatter, ScalarFormatter

from .. import precision, reference, specs
from . import (CEILING, MEASURED, MODEL, NAIVE, OPTIMIZED, REFERENCE, legend_below, new_figure,
               title)

PRECISION_COLOURS = {"fp32": MEASURED, "tf32": "#17becf", "fp16": "#ff7f0e", "bf16": OPTIMIZED,
                     "int8": "#9467bd", "fp8_e4m3": "#8c564b", "fp8_e5m2": "#e377c2"}
RUN_COLOURS = {"fp32": CEILING, "none": NAIVE, "static": "#ff7f0e", "dynamic": OPTIMIZED,
               "bf16": "#9467bd"}


def _colour(name: str) -> str:
    for k, c in PRECISION_COLOURS.items():
        if name.startswith(k):
            return c
    return MEASURED


# --------------------------------------------------------------------------- formats

def formats_figure(rows: list[dict], device: str | None = None) -> Figure:
    """Each float format's range (subnormal part hatched) and its relative spacing (eps)."""
    floats = [r for r in rows if r["format"] != "int8"]
    fig, (a1, a2) = new_figure(1, 2, figsize=(11, 3.9), gridspec_kw={"width_ratios": [2.2, 1]})
    ys = np.arange(len(floats))
    for y, r in zip(ys, floats):
        c = _colour(r["format"])
        lo, mid, hi = (math.log10(r["smallest subnormal"]), math.log10(r["smallest normal"]),
                       math.log10(r["max"]))
        a1.barh(y, hi - mid, left=mid, color=c, height=0.6)
        a1.barh(y, mid - lo, left=lo, color="white", edgecolor=c, hatch="///", height=0.6)
        a1.annotate(f"max {r['max']:.3g}", (hi, y), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=7.5)
    a1.add_patch(Rectangle((0, 0), 0, 0, facecolor="white", edgecolor="#555", hatch="///",
                           label="subnormal (fewer bits)"))
    f16 = next(r for r in floats if r["format"] == "fp16")
    a1.axvline(math.log10(f16["smallest subnormal"]), color=CEILING, ls=":", lw=1.2,
               label="fp16: below this, zero")
    a1.axvline(math.log10(f16["max"]), color=CEILING, ls="--", lw=1.2, label="fp16: above this, inf")
    a1.set_yticks(ys, [r["format"] for r in floats])
    a1.invert_yaxis()
    a1.set_xlabel("magnitude, log10 (a value of 1e-8 is at -8)")
    a1.set_xlim(-48, 48)
    title(a1, "Range of each format (positive values)", device or "exact: from the formats' bit layouts")
    eps = [r["spacing at 1 (eps)"] for r in rows]
    names = [r["format"] for r in rows]
    yy = np.arange(len(rows))
    a2.barh(yy, eps, color=[_colour(n) for n in names])
    for y, e, r in zip(yy, eps, rows):
        a2.annotate(f"{e:.2g}" + (" x scale" if r["format"] == "int8" else ""), (e, y),
                    xytext=(3, 0), textcoords="offset points", va="center", fontsize=7.5)
    a2.set_xscale("log")
    a2.set_xlim(1e-8, 1e2)
    a2.axvline(1.0, color=CEILING, ls="--", lw=1, label="1: no fraction bits left")
    a2.set_yticks(yy, names)
    a2.invert_yaxis()
    a2.set_xlabel("gap after 1.0 (eps, unitless)")
    title(a2, "Precision: gap to the next number", "exact: from the formats' bit layouts")
    # One legend below both panels: inside, it hid int8's bar and its note.
    handles = [h for ax in (a1, a2) for h in ax.get_legend_handles_labels()[0]]
    labels = [lab for ax in (a1, a2) for lab in ax.get_legend_handles_labels()[1]]
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=7)
    return fig


def gradient_histogram(g: dict, device: str | None = None) -> Figure:
    """|gradient| of weights and activations against FP16's smallest normal and subnormal values.

    ``g`` is ``ch6.gradient_magnitudes()`` (arrays) or its JSON form (histogram counts).
    """
    fig, ax = new_figure(figsize=(8, 3.8))
    bins = np.array(g["bins"]) if "bins" in g else np.logspace(-14, 0, 57)
    for name, colour in (("activations", NAIVE), ("weights", MEASURED)):
        if isinstance(g.get(name), np.ndarray):
            v = g[name][g[name] > 0]
            counts = np.histogram(np.clip(v, bins[0], bins[-1]), bins)[0]
        else:
            counts = np.array(g[name + "_hist"])
        share = 100 * counts / max(1, counts.sum())
        ax.stairs(share, bins, color=colour, lw=1.8, label=f"{name[:-1]} gradients (measured)")
    ax.set_xscale("log")
    ax.axvspan(bins[0], g["fp16_min_subnormal"] / 2, color=NAIVE, alpha=0.08,
               label="fp16 rounds these to 0")
    ax.axvline(g["fp16_min_subnormal"], color=CEILING, ls=":", lw=1.3,
               label=f"fp16 smallest subnormal {g['fp16_min_subnormal']:.2g}")
    ax.axvline(g["fp16_min_normal"], color=CEILING, ls="--", lw=1.3,
               label=f"fp16 smallest normal {g['fp16_min_normal']:.2g}")
    ax.set_xlabel("|gradient value| (values below 1e-14 drawn at 1e-14)")
    ax.set_ylabel("% of values per bin")
    ax.legend(loc="upper left", fontsize=7.5)
    sh = g.get("share_below_subnormal", {})
    text = " and ".join(f"{100 * v:.0f} % of {k}" for k, v in sh.items())
    title(ax, f"FP32 gradients at step {g.get('step', '?')}"
              + (f": {text} are below fp16's range" if text else ""), device or g.get("device"))
    return fig


# --------------------------------------------------------------------------- loss scaling

def loss_scaling_figure(result: dict) -> Figure:
    """Loss curves, their gap to FP32, gradients flushed to zero, and the dynamic loss scale."""
    fig, axes = new_figure(2, 2, figsize=(12, 7.0))
    (a1, a2), (a3, a4) = axes
    runs = result["runs"]
    ref = np.array(runs["fp32"]["losses"])
    tol = 100 * result["tolerance"]
    for mode, run in runs.items():
        steps = np.arange(len(run["losses"]))
        style = dict(color=RUN_COLOURS[mode], ls="--" if mode in ("dynamic", "bf16") else "-",
                     lw=2.2 if mode == "fp32" else 1.4)
        a1.plot(steps, run["losses"], label=run["label"], **style)
        if mode != "fp32":
            gap = 100 * (np.array(run["losses"]) - ref) / ref
            a2.plot(steps, gap, label=f"{run['label']} (max {100 * result['max_rel_gap'][mode]:.2g} %)",
                    **style)
            a3.plot(steps, 100 * np.array(run["zeroed"]), label=run["label"], **style)
    a1.set_yscale("log")
    a1.set_xlabel("training step")
    a1.set_ylabel("cross-entropy loss (log scale)")
    a1.legend(fontsize=7.5)
    title(a1, "Loss curves (measured)", result["device"])
    a2.axhspan(-tol, tol, color=OPTIMIZED, alpha=0.12, label=f"tolerance ±{tol:g} %")
    a2.axhline(0, color=CEILING, lw=1, ls="--", label="fp32")
    a2.set_xlabel("training step")
    a2.set_ylabel("loss gap to fp32 (%)")
    a2.legend(fontsize=7.5)
    title(a2, "Gap to the FP32 loss, step by step", result["device"])
    a3.axhline(0, color=CEILING, lw=1, ls="--", label="fp32: none lost")
    a3.set_xlabel("training step")
    a3.set_ylabel("% of weight gradients flushed to 0")
    a3.legend(fontsize=7.5)
    title(a3, "FP16 gradients that underflow to zero", result["device"])
    dyn = runs["dynamic"]
    a4.plot(np.arange(len(dyn["scales"])), np.log2(dyn["scales"]), color=OPTIMIZED,
            drawstyle="steps-post", label="dynamic scale (measured run)")
    static = runs["static"]["scales"][0]
    a4.axhline(math.log2(static), color="#ff7f0e", ls="-.", label=f"static scale 2^{math.log2(static):g}")
    a4.axhline(0, color=CEILING, ls=":", lw=1, label="no scaling (2^0)")
    a4.set_xlabel("training step")
    a4.set_ylabel("log2(loss scale)")
    a4.legend(fontsize=7.5)
    title(a4, f"Dynamic loss scale ({dyn['skipped']} steps skipped for overflow)", result["device"])
    return fig


def scale_sweep_figure(sweep: dict, point: dict | None = None, device: str | None = None) -> Figure:
    """Zeroed and overflowed gradients against the loss scale; the chosen scale's histogram."""
    if point:
        fig, (a1, a2) = new_figure(1, 2, figsize=(12, 3.9))
    else:
        fig, a1 = new_figure(figsize=(7, 3.9))
    x = sweep["log2_scales"]
    a1.plot(x, 100 * np.array(sweep["zeroed"]), "o-", color=NAIVE, ms=4,
            label="flushed to 0 (measured)")
    a1.plot(x, 100 * np.array(sweep["overflow"]), "s-", color="#ff7f0e", ms=4,
            label="overflowed to inf (measured)")
    a1.axhline(0, color=CEILING, ls="--", lw=1, label="ideal: nothing lost")
    if point:
        a1.axvline(point["log2_scale"], color=OPTIMIZED, lw=2, label=f"2^{point['log2_scale']:g}")
    a1.set_xlabel("log2(loss scale)")
    a1.set_ylabel("% of weight gradients lost")
    a1.legend(fontsize=7.5)
    title(a1, "Too small a scale loses gradients, too large overflows", device or sweep.get("device"))
    if point:
        mags = point["scaled_magnitudes"]
        mags = mags[mags > 0]
        bins = np.logspace(-14, 8, 89)
        counts, edges = np.histogram(np.clip(mags, bins[0], bins[-1]), bins)
        a2.stairs(100 * counts / max(1, counts.sum()), edges, color=MEASURED, lw=1.8,
                  label=f"|gradient| x 2^{point['log2_scale']:g}")
        a2.axvspan(edges[0], 2.0 ** -25, color=NAIVE, alpha=0.1, label="rounds to 0 in fp16")
        a2.axvspan(65504, edges[-1], color="#ff7f0e", alpha=0.15, label="overflows in fp16")
        a2.axvline(2.0 ** -14, color=CEILING, ls="--", lw=1, label="fp16 smallest normal")
        a2.set_xscale("log")
        a2.set_xlabel("|scaled gradient value|")
        a2.set_ylabel("% of values per bin")
        a2.legend(fontsize=7.5, loc="upper left")
        title(a2, f"Scale 2^{point['log2_scale']:g}: {100 * point['zeroed']:.2f} % zeroed, "
                  f"{100 * point['overflow']:.2f} % inf, gradient error {point['grad_error']:.2g}",
              device)
    return fig


# --------------------------------------------------------------------------- AMP

def _reference_amp():
    """[(label, {precision: speed-up})] from reference files."""
    return [(r.label, v) for r, v in reference.find("ch6", "amp", "speedup_vs_fp32")]


def amp_figure(result: dict, model_gpu: str | None = None) -> Figure:
    """Throughput and memory of a training step per precision, with ceilings and reference data.

    The ceiling comes from ``result["ceiling_gflops"]``: datasheet peaks on a GPU, the measured
    FP32 matmul rate on the CPU. ``model_gpu`` adds that GPU's peak ratios (model).
    """
    fig, (a1, a2, a3) = new_figure(1, 3, figsize=(13.5, 3.9))
    rows = [r for r in result["rows"] if "skipped" not in r]
    names = [r["precision"] for r in rows]
    ceilings = dict(result.get("ceiling_gflops") or {})
    big = max([r["TFLOP/s"] for r in rows]) > 2.0
    unit, k = ("TFLOP/s", 1e-3) if big else ("GFLOP/s", 1.0)
    tput = [r["TFLOP/s"] * 1e3 * k for r in rows]
    ceilings = {n: v * k for n, v in ceilings.items()}
    xs = np.arange(len(rows))
    a1.bar(xs, tput, color=[_colour(n) for n in names], label="measured")
    for x, v in zip(xs, tput):
        a1.annotate(f"{v:.3g}", (x, v), xytext=(0, 2), textcoords="offset points", ha="center",
                    fontsize=8)
    how = result.get("ceiling_how", "ceiling")
    if set(ceilings) == {"fp32"} and len(names) > 1:
        a1.axhline(ceilings["fp32"], color=CEILING, ls="--", lw=1.4, label=how)
    else:
        for i, n in enumerate(names):
            if ceilings.get(n):
                a1.plot([i - 0.4, i + 0.4], [ceilings[n]] * 2, color=CEILING, ls="--", lw=1.4,
                        label=how if i == 0 else None)
    a1.set_xticks(xs, names)
    a1.set_ylabel(f"throughput ({unit}, matmul FLOPs)")
    top = max(tput + list(ceilings.values()))
    if top / max(min(tput), 1e-9) > 30:
        a1.set_yscale("log")
    else:
        a1.set_ylim(0, top * 1.2)
    legend_below(a1, fontsize=7)
    title(a1, f"Training step, {result['tokens']} tokens x d={result['d']}", result["device"])

    # 2. speed-up vs fp32: measured here, reference GPUs (hollow), peak ratio (model)
    sp = result["speedup_vs_fp32"]
    a2.bar(xs, [sp[n] for n in names], color=[_colour(n) for n in names], width=0.25,
           label="measured here")
    for x, n in zip(xs, names):
        a2.annotate(f"{sp[n]:.2g}x", (x, sp[n]), xytext=(0, 2), textcoords="offset points",
                    ha="center", fontsize=8)
    refs = _reference_amp()
    for j, (lab, ref_sp) in enumerate(refs[:2]):
        vals = [ref_sp.get(n) or 0 for n in names]
        a2.bar(xs + 0.27 * (j + 1), vals, width=0.25, fill=False, edgecolor=REFERENCE, hatch="//",
               label=lab)
    if model_gpu:
        g = specs.lookup(model_gpu)
        # FP32's ratio is 1 by definition (the dashed line): a marker there would sit on its note.
        ratio = [g.peak_flops(n) / g.peak_flops("fp32") if n in g.precisions and n != "fp32"
                 else float("nan") for n in names]
        a2.plot(xs, ratio, "D", mfc="none", color=MODEL, ls="none",
                label=f"peak ratio, {g.key} (model)")
    a2.axhline(1.0, color=CEILING, ls="--", lw=1, label="fp32 = 1")
    a2.set_yscale("log")
    # Room above the tallest bar or marker for its note; the legend goes below the panel.
    tallest = max((v for line in a2.get_lines() for v in line.get_ydata() if math.isfinite(v)),
                  default=1)
    tallest = max([tallest] + [b.get_height() for b in a2.patches])
    a2.set_ylim(min([sp[n] for n in names] + [1.0]) / 2, tallest * 2)
    a2.set_xticks(xs, names)
    a2.set_ylabel("speed-up over fp32 (x, log scale)")
    legend_below(a2, fontsize=7)
    lo, hi = a2.get_ylim()
    a2.set_yticks([t for t in (0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100) if lo <= t <= hi])
    a2.yaxis.set_major_formatter(ScalarFormatter())
    a2.yaxis.set_minor_formatter(NullFormatter())
    if not refs and result["backend"] != "cuda":
        a2.text(0.02, 0.02, "no GPU reference data for chapter 6 yet", transform=a2.transAxes,
                fontsize=7.5, color="#444")
    title(a2, "Speed-up of autocast over fp32", result["device"])

    # 3. memory: measured vs model
    mem = [r["memory_MB"] for r in rows]
    model_mb = [r["model_MB"] for r in rows]
    a3.bar(xs - 0.2, mem, width=0.4, color=[_colour(n) for n in names], label="measured")
    a3.bar(xs + 0.2, model_mb, width=0.4, fill=False, edgecolor=MODEL, ls="--",
           label="training_memory (model)")
    a3.axhline(mem[0], color=CEILING, ls=":", lw=1, label="fp32 measured")
    a3.set_xticks(xs, names)
    a3.set_ylabel("memory of a training step (MB)")
    legend_below(a3, fontsize=7)
    title(a3, "Memory: " + ("peak allocated" if result["backend"] == "cuda" else
                            "tensors counted"), result["device"])
    return fig


# --------------------------------------------------------------------------- INT8

def int8_figure(result: dict) -> Figure:
    """Latency, weight size and held-out accuracy of FP32 and INT8 versions of the classifier."""
    fig, (a1, a2, a3) = new_figure(1, 3, figsize=(13.5, 3.9))
    rows = result["rows"]
    labels = [r["version"].replace(" (", "\n(") for r in rows]
    ys = np.arange(len(rows))
    colours = [MEASURED] + [PRECISION_COLOURS["int8"]] * (len(rows) - 1)
    t = [r["median_ms"] for r in rows]
    tl = [(d["median_s"] - d["p20_s"]) * 1e3 for d in result["timings"]]
    th = [(d["p80_s"] - d["median_s"]) * 1e3 for d in result["timings"]]
    a1.barh(ys, t, color=colours, xerr=[tl, th], capsize=3)
    for y, r, hi in zip(ys, rows, th):
        a1.annotate(f"{r['median_ms']:.3g} ms ({r['speed-up vs fp32']:.2f}x)",
                    (r["median_ms"] + hi, y), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=7.5)
    a1.axvline(t[0], color=CEILING, ls="--", lw=1, label="fp32 baseline")
    a1.set_xlim(0, max(v + h for v, h in zip(t, th)) * 1.6)
    a1.set_yticks(ys, labels, fontsize=7.5)
    a1.invert_yaxis()
    a1.set_xlabel("median latency per batch (ms)")
    a1.legend(fontsize=7)
    title(a1, f"Inference, batch {result['batch']}", result["device"])
    mb = [r["weights_MB"] for r in rows]
    a2.barh(ys, mb, color=colours)
    for y, v in zip(ys, mb):
        a2.annotate(f"{v:.3g} MB ({mb[0] / v:.1f}x smaller)" if y else f"{v:.3g} MB", (v, y),
                    xytext=(4, 0), textcoords="offset points", va="center", fontsize=7.5)
    a2.set_xlim(0, mb[0] * 1.45)
    a2.axvline(mb[0] / 4, color=MODEL, ls="--", lw=1.2, label="fp32 / 4 (ideal, model)")
    a2.axvline(mb[0], color=CEILING, ls=":", lw=1, label="fp32")
    a2.set_yticks(ys, labels, fontsize=7.5)
    a2.invert_yaxis()
    a2.set_xlabel("stored weights (MB)")
    legend_below(a2)  # inside, it sat on the fp32 line
    title(a2, "Model size", result["device"])
    acc = [100 * r["accuracy"] for r in rows]
    a3.barh(ys, acc, color=colours)
    for y, a in zip(ys, acc):
        a3.annotate(f"{a:.2f} %", (a, y), xytext=(4, 0), textcoords="offset points", va="center",
                    fontsize=7.5)
    a3.axvline(acc[0], color=CEILING, ls="--", lw=1, label="fp32 accuracy")
    a3.set_xlim(min(acc) - 5, 100)
    a3.set_yticks(ys, labels, fontsize=7.5)
    a3.invert_yaxis()
    a3.set_xlabel("held-out accuracy (%)")
    a3.legend(fontsize=7, loc="lower right")  # the bars end near the fp32 line; right is empty
    title(a3, "Accuracy (2048 held-out points)", result["device"])
    return fig


# --------------------------------------------------------------------------- precision widget

def _rounding_line(name: str) -> tuple[float, str]:
    """(level, label) of the rounding of the selected format, the error's scale: its unit
    roundoff, or for INT8 half a step of a symmetric scale (max|x| / 127 / 2)."""
    if name == "int8":
        return 1 / 254, "int8 half step (max|x| / 254)"
    u = precision.UNIT_ROUNDOFF[name]
    return u, f"{name} rounding (2^{round(math.log2(u))})"


def precision_figure(result: dict) -> Figure:
    """The chosen precision against FP32: time per batch, stored weights, output error."""
    p = result["precision"]
    names = list(dict.fromkeys(("fp32", p)))
    device = result[p]["device"]
    fig, (a1, a2, a3) = new_figure(1, 3, figsize=(12, 3.4))
    xs = np.arange(len(names))
    colours = [_colour(n) for n in names]
    t = [result[n]["median_s"] * 1e3 for n in names]
    err = [[(result[n]["median_s"] - result[n]["p20_s"]) * 1e3 for n in names],
           [(result[n]["p80_s"] - result[n]["median_s"]) * 1e3 for n in names]]
    a1.bar(xs, t, color=colours, yerr=err, capsize=3)
    for x, v, hi in zip(xs, t, err[1]):  # above the error bar, which would cross the note
        a1.annotate(f"{v:.3g} ms", (x, v + hi), xytext=(0, 2), textcoords="offset points",
                    ha="center", fontsize=8)
    a1.set_ylim(0, max(v + hi for v, hi in zip(t, err[1])) * 1.2)
    a1.axhline(t[0], color=CEILING, ls="--", lw=1, label="fp32")
    a1.set_xticks(xs, names)
    a1.set_ylabel("median time per batch (ms)")
    a1.legend(fontsize=7.5)
    title(a1, f"Inference, batch {result['batch']}", device)
    mem = [result[n]["weights_bytes"] / 1e6 for n in names]
    a2.bar(xs, mem, color=colours, label="stored weights")
    if result[p].get("peak_bytes"):
        a2.plot(xs, [result[n]["peak_bytes"] / 1e6 for n in names], "o", color=CEILING,
                label="peak allocated")
    a2.axhline(mem[0], color=CEILING, ls="--", lw=1, label="fp32 weights")
    a2.set_xticks(xs, names)
    a2.set_ylabel("memory (MB)")
    a2.legend(fontsize=7.5)
    title(a2, "Memory", device)
    e = [max(result[n]["rel_error"], 1e-8) for n in names]
    a3.bar(xs, e, color=colours)
    for x, n in zip(xs, names):
        a3.annotate(f"acc {100 * result[n]['accuracy']:.1f} %", (x, e[x]), xytext=(0, 2),
                    textcoords="offset points", ha="center", fontsize=8)
    level, what = _rounding_line(p)
    a3.axhline(level, color=CEILING, ls=":", lw=1, label=what)
    a3.set_yscale("log")
    a3.set_ylim(1e-8, 1)
    a3.set_xticks(xs, names)
    a3.set_ylabel("relative error of outputs vs fp32")
    legend_below(a3, fontsize=7.5)  # the bars and their notes fill the axis
    title(a3, "Error", device)
    return fig


# --------------------------------------------------------------------------- runner

def figures(results: dict) -> dict:
    """Every figure of the chapter from ``experiments.ch6.run_all`` results."""
    out = {"formats": formats_figure(results["formats"]["rows"]),
           "gradients": gradient_histogram(results["gradients"]),
           "loss_scaling": loss_scaling_figure(results["loss_scaling"]),
           "scale_sweep": scale_sweep_figure(results["scale_sweep"]),
           "amp": amp_figure(results["amp"], model_gpu=None if results["amp"]["backend"] == "cuda"
                             else specs.DEFAULT_GPU),
           "int8": int8_figure(results["int8"])}
    return out
