"""Figures of chapter 7 (a transformer, end to end) from ``experiments.ch7`` results."""
from __future__ import annotations

import textwrap

import numpy as np
from matplotlib.figure import Figure

from .. import reference
from . import CEILING, MEASURED, MODEL, NAIVE, OPTIMIZED, PALETTE, REFERENCE, new_figure, title

CATEGORY_COLOURS = {"matmul": "#1f77b4", "attention": "#d62728", "elementwise and norms": "#ff7f0e",
                    "data movement": "#8c564b", "fused (torch.compile)": "#2ca02c",
                    "custom op": "#17becf", "optimizer": "#9467bd", "overhead": "#7f7f7f"}


def profile_figure(profile: dict, prediction: str | None = None) -> Figure:
    """Milliseconds per step by category (torch.profiler), largest first."""
    short = {"cpu": "overhead between operators", "cuda": "GPU idle between kernels"}
    items = sorted(profile["ms_by_category"].items(), key=lambda kv: kv[1])
    fig, ax = new_figure(figsize=(9, 0.42 * len(items) + 1.9))
    names = [short[profile["backend"]] if k == "overhead" else k for k, _ in items]
    values = [v for _, v in items]
    ax.barh(range(len(items)), values, color=[CATEGORY_COLOURS.get(k, MEASURED) for k, _ in items])
    for y, v in enumerate(values):
        ax.annotate(f"{v:.3g} ms ({100 * v / profile['step_ms']:.0f}%)", (v, y), xytext=(4, 0),
                    textcoords="offset points", va="center", fontsize=8)
    ax.set_yticks(range(len(items)), names)
    ax.set_xlim(0, max(values) * 1.35)
    ax.set_xlabel("ms per training step (measured with torch.profiler)")
    text = f"One step: {profile['step_ms']:.3g} ms, {profile['kernels']} kernels"
    if prediction:
        text += f"\n(you predicted: {prediction})"
    title(ax, text, profile["device"])
    return fig


def _reference_ladder():
    """[(label, [rows])] of chapter 7 ladders in the reference files."""
    return [(r.label, rows) for r, rows in reference.find("ch7", "ladder") if isinstance(rows, list)]


def ladder_figure(result: dict) -> Figure:
    """The cumulative ladder: step time and peak memory per rung, in % of the naive step,
    measured here; the reference GPU's ladder beside it when a reference file has one."""
    rows = result["rows"]
    refs = _reference_ladder()
    fig, (a1, a2) = new_figure(1, 2, figsize=(12, 0.55 * len(rows) + 2.8), sharey=True,
                               gridspec_kw={"width_ratios": [1.25, 1]})
    ys = np.arange(len(rows))
    # Long rung names on two lines: one long tick label pushes the panels past the page.
    labels = [textwrap.fill(r["label"], 32) for r in rows]
    for ax, key, what in ((a1, "time", "step time"), (a2, "memory", "peak memory")):
        values = []
        for y, r in zip(ys, rows):
            v = r.get(f"{key}_vs_naive")
            if v is None:
                why = "not run here" + (": " + r["skipped"].split(":")[0] if key == "time"
                                        and r.get("skipped") else "")
                if r.get("model") and key == "time":
                    m = r["model"]
                    why += (f"\nmodel: {m['kernels']} launches x {m['launch_cost_us']:g} us = "
                            f"{m['saved_ms']:.2g} ms/step\na replay would save on a GPU")
                ax.annotate(why, (0.02, y), xycoords=("axes fraction", "data"), va="center",
                            fontsize=7, color="#555")
                values.append(np.nan)
                continue
            v *= 100
            values.append(v)
            colour = NAIVE if r["rung"] == "naive" else (
                "white" if r.get("note") else (OPTIMIZED if v < 100 else MEASURED))
            err = None
            if key == "time" and r.get("p20_ms"):
                base = v / r["median_ms"]
                err = [[v - r["p20_ms"] * base], [r["p80_ms"] * base - v]]
            ax.barh([y], [v], color=colour, edgecolor=MEASURED, hatch="//" if r.get("note") else None,
                    xerr=err, capsize=3, height=0.6)
            note = f"{v:.0f}%"
            if key == "time":
                ms = r["median_ms"]
                note += f"  ({ms:.3g} ms)" if ms < 1000 else f"  ({ms:,.0f} ms)"
            elif r.get("peak_bytes"):
                note += f"  ({r['peak_bytes'] / 1e6:.3g} MB)"
            if r.get("note"):
                note += "  interpreter"
            end = v + (err[1][0] if err else 0)  # after the error bar, not over it
            ax.annotate(note, (end, y), xytext=(4, 0), textcoords="offset points", va="center",
                        fontsize=7.5)
        for lab, ref_rows in refs[:1]:
            by = {rr.get("rung"): rr for rr in ref_rows if isinstance(rr, dict)}
            rv = [100 * by.get(r["rung"], {}).get(f"{key}_vs_naive", np.nan) for r in rows]
            ax.plot(rv, ys, "s", mfc="none", color=REFERENCE, ms=7, label=f"{lab} (reference)")
        finite = [v for v in values if np.isfinite(v)]
        top = max(finite + [100.0])
        if top / max(min(finite + [100.0]), 1e-9) > 20:
            ax.set_xscale("log")
            ax.set_xlim(min(finite + [100.0]) / 2, top * 6)
        else:
            ax.set_xlim(0, top * 1.45)
        ax.axvline(100, color=CEILING, ls="--", lw=1, label="naive = 100%")
        ax.set_xlabel(f"{what}, % of the naive step's\n(measured; lower is better)")
        ax.legend(loc="lower right", fontsize=7)
        title(ax, f"Cumulative ladder: {what}", result["device"])
    a1.set_yticks(ys, labels)
    a1.set_ylim(len(rows) - 0.4, -0.6)  # top to bottom, with room for a last row without a bar
    if not refs:
        fig.suptitle("No GPU reference data for chapter 7 yet: `make gpu-check` on a GPU records "
                     "its ladder, which is then drawn here beside this device's.", fontsize=8,
                     color="#444")
    return fig


