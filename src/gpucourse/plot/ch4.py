"""Figures of chapter 4 (threads and scheduling) from ``experiments.ch4`` results."""
from __future__ import annotations

import textwrap

import numpy as np
from matplotlib.figure import Figure

from ..bench import Timing, Timings
from ..display import Note
from ..experiments.ch4 import sweep_point
from . import (CEILING, MEASURED, MODEL, NAIVE, OPTIMIZED, PALETTE, REFERENCE, ladder,
               legend_below, new_figure, same_gpu, sweep, timeline, title)

_NO_GPU_DATA = ("No GPU here and no reference data for chapter 4 yet:\n"
                "run `make gpu-check` on a GPU to record some.")


def _note(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=8.5,
            color="#444", wrap=True, bbox=dict(boxstyle="round", fc="#f7f7f7", ec="#ccc"))


# --------------------------------------------------------------------------- block size

def block_size_figure(result: dict) -> Figure:
    """Occupancy model, bandwidth against the ceiling, and the tail effect, for one block size.

    ``result`` is ``block_size_point`` (a chosen block size is marked) or ``block_size_sweep``.
    """
    point = result.get("point")
    sizes = result["block_sizes"]
    xs = list(range(len(sizes)))
    fig, (a1, a2, a3) = new_figure(1, 3, figsize=(13, 4.0))
    device = result["device"]

    # 1. occupancy and lanes used (models)
    sweep(xs, {}, xlabel="threads per block", ylabel="% of the SM's warp slots / of lanes",
          title_text=f"Occupancy of saxpy (model, {result['gpu']})",
          ceilings={"100 %": 100.0},
          models={"occupancy": [100 * o for o in result["occupancy"]],
                  "lanes holding a thread": [100 * e for e in result["lane_efficiency"]]},
          device=device, ax=a1)
    a1.set_ylim(0, 112)
    skipped = result.get("skipped") or []
    if skipped:  # under the axis, where no curve runs
        left_out = ", ".join(str(s["block_size"]) for s in skipped)
        a1.set_xlabel(f"threads per block\nnot drawn: {left_out} threads per block cannot launch "
                      f"at {result['regs_per_thread']} registers\nper thread (too many registers "
                      "per block)", fontsize=8)
    if point and not point.get("skipped"):
        i = sizes.index(point["block_size"]) if point["block_size"] in sizes else None
        if i is not None:
            a1.plot([i], [100 * point["occupancy"]], "o", ms=11, mfc="none", mec=NAIVE, mew=2,
                    label=f"block {point['block_size']}")
            a1.annotate(f"{100 * point['occupancy']:.0f} %: {point['blocks_per_sm']} blocks/SM,\n"
                        f"limited by {point['limited_by']}", (i, 100 * point["occupancy"]),
                        xytext=(0.45, 0.5), textcoords="axes fraction", fontsize=8,
                        ha="center", arrowprops=dict(arrowstyle="->", color=NAIVE))

    # 2. bandwidth: measured on a GPU, else reference data, against the datasheet ceiling
    measured = result.get("measured")
    series, reference, elsewhere, ref_n = {}, {}, [], {}
    if measured:
        series["measured (CUDA events)"] = measured["gbps"]
    for r in result.get("reference", []):
        # Another GPU's points against this GPU's ceiling would read as this GPU's.
        if same_gpu(r.get("gpu"), result["gpu"]) is False:
            elsewhere.append(r.get("gpu"))
            continue
        pos = [sizes.index(b) for b in r["block_sizes"] if b in sizes]
        vals = [g for b, g in zip(r["block_sizes"], r["gbps"]) if b in sizes]
        reference[r["label"]] = (pos, vals)
        ref_n[r["label"]] = r.get("n")
    ceilings = {result["ceiling_label"]: result["ceiling_gbps"]}
    if measured and measured.get("copy_gbps"):
        ceilings["device-to-device copy (measured)"] = measured["copy_gbps"]
    # A reference panel is subtitled with the reference run, not with this machine.
    where = device if measured or not reference else next(iter(reference))
    # ... and with the size that run measured, which need not be this sweep's.
    n_shown = result["n"] if measured or not reference else (ref_n[where] or result["n"])
    sweep(xs, series, xlabel="threads per block", ylabel="effective bandwidth (GB/s)",
          title_text=f"saxpy, {n_shown:,} elements",
          ceilings=ceilings,
          reference=reference, device=where, ax=a2)
    shown = (list(ceilings.values()) + list(series.get("measured (CUDA events)", []))
             + [v for _, vals in reference.values() for v in vals])
    a2.set_ylim(0, max(shown) * 1.15)
    if not series and not reference:
        _note(a2, _NO_GPU_DATA if not elsewhere else
              f"The reference run is of the {elsewhere[0]}:\nnot drawn against the "
              f"{result['gpu']}'s ceiling;\nchoose the {elsewhere[0]} to see it.")
    elif elsewhere:
        a2.text(0.02, 0.02, f"reference of the {elsewhere[0]} not drawn", transform=a2.transAxes,
                fontsize=7, color=MODEL)
    if point and point.get("measured") and point["block_size"] in sizes:
        i = sizes.index(point["block_size"])
        a2.plot([i], [point["measured"]["gbps"]], "o", ms=11, mfc="none", mec=NAIVE, mew=2,
                label=f"block {point['block_size']} now")
    elif point and point["block_size"] in sizes:
        a2.axvline(sizes.index(point["block_size"]), color=NAIVE, lw=1, ls=":",
                   label=f"block {point['block_size']}")
    for ax in (a1, a2):
        ax.set_xticks(xs, [str(s) for s in sizes], rotation=60, fontsize=8)
        for lab, s in zip(ax.get_xticklabels(), sizes):
            if s % 32:  # not a whole number of warps
                lab.set_color(NAIVE)
        # two more lines of x label on the occupancy panel where block sizes were skipped
        legend_below(ax, gap_pt=70 if ax is a1 and skipped else 46, fontsize=8)

    # 3. the tail effect for the chosen block size (model)
    if point and point.get("skipped"):
        a3.set_axis_off()
        _note(a3, textwrap.fill(f"Block {point['block_size']}: cannot launch, "
                                f"{point['skipped']}.", 44))
    elif point:
        tail = point["tail"]
        per_wave = tail["blocks_per_wave"]
        waves = np.array(tail["grid_blocks"]) / per_wave
        a3.plot(waves, [100 * u for u in tail["utilization"]], "--", color=MODEL,
                label=f"block {point['block_size']}: {per_wave} blocks per wave (model)")
        a3.axhline(100, color=CEILING, ls=":", lw=1.2, label="every block slot busy")
        a3.set_xlabel("grid size (full waves of blocks)")
        a3.set_ylabel("block slots used over the run (%)")
        a3.set_ylim(0, 110)
        legend_below(a3, fontsize=8)
        title(a3, f"Waves and the tail effect (model)\nof the {result['gpu']}", device)
    else:
        a3.set_axis_off()
    return fig


