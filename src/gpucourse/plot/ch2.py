"""Figures of chapter 2 (memory management). ``figures(results)`` draws
``experiments.ch2.run_all``; the other functions draw one experiment each."""
from __future__ import annotations

from matplotlib import ticker
from matplotlib.figure import Figure

from ..bench import format_bytes as _fmt_bytes, format_time as _fmt_s
from .. import reference as _reference
from ..bench import Timing, Timings
from . import (CEILING, MEASURED, MODEL, NAIVE, OPTIMIZED, REFERENCE, legend_below, new_figure,
               same_gpu, title)

H2D, COMPUTE = "#ff7f0e", OPTIMIZED

SECTION = "ch2"


def references(key: str) -> list[tuple[str, dict]]:
    """(label naming GPU and date, data) for every reference file with ch2/``key``."""
    return _reference.labelled(SECTION, key)


def _where(result: dict) -> str:
    """Device line of a title: the machine, and the GPU a model describes when it is not it."""
    if result.get("kind") == "measured":
        return result["device"]
    return f"{result['device']} · GPU figures: model of the {result['gpu']}"


# --------------------------------------------------------------------------- 1. transfers

_SERIES_COLOURS = {"pageable": NAIVE, "pinned (CuPy)": "#17becf", "pinned": OPTIMIZED}


def _series_colour(name: str) -> str:
    return next((c for k, c in _SERIES_COLOURS.items() if name.startswith(k)), MEASURED)


def transfer_figure(sweep_result: dict, reference_rows=None) -> Figure:
    """Host-to-device GB/s against size: measured lines, dashed models, hollow reference
    points, and the link's theoretical peak."""
    if reference_rows is None:
        reference_rows = references("transfers")
    fig, ax = new_figure(figsize=(8, 4.2))
    x = sweep_result["sizes"]
    for name, ys in sweep_result["series"].items():
        ax.plot(x, ys, "o-", ms=4, color=_series_colour(name), label=f"{name}, measured")
    for name, ys in sweep_result["model"].items():
        ax.plot(x, ys, "--", lw=1.5, color=_series_colour(name),
                label=f"{name} (model, {sweep_result['gpu']})")
    markers = "sD^v"
    for i, (label, data) in enumerate(reference_rows):
        for name, ys in data.get("series", {}).items():
            if len(ys) != len(data.get("sizes", ())):  # a series without its sizes: not drawn
                continue
            ax.plot(data["sizes"], ys, markers[i % 4], mfc="none", ms=6, color=_series_colour(name),
                    label=f"{name}, {label}")
    ax.axhline(sweep_result["link_peak_gbps"], color=CEILING, ls=":", lw=1.2,
               label=f"link peak: PCIe datasheet rate ({sweep_result['gpu']})")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(_fmt_bytes))
    ax.xaxis.set_major_locator(ticker.LogLocator(base=4))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.tick_params(axis="x", labelrotation=30)
    ax.set_xlabel("transfer size (bytes)")
    ax.set_ylabel("host → device bandwidth (GB/s)")
    ax.set_ylim(0, sweep_result["link_peak_gbps"] * 1.2)
    legend_below(ax, ncols=2, fontsize=7)  # inside, it covered the link-peak line
    if not sweep_result["series"] and not reference_rows:
        ax.text(0.98, 0.04, "no GPU here and no reference measurement in the course's data:\n"
                "the lines are the model only", transform=ax.transAxes, ha="right", va="bottom",
                fontsize=8, color=MODEL)
    title(ax, "Pageable vs pinned host-to-device copies", _where(sweep_result))
    return fig