def attention_memory_figure(result: dict) -> Figure:
    """Peak memory of attention forward + backward against T, log-log, with T and T^2 guides."""
    from ..experiments.ch7.attention import VARIANTS  # heavy: loads torch, which the other figures do without

    fig, ax = new_figure(figsize=(7.5, 4.2))
    ts = np.array([r["T"] for r in result["rows"]], dtype=float)
    styles = {"naive": (NAIVE, "o-"), "sdpa": (OPTIMIZED, "s-"),
              "sdpa, math backend": (PALETTE[3], "^--")}
    for v in VARIANTS:
        colour, style = styles[v]
        ax.plot(ts, [r[v] / 1e6 for r in result["rows"]], style, color=colour, label=f"{v} (measured)")
    for power, base_key, name in ((2, "naive", "T^2"), (1, "sdpa", "T")):
        start = result["rows"][0][base_key] / 1e6
        ax.plot(ts, start * (ts / ts[0]) ** power, ":", color=MODEL, lw=1,
                label=f"grows as {name} (guide)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length T (tokens)")
    ax.set_ylabel("peak memory above the inputs (MB)")
    ax.legend(fontsize=7.5)
    title(ax, f"Attention memory: {result['heads']} heads x d_head {result['head_dim']}, "
              f"forward + backward", result["device"])
    return fig


def setup_figure(result: dict) -> Figure:
    """The widget's figure: the chosen setup against the naive step (time, memory)."""
    fig, (a1, a2) = new_figure(1, 2, figsize=(10, 3.2))
    names = ["naive", "chosen"]
    rows = [result[n] for n in names]
    label = ", ".join([result["precision"]] + list(result["switches"])) or "naive"
    colours = [NAIVE, OPTIMIZED]
    t = [r["median_ms"] for r in rows]
    err = [[r["median_ms"] - r["p20_ms"] for r in rows], [r["p80_ms"] - r["median_ms"] for r in rows]]
    a1.bar([0, 1], t, color=colours, yerr=err, capsize=3)
    for x, v in enumerate(t):  # above the error bar, which would cross the note
        a1.annotate(f"{v:.3g} ms", (x, v + err[1][x]), xytext=(0, 3), textcoords="offset points",
                    ha="center", fontsize=8)
    a1.set_xticks([0, 1], ["naive", label])
    a1.set_ylabel("median step time (ms)")
    a1.set_ylim(0, max(v + e for v, e in zip(t, err[1])) * 1.25)
    title(a1, f"Training step, T={result['seq']} (measured)", result["device"])
    m = [(r["peak_bytes"] or 0) / 1e6 for r in rows]
    a2.bar([0, 1], m, color=colours)
    for x, v in enumerate(m):
        a2.annotate(f"{v:.3g} MB", (x, v), xytext=(0, 3), textcoords="offset points",
                    ha="center", fontsize=8)
    a2.set_xticks([0, 1], ["naive", label])
    a2.set_ylabel("peak tensor memory of a step (MB)")
    a2.set_ylim(0, max(m) * 1.3)
    title(a2, "Peak memory (measured)", result["device"])
    return fig


def figures(results: dict) -> dict:
    """Every figure of the chapter from ``experiments.ch7.run_all`` results."""
    return {"profile": profile_figure(results["profile"]),
            "ladder": ladder_figure(results["ladder"]),
            "attention_memory": attention_memory_figure(results["attention_memory"])}