# --------------------------------------------------------------------------- divergence

def _short_version(v: str) -> str:
    return v.replace("divergence_", "").replace("histogram_", "").replace("reduce_", "")


def _times_by_version(ref: dict, versions) -> list | None:
    """A reference run's median time of each of ``versions``, in their order; None when it did
    not time every one (its own version list, where it has one, says which time is which)."""
    times = ref.get("median_s") or []
    named = ref.get("versions") or list(versions)[:len(times)]
    by_name = dict(zip(named, times))
    if len(named) != len(times) or any(v not in by_name for v in versions):
        return None
    return [by_name[v] for v in versions]


def divergence_figure(result: dict) -> Figure:
    """Warp efficiency (model) and time per version (measured on a GPU, reference, or the model's passes)."""
    versions = result["versions"]
    labels = [_short_version(v) for v in versions]
    fig, (a1, a2) = new_figure(1, 2, figsize=(11, 3.6))
    eff = [100 * result["model"][v]["efficiency"] for v in versions]
    ys = range(len(versions))
    a1.barh(ys, eff, fill=False, edgecolor=MODEL, hatch="//", label="model")
    for y, e in zip(ys, eff):
        a1.annotate(f"{e:.0f} %", (e, y), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=8)
    a1.axvline(100, color=CEILING, ls="--", lw=1.2, label="every lane busy")
    a1.set_yticks(list(ys), labels)
    a1.invert_yaxis()
    a1.set_xlim(0, 125)
    a1.set_xlabel("lanes doing useful work (%)")
    legend_below(a1, ncols=2, fontsize=8)
    title(a1, "Warp efficiency (model: each branch taken is one pass)", result["device"])

    measured = result.get("measured")
    refs = [r for r in result.get("reference", []) if _times_by_version(r, versions)]
    if measured:
        t = [1e3 * s for s in measured["median_s"]]
        lo = [1e3 * (m - p) for m, p in zip(measured["median_s"], measured["p20_s"])]
        hi = [1e3 * (p - m) for m, p in zip(measured["median_s"], measured["p80_s"])]
        a2.barh(ys, t, color=[NAIVE, MEASURED, OPTIMIZED][: len(t)], xerr=[lo, hi], capsize=3)
        fastest = min(t)
        for y, v, h in zip(ys, t, hi):
            a2.annotate(f"{v:.3g} ms ({v / fastest:.2f}x)", (v + h, y), xytext=(4, 0),
                        textcoords="offset points", va="center", fontsize=8)
        a2.set_xlabel("median time per call (ms)")
        a2.set_xlim(0, max(t) * 1.45)
        title(a2, f"Measured: n = {result['n']:,}, k = {result['k']}", result["device"])
    elif refs:
        r = refs[0]
        t = [1e3 * s for s in _times_by_version(r, versions)]
        a2.barh(ys, t, fill=False, edgecolor=REFERENCE, hatch="//", label=r["label"])
        fastest = min(t)
        for y, v in zip(ys, t):
            a2.annotate(f"{v:.3g} ms ({v / fastest:.2f}x)", (v, y), xytext=(4, 0),
                        textcoords="offset points", va="center", fontsize=8)
        a2.set_xlabel("median time per call (ms)")
        a2.set_xlim(0, max(t) * 1.45)
        legend_below(a2, fontsize=8)
        size = f": n = {r['n']:,}, k = {r['k']}" if r.get("n") and r.get("k") else ""
        title(a2, f"Reference measurement{size}", r["label"])
    else:
        passes = [result["model"][v]["passes"] for v in versions]
        a2.barh(ys, passes, fill=False, edgecolor=MODEL, hatch="//", label="model")
        a2.set_xlabel("branch passes per warp (relative time, model)")
        a2.set_xlim(0, 2.6)
        legend_below(a2, fontsize=8)
        title(a2, "Time in the model: one pass per branch taken", result["device"])
    a2.set_yticks(list(ys), labels)
    a2.invert_yaxis()
    return fig