def transfer_bars(result: dict) -> Figure:
    """One transfer size: time of a pageable and a pinned copy, split into fixed latency and
    streaming (model), with the measured times on a GPU."""
    fig, ax = new_figure(figsize=(7.5, 3.2))
    rows = []
    for kind in ("pageable", "pinned"):
        m = result["model"][kind]
        rows.append((f"{kind} (model)", m["latency_s"], m["time_s"] - m["latency_s"], True))
        if kind in result["measured"]:
            rows.append((f"{kind} (measured)", None, result["measured"][kind]["time_s"], False))
    for y, (label, lat, stream, is_model) in enumerate(rows):
        colour = NAIVE if label.startswith("pageable") else OPTIMIZED
        if is_model:
            ax.barh(y, lat * 1e6, color=MODEL, fill=False, hatch="..", edgecolor=MODEL,
                    label="fixed cost per copy (model)" if y == 0 else None)
            ax.barh(y, stream * 1e6, left=lat * 1e6, fill=False, edgecolor=colour, ls="--", lw=1.5,
                    label="streaming at the link rate (model)" if y == 0 else None)
            total = lat + stream
        else:
            ax.barh(y, stream * 1e6, color=colour)
            total = stream
        gbps = result["bytes"] / total / 1e9
        ax.annotate(f"{_fmt_s(total)}  ({gbps:.3g} GB/s)", (total * 1e6, y), xytext=(4, 0),
                    textcoords="offset points", va="center", fontsize=8)
    ideal = result["bytes"] / (result["link_peak_gbps"] * 1e9) * 1e6
    ax.axvline(ideal, color=CEILING, ls=":", lw=1.2, label="bytes / link peak (ceiling)")
    ax.set_yticks(range(len(rows)), [r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("time of one copy (µs)")
    ax.set_xlim(0, max((r[1] or 0) + r[2] for r in rows) * 1e6 * 1.45)
    fig.legend(loc="outside lower center", ncols=3, fontsize=7)
    title(ax, f"Copying {_fmt_bytes(result['bytes'])} host → device",
          result["device"] if result["measured"] else
          f"{result['device']} · model of the {result['gpu']}")
    return fig


# --------------------------------------------------------------------------- 2. loops

def loop_references() -> list[tuple[str, dict]]:
    """(label, per-step times with the GPU's name) of every reference run of the three loops."""
    return [(ref.label, {**val, "gpu": ref.gpu}) for ref, val in _reference.find(SECTION, "loops")
            if isinstance(val, dict)]


def _per_step(data: dict, names) -> dict:
    """{loop: ms per step} of the loops a reference run timed."""
    return {nm: data[nm]["per_step_ms"] for nm in names
            if isinstance(data.get(nm), dict) and data[nm].get("per_step_ms") is not None}


def _same_loop(data: dict, timelines: dict) -> bool:
    """Whether a reference run timed the loop the timelines model: same batch bytes, same
    number of steps, same GPU (when both GPUs are in the spec table)."""
    c, step = data.get("config") or {}, timelines["step"]
    if c and (c.get("batch", 0) * c.get("features", 0) * 4 + c.get("batch", 0) * 8
              != step["batch_bytes"] or c.get("batches") != step["steps"]):
        return False
    return same_gpu(data.get("gpu"), timelines["gpu"]) is not False


def loop_figure(timelines: dict, measured: list[dict] | None = None, steps_shown: int = 6,
                reference_rows=None) -> Figure:
    """Stream-timeline model of the three loops (first ``steps_shown`` steps), then the time per
    step of each: model, measured here on a GPU, and reference runs of the same loop."""
    if reference_rows is None:
        reference_rows = loop_references()
    names = list(timelines["versions"])
    refs = [(label, data) for label, data in reference_rows
            if _same_loop(data, timelines) and _per_step(data, names)]
    compare = bool(measured or refs)
    n = len(names) + (1 if compare else 0)
    ratios = [1] * len(names) + ([1.6] if compare else [])
    fig, axes = new_figure(n, 1, figsize=(8.5, 1.6 * n + (1.0 if compare else 0) + 1.5),
                           gridspec_kw={"height_ratios": ratios})
    axes = list(axes) if n > 1 else [axes]
    step = timelines["step"]
    horizon = steps_shown * (step["h2d_pageable_s"] + step["compute_s"]) * 1e3
    lanes = ["copy H2D", "compute"]
    colours = {"H2D": H2D, "kernel": COMPUTE}
    for ax, name in zip(axes, names):
        v = timelines["versions"][name]
        shown = set()
        for lane, op, start, end in v["ops"]:
            if start >= horizon:
                continue
            ax.barh(lanes.index(lane), end - start, left=start, height=0.6, color=colours[op],
                    edgecolor="white", label=None if op in shown else
                    ("host → device copy (model)" if op == "H2D"
                     else "training step: forward, backward, update (model)"))
            shown.add(op)
        ax.set_yticks(range(2), lanes)
        ax.set_ylim(1.6, -0.6)
        ax.set_xlim(0, horizon)
        ax.set_xlabel("time (ms)")
        ax.set_title(f"{name}: {v['per_step_ms']:.3g} ms per step (model)", fontsize=9, loc="left")
    if compare:
        _loop_comparison(axes[-1], timelines, measured, refs)
    # One legend for every panel, below them: a legend inside a timeline hides its bars.
    handles: dict = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=2,
               fontsize=7)
    fig.suptitle(f"Copy every step vs pinned prefetch vs resident data\n"
                 f"timelines: model of the {timelines['gpu']}, batches of "
                 f"{_fmt_bytes(step['batch_bytes'])} (resident: the one upload before is not shown)",
                 fontsize=10)
    return fig


def _loop_comparison(ax, timelines: dict, measured, refs) -> None:
    """Time per step of each loop: the model (hatched), measured here, reference runs (hollow)."""
    names = list(timelines["versions"])
    rows = [("model", {nm: timelines["versions"][nm]["per_step_ms"] for nm in names}, "model")]
    where = []
    if measured:
        ts = [Timing.from_dict(d) for d in measured]
        rows.append((f"measured on {ts[0].device}",
                     {t.label: t.median_s / (t.size or 1) * 1e3 for t in ts}, "measured"))
        where.append(f"measured on {ts[0].device} ({ts[0].size} steps per epoch)")
    for label, data in refs:
        rows.append((label, _per_step(data, names), "reference"))
        where.append(label)
    height = 0.8 / len(rows)
    fill = dict(zip(names, [NAIVE, MEASURED, OPTIMIZED]))
    model = rows[0][1]
    for j, (label, values, kind) in enumerate(rows):
        for i, nm in enumerate(names):
            if nm not in values:
                continue
            y, v = i - 0.4 + (j + 0.5) * height, values[nm]
            if kind == "model":
                ax.barh(y, v, height, fill=False, edgecolor=MODEL, hatch="..",
                        label="model (stream timeline)" if i == 0 else None)
            elif kind == "measured":
                ax.barh(y, v, height, color=fill.get(nm, MEASURED),
                        label=f"{label}" if i == 0 else None)
            else:
                ax.barh(y, v, height, fill=False, edgecolor=REFERENCE, hatch="//",
                        label=label if i == 0 else None)
            note = f"{v:.3g} ms" if kind == "model" else f"{v:.3g} ms, {v / model[nm]:.1f}x the model"
            ax.annotate(note, (v, y), xytext=(4, 0), textcoords="offset points", va="center",
                        fontsize=7)
    ax.axvline(timelines["step"]["compute_s"] * 1e3, color=CEILING, ls=":", lw=1.2,
               label="one training step alone (roofline model)")
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.set_ylim(len(names) - 0.5, -0.5)
    top = max(v for _, values, _ in rows for v in values.values())
    ax.set_xlim(0, top * 1.45)
    ax.set_xlabel("time per training step (ms)")
    ax.set_title("time per step: " + "; ".join(["model"] + where), fontsize=9, loc="left")


# --------------------------------------------------------------------------- 3. transpose

COPY_LABELS = ("copy (copy.cu)", "tile copy (tile_copy.cu)")
REF_LABEL = "ref (library device-to-device copy)"


def transpose_figure(result: dict, reference_rows=None) -> Figure:
    """Bandwidth of the transpose ladder against the faster copy kernel (measured, or
    reference data on a machine without a GPU) next to the bank conflicts of each version."""
    if reference_rows is None:
        reference_rows = references("transpose")
    fig, (ax, ax2) = new_figure(1, 2, figsize=(10.5, 4.0), width_ratios=(1.7, 1))
    versions = ["naive", "shared tile", "padded tile"]
    colours = {"naive": NAIVE, "shared tile": MEASURED, "padded tile": OPTIMIZED}
    gbps, is_ref, where = {}, False, result["device"]
    if result.get("timings"):
        gbps = {d["label"]: Timing.from_dict(d).gbps for d in result["timings"]}
    else:
        for label, data in reference_rows[:1]:
            g = data.get("gbps", {})
            if all(v in g for v in versions) and any(c in g for c in COPY_LABELS):
                gbps, is_ref = g, True
                where = f"{result['device']} · bandwidth: {label}"
    if gbps:
        ceiling_label = max((c for c in COPY_LABELS if c in gbps), key=lambda c: gbps[c])
        ceiling = gbps[ceiling_label]
        for y, v in enumerate(versions):
            if is_ref:
                ax.barh(y, gbps[v], fill=False, edgecolor=REFERENCE, hatch="//",
                        label="reference data" if y == 0 else None)
            else:
                ax.barh(y, gbps[v], color=colours[v])
            # On a white box: the ceiling lines pass just right of the fastest bars.
            ax.annotate(f"{gbps[v]:.0f} GB/s ({100 * gbps[v] / ceiling:.0f}% of copy)", (gbps[v], y),
                        xytext=(4, 0), textcoords="offset points", va="center", fontsize=8,
                        zorder=5, bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none",
                                            alpha=0.85))
        ax.axvline(ceiling, color=CEILING, ls="--", lw=1.2,
                   label=f"ceiling: {ceiling_label}, {ceiling:.0f} GB/s")
        if REF_LABEL in gbps:
            ax.axvline(gbps[REF_LABEL], color=MODEL, ls=":", lw=1.2,
                       label=f"{REF_LABEL}, {gbps[REF_LABEL]:.0f} GB/s")
        ax.set_yticks(range(3), versions)
        ax.set_xlim(0, max(gbps.values()) * 1.45)
        legend_below(ax, fontsize=7)
    else:
        ax.set_yticks([])
        ax.text(0.5, 0.5, "no GPU here and no reference measurement\nof the transpose in the "
                "course's data yet", transform=ax.transAxes, ha="center", va="center",
                color=MODEL)
    ax.invert_yaxis()
    ax.set_xlabel("effective bandwidth, bytes read + written (GB/s)")
    title(ax, f"Transpose ladder (tile {result['tile']})", where)
    conf = result["conflicts"]
    ways = [max(conf[v]["worst_ways"], 1) if conf[v]["accesses_per_thread"] else 0 for v in versions]
    ax2.bar(range(3), ways, color=[colours[v] for v in versions], alpha=0.35, edgecolor="black",
            ls="--")
    for i, (v, w) in enumerate(zip(versions, ways)):
        # Above the conflict-free line, which would otherwise run through a note at the bottom.
        ax2.annotate("no shared\nmemory" if w == 0 else f"{w}-way", (i, max(w, 1)), xytext=(0, 3),
                     textcoords="offset points", ha="center", va="bottom", fontsize=8)
    ax2.axhline(1, color=CEILING, ls=":", lw=1.2, label="conflict-free (1 wavefront)")
    ax2.set_xticks(range(3), versions)
    ax2.set_ylabel("worst bank conflict (n-way)")
    ax2.set_ylim(0, max(ways + [1]) * 1.3)
    legend_below(ax2, fontsize=7)
    title(ax2, "Shared-memory bank conflicts (model)", "addresses traced on the emulator")
    return fig


