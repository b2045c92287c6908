"""The headless report's page: each figure links to its full-size PNG and is shown at its
own width, so that a three-panel figure spans the page and two narrow ones share a row."""
import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402

from gpucourse import runner  # noqa: E402


def test_figures_link_to_their_png_and_keep_their_width(tmp_path):
    for name, inches in (("wide.png", 12), ("narrow.png", 6)):
        Figure(figsize=(inches, 3), dpi=100).savefig(tmp_path / name)
    report = {"date": "2026-01-01", "command": "python -m gpucourse run",
              "device": {"backend": "cpu", "name": "CPU"},
              "chapters": {"1": {"name": "architecture", "figures": ["wide.png", "narrow.png"],
                                 "seconds": 1.0}}}
    page = runner.summary_html(report, tmp_path)
    assert "<a href='wide.png' title='full size'><img src='wide.png'" in page
    assert "width:calc(100.0% - 4px)" in page and "width:calc(50.0% - 4px)" in page
    assert "display:flex;flex-wrap:wrap" in page
