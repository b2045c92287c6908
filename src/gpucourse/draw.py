"""Pictures of what each thread of a kernel touched, drawn from an emulator run.

``gc.draw(kernel, grid, block, args)`` runs the launch once on the CPU emulator under the
profiler's tracer (:func:`gpucourse.profiler.trace.trace`) and draws every array the kernel
touched, kernel arguments and ``__shared__`` arrays alike, one cell per element::

    mod = gc.kernels.from_source(code)
    gc.draw(mod.copy_strided, 1, 32, (x, y, np.int32(32)))

A cell's colour is the warp of the thread that wrote it (light: only read), its number the
thread (``blockIdx.x * blockDim.x + threadIdx.x`` for a 1-D launch), ``a→b`` when thread a
wrote it and thread b read it (small arrays), and ``xk`` the number of reads. Edges mark trouble: orange, an element of an uncoalesced global
request (its warp touched at least twice the 32-byte sectors its bytes need); purple, a shared-memory
request with a bank conflict; red cells past an array's end, accesses out of bounds.
Arrays of up to ``max_elements`` are drawn whole; beyond that one block is drawn (and the
cells it touched). On a GPU the picture still comes from the emulator run of the same
source: the addresses are the kernel's, not the hardware's.

``gc.draw(trace)`` draws a trace made before; ``draw(..., arrays=["x", "tile"])`` picks
arrays and their order.
"""
from __future__ import annotations

import io
import sys
import types

import matplotlib
import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.colors import to_rgb
from matplotlib.patches import Patch
from PIL import Image

from . import plot
from .errors import InputError
from .profiler.trace import KIND_NAMES, Trace, trace

__all__ = ["draw", "MAX_ELEMENTS", "WRAP"]

#: Elements drawn whole; larger launches are drawn one block at a time.
MAX_ELEMENTS = 4096
#: Cells per row of a 1-D array: one warp's worth, 32 floats = one 128-byte line.
WRAP = 32
UNCOALESCED = "#ff7f0e"
CONFLICT = "#9467bd"
OUT_OF_BOUNDS = "#d62728"
UNTOUCHED = "#f2f2f2"
# Warps cycle through six colours that stay apart in light and dark shades.
WARP_COLOURS = ["#1f77b4", "#2ca02c", "#8c564b", "#17becf", "#e377c2", "#bcbd22"]


def draw(what, grid=None, block=None, args=None, shared_mem: int = 0, *, arrays=None,
         block_index: int | None = None, max_elements: int = MAX_ELEMENTS, title: str | None = None):
    """A figure of which thread read and wrote which element of each array (see the module)."""
    if isinstance(what, Trace):
        tr = what
    else:
        if grid is None or block is None or args is None:
            raise InputError("draw(kernel, grid, block, args) needs the launch: pass the grid, "
                             "the block and the arguments as for kernel(grid, block, args), or a "
                             "trace from gc.profiler.trace.trace(...).")
        tr = trace(what, grid, block, args, shared_mem)
    names = [a.name for a in tr.arrays] if arrays is None else list(arrays)
    for n in names:
        tr.array(n)  # a name the kernel did not touch: one sentence
    records = tr.records
    shown_block = block_index
    total = sum(tr.arrays[tr.array(n)].size for n in names)
    if shown_block is None and tr.blocks > 1 and total > max_elements:
        shown_block = int(records["block"].min()) if len(records) else 0
    if shown_block is not None:
        records = records[records["block"] == shown_block]
    elif tr.blocks > 1 and len(records):
        # Every block has its own shared memory: draw the first block's.
        spaces = np.array([a.space == "shared" for a in tr.arrays] + [False])
        first = int(records["block"].min())
        records = records[~spaces[records["array"]] | (records["block"] == first)]
    fig, axes = _figure(tr, names, records, max_elements)
    for ax, n in zip(axes, names):
        _panel(ax, tr, n, records, max_elements)
    head = title or ((tr.label + ": " if tr.label else "") +
                     f"what each thread touched in {tr.kernel}, grid {_dims(tr.grid)}, block "
                     f"{_dims(tr.block)}" + (f", block {shown_block} shown" if shown_block is not None
                                             and tr.blocks > 1 else ""))
    sub = "recorded on the CPU emulator"
    if tr.blocks > 1 and shown_block is None and any(tr.arrays[tr.array(n)].space == "shared"
                                                     for n in names):
        sub += "; __shared__ arrays: the first block's"
    if tr.error:
        sub += "\nthe launch stopped: " + (tr.oob_sentence() or tr.error.split(";")[0])[:120]
    fig.suptitle(head + "\n" + sub, fontsize=plot.STYLE["axes.titlesize"])
    _legend(fig, tr)
    return fig


