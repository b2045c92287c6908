"""Figures of chapter 5 (accelerated libraries) from ``experiments.ch5`` results."""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from .. import models
from ..bench import Timing, Timings
from . import (CEILING, MEASURED, MODEL, NAIVE, OPTIMIZED, PALETTE, REFERENCE, ladder,
               new_figure, sweep, title)


def _timings(items) -> Timings:
    """Timings from live records or from run_all's dicts."""
    return Timings(t if isinstance(t, Timing) else Timing.from_dict(t) for t in items)


def _note(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=9,
            color="#444", wrap=True, bbox=dict(boxstyle="round", fc="#f7f7f7", ec="#ccc"))


def _relegend(fig, ax, ncols: int = 3) -> None:
    for leg in list(fig.legends):
        leg.remove()
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=ncols)


# --------------------------------------------------------------------------- 1. matmul

def cpu_ladder_figure(timings) -> Figure:
    """Python loops → NumPy rows → BLAS on the CPU, in GFLOP/s, against the best BLAS rate."""
    timings = _timings(timings)
    best = max(t.gflops for t in timings)
    return ladder(timings, metric="gflops", ceiling=best,
                  ceiling_label=f"fastest BLAS call measured here ({best:.3g} GFLOP/s)",
                  title_text="Matrix multiply on the CPU: Python loops → BLAS (FP32, one thread)",
                  device=timings[0].device)