def bank_map(config: dict) -> Figure:
    """Which bank each lane of a warp hits when it reads a column of the tile (model), and
    the distinct words each bank must serve."""
    m = config["model"]
    fig, (ax, ax2) = new_figure(1, 2, figsize=(10, 3.3), width_ratios=(1.4, 1))
    lanes = list(range(len(m["read_banks"])))
    ax.scatter(lanes, m["read_banks"], s=18, color=NAIVE if m["read_ways"] > 1 else OPTIMIZED,
               label=f"column read t[tx][ty]: {m['read_ways']}-way (model)")
    ax.scatter(lanes, m["write_banks"], s=10, marker="x", color=MODEL,
               label=f"row write t[ty][tx]: {m['write_ways']}-way (model)")
    ax.set_xlabel("lane of the warp")
    ax.set_ylabel("shared-memory bank (0–31)")
    ax.set_ylim(-1, 33)
    ax.axhline(31.5, color=CEILING, ls=":", lw=1, label="32 banks (ceiling)")
    legend_below(ax, fontsize=7)  # inside, it hid the lanes that hit the top banks (tile 16)
    measured = ""
    if config.get("gbps"):
        measured = (f" · measured: {config['gbps']:.0f} GB/s, copy ceiling "
                    f"{config['copy_gbps']:.0f} GB/s")
    title(ax, f"float tile[{m['tile']}][{m['pitch']}]: bank of each lane (model)",
          config["device"] + measured)
    counts = m["read_words_per_bank"]
    ax2.bar(range(len(counts)), counts, color=NAIVE if m["read_ways"] > 1 else OPTIMIZED)
    ax2.axhline(1, color=CEILING, ls=":", lw=1.2, label="one word per bank (no conflict)")
    ax2.set_xlabel("bank")
    ax2.set_ylabel("distinct words requested")
    ax2.set_ylim(0, max(counts) * 1.35 + 0.3)
    legend_below(ax2, fontsize=7)
    title(ax2, f"Column read: {m['read_ways']}-way (model)", config["version"])
    return fig


