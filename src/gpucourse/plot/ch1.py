"""Figures of chapter 1: timing done wrong vs right, the stride sweep and one warp's sectors,
transfer vs compute, and rooflines. ``figures(results)`` draws ``experiments.ch1.run_all``."""
from __future__ import annotations

import numpy as np
from matplotlib import ticker
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..bench import format_bytes as _fmt_bytes, format_time as _fmt_s
from .. import models as _models
from .. import reference as _reference
from .. import specs as _specs
from . import (CEILING, MEASURED, MODEL, NAIVE, OPTIMIZED, PALETTE, REFERENCE, new_figure,
               legend_below, roofline, same_gpu, sweep, title)

H2D, COMPUTE, D2H, CPU = "#ff7f0e", OPTIMIZED, "#17becf", MEASURED


def references(key: str) -> list[tuple[str, dict]]:
    """(label naming GPU and date, data) for every reference file with ch1/``key``."""
    return _reference.labelled("ch1", key)


def _plain(v: float) -> str:
    return f"{v:g}" if v >= 1e-3 else f"{v:.0e}"


def plain_log_axes(ax, xticks=None) -> None:
    """Log axes labelled 1, 2, 4 ... and 0.5, 1, 2, 5 instead of powers."""
    if xticks is not None:
        ax.set_xticks(list(xticks))
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: _plain(v)))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    if ax.get_yscale() == "log":
        ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: _plain(v)))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())


# --------------------------------------------------------------------------- 0. the GPU

def architecture_figure(spec) -> Figure:
    """A schematic of a GPU from the spec table: SMs, L2, device memory and the host link."""
    fig, ax = new_figure(figsize=(10, 4.6))
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 60)
    ax.axis("off")

    def box(x, y, w, h, text, colour, size=8, weight="normal"):
        ax.add_patch(Rectangle((x, y), w, h, facecolor=colour, edgecolor="#444444", lw=0.8))
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size,
                fontweight=weight)

    # Host
    box(1, 22, 17, 22, "host\nCPU + RAM", "#eeeeee", 9, "bold")
    link = "?" if not spec.pcie_bandwidth_Bps else f"{spec.pcie_bandwidth_Bps / 1e9:.0f} GB/s"
    ax.annotate("", xy=(27, 33), xytext=(18, 33),
                arrowprops=dict(arrowstyle="<->", color=H2D, lw=2.5))
    ax.text(22.5, 35, f"PCIe {spec.pcie_gen} x{spec.pcie_lanes}\n{link}\neach way",
            ha="center", fontsize=8, color=H2D)  # three short lines: between host and GPU
    # GPU outline
    ax.add_patch(Rectangle((27, 1), 72, 58, facecolor="none", edgecolor="#222222", lw=1.5))
    ax.text(28, 56.5, f"{spec.name} ({spec.architecture}, cc {spec.cc})", fontsize=9,
            fontweight="bold", va="top")
    try:
        lim = _specs.occupancy_limits(spec.compute_capability)
        regs = f"registers {lim.registers_per_sm * 4 // 1024} KB"
        smem = f"shared ≤ {lim.shared_memory_per_sm // 1024} KB"
        warps = f"4 warp schedulers\n≤ {lim.max_warps_per_sm} warps"
    except Exception:  # a GPU without occupancy limits in the table
        regs, smem, warps = "registers", "shared / L1", "4 warp\nschedulers"
    shown = 4  # four SMs drawn wide enough for their labels at a readable size
    w = 16.0
    for i in range(shown):
        x = 29 + i * (w + 1.3)
        box(x, 33, w, 19, "", "#deebf7")
        ax.text(x + w / 2, 50.2, f"SM {i}" if i < shown - 1 else f"SM {spec.sm_count - 1}",
                ha="center", fontsize=8, fontweight="bold")
        box(x + 0.6, 43, w - 1.2, 5, warps, "#c6dbef", 8)
        box(x + 0.6, 38.5, w - 1.2, 4, regs, "#fdd0a2", 8)
        box(x + 0.6, 34, w - 1.2, 4, smem, "#c7e9c0", 8)
    ax.text(29 + (shown - 1) * (w + 1.3) - 0.65, 42, "…", ha="center", fontsize=12)
    ax.text(63, 30.5, f"{spec.sm_count} SMs; each runs many warps of 32 threads at once", ha="center",
            fontsize=8)
    l2 = f"L2 cache, {spec.l2_bytes / 2**20:.0f} MiB, shared by all SMs" if spec.l2_bytes else "L2 cache"
    box(29, 20, 68, 8, l2, "#fee6ce", 8)
    mem = (f"device memory (global, {spec.memory_type}): {spec.memory_bytes / 2**30:.0f} GiB, "
           f"{spec.memory_bandwidth_GBps:,.0f} GB/s")
    box(29, 3, 68, 12, mem, "#fdae6b", 9, "bold")
    ax.annotate("", xy=(63, 15), xytext=(63, 20), arrowprops=dict(arrowstyle="<->", lw=1.5))
    ax.set_title(f"Inside a GPU: where the data lives\ndatasheet figures of the {spec.name} "
                 f"(spec table; schematic, not to scale)", fontsize=10)
    return fig


