"""Chapter 2's transfer figure keeps its legend off the link-peak line (under the axis)."""
from gpucourse.plot import ch2 as fig2

MiB = 2**20


def test_the_transfer_legend_leaves_the_link_peak_line_visible():
    sizes = [64 * 2**10, MiB, 64 * MiB, 256 * MiB]
    sweep = {"kind": "measured", "device": "NVIDIA H200", "gpu": "NVIDIA H200 SXM", "sizes": sizes,
             "link_peak_gbps": 63.0, "model": {"pageable": [5, 20, 26, 27], "pinned": [9, 40, 52, 53]},
             "series": {"pageable (torch)": [4, 6, 7, 6], "pinned (torch)": [8, 40, 54, 55]}}
    ref = [("reference: NVIDIA H200, 2026-11-29, `make gpu-check`", sweep)]
    fig = fig2.transfer_figure(sweep, reference_rows=ref)
    ax = fig.axes[0]
    legend = ax.get_legend() or fig.legends[0]
    fig.canvas.draw()
    box = legend.get_window_extent()
    peak_y = ax.transData.transform((sizes[0], 63.0))[1]
    inside = ax.get_window_extent()
    assert not (box.y0 <= peak_y <= box.y1 and box.x0 < inside.x1 and box.x1 > inside.x0)