# --------------------------------------------------------------------------- 4. allocation

def allocation_references() -> list[tuple[str, dict]]:
    """(label, {"n", "median_ms", "gpu"}) of every reference run of the allocation experiment."""
    return [(ref.label, {**val, "gpu": ref.gpu}) for ref, val in _reference.find(SECTION, "allocation")
            if isinstance(val, dict) and val.get("median_ms")]


def allocation_figure(result: dict, reference_rows=None) -> Figure:
    """Time per call of y = a*b + c with new results against reused buffers (measured), and
    beside it the GPU versions in a reference run (not when that is the GPU measured here)."""
    if reference_rows is None:
        reference_rows = allocation_references()
    refs = [(label, data) for label, data in reference_rows
            if same_gpu(data.get("gpu"), result["device"]) is not True]
    ts = Timings(Timing.from_dict(d) for d in result["timings"])
    rows = max([len(ts)] + [len(d["median_ms"]) for _, d in refs[:1]])
    fig, axes = new_figure(1, 2 if refs else 1, figsize=(13 if refs else 7.5, 0.5 * rows + 1.8))
    ax = axes[0] if refs else axes
    ys = range(len(ts))
    colours = [NAIVE if ("new" in t.label or "OFF" in t.label) else OPTIMIZED for t in ts]
    values = [t.median_s * 1e3 for t in ts]
    lo = [v - t.p20_s * 1e3 for v, t in zip(values, ts)]
    hi = [t.p80_s * 1e3 - v for v, t in zip(values, ts)]
    ax.barh(list(ys), values, color=colours, xerr=[lo, hi], capsize=3)
    ideal = min(t.bytes / (t.gbps * 1e9) for t in ts) * 1e3
    ax.axvline(ideal, color=CEILING, ls=":", lw=1.2, label="fastest version (floor)")
    for y, v, h in zip(ys, values, hi):  # after the error bar, so that it never crosses the note
        ax.annotate(f"{v:.3g} ms", (v + h, y), xytext=(5, 0), textcoords="offset points",
                    va="center", fontsize=8)
    ax.set_yticks(list(ys), [t.label for t in ts])
    ax.invert_yaxis()
    ax.set_xlabel("median time per call (ms)")
    ax.set_xlim(0, max(v + h for v, h in zip(values, hi)) * 1.3)
    title(ax, f"y = a*b + c on {result['n']:,} floats: allocate vs reuse", result["device"])
    if refs:
        label, data = refs[0]
        ax2 = axes[1]
        names, times = list(data["median_ms"]), list(data["median_ms"].values())
        ax2.barh(range(len(names)), times, fill=False, edgecolor=REFERENCE, hatch="//",
                 label="reference data (medians only)")
        for y, v in enumerate(times):
            ax2.annotate(f"{v:.3g} ms", (v, y), xytext=(4, 0), textcoords="offset points",
                         va="center", fontsize=8)
        ax2.set_yticks(range(len(names)), names, fontsize=8)
        ax2.invert_yaxis()
        ax2.set_xlim(0, max(times) * 1.3)
        ax2.set_xlabel("median time per call (ms)")
        n = f" on {data['n']:,} floats" if data.get("n") else ""
        title(ax2, f"The same on a GPU{n}", label)
    fig.legend(loc="outside lower center", fontsize=7, ncols=2)
    return fig