# --------------------------------------------------------------------------- 1. timing

_METHOD_COLOURS = (("no synchronize", "#ff7f0e"), ("cold", NAIVE), ("warm call", MEASURED),
                   ("median", OPTIMIZED), ("true", CEILING))


def _colour(method: str) -> str:
    for key, colour in _METHOD_COLOURS:
        if key in method:
            return colour
    return MEASURED


def timing_figure(result: dict, reference_rows=None) -> Figure:
    """Per-call time reported by each way of timing, grouped by what was timed (log scale)."""
    if reference_rows is None:
        reference_rows = [(label, data.get("rows", [])) for label, data in references("timing")]
    groups: dict[str, list[dict]] = {}
    for row in result["rows"]:
        if isinstance(row["seconds"], (int, float)) and np.isfinite(row["seconds"]):
            groups.setdefault(row["group"], []).append(row)
    for label, rows in reference_rows:
        for row in rows:
            if row.get("kind") == "measured" and "GPU" in row["group"]:
                groups.setdefault(f"{row['group']}\n({label})", []).append({**row, "kind": "reference"})
    n_rows = sum(len(v) for v in groups.values()) + len(groups)
    fig, ax = new_figure(figsize=(8.5, 0.32 * n_rows + 1.6))
    y, ticks, labels = 0, [], []
    for group, rows in groups.items():
        ax.text(0.01, y, group, transform=ax.get_yaxis_transform(), ha="left", va="center",
                fontsize=8, fontweight="bold")
        y += 1
        for row in rows:
            v = row["seconds"] * 1e3
            kind = row.get("kind", "measured")
            if kind == "truth":
                ax.plot([v, v], [y - 0.4, y + 0.4], color=CEILING, lw=2)
            elif kind == "reference":
                ax.barh(y, v, fill=False, edgecolor=REFERENCE, hatch="//", height=0.7)
            else:
                ax.barh(y, v, color=_colour(row["method"]), height=0.7,
                        hatch="xx" if kind == "simulation" else None, edgecolor="white")
            ax.annotate(_fmt_s(row["seconds"]), (v, y), xytext=(4, 0), textcoords="offset points",
                        va="center", fontsize=8)
            ticks.append(y)
            labels.append(row["method"] + (" (simulation)" if kind == "simulation" else ""))
            y += 1
    ax.set_yticks(ticks, labels, fontsize=8)
    ax.set_ylim(y - 0.4, -0.8)
    ax.set_xscale("log")
    lo = min(r["seconds"] for rows in groups.values() for r in rows) * 1e3
    hi = max(r["seconds"] for rows in groups.values() for r in rows) * 1e3
    ax.set_xlim(lo / 3, hi * 20)
    ax.set_xlabel("reported time per call (ms, log scale)")
    ax.grid(axis="y", visible=False)
    title(ax, "Timing done wrong vs right", result.get("device"))
    return fig


# --------------------------------------------------------------------------- 2. strided access

