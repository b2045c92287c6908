"""Every figure of the headless report (``python -m gpucourse run``) is readable on its page:
each text at least ``plot.MIN_TEXT_PT`` (9 pt) at the width the page shows the figure. The
page shrinks a PNG wider than ``runner.PAGE_PX`` to that width, and its text with it.

The results are those of one quick run on a two-core CPU (``report_results_cpu.json``: the
``results`` of each chapter of its report.json), so every chapter's figures are drawn without
running the experiments again."""
import importlib
import io
import json
import pathlib

import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from gpucourse import plot, runner  # noqa: E402

RESULTS = json.loads((pathlib.Path(__file__).parent / "report_results_cpu.json").read_text())


def _png_width(fig) -> int:
    """The width in pixels of the PNG the runner writes (``fig.savefig(path)``)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return int.from_bytes(buf.getvalue()[16:20], "big")


def _too_small(fig) -> list[str]:
    """Each text smaller than 9 pt on the page, as 'size pt: text', after drawing it as the
    runner does."""
    scale = min(1.0, runner.PAGE_PX / _png_width(fig))
    return [f"{t.get_fontsize() * scale:.1f} pt: {t.get_text()[:40]!r}"
            for t in fig.findobj(Text)
            if t.get_visible() and t.get_text().strip() and t.get_fontsize() * scale < 9 - 1e-9]


@pytest.mark.parametrize("chapter", sorted(RESULTS))
def test_every_report_figure_has_text_of_at_least_9_pt_at_page_width(chapter):
    figures = importlib.import_module(f"gpucourse.plot.ch{chapter}").figures(RESULTS[chapter])
    assert figures
    small = {name: s for name, fig in figures.items() if (s := _too_small(fig))}
    assert not small, f"text under 9 pt at page width in chapter {chapter}'s figures: {small}"


def test_a_figure_wider_than_the_page_is_narrowed_to_it():
    fig, _ = plot.new_figure(1, 3, figsize=(18, 4))
    assert fig.get_figwidth() == plot.PAGE_WIDTH_IN
    assert _png_width(fig) == runner.PAGE_PX


def test_the_page_scale_and_the_text_it_needs():
    wide = plot.CourseFigure(figsize=(15, 3), dpi=100)   # 1500 px on a 1200 px page
    wide.min_text_pt = plot.MIN_TEXT_PT
    wide.text(0.5, 0.5, "note", fontsize=9)
    assert plot.page_scale(wide) == pytest.approx(0.8)
    assert plot.effective_text_pt(wide) == [(pytest.approx(7.2), "note")]  # before drawing
    assert not _too_small(wide)                           # drawing raised it to 9 / 0.8 pt
    assert plot.effective_text_pt(wide) == [(pytest.approx(9.0), "note")]


def test_figures_that_do_not_ask_for_it_keep_their_sizes():
    """An access picture (``gc.draw``) sizes its cell labels to fit the cells."""
    fig = plot.CourseFigure(figsize=(6, 3))
    fig.text(0.5, 0.5, "7", fontsize=5.5)
    _png_width(fig)
    assert [t.get_fontsize() for t in fig.findobj(Text) if t.get_text() == "7"] == [5.5]
    assert isinstance(fig, Figure)