# --------------------------------------------------------------------------- streams

def streams_figure(result: dict) -> Figure:
    """Three timelines on one time axis: serial, chunked with a sync per chunk, over N streams."""
    is_model = result["kind"] == "model"
    fig, axes = new_figure(3, 1, figsize=(9, 6.2), sharex=True)
    cases = [("serial", "1 copy in, 1 kernel, 1 copy out"),
             ("synced", f"{result['chunks']} chunks, host waits after each"),
             ("multi", f"{result['chunks']} chunks over {result['n_streams']} stream"
                       + "s" * (result["n_streams"] != 1))]
    for ax, (key, what) in zip(axes, cases):
        case = result[key]
        events = [(eng, op, 1e3 * s, 1e3 * e) for eng, op, s, e, *_ in case["ops"]]
        timeline(events, title_text="", is_model=is_model, device=result["device"], ax=ax)
        ax.axvline(1e3 * result["bound_s"], color=CEILING, ls="--", lw=1.2,
                   label="max(copy, compute), copies in and out together")
        isolated = result.get("bound_isolated_s")
        if isolated and abs(isolated / result["bound_s"] - 1) > 0.02:
            # Measured: the link is slower when both directions are busy than each alone.
            ax.axvline(1e3 * isolated, color=CEILING, ls=":", lw=1.2,
                       label="the longest stage run alone")
        ax.set_title("")  # one title per panel, on the left, plus the figure's title
        ax.set_title(f"{what}: {1e3 * case['total_s']:.3g} ms "
                     f"({case['total_s'] / result['bound_s']:.2f}x the bound)"
                     + (" (model)" if is_model else ""), fontsize=10, loc="left")
        ax.get_legend().remove()  # one legend for the figure, below the panels
        ax.set_xlabel("")
    axes[-1].set_xlabel("time (ms)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=4)
    how = (f"model of {result['gpu']} over PCIe (pinned)" if is_model
           else "measured with CUDA events (starts inferred from end events)")
    fig.suptitle(f"Copy → compute → copy of {result['bytes'] / 2**20:.0f} MiB: {how}\n"
                 f"{result['device']}", fontsize=11)
    return fig


# --------------------------------------------------------------------------- histogram

def histogram_figure(result: dict) -> Figure:
    """The data's bin counts (where contention comes from) and v1 vs v2 times per skew."""
    fig, (a1, a2) = new_figure(1, 2, figsize=(11, 3.8))
    for i, (skew, c) in enumerate(zip(result["skews"], result["contention"])):
        counts = np.array(c["counts"], dtype=float)
        counts[counts == 0] = np.nan  # an empty bin has no bar on a log axis
        a1.step(range(len(counts)), counts, where="mid",
                color=PALETTE[i % len(PALETTE)],
                label=f"skew {skew:g}: hottest bin {100 * c['hottest_bin_share']:.2g} %, "
                      f"{c['lanes_on_one_bin_per_warp']:.1f} lanes/warp on one bin")
    a1.set_yscale("log")
    a1.set_xlabel("bin (value)")
    a1.set_ylabel("elements per bin (first 65 536)")
    a1.legend(loc="upper right")
    title(a1, "Where the atomics go (the data, counted)", result["device"])

    measured = result.get("measured")
    # a reference run is drawn when it has both kernels' times and says at which skews (lists
    # of one length, checked when the file was read)
    skews = result["skews"]
    refs = [r for r in result.get("reference", []) if r.get("v1_s") and r.get("v2_s")
            and (r.get("skews") or len(r["v1_s"]) == len(skews))]
    xs = np.arange(len(skews))
    if measured or refs:
        r = measured or refs[0]
        xs, skews = np.arange(len(r.get("skews", skews))), r.get("skews", skews)
        style = ({} if measured else dict(fill=False, hatch="//"))
        where = "measured" if measured else "reference"
        v1, v2 = [1e3 * t for t in r["v1_s"]], [1e3 * t for t in r["v2_s"]]
        a2.bar(xs - 0.2, v1, 0.4, **({"color": NAIVE} if measured else {"edgecolor": NAIVE}),
               label=f"v1 global atomics ({where})", **style)
        a2.bar(xs + 0.2, v2, 0.4, **({"color": OPTIMIZED} if measured else {"edgecolor": OPTIMIZED}),
               label=f"v2 shared privatized ({where})", **style)
        # v1 and v2 differ 100-fold: a log axis shows both, and every bar carries its time.
        for x, a, b, sp in zip(xs, v1, v2, r.get("speedup") or [a / b for a, b in zip(v1, v2)]):
            a2.annotate(_ms(a), (x - 0.2, a), xytext=(0, 2), textcoords="offset points",
                        ha="center", fontsize=8)
            a2.annotate(f"{_ms(b)}\n{sp:.3g}x faster", (x + 0.2, b), xytext=(0, 2),
                        textcoords="offset points", ha="center", fontsize=8)
        a2.set_yscale("log")
        a2.set_ylim(min(v2) / 3, max(v1) * 6)
        a2.set_ylabel("median time per call (ms, log scale)")
        if measured:
            title(a2, f"Measured: {result['n']:,} elements", result["device"])
        else:
            size = f": {r['n']:,} elements" if r.get("n") else ""
            title(a2, f"Reference measurement{size}", r["label"])
    else:
        # No GPU: the longest chain of updates to one address, counted exactly.
        ch = result["chains"]
        a2.bar(xs - 0.2, [c["v1_longest_chain"] for c in ch], 0.4, fill=False,
               edgecolor=NAIVE, hatch="//", label="v1: updates to the hottest global bin")
        a2.bar(xs + 0.2, [c["v2_longest_shared_chain"] for c in ch], 0.4, fill=False,
               edgecolor=OPTIMIZED, hatch="\\\\",
               label=f"v2: to the hottest shared bin of one block ({ch[0]['grid_v2']} blocks)")
        a2.plot(xs + 0.2, [c["v2_longest_global_chain"] for c in ch], "v", color=OPTIMIZED,
                label="v2: block totals added to the hottest global bin")
        a2.set_yscale("log")
        a2.set_ylabel("longest chain of atomics on one address")
        title(a2, f"Contention counted for {result['chains_n']:,} elements (not a time)",
              result["device"])
    a2.set_xticks(xs, [f"skew {s:g}" for s in skews])
    a2.set_xlabel("data")
    legend_below(a2, fontsize=8)
    return fig


def _ms(v: float) -> str:
    """A time given in ms, in µs below one ms."""
    return f"{v:.3g} ms" if v >= 1 else f"{1e3 * v:.3g} µs"


# --------------------------------------------------------------------------- reduction

def _timings(dicts) -> Timings:
    return Timings(Timing.from_dict(d) for d in dicts)


def reduction_figure(result: dict) -> Figure:
    """The reduction ladder and the library sums against the copy bandwidth (the ceiling)."""
    copy = result["copy"]["gbps"]
    if result.get("measured"):
        return ladder(_timings(result["measured"]), metric="gbps", ceiling=copy,
                      ceiling_label="device-to-device copy (measured)", ceiling_name="copy",
                      title_text=f"Sum of {result['n']:,} floats: reduction ladder vs library",
                      device=result["device"])
    cpu = sorted(result["cpu_measured"], key=lambda t: t["bytes"] / t["median_s"])  # slowest first
    label = result["copy"].get("label", "copy")
    # The line is a rate measured once, not a bound: a library sum can pass it, and its note
    # then says "120% of dot", not "120% of ceiling".
    return ladder(_timings(cpu), metric="gbps", ceiling=copy,
                  ceiling_label=f"{label} on this CPU (measured)",
                  ceiling_name="dot" if label.startswith("dot") else "copy",
                  title_text=f"Library sums of {result['n']:,} floats on this CPU",
                  device=result["device"])


def reduction_reference_figure(result: dict):
    """The ladder as measured on a real GPU (reference data) against that GPU's copy bandwidth, or a note saying there is none."""
    refs = [r for r in result.get("reference", []) if r.get("copy_gbps") and r.get("labels")
            and len(r["labels"]) == len(r.get("gbps") or ())]
    if not refs:
        return Note("No reference measurement of the reduction ladder on a GPU yet: "
                    "run `make gpu-check` on a GPU to record one.")
    r = refs[0]
    gpu = r.get("gpu") or r["label"].replace("reference: ", "").split(",")[0]
    # Rows of the kernel sweep: the bar notes name the sweep, the copy line says which copy it is.
    source = "reference, kernel sweep" if r.get("source") == "kernel sweep" else "reference"
    bars = [(lab, g, source) for lab, g in zip(r["labels"], r["gbps"])]
    copy = f"{r.get('copy_label') or 'device-to-device copy'} on {gpu} (reference)"
    missing = [v for v in result.get("versions", []) if v not in r["labels"]]
    text = f"Reduction ladder on {gpu} (reference data)"
    if r.get("n"):
        text = f"Sum of {r['n']:,} floats on {gpu} (reference data)"
    if missing:
        text += f"\n{', '.join(missing)}: not in this run"
    return ladder([], metric="gbps", ceiling=r["copy_gbps"], ceiling_label=copy,
                  ceiling_name="copy", title_text=text, reference=bars, device=r["label"])


# --------------------------------------------------------------------------- runner

def figures(results: dict) -> dict:
    """Every figure of chapter 4 from ``experiments.ch4.run_all`` results."""
    sweep_res = results["block_size_sweep"]
    shown = min(sweep_res["block_sizes"] or [sweep_res["recommended"]],
                key=lambda b: abs(b - sweep_res["recommended"]))
    point = {**sweep_res, "point": sweep_point(sweep_res, shown)}
    figs = {"block_size": block_size_figure(point),
            "divergence": divergence_figure(results["divergence"]),
            "streams": streams_figure(results["streams"]),
            "histogram": histogram_figure(results["histogram"]),
            "reduction": reduction_figure(results["reduction"])}
    ref = reduction_reference_figure(results["reduction"])
    if isinstance(ref, Figure):
        figs["reduction_reference"] = ref
    return figs