def stride_figure(sweep_result: dict, model: dict | None = None, reference_rows=None) -> Figure:
    """Left: effective GB/s against stride on this device, with its ceilings and model.
    Right: the sector model of a GPU from the spec table, with reference measurements."""
    if reference_rows is None:
        reference_rows = references("stride_sweep")
    panels = 2 if model is not None else 1
    fig, axes = new_figure(1, panels, figsize=(11 if panels == 2 else 7, 4.2), squeeze=False)
    ax = axes[0][0]
    s = sweep_result
    on_gpu = s.get("peak_gbps") is not None
    ceilings = {f"measured copy ceiling ({s['ceiling_gbps']:.4g} GB/s)": s["ceiling_gbps"]}
    if on_gpu:
        ceilings[f"datasheet peak ({s['peak_gbps']:.4g} GB/s)"] = s["peak_gbps"]
    name = "copy.cu kernels (measured)" if on_gpu else "NumPy strided copy (measured)"
    models_ = {}
    if s.get("model_gbps"):
        models_["sector model (32 B sectors)" if on_gpu else
                f"cache-line model ({s.get('line_bytes', 64)} B lines)"] = s["model_gbps"]
    sweep(s["strides"], {name: s["gbps"]}, "stride (elements between neighbouring threads)",
          "effective bandwidth (GB/s, useful bytes)", "Strided copy: this device",
          ceilings=ceilings, models=models_, logx=True, logy=True, device=s.get("device"), ax=ax)
    # Every coalesced version of copy.cu at stride 1: one 4-byte load per thread against wider
    # loads (more bytes in flight); older results carry only the fastest.
    versions = s.get("coalesced_versions") or (
        {s.get("coalesced_kernel", "copy_v1_coalesced"): s["coalesced_gbps"]}
        if s.get("coalesced_gbps") else {})
    for (kernel, gbps), marker in zip(sorted(versions.items(), key=lambda kv: kv[1]), "D*^v"):
        ax.plot([s["strides"][0]], [gbps], marker, color=OPTIMIZED, ms=9 if marker == "*" else 6,
                label=f"{kernel} (measured, {gbps:.4g} GB/s)", ls="none")
    slow = s["gbps"][0] / s["gbps"][-1]
    ax.text(0.98, 0.86, f"stride {s['strides'][-1]} is {slow:.1f}x slower than stride {s['strides'][0]}",
            transform=ax.transAxes, ha="right", va="top", fontsize=8)
    ax.legend(loc="lower left", fontsize=7)
    plain_log_axes(ax, s["strides"])
    if model is not None:
        ax2 = axes[0][1]
        refs = {}
        for label, data in reference_rows:
            if data.get("strides") and data.get("gbps"):
                refs[label] = (data["strides"], data["gbps"])
        sweep(model["strides"], {}, "stride (elements between neighbouring threads)",
              "effective bandwidth (GB/s)", f"Strided copy kernel: {model['gpu']}",
              ceilings={f"datasheet peak ({model['peak_gbps']:.4g} GB/s)": model["peak_gbps"]},
              models={"sector model": model["model_gbps"]}, reference=refs, logx=True, logy=True,
              device=f"model: {model['gpu_name']} datasheet", ax=ax2)
        ax2.legend(loc="lower left", fontsize=7)
        plain_log_axes(ax2, model["strides"])
        if not refs:
            ax2.text(0.98, 0.86, "no reference measurement from a GPU yet", transform=ax2.transAxes,
                     ha="right", va="top", fontsize=8, color=MODEL)
    return fig