# --------------------------------------------------------------------------- 5. footprint

KINDS = (("weights", "#1f77b4"), ("gradients", "#ff7f0e"), ("master_copy", "#8c564b"),
         ("optimizer_state", "#9467bd"), ("activations", "#2ca02c"))


def _label(f: dict) -> str:
    if f["dtype"] == "fp32":
        return "fp32"
    return f"{f['dtype']} + fp32 master" if f["master_weights"] else f"{f['dtype']} only"


def footprint_figure(footprints: list[dict], device: str = "", peaks: list[dict] | None = None) -> Figure:
    """Stacked bytes by kind for each precision: real tensors (solid) and the model's total
    (dashed marker); the fp32 total as the line to beat."""
    fig, ax = new_figure(figsize=(8.5, 0.55 * len(footprints) + 2.4))
    labelled: set = set()
    for y, f in enumerate(footprints):
        left = 0.0
        for kind, colour in KINDS:
            v = f["measured"][kind] / 2**20
            if v:
                ax.barh(y, v, left=left, color=colour,
                        label=None if kind in labelled else kind.replace("_", " "))
                labelled.add(kind)
            left += v
        ax.plot([f["model"]["total"] / 2**20] * 2, [y - 0.42, y + 0.42], color=MODEL, ls="--",
                lw=2, label="model total" if y == 0 else None)
        ax.annotate(f"{left:.2f} MiB", (left, y), xytext=(6, 0), textcoords="offset points",
                    va="center", fontsize=8)
    fp32 = next((f for f in footprints if f["dtype"] == "fp32"), None)
    if fp32:
        ax.axvline(fp32["measured"]["total"] / 2**20, color=CEILING, ls=":", lw=1.2,
                   label="fp32 total (the budget to beat)")
    ax.set_yticks(range(len(footprints)), [_label(f) for f in footprints])
    ax.invert_yaxis()
    ax.set_xlabel("bytes kept for one training step (MiB)")
    ax.set_xlim(0, max(f["measured"]["total"] for f in footprints) / 2**20 * 1.2)
    fig.legend(loc="outside lower center", fontsize=7, ncols=4)
    f0 = footprints[0]
    title(ax, f"Training memory by precision: MLP {'-'.join(map(str, f0['widths']))}, batch "
              f"{f0['batch']}, Adam", (device or "") + " · tensors' nbytes (measured) and model")
    return fig


# --------------------------------------------------------------------------- headless

def figures(results: dict) -> dict:
    """Every figure of ``experiments.ch2.run_all``'s results."""
    out = {"transfers": transfer_figure(results["transfers"]),
           "loops": loop_figure(results["loops_model"], results.get("loops_measured")),
           "transpose": transpose_figure(results["transpose"]),
           "allocation": allocation_figure(results["allocation"]),
           "footprint": footprint_figure(results["footprint"], results["allocation"]["device"])}
    return out
