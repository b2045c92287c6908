"""Figures with one house style: units on axes, ceilings drawn, device in the title,
models dashed and labelled "model", reference data hollow and labelled with its GPU.

Chapter-specific figures live in ``gpucourse.plot.chN`` (``figures(results)`` for the
headless runner). Every function returns a ``matplotlib.figure.Figure`` built without pyplot's global
state, so a notebook cell that ends with it shows it exactly once.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import io
import re

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FixedFormatter, FuncFormatter
from matplotlib.transforms import ScaledTranslation

from .. import device as _device
from .. import specs
from ..bench import Timing
from ..errors import SpecError
from ..runner import PAGE_PX

MEASURED = "#1f77b4"
OPTIMIZED = "#2ca02c"
NAIVE = "#d62728"
MODEL = "#7f7f7f"
CEILING = "#000000"
REFERENCE = "#9467bd"
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#17becf"]

STYLE = {
    "figure.dpi": 100,
    "savefig.dpi": 110,
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.fontsize": 8,
    "legend.frameon": False,
}

#: The smallest text a course figure shows, in points at the size the report page displays
#: the figure (``python -m gpucourse run``): a figure wider than the page is scaled down to it,
#: so its text must be larger in proportion (see :func:`page_scale`).
MIN_TEXT_PT = 9.0


def page_scale(fig: Figure) -> float:
    """How much the report page shrinks ``fig``: 1 when its PNG fits the page's width
    (``runner.PAGE_PX``), else the page's width over the PNG's."""
    return min(1.0, PAGE_PX / (fig.get_figwidth() * fig.dpi))


def _shown_texts(fig: Figure) -> list[Text]:
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def effective_text_pt(fig: Figure) -> list[tuple[float, str]]:
    """(size in points at the width the report page shows ``fig``, text) of each text it draws."""
    scale = page_scale(fig)
    return [(t.get_fontsize() * scale, t.get_text()) for t in _shown_texts(fig)]


def enlarge_small_text(fig: Figure, min_pt: float = MIN_TEXT_PT) -> None:
    """Raise every text of ``fig`` smaller than ``min_pt`` at page width to that size: notes,
    legends and tick labels written at 7-8 pt, or a wide figure that the page shrinks."""
    floor = min_pt / page_scale(fig)
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for which in ("major", "minor"):
                labels = [t for t in axis.get_ticklabels(which=which) if t.get_text()]
                if labels and min(t.get_fontsize() for t in labels) < floor:
                    # through the axis, so that ticks made when the layout runs get it too
                    axis.set_tick_params(which=which, labelsize=floor)
    for text in _shown_texts(fig):
        if text.get_fontsize() < floor:
            text.set_fontsize(floor)


def _figure_png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _register_notebook_display() -> None:
    """Render a returned Figure as a PNG in IPython, whatever the matplotlib backend.

    Figures built without pyplot are not shown by the inline backend's hooks, so the
    course registers the PNG formatter itself.
    """
    try:
        from IPython import get_ipython  # optional: figures are also drawn outside IPython
    except ImportError:
        return
    ip = get_ipython()
    if ip is not None:
        ip.display_formatter.formatters["image/png"].for_type(Figure, _figure_png)


_register_notebook_display()


def literal_text(fig: Figure) -> None:
    """Show every text of ``fig`` as written: matplotlib reads ``$...$`` as math, so a GPU
    name, label or command from data ("$x_1$", "H200 $^$") would be typeset, or stop the
    figure from drawing. Titles, labels, legends and notes get math text turned off; tick
    labels the course set (FixedFormatter) get their ``$`` escaped; tick labels that matplotlib
    formats itself (log axes, offsets) keep their math."""
    texts = fig.findobj(Text)  # first: it makes the ticks the axes will draw
    own = set()  # tick labels and offsets: made by matplotlib's formatters, which may use math
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for formatter in (axis.get_major_formatter(), axis.get_minor_formatter()):
                if isinstance(formatter, FixedFormatter):
                    formatter.seq = [_escape_dollars(s) for s in formatter.seq]
                elif isinstance(formatter, FuncFormatter) and \
                        not getattr(formatter.func, "literal", False):
                    # set_ticks(ticks, labels) keeps the labels in a FuncFormatter
                    formatter.func = _literal_labels(formatter.func)
            for tick in axis.majorTicks + axis.minorTicks:
                own.update((id(tick.label1), id(tick.label2)))  # their formatters, above
            own.add(id(axis.offsetText))
    for text in texts:
        if id(text) not in own and text.get_parse_math():
            text.set_parse_math(False)


def _literal_labels(func):
    def literal(x, pos=None):
        return _escape_dollars(func(x, pos))
    literal.literal = True
    return literal


def _escape_dollars(text) -> str:
    """``text`` with each ``$`` not already escaped written as ``\\$`` (a literal dollar)."""
    return re.sub(r"(?<!\\)\$", r"\\$", str(text))


class CourseFigure(Figure):
    """A Figure that draws its text literally (see :func:`literal_text`) and, when
    ``min_text_pt`` is set, no smaller than that at page width (:func:`enlarge_small_text`),
    however the text was added: just before every draw, so that text added after
    ``new_figure`` is covered and the layout makes room for the larger text."""

    #: ``new_figure`` sets it to ``MIN_TEXT_PT``; None keeps the sizes as written (an access
    #: picture's cell labels must fit their cells).
    min_text_pt: float | None = None

    def draw(self, renderer):
        literal_text(self)
        if self.min_text_pt:
            enlarge_small_text(self, self.min_text_pt)
        return super().draw(renderer)

    def __repr__(self):  # what a notebook prints beside the image, as for any Figure
        return super().__repr__().replace(type(self).__name__, "Figure", 1)


#: The report page's width in inches of a figure (at ``figure.dpi``): ``new_figure`` makes
#: none wider, since the page would shrink it, text and all.
PAGE_WIDTH_IN = PAGE_PX / STYLE["figure.dpi"]


def new_figure(nrows: int = 1, ncols: int = 1, figsize=(7.5, 4.0), **kwargs):
    """A Figure and its axes in the course's style (not registered with pyplot), at most
    ``PAGE_WIDTH_IN`` wide, whose text is drawn no smaller than ``MIN_TEXT_PT``."""
    figsize = (min(figsize[0], PAGE_WIDTH_IN), figsize[1])
    with matplotlib.rc_context(STYLE):
        fig = CourseFigure(figsize=figsize, layout="constrained")
        axes = fig.subplots(nrows, ncols, **kwargs)
    fig.min_text_pt = MIN_TEXT_PT
    return fig, axes


def device_label(device: str | None = None) -> str:
    """The device to name in a title: the given one or the active device."""
    return device or _device.describe().short_name


def legend_below(ax, ncols: int = 1, gap_pt: float = 30, **kwargs) -> None:
    """The axis's legend under its x label (``gap_pt`` below the axis), off the data; the
    constrained layout makes room for it."""
    below = ax.transAxes + ScaledTranslation(0, -gap_pt / 72, ax.figure.dpi_scale_trans)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0), bbox_transform=below, ncols=ncols,
              **kwargs)


def same_gpu(a: str | None, b: str | None) -> bool | None:
    """Whether two GPU names ("NVIDIA H200", "H200") are one row of the spec table; None when
    either is not in it, so a caller can keep data it cannot place."""
    try:
        return specs.lookup(a).key == specs.lookup(b).key
    except SpecError:  # an unknown or missing name
        return None


def title(ax, text: str, device: str | None = None) -> None:
    """Set an axis title with the device named on a second line."""
    ax.set_title(f"{text}\n{device_label(device)}", fontsize=STYLE["axes.titlesize"])


def _metric(t: Timing, metric: str) -> float:
    if metric == "time":
        return t.median_s * 1e3
    value = t.gbps if metric == "gbps" else t.gflops
    if value is None:
        raise ValueError(f"timing {t.label!r} has no {'bytes' if metric == 'gbps' else 'flops'} "
                         f"set, so it cannot be plotted as {metric}.")
    return value


UNITS = {"time": "median time per call (ms)", "gbps": "effective bandwidth (GB/s)",
         "gflops": "throughput (GFLOP/s)"}


def ladder(timings: Sequence[Timing], metric: str = "gbps", ceiling: float | None = None,
           ceiling_label: str = "ceiling", title_text: str = "Naive → optimized",
           reference: Sequence[tuple[str, float, str]] = (), device: str | None = None,
           ceiling_name: str = "ceiling") -> Figure:
    """Horizontal bars from naive (top) to optimized, each annotated with % of ``ceiling``.

    ``ceiling_name`` names the ceiling in those notes ("copy" where a bar may pass it).
    ``reference`` adds hollow bars of reference measurements: (label, value, source).
    Error bars show the p20–p80 spread of each measurement.
    """
    if metric not in UNITS:
        raise ValueError(f"metric {metric!r} is not one of {', '.join(map(repr, UNITS))}.")
    fig, ax = new_figure(figsize=(7.5, 0.55 * (len(timings) + len(reference)) + 1.6))
    labels, values, errs = [], [], []
    for t in timings:
        v = _metric(t, metric)
        labels.append(t.label)
        values.append(v)
        lo, hi = (t.p20_s, t.p80_s)
        if metric == "time":
            errs.append((v - lo * 1e3, hi * 1e3 - v))
        else:
            errs.append((v - v * t.median_s / hi, v * t.median_s / lo - v))
    ys = list(range(len(labels)))
    colors = [NAIVE] + [MEASURED] * max(0, len(values) - 2) + [OPTIMIZED] if len(values) > 1 \
        else [MEASURED]
    ax.barh(ys, values, color=colors[:len(values)], xerr=list(zip(*errs)) if errs else None,
            capsize=3)
    for i, (lab, val, src) in enumerate(reference):
        y = len(labels) + i
        ax.barh([y], [val], fill=False, edgecolor=REFERENCE, hatch="//",
                label="reference data" if i == 0 else None)
        labels.append(f"{lab}\n({src})")
        values.append(val)
        ys.append(y)
    ax.set_yticks(ys, labels)
    ax.invert_yaxis()
    ax.set_xlabel(UNITS[metric])
    top = max(values + ([ceiling] if ceiling else []))
    # A 100x ladder on a linear axis hides the naive bar: switch to log past 30x.
    log = min(values) > 0 and top / min(values) > 30
    if log:
        ax.set_xscale("log")
    # Each note starts after its bar's error bar, so the two never overlap.
    ends = [v + e[1] for v, e in zip(values, errs)] + values[len(errs):]
    for y, v, end in zip(ys, values, ends):
        note = f"{v:.3g}" if v < 1000 else f"{v:,.0f}"  # 2,162 rather than 2.16e+03
        if ceiling:
            note += f"  ({100 * v / ceiling:.0f}% of {ceiling_name})"
        # A white box keeps the ceiling line from running through a note.
        ax.annotate(note, (end, y), xytext=(4, 0), textcoords="offset points", va="center",
                    fontsize=8, zorder=5,
                    bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.85))
    if ceiling:
        ax.axvline(ceiling, color=CEILING, ls="--", lw=1.2, label=ceiling_label)
    if log:
        ax.set_xlim(min(values) / 2, top * 8)
    else:
        ax.set_xlim(0, top * 1.35)
    if ceiling or reference:
        # Side by side only while the entries fit the figure's width: a legend wider than the
        # figure is cut off at both edges (a long ceiling label does it with two entries).
        labels_shown = ax.get_legend_handles_labels()[1]
        wide = sum(len(lab) + 6 for lab in labels_shown) > 95
        fig.legend(loc="outside lower center", ncols=1 if wide else 3)
    title(ax, title_text, device)
    return fig


def sweep(x: Sequence, series: Mapping[str, Sequence[float]], xlabel: str, ylabel: str,
          title_text: str, ceilings: Mapping[str, float] | None = None,
          models: Mapping[str, Sequence[float]] | None = None,
          reference: Mapping[str, tuple[Sequence, Sequence]] | None = None,
          logx: bool = False, logy: bool = False, device: str | None = None,
          ax=None) -> Figure:
    """Measured lines against horizontal ceilings, with dashed models and hollow reference points.

    Model labels get "(model)" appended, so a model is never mistaken for a measurement.
    Pass ``ax`` to draw into an existing axis (its figure is returned).
    """
    if ax is None:
        fig, ax = new_figure()
    else:
        fig = ax.figure
    for i, (name, ys) in enumerate(series.items()):
        ax.plot(x, ys, "o-", color=PALETTE[i % len(PALETTE)], label=name, ms=4)
    for i, (name, ys) in enumerate((models or {}).items()):
        lab = name if "model" in name.lower() else f"{name} (model)"
        ax.plot(x, ys, "--", color=PALETTE[(i + len(series)) % len(PALETTE)], label=lab, lw=1.5)
    for i, (name, (rx, ry)) in enumerate((reference or {}).items()):
        lab = name if "reference" in name.lower() else f"{name} (reference)"
        ax.plot(rx, ry, "s", mfc="none", color=REFERENCE if i == 0 else PALETTE[-1 - i],
                label=lab, ms=6)
    for i, (name, value) in enumerate((ceilings or {}).items()):
        ax.axhline(value, color=CEILING, ls=[":", "-.", "--"][i % 3], lw=1.2, label=name)
    if logx:
        powers_of_two = all(v > 0 and (int(v) & (int(v) - 1)) == 0 and v == int(v) for v in x)
        ax.set_xscale("log", base=2 if powers_of_two else 10)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend()
    title(ax, title_text, device)
    return fig


def roofline(points: Iterable[tuple[str, float, float]], peak_flops: float, bandwidth: float,
             title_text: str = "Roofline", label: str = "", is_model: bool = False,
             device: str | None = None, ax=None) -> Figure:
    """Operations as (name, arithmetic intensity FLOP/byte, achieved FLOP/s) under the roof.

    ``peak_flops`` in FLOP/s and ``bandwidth`` in bytes/s draw the two ceilings; set
    ``is_model`` when the points are predictions rather than measurements.
    """
    if ax is None:
        fig, ax = new_figure()
    else:
        fig = ax.figure
    points = list(points)
    ridge = peak_flops / bandwidth
    lo = min([p[1] for p in points] + [ridge]) / 8
    hi = max([p[1] for p in points] + [ridge]) * 8
    ai = np.geomspace(lo, hi, 200)
    roof = np.minimum(peak_flops, ai * bandwidth) / 1e9
    kind = "model" if is_model else "measured"
    ax.plot(ai, roof, color=CEILING, lw=1.5,
            label=f"{label + ': ' if label else ''}roof ({bandwidth / 1e9:.0f} GB/s, "
                  f"{peak_flops / 1e12:.3g} TFLOP/s)")
    ax.axvline(ridge, color=MODEL, ls=":", lw=1)
    for i, (name, intensity, rate) in enumerate(points):
        ax.plot([intensity], [rate / 1e9], "o" if not is_model else "D",
                color=PALETTE[i % len(PALETTE)], mfc="none" if is_model else None,
                label=f"{name} ({kind})", ms=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable rate (GFLOP/s)")
    ax.legend(loc="lower right")
    title(ax, title_text + (" (model)" if is_model else ""), device)
    return fig


def timeline(events: Iterable[tuple[str, str, float, float]], title_text: str = "Timeline",
             is_model: bool = False, unit: str = "ms", device: str | None = None,
             ax=None) -> Figure:
    """A Gantt chart of (lane, op, start, end) intervals, times in ``unit``.

    Colours follow the op name (h2d, compute, d2h, forward, backward, ...).
    """
    if ax is None:
        fig, ax = new_figure(figsize=(8, 3.2))
    else:
        fig = ax.figure
    events = list(events)
    lanes = list(dict.fromkeys(e[0] for e in events))
    ops = list(dict.fromkeys(e[1] for e in events))
    for lane, op, start, end in events:
        y = lanes.index(lane)
        ax.barh(y, end - start, left=start, color=PALETTE[ops.index(op) % len(PALETTE)],
                edgecolor="white", height=0.7)
    for i, op in enumerate(ops):
        ax.barh([0], [0], color=PALETTE[i % len(PALETTE)], label=op)
    ax.set_yticks(range(len(lanes)), lanes)
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({unit})")
    ax.legend(loc="upper right", ncols=min(len(ops), 4))
    title(ax, title_text + (" (model)" if is_model else ""), device)
    return fig


def save(fig: Figure, path) -> str:
    """Write a figure to PNG and return the path."""
    fig.savefig(path)
    return str(path)