def warp_figure(warp: dict, ax=None) -> Figure:
    """One warp's 32 lane addresses (ticks) and the 32-byte sectors they touch (boxes): a model."""
    if ax is None:
        fig, ax = new_figure(figsize=(8, 2.8))
    else:
        fig = ax.figure
    sec = 32
    addrs = np.asarray(warp["addresses"])
    ids = set(warp["sector_ids"])
    n_sec = max(ids) + 1
    for k in range(n_sec):
        used = k in ids
        ax.add_patch(Rectangle((k * sec, 0), sec, 1, facecolor="#fdd0a2" if used else "none",
                               edgecolor=H2D if used else "#dddddd", lw=0.6))
    ax.vlines(addrs + warp["elem_bytes"] / 2, 0.15, 0.85, color=PALETTE[0], lw=1.2)
    for lane, ha in ((0, "left"), (len(addrs) - 1, "right")):
        ax.annotate(f"lane {lane}", (addrs[lane] + warp["elem_bytes"] / 2, 1.0), xytext=(0, 3),
                    textcoords="offset points", fontsize=7, ha=ha, va="bottom")
    ax.set_xlim(-sec / 4, n_sec * sec + sec / 4)
    ax.set_ylim(0, 1.35)
    ax.set_yticks([])
    ax.grid(False)
    ax.set_xlabel(f"byte address from the warp's first element\n{warp['sectors']} sector(s) of 32 B "
                  f"moved = {warp['moved_bytes']} B for {warp['requested_bytes']} B used: "
                  f"{warp['efficiency']:.0%} efficiency")
    title(ax, f"One warp's load at stride {warp['stride']}, {warp['elem_bytes']} B elements",
          "model: lanes (ticks), 32-byte sectors moved (boxes)")
    return fig


def copy_view(result: dict) -> Figure:
    """Widget view of ``experiments.ch1.copy_explorer``: the warp's sectors and the model sweep."""
    fig, axes = new_figure(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [1.4, 1]})
    warp_figure(result["warp"], ax=axes[0])
    m, launch = result["model"], result["launch"]
    ax = axes[1]
    sweep(m["strides"], {}, "stride", "effective bandwidth (GB/s)", f"Strided copy on {m['gpu']}",
          ceilings={"datasheet peak": m["peak_gbps"]}, models={"sector model": m["model_gbps"]},
          logx=True, logy=True, device=f"model: {m['gpu_name']} datasheet", ax=ax)
    ax.plot([launch["stride"]], [result["model_at_stride"]], "D", color=NAIVE, ms=8, mfc="none",
            label=f"stride {launch['stride']} (model)")
    if launch.get("gbps"):
        ax.plot([launch["stride"]], [launch["gbps"]], "o", color=MEASURED, ms=8,
                label=f"this GPU, block {launch['block_size']} (measured)")
    ax.legend(loc="lower left", fontsize=7)
    plain_log_axes(ax, sorted(set(m["strides"]) | {launch["stride"]}))
    ax.text(0.98, 0.62, f"kernel checked on the {launch['where']}:\nstride {launch['stride']}, "
            f"block {launch['block_size']}, n = {launch['checked_n']}, correct",
            transform=ax.transAxes, ha="right", va="top", fontsize=7, color=OPTIMIZED)
    return fig


def precision_figure(result: dict) -> Figure:
    """Copy bandwidth (GB/s) and element rate (elements/s) of each precision at stride 1 and s."""
    fig, axes = new_figure(1, 2, figsize=(10, 3.4))
    rows = result["rows"]
    labels = [f"{r['precision']} ({r['elem_bytes']} B), stride {r['stride']}" for r in rows]
    colours = [OPTIMIZED if r["stride"] == 1 else NAIVE for r in rows]
    for ax, key, unit in ((axes[0], "gbps", "effective bandwidth (GB/s)"),
                          (axes[1], "gelems", "elements copied per second (billions)")):
        vals = [r[key] for r in rows]
        ax.barh(range(len(vals)), vals, color=colours,
                hatch=None, edgecolor="white")
        for i, v in enumerate(vals):
            ax.annotate(f"{v:.3g}", (v, i), xytext=(4, 0), textcoords="offset points", va="center",
                        fontsize=8)
        ax.set_yticks(range(len(vals)), labels if ax is axes[0] else [""] * len(vals), fontsize=8)
        ax.set_xlim(0, max(vals) * 1.3)
        ax.set_xlabel(unit)
        ax.invert_yaxis()
    title(axes[0], "Bytes per second", result["device"])
    title(axes[1], "Elements per second", result["device"])
    m = result["model"]
    note = "; ".join(f"{p}: {', '.join(f'stride {s} {e:.0%}' for s, e in zip(d['strides'], d['load_efficiency']))}"
                     for p, d in m.items())
    fig.supxlabel(f"sector model on {next(iter(m.values()))['gpu']} (load efficiency of one warp) — {note}",
                  fontsize=7, color=MODEL)
    return fig


