"""Chapter 1's architecture diagram is readable: no text under 8 pt, and every label inside
the box drawn for it."""
from gpucourse import specs
from gpucourse.plot import ch1 as fig1


def test_the_architecture_diagram_text_is_at_least_8_pt_and_fits_its_boxes():
    for gpu in ("H100-SXM", "T4"):
        fig = fig1.architecture_figure(specs.lookup(gpu))
        ax = fig.axes[0]
        fig.canvas.draw()
        renderer = fig._get_renderer()
        texts = [t for t in ax.texts if t.get_text().strip() and t.get_text() != "…"]
        assert texts and min(t.get_fontsize() for t in texts) >= 8
        boxes = [p.get_window_extent() for p in ax.patches if p.get_width() < 60]
        for t in texts:
            tb = t.get_window_extent(renderer)
            holder = [b for b in boxes if b.contains(*tb.get_points().mean(axis=0))]
            if holder:  # a label drawn on a box lies inside the smallest box around it
                b = min(holder, key=lambda b: b.width * b.height)
                assert tb.x0 >= b.x0 - 1 and tb.x1 <= b.x1 + 1, (gpu, t.get_text())
