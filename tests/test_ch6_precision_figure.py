"""Chapter 6's precision widget: its error panel draws the rounding line of the format chosen
in the dropdown, with the legend under the axis, off the bars."""
import pytest

from gpucourse.plot import ch6 as p6


@pytest.mark.parametrize("chosen, label", [("fp16", "fp16 rounding (2^-11)"),
                                           ("bf16", "bf16 rounding (2^-8)"),
                                           ("tf32", "tf32 rounding (2^-11)"),
                                           ("int8", "int8 half step (max|x| / 254)")])
def test_precision_widget_draws_the_chosen_formats_rounding_line(chosen, label):
    r = {"precision": chosen, "batch": 32}
    for n in ("fp32", chosen):
        r[n] = {"device": "cpu", "median_s": 1e-3, "p20_s": 0.9e-3, "p80_s": 1.1e-3,
                "weights_bytes": 4e6, "rel_error": 1e-3 if n != "fp32" else 0.0, "accuracy": 0.9}
    fig = p6.precision_figure(r)
    ax = fig.axes[2]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [label]
    fig.canvas.draw()
    box = ax.get_legend().get_window_extent()
    assert box.y1 <= ax.get_window_extent().y0  # under the axis, off the bars