# --------------------------------------------------------------------------- 3. transfer vs compute

def _parts(parts) -> str:
    """'177 + 32.1 + 88.3 µs': the parts of a stacked bar in one unit, that of their sum."""
    total = sum(sec for _, sec, _ in parts)
    scale, unit = (1e6, "µs") if total < 1e-3 else (1e3, "ms") if total < 1 else (1, "s")
    return " + ".join(f"{sec * scale:.3g}" for _, sec, _ in parts) + f" {unit}"


def transfer_figure(result: dict) -> Figure:
    """Per operation: compute on the CPU against send-compute-return on a GPU and data kept resident."""
    rows = result["rows"]
    fig, axes = new_figure(1, len(rows), figsize=(6 * len(rows), 3.6), squeeze=False)
    handles: dict = {}
    for ax, row in zip(axes[0], rows):
        gpu = "compute (GPU)"
        bars = [("CPU, measured here", [("compute (CPU)", row["cpu_s"], CPU)])]
        m = row["model"]
        bars.append((f"{row['gpu']}: send, compute, return (model)",
                     [("H2D", m["h2d_pinned_s"], H2D), (gpu, m["compute_s"], COMPUTE),
                      ("D2H", m["d2h_s"], D2H)]))
        bars.append((f"{row['gpu']}: data resident (model)", [(gpu, m["compute_s"], COMPUTE)]))
        if row.get("measured"):
            g = row["measured"]
            bars.append(("this GPU: send, compute, return (measured)",
                         [("H2D", g["h2d_pinned_s"], H2D), (gpu, g["compute_s"], COMPUTE),
                          ("D2H", g["d2h_s"], D2H)]))
            bars.append(("this GPU: data resident (measured)", [(gpu, g["compute_s"], COMPUTE)]))
        for i, (label, parts) in enumerate(bars):
            left = 0.0
            model = "(model)" in label
            for part, sec, colour in parts:
                ax.barh(i, sec * 1e3, left=left, color=colour, height=0.6,
                        hatch="//" if model else None, edgecolor="white")
                # One legend entry per name and colour: "compute" on the CPU and on the GPU differ.
                handles.setdefault((part, colour), Rectangle((0, 0), 1, 1, color=colour))
                left += sec * 1e3
            # Microseconds of GPU compute vanish beside milliseconds of copies: the note spells
            # out every part (a log axis would distort the stacked parts instead).
            ax.annotate(_fmt_s(left / 1e3) + ("\n= " + _parts(parts) if len(parts) > 1 else ""),
                        (left, i), xytext=(4, 0), textcoords="offset points", va="center",
                        fontsize=7)
        ax.set_yticks(range(len(bars)), [b[0] for b in bars], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, max(sum(p[1] for p in b[1]) for b in bars) * 1e3 * 1.45)
        ax.set_xlabel("time (ms)")
        what = (f"matmul {row['size']}x{row['size']}" if row["op"] == "matmul" else row["op"])
        title(ax, f"{what}, {row['nbytes'] / 2**20:.3g} MiB per input", result.get("device"))
    legend = [(h, part) for (part, _), h in handles.items()]
    hatched = Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="#555555", hatch="//")
    legend.append((hatched, "hatched: model; parts: H2D + compute + D2H"))
    fig.legend([h for h, _ in legend], [lab for _, lab in legend], loc="outside lower center",
               ncols=len(legend), fontsize=7)
    return fig