def sgemm_figure(result: dict) -> Figure:
    """The SGEMM ladder: measured on this GPU against cuBLAS and the FP32 peak, or the reference data."""
    if result["source"] == "measured":
        timings = _timings(result["timings"])
        versions = Timings(t for t in timings if not t.label.startswith("ref"))
        cublas = result["cublas_gflops"]
        fig = ladder(versions, metric="gflops", ceiling=cublas,
                     ceiling_label=f"cuBLAS SGEMM, measured ({cublas:,.0f} GFLOP/s)",
                     title_text=f"Hand-written SGEMM at {result['n']}³ vs cuBLAS (FP32)",
                     device=timings[0].device)
        ax = fig.axes[0]
        if result.get("peak_gflops"):
            ax.axvline(result["peak_gflops"], color=MODEL, ls=":", lw=1.2,
                       label=f"FP32 datasheet peak ({result['peak_gflops']:,.0f} GFLOP/s)")
            lo, hi = ax.get_xlim()
            ax.set_xlim(lo, max(hi, result["peak_gflops"] * (8 if ax.get_xscale() == "log" else 1.35)))
            _relegend(fig, ax, ncols=2)
        return fig
    # a run with no versions has nothing to draw (its lists are of one length, checked on reading)
    refs = [r for r in result.get("reference", []) if r["value"].get("labels")]
    fig, ax = new_figure(figsize=(7.5, 0.5 * max(1, sum(len(r["value"]["labels"]) for r in refs)) + 1.8))
    if not refs:
        _note(ax, result.get("note", "no data"))
        ax.set_axis_off()
        title(ax, "Hand-written SGEMM vs cuBLAS: no GPU and no reference data")
        return fig
    labels, values, y = [], [], 0
    for i, r in enumerate(refs):
        v = r["value"]
        color = PALETTE[(i + 4) % len(PALETTE)] if i else REFERENCE
        for lab, g in zip(v["labels"], v["gflops"]):
            ax.barh([y], [g], fill=False, edgecolor=color, hatch="//")
            ax.annotate(f"{g:,.0f}  ({100 * g / v['cublas_gflops']:.0f}% of cuBLAS)", (g, y),
                        xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
            labels.append(lab if len(refs) == 1 else f"{lab} ({r['gpu']})")
            values.append(g)
            y += 1
        ax.axvline(v["cublas_gflops"], color=CEILING, ls="--", lw=1.2,
                   label=f"cuBLAS, {r['gpu']} ({v['cublas_gflops']:,.0f} GFLOP/s)")
        ax.barh([0], [0], fill=False, edgecolor=color, hatch="//", label=r["label"])
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(min(values) / 2, max(values) * 8)
    ax.set_xlabel("throughput (GFLOP/s)")
    fig.legend(loc="outside lower center", ncols=1)
    title(ax, f"Hand-written SGEMM at {refs[0]['value']['n']}³ vs cuBLAS (reference data)",
          device=", ".join(r["gpu"] for r in refs))
    return fig


def reuse_figure(model: dict) -> Figure:
    """Device-memory bytes and shared-memory loads per multiply-add of each matmul version (model)."""
    fig, ax = new_figure(figsize=(7.5, 4.0))
    names = [v.replace("matmul_", "") for v in model["versions"]]
    y = np.arange(len(names))
    g, s = model["global_bytes_per_fma"], model["shared_loads_per_fma"]
    ax.barh(y - 0.2, g, height=0.4, color="none", edgecolor=NAIVE, hatch="\\\\",
            label="device-memory bytes per FMA (32-byte sectors, no cache; model)")
    ax.barh(y + 0.2, [v if v > 0 else np.nan for v in s], height=0.4, color="none",
            edgecolor=MEASURED, hatch="//", label="shared-memory load instructions per FMA (model)")
    for yi, gv, sv in zip(y, g, s):
        ax.annotate(f"{gv:.3g} B", (gv, yi - 0.2), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=7.5)
        ax.annotate(f"{sv:.3g}" if sv > 0 else "none", (max(sv, 1e-2), yi + 0.2), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=7.5)
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(1e-2, 300)
    ax.set_xlabel("per multiply-add (log scale; fewer is better)")
    fig.legend(loc="outside lower center", ncols=1)
    title(ax, "Traffic per multiply-add of each SGEMM version (model)",
          device="counted from the code for any GPU, not measured")
    return fig


# --------------------------------------------------------------------------- 2. convolution

def conv_figure(result: dict, peak_gflops: float | None = None) -> Figure:
    """Taps loop → unfold + matmul → library conv2d, in GFLOP/s, against a ceiling.

    On a GPU the ceiling is the FP32 datasheet peak (pass ``peak_gflops``); on the CPU it is
    the library's own rate.
    """
    timings = _timings(result["timings"])
    cfg = result["config"]
    shape = (f"{cfg['batch']}×{cfg['channels']}×{cfg['size']}×{cfg['size']}, "
             f"{cfg['out_channels']} filters {cfg['kernel']}×{cfg['kernel']}")
    if peak_gflops:
        ceiling, label = peak_gflops, f"FP32 datasheet peak ({peak_gflops:,.0f} GFLOP/s)"
    else:
        ceiling = timings[-1].gflops
        label = f"the library's rate, measured ({ceiling:.3g} GFLOP/s)"
    return ladder(timings, metric="gflops", ceiling=ceiling, ceiling_label=label,
                  title_text=f"Convolution {shape}, FP32", device=timings[0].device)


# --------------------------------------------------------------------------- 3. sparse

def sparse_figure(sweep_result: dict, point: float | None = None) -> Figure:
    """CSR × dense time against density, the dense time as a line, and the measured crossover."""
    s = sweep_result
    series = {f"CSR × dense, torch.sparse ({s['library']})": [t * 1e3 for t in s["sparse_s"]]}
    if s.get("cupyx_s"):
        series["CSR × dense, cupyx.scipy.sparse"] = [t * 1e3 for t in s["cupyx_s"]]
    fig = sweep(s["densities"], series, xlabel="density of the sparse matrix (fraction non-zero)",
                ylabel="median time per product (ms)",
                title_text=f"Dense vs sparse: ({s['n']}×{s['n']}) × ({s['n']}×{s['k']}), FP32",
                ceilings={f"dense × dense, measured ({s['dense_s'] * 1e3:.3g} ms)": s["dense_s"] * 1e3},
                logx=True, logy=True, device=s["device"])
    ax = fig.axes[0]
    for key, color, what in (("crossover", OPTIMIZED, "torch"), ("cupyx_crossover", NAIVE, "cupyx")):
        c = s.get(key)
        if c is not None:
            ax.axvline(c, color=color, ls="--", lw=1.2,
                       label=f"crossover, {what}: density {c:.3g} (measured)")
    if point is not None:
        ax.axvline(point, color="#444", ls="-.", lw=1.5, label=f"your guess: {point:g}")
    ax.legend(fontsize=7.5)
    return fig


def sparse_point_figure(timings) -> Figure:
    """The density widget: dense and CSR times at one density."""
    timings = _timings(timings)
    return ladder(timings, metric="time", title_text=f"Density {timings[1].size:g}: dense vs CSR",
                  device=timings[0].device)


# --------------------------------------------------------------------------- 4. fusion

def fusion_figure(result: dict) -> Figure:
    """Time per call of each version (measured) next to the bytes each moves (counted)."""
    timings = _timings(result["timings"])
    copy = result["copy"] if isinstance(result["copy"], Timing) else Timing.from_dict(result["copy"])
    fig, (a1, a2) = new_figure(1, 2, figsize=(11, 0.5 * len(timings) + 2.8), sharey=True)
    labels = [t.label for t in timings]
    y = np.arange(len(labels))
    ms = [t.median_s * 1e3 for t in timings]
    colors = [OPTIMIZED if t.label.startswith("fused") else NAIVE for t in timings]
    err = [[m - t.p20_s * 1e3 for m, t in zip(ms, timings)],
           [t.p80_s * 1e3 - m for m, t in zip(ms, timings)]]
    a1.barh(y, ms, color=colors, xerr=err, capsize=3)
    # Each note starts past its error bar (a noisy eager run's bar would cross it).
    ends = [m + e for m, e in zip(ms, err[1])]
    for yi, m, end in zip(y, ms, ends):
        a1.annotate(f"{m:.3g} ms", (end, yi), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=8)
    a1.axvline(copy.median_s * 1e3, color=CEILING, ls="--", lw=1.2,
               label=f"copy of x: one read + one write, measured ({copy.median_s * 1e3:.3g} ms)")
    a1.set_yticks(y, labels)
    a1.invert_yaxis()
    a1.set_xlim(0, max(ends) * 1.3)
    a1.set_xlabel("median time per call (ms)")
    title(a1, f"Five elementwise ops on {result['n']:,} floats", device=timings[0].device)
    b = result["bytes"]
    mb = [(b["fused"] if t.label.startswith("fused") else b["unfused"]) / 1e6 for t in timings]
    a2.barh(y, mb, color="none", edgecolor=MODEL, hatch="//",
            label="bytes moved (counted: 8 bytes per value per pass)")
    for yi, m in zip(y, mb):
        a2.annotate(f"{m:,.0f} MB", (m, yi), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=8)
    a2.set_xlim(0, max(mb) * 1.3)
    a2.set_xlabel("device/main memory traffic per call (MB, counted)")
    title(a2, "Bytes moved (model: counted, not measured)", device=timings[0].device)
    handles = a1.get_legend_handles_labels()[0] + a2.get_legend_handles_labels()[0]
    fig.legend(handles, [h.get_label() for h in handles], loc="outside lower center", ncols=2)
    return fig


# --------------------------------------------------------------------------- 5. precision

def precision_figure(model: dict, measured: dict | None = None,
                     reference: list | None = None) -> Figure:
    """Matmul TFLOP/s per precision: the roofline model of a GPU (dashed), its datasheet peaks,
    reference measurements (hollow) and what this device measured (filled)."""
    fig, ax = new_figure(figsize=(8, 4.4))
    sizes = model["sizes"]
    markers = {"fp32": "", "tf32": "", "fp16": "x", "bf16": "+"}  # fp16 and bf16 coincide
    for i, (p, ys) in enumerate(model["tflops"].items()):
        color = PALETTE[i % len(PALETTE)]
        ax.plot(sizes, ys, "--", color=color, lw=1.5, marker=markers.get(p, ""), ms=7,
                label=f"{p} (model, {model['gpu']})")
        ax.axhline(model["peak_tflops"][p], color=color, ls=":", lw=1)
    ax.plot([], [], ":", color=CEILING, lw=1, label="datasheet peaks (dotted)")
    ax.plot([], [], " ", label=f"model = {models.LAUNCH_OVERHEAD_S * 1e6:g} µs launch + roofline time")
    order = list(model["tflops"])
    for r in reference or []:
        v = r["value"]
        for p, tf in v.get("precision_tflops", {}).items():
            color = PALETTE[order.index(p) % len(PALETTE)] if p in order else REFERENCE
            ax.plot([v.get("precision_n")], [tf], "s", mfc="none", mec=color, ms=8)
        ax.plot([], [], "s", mfc="none", mec=REFERENCE, label=r["label"])
    dev = None
    if measured:
        for t in _timings(measured["timings"]):
            color = PALETTE[order.index(t.label) % len(PALETTE)] if t.label in order else MEASURED
            ax.plot([t.size], [t.gflops / 1e3], "o", color=color, ms=7)
            ax.annotate(f"{t.label}: {t.gflops / 1e3:.3g}", (t.size, t.gflops / 1e3),
                        xytext=(5, -3), textcoords="offset points", fontsize=7.5)
            dev = t.device
        ax.plot([], [], "o", color=MEASURED, label=f"measured here ({dev})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("matrix size n (n×n×n matmul)")
    ax.set_ylabel("throughput (TFLOP/s)")
    ax.legend(fontsize=7.5, loc="lower right")
    title(ax, "Matmul throughput by precision: tensor cores vs CUDA cores",
          device=f"model: {model['gpu']}" + (f"; measured: {dev}" if dev else ""))
    return fig


def precision_point_figure(point: dict) -> Figure:
    """The precision widget: this device's measurement next to the target GPU's model and peak."""
    t = point["timing"]
    fig, ax = new_figure(figsize=(7.5, 2.9))
    rows = [(f"{t.label} measured here (n={t.size})", t.gflops / 1e3, MEASURED, None)]
    if point.get("model_tflops") is not None:
        rows.append((f"{t.label} model, {point['model_gpu']} (n={t.size})", point["model_tflops"],
                     MODEL, "//"))
    y = np.arange(len(rows))
    for yi, (lab, v, c, h) in zip(y, rows):
        ax.barh([yi], [v], color=c if h is None else "none", edgecolor=c, hatch=h)
        ax.annotate(f"{v:.3g} TFLOP/s", (v, yi), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=8)
    if point.get("peak_tflops"):
        ax.axvline(point["peak_tflops"], color=CEILING, ls="--", lw=1.2,
                   label=f"{t.label} datasheet peak, {point['model_gpu']} ({point['peak_tflops']:g} TFLOP/s)")
        fig.legend(loc="outside lower center")
    ax.set_yticks(y, [r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xscale("log")
    vals = [r[1] for r in rows] + ([point["peak_tflops"]] if point.get("peak_tflops") else [])
    ax.set_xlim(min(vals) / 3, max(vals) * 10)
    ax.set_xlabel("throughput (TFLOP/s, log)")
    title(ax, f"Matmul in {t.label}", device=t.device)
    return fig


# --------------------------------------------------------------------------- headless

def figures(results: dict) -> dict:
    """Every figure of ``experiments.ch5.run_all`` results."""
    out = {"cpu_ladder": cpu_ladder_figure(results["cpu_ladder"]),
           "sgemm": sgemm_figure(results["sgemm"]),
           "reuse_model": reuse_figure(results["reuse_model"]),
           "conv": conv_figure(results["conv"]),
           "sparse": sparse_figure(results["sparse"]),
           "fusion": fusion_figure(results["fusion"]),
           "precision": precision_figure(results["precision_model"], results["precision"])}
    return out