def _dims(d) -> str:
    d = tuple(d)
    while len(d) > 1 and d[-1] == 1:
        d = d[:-1]
    return str(d[0]) if len(d) == 1 else "(" + ", ".join(map(str, d)) + ")"


def _layout(info, lo: int, hi: int) -> tuple[int, int, int]:
    """(first element, rows, columns) of the cells drawn for elements lo..hi-1."""
    if len(info.shape) == 2 and info.shape[1] <= 64:
        cols = info.shape[1]
    elif hi - lo <= WRAP:
        cols = min(WRAP // 2, max(1, hi - lo))  # short arrays: wide cells that fit "a→b"
    else:
        cols = min(WRAP, max(1, hi - lo))
    first = (lo // cols) * cols
    rows = max(1, -(-(hi - first) // cols))
    return first, rows, cols


def _span(tr, name, records, max_elements) -> tuple[int, int]:
    """The elements to draw: the whole array, or what the shown records touched (plus any
    out-of-bounds cells), at most ``max_elements``."""
    info = tr.arrays[tr.array(name)]
    r = records[records["array"] == tr.array(name)]
    lo, hi = 0, info.size
    if info.size > max_elements and len(r):
        lo, hi = int(max(0, r["element"].min())), int(min(info.size, r["element"].max() + 1))
        hi = min(hi, lo + max_elements)
    if len(r):
        hi = max(hi, min(int(r["element"].max()) + 1, hi + WRAP))  # room for out-of-bounds cells
        lo = min(lo, max(int(r["element"].min()), lo - WRAP))
    return lo, hi


class _View:
    """Which element each drawn cell is: a run of a flat array wrapped into rows, or a box of
    rows and columns of a matrix too large to draw whole."""

    def __init__(self, tr, name, records, max_elements):
        info = tr.arrays[tr.array(name)]
        r = records[records["array"] == tr.array(name)]
        self.info = info
        big = info.size > max_elements or (len(info.shape) == 2 and info.shape[1] > 64)
        if len(info.shape) == 2 and big and len(r):
            width = info.shape[1]
            rr, cc = r["element"] // width, r["element"] % width
            self.r0, self.c0 = int(rr.min()), int(cc.min())
            self.cols = min(64, int(cc.max()) - self.c0 + 1)
            self.rows = min(max(1, max_elements // self.cols), int(rr.max()) - self.r0 + 1)
            self.width, self.box = width, True
            self.ylabels = [str(self.r0 + y) for y in range(self.rows)]
            self.xlabel0 = self.c0
        else:
            lo, hi = _span(tr, name, records, max_elements)
            self.first, self.rows, self.cols = _layout(info, lo, hi)
            self.box = False
            self.ylabels = [str(self.first + y * self.cols) for y in range(self.rows)]
            self.xlabel0 = 0

    @property
    def cells(self) -> int:
        return self.rows * self.cols

    def cell(self, elements) -> np.ndarray:
        """The cell of each element, -1 where it is not drawn."""
        e = np.asarray(elements, np.int64)
        if self.box:
            y, x = e // self.width - self.r0, e % self.width - self.c0
            ok = (y >= 0) & (y < self.rows) & (x >= 0) & (x < self.cols)
            return np.where(ok, y * self.cols + x, -1)
        c = e - self.first
        return np.where((c >= 0) & (c < self.cells), c, -1)

    def element(self, c: int) -> int:
        y, x = divmod(c, self.cols)
        return (self.r0 + y) * self.width + self.c0 + x if self.box else self.first + c


def _figure(tr, names, records, max_elements):
    heights = []
    for n in names:
        rows = _View(tr, n, records, max_elements).rows
        heights.append(min(rows, 40) * 0.24 + 0.55)
    with matplotlib.rc_context(plot.STYLE):
        fig = AccessFigure(figsize=(9.0, sum(heights) + 1.3), layout="constrained", dpi=DPI)
        axes = fig.subplots(len(names), 1, gridspec_kw={"height_ratios": heights}, squeeze=False)
    return fig, axes[:, 0]


#: Pixels per inch of an access picture in a notebook: cells stay legible, files small.
DPI = 80


class AccessFigure(plot.CourseFigure):
    """An access picture; a notebook shows it as a PNG of at most 256 colours (a few flat
    colours and text: the palette loses nothing visible and the file is a third the size)."""


def _palette_png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    # Octree keeps the few flat colours exact (median cut merged the red of out of bounds).
    image = Image.open(io.BytesIO(buf.getvalue())).convert("RGB").quantize(
        colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def _register_notebook_display() -> None:
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is not None:
        ip.display_formatter.formatters["image/png"].for_type(AccessFigure, _palette_png)


_register_notebook_display()


def _panel(ax, tr: Trace, name: str, records, max_elements: int) -> None:
    idx = tr.array(name)
    info = tr.arrays[idx]
    r = records[records["array"] == idx]
    view = _View(tr, name, records, max_elements)
    rows, cols, ncell = view.rows, view.cols, view.cells
    rgba = np.ones((rows, cols, 4))
    rgba[..., :3] = to_rgb(UNTOUCHED)
    thread = np.full(ncell, -1, np.int64)
    warp = np.zeros(ncell, np.int64)      # the block's warp, numbered across the grid
    reader = np.full(ncell, -1, np.int64)  # the one thread that read it, -1: none or several
    reads = np.zeros(ncell, np.int64)
    writers = np.zeros(ncell, np.int64)
    bad = {"uncoalesced": set(), "conflict": set(), "oob": set()}
    gt = tr.global_thread(r)
    warps_per_block = -(-tr.threads_per_block // 32)
    gw = r["block"].astype(np.int64) * warps_per_block + r["thread"] // 32
    cell = view.cell(r["element"])
    inside = cell >= 0
    # Writes last so that a written cell shows its writer; reads count separately.
    for kind in (0, 2, 1):
        sel = inside & (r["kind"] == kind)
        for c, t, w in zip(cell[sel], gt[sel], gw[sel]):
            if kind == 0:
                reads[c] += 1
                reader[c] = t if reads[c] == 1 or reader[c] == t else -2
                if thread[c] < 0:
                    thread[c], warp[c] = t, w
            else:
                if writers[c] == 0 or kind == 1:
                    thread[c], warp[c] = t, w
                writers[c] += 1
    flag_unc = inside & _uncoalesced(r)
    flag_conf = inside & (r["ways"] > 1)
    flag_oob = inside & r["oob"]
    bad["uncoalesced"] = set(cell[flag_unc].tolist())
    bad["conflict"] = set(cell[flag_conf].tolist())
    bad["oob"] = set(cell[flag_oob].tolist())
    for c in np.flatnonzero(thread >= 0):
        colour = np.array(to_rgb(WARP_COLOURS[warp[c] % len(WARP_COLOURS)]))
        if writers[c] == 0:
            colour = 0.6 + 0.4 * colour  # read only: a light shade of the warp's colour
        rgba[c // cols, c % cols, :3] = colour
    for c in bad["oob"]:
        rgba[c // cols, c % cols, :3] = to_rgb(OUT_OF_BOUNDS)
    # Cells past the array's end that nobody touched are left blank.
    for c in range(ncell):
        e = view.element(c)
        if (e < 0 or e >= info.size) and c not in bad["oob"]:
            rgba[c // cols, c % cols, 3] = 0.0
    ax.imshow(rgba, aspect="auto", interpolation="nearest",
              extent=(-0.5, cols - 0.5, rows - 0.5, -0.5))
    ax.grid(False)
    # Cell borders as two line collections: minor ticks would make hundreds of tick artists.
    ax.vlines(np.arange(0.5, cols - 1, 1), -0.5, rows - 0.5, colors="white", linewidth=0.6)
    ax.hlines(np.arange(0.5, rows - 1, 1), -0.5, cols - 0.5, colors="white", linewidth=0.6)
    xt = range(0, cols, 8 if cols > 16 else 1)
    ax.set_xticks(xt)
    ax.set_xticklabels([str(view.xlabel0 + x) for x in xt])
    step = max(1, rows // 8)
    ax.set_yticks(range(0, rows, step))
    ax.set_yticklabels(view.ylabels[::step], fontsize=7)
    if view.box:
        ax.set_xlabel("column", fontsize=7, labelpad=1)
        ax.set_ylabel("row", fontsize=7, labelpad=1)
    ax.tick_params(axis="x", labelsize=7)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    _outline(ax, bad["uncoalesced"] - bad["oob"], cols, UNCOALESCED)
    _outline(ax, bad["conflict"], cols, CONFLICT)
    if ncell <= 1024 and cols <= 64:
        size = 9 if cols <= 8 else 7.5 if cols <= 16 else 6 if cols <= 32 else 4.5
        for c in np.flatnonzero(thread >= 0):
            y, x = divmod(int(c), cols)
            label = str(thread[c]) + (f"×{reads[c]}" if reads[c] > 1 and cols <= 16 else "")
            if writers[c] and reader[c] >= 0 and reader[c] != thread[c] and ncell <= 128:
                # Written by one thread, read by another: both, on two lines when narrow.
                label = f"{thread[c]}→{reader[c]}" if cols <= 16 else f"{thread[c]}\n→{reader[c]}"
            # Out of the layout: the constrained layout would measure every label.
            ax.text(x, y, label, ha="center", va="center", in_layout=False, linespacing=0.9,
                    fontsize=size if "\n" not in label else min(size, 5.5),
                    color="white" if writers[c] or c in bad["oob"] else "black")
    ax.set_title(_caption(tr, info, r), fontsize=9, loc="left")


def _uncoalesced(r) -> np.ndarray:
    """Global requests that touch at least twice the 32-byte sectors their bytes need: half
    or more of what the memory moves is wasted (a misaligned row costs one sector, not this)."""
    return r["sectors"] >= 2 * np.maximum(r["ideal_sectors"], 1)


def _outline(ax, cells, cols, colour) -> None:
    if not cells:
        return
    segs = []
    for c in sorted(cells):
        y, x = divmod(int(c), cols)
        x0, x1, y0, y1 = x - 0.45, x + 0.45, y - 0.45, y + 0.45
        segs.append([(x0, y0), (x1, y0), (x1, y1), (x0, y1), (x0, y0)])
    ax.add_collection(LineCollection(segs, colors=colour, linewidths=1.6))


def _caption(tr, info, r) -> str:
    kind = {"global": "kernel argument", "shared": "__shared__"}[info.space]
    shape = "x".join(map(str, info.shape))
    wide = _layout(info, 0, info.size)[2] == WRAP
    banks = ", a column per bank" if info.space == "shared" and info.itemsize == 4 and wide else ""
    plural = "s" * (info.size != 1)
    parts = [f"{info.name} ({kind}, {shape} element{plural} of {info.itemsize} B{banks}):"]
    for k, word in enumerate(KIND_NAMES):
        sel = r[r["kind"] == k]
        if len(sel):
            parts.append(f"{len(sel):,} {word}s by {len(np.unique(tr.global_thread(sel))):,} threads")
    if not len(r):
        parts.append("not touched in the part shown")
    notes = []
    req = r[_uncoalesced(r)]
    if len(req):
        notes.append(f"{len(np.unique(req['request']))} uncoalesced requests")
    conf = r[r["ways"] > 1]
    if len(conf):
        notes.append(f"{len(np.unique(conf['request']))} requests with up to "
                     f"{int(conf['ways'].max())}-way bank conflicts")
    oob = r[r["oob"]]
    if len(oob):
        notes.append(f"{len(oob)} out of bounds")
    # The notes on a line of their own: one line of both ran past the figure's right edge.
    return " ".join(parts[:1]) + " " + ", ".join(parts[1:]) + ("\n" + ", ".join(notes) if notes else "")


def _legend(fig, tr) -> None:
    handles = [Patch(color=WARP_COLOURS[0], label="written (colour: its warp)"),
               Patch(color=0.6 + 0.4 * np.array(to_rgb(WARP_COLOURS[0])), label="only read"),
               Patch(facecolor="white", edgecolor=UNCOALESCED, linewidth=1.6,
                     label="uncoalesced (2x the sectors)"),
               Patch(facecolor="white", edgecolor=CONFLICT, linewidth=1.6, label="bank conflict"),
               Patch(color=OUT_OF_BOUNDS, label="out of bounds")]
    fig.legend(handles=handles, loc="outside lower center", ncols=5, fontsize=7.5)


class _CallableModule(types.ModuleType):
    """``gc.draw(...)`` calls :func:`draw`; ``gpucourse.draw`` stays the module."""

    def __call__(self, *args, **kwargs):
        return draw(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