def transfer_sweep_figure(result: dict, ax=None) -> Figure:
    """Model: time to send a vector add's inputs over PCIe against adding them in device memory."""
    if ax is None:
        fig, ax = new_figure()
    else:
        fig = ax.figure
    x = result["sizes"]
    ax.plot(x, np.asarray(result["h2d_s"]) * 1e3, "--", color=H2D, lw=1.8,
            label="send both inputs, pinned (model)")
    ax.plot(x, np.asarray(result["compute_s"]) * 1e3, "--", color=COMPUTE, lw=1.8,
            label="add them in device memory (model, with a 3 µs launch)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(x[::2])
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(_fmt_bytes))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel("bytes per input array")
    ax.set_ylabel("time (ms)")
    ax.text(0.98, 0.04, f"for large arrays, sending takes {result['ratio'][-1]:.0f}x longer "
            "than computing", transform=ax.transAxes, ha="right", fontsize=8)
    ax.legend(loc="upper left")
    title(ax, "Host link vs device memory", f"model of {result['gpu_name']} (datasheet)")
    return fig


# --------------------------------------------------------------------------- 4. roofline

def _roof(result: dict, ax, is_model: bool, label: str, device: str):
    c = result["ceilings"]
    pts = [(p["name"], p["intensity"], p["rate"]) for p in result["points"]]
    roofline(pts, c["peak_flops"], c["bandwidth_Bps"], title_text="Roofline", label=label,
             is_model=is_model, device=device, ax=ax)
    if is_model:
        return  # a model's points lie on its roof by construction: "100% of roof" says nothing
    for p in result["points"]:
        pct = 100 * _models.roof_share(p["rate"], p["intensity"], c["peak_flops"],
                                       c["bandwidth_Bps"])
        ax.annotate(f"{pct:.0f}% of roof", (p["intensity"], p["rate"] / 1e9), xytext=(6, -10),
                    textcoords="offset points", fontsize=7)


def roofline_figure(measured: dict, model: dict | None = None, reference_rows=None) -> Figure:
    """Left: this device's measured roofline and points. Right: a GPU's datasheet roofline (model),
    with the same operations measured on that GPU (reference data) where the course has them."""
    if reference_rows is None:
        reference_rows = references("roofline")
    panels = 2 if model is not None else 1
    fig, axes = new_figure(1, panels, figsize=(6 * panels, 4.4), squeeze=False)
    _roof(measured, axes[0][0], False, "measured (best rates seen)", measured.get("device"))
    if model is not None:
        ax = axes[0][1]
        _roof(model, ax, True, "datasheet", f"model of {model['gpu_name']}, {model['precision']}")
        c = model["ceilings"]
        for label, data in reference_rows:
            # Another GPU's points under this roof would read as this GPU's.
            if same_gpu(data.get("device"), model["gpu"]) is False or data.get("kind") == "model":
                continue
            for i, p in enumerate(data.get("points", [])):
                ax.plot([p["intensity"]], [p["rate"] / 1e9], "s", mfc="none", mew=1.5, ms=8,
                        color=PALETTE[i % len(PALETTE)], label=f"{p['name']} ({label})")
                pct = 100 * _models.roof_share(p["rate"], p["intensity"], c["peak_flops"],
                                               c["bandwidth_Bps"])
                ax.annotate(f"{pct:.0f}% of roof", (p["intensity"], p["rate"] / 1e9),
                            xytext=(6, -10), textcoords="offset points", fontsize=7,
                            color=REFERENCE)
    for row in axes:
        for ax in row:
            legend_below(ax, fontsize=7)
    return fig


def model_views_figure(result: dict) -> Figure:
    """Widget view of ``experiments.ch1.model_views``: roofline and host-link models of one GPU."""
    fig, axes = new_figure(1, 2, figsize=(12, 4.2))
    _roof(result["roofline"], axes[0], True, "datasheet",
          f"model of {result['roofline']['gpu_name']}, {result['roofline']['precision']}")
    transfer_sweep_figure(result["transfer"], ax=axes[1])
    return fig


# --------------------------------------------------------------------------- headless

def figures(results: dict) -> dict:
    """Every figure of ``experiments.ch1.run_all``'s results."""
    out = {"timing": timing_figure(results["timing"]),
           "stride_sweep": stride_figure(results["stride_sweep"], results.get("sector_model")),
           "transfer": transfer_figure(results["transfer"]),
           "transfer_sweep": transfer_sweep_figure(results["transfer_sweep"]),
           "roofline": roofline_figure(results["roofline"], results.get("roofline_model"))}
    return out
