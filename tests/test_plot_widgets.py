import pytest

from gpucourse import bench, plot, widgets


def _timings():
    return bench.Timings([
        bench.Timing("naive", [2e-3, 2.1e-3, 2.2e-3], 1, "cpu", "cpu", "perf_counter", bytes=1e6),
        bench.Timing("fast", [1e-3, 1.1e-3, 1.2e-3], 1, "cpu", "cpu", "perf_counter", bytes=1e6)])


def test_ladder_annotates_percent_of_ceiling(tmp_path):
    fig = plot.ladder(_timings(), metric="gbps", ceiling=1.0, device="test device",
                      reference=[("H200 copy", 1.5, "reference: H200, 2026")])
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert any("(48% of ceiling)" in t for t in texts) and any("(91% of ceiling)" in t for t in texts)
    assert ax.get_xlabel() == "effective bandwidth (GB/s)"
    assert "test device" in ax.get_title()
    assert any("reference" in t.get_text() for t in fig.legends[0].get_texts())
    assert (tmp_path / "l.png").exists() is False
    plot.save(fig, tmp_path / "l.png")
    assert (tmp_path / "l.png").stat().st_size > 1000


def test_ladder_legend_with_a_long_ceiling_label_stays_inside_the_figure():
    # chapter 4's reference ladder: two entries, but a ceiling label of some 80 characters
    fig = plot.ladder([], metric="gbps", ceiling=4000.0, reference=[("reduce_v4", 2162.0, "ref")],
                      ceiling_label="library device-to-device copy (chapter 1's check) on "
                                    "NVIDIA H200 (reference)", ceiling_name="copy")
    fig.canvas.draw()
    box, legend = fig.bbox, fig.legends[0].get_window_extent()
    assert box.x0 <= legend.x0 and legend.x1 <= box.x1
    assert any("2,162" in t.get_text() for t in fig.axes[0].texts)  # not 2.16e+03


def test_ladder_needs_bytes_for_bandwidth():
    t = bench.Timing("x", [1.0], 1, "cpu", "cpu", "perf_counter")
    with pytest.raises(ValueError, match="no bytes"):
        plot.ladder([t], metric="gbps")


def test_sweep_labels_models_and_reference():
    fig = plot.sweep([1, 2, 4], {"measured": [1, 2, 3]}, "stride", "GB/s", "Sweep",
                     ceilings={"peak": 5}, models={"sectors": [3, 2, 1]},
                     reference={"T4, 2026-01-01": ([1, 2], [2, 2])}, device="dev")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "sectors (model)" in labels and "T4, 2026-01-01 (reference)" in labels
    assert "peak" in labels


def test_roofline_and_timeline():
    fig = plot.roofline([("add", 1 / 12, 1e9), ("matmul", 100, 1e11)], 1e12, 1e10,
                        is_model=True, device="dev")
    assert "(model)" in fig.axes[0].get_title()
    fig = plot.timeline([("stream 0", "h2d", 0, 1), ("stream 0", "compute", 1, 2)],
                        is_model=True, device="dev")
    assert fig.axes[0].get_xlabel() == "time (ms)"


def test_explorer_runs_and_reports_unavailable_choices():
    calls = []

    def run(n, precision, progress):
        calls.append((n, precision))
        progress(0.5)
        return n

    w = widgets.explore(run, lambda r: f"result {r}",
                        n=widgets.int_slider(3, 1, 10),
                        precision=widgets.precision_dropdown({"fp32": None, "bf16": "no bf16 here"}))
    assert calls == [(3, "fp32")] and w.result == 3
    w.controls["n"].value = 5
    assert calls[-1] == (5, "fp32") and "ran in" in w.status.value
    w.controls["precision"].value = "bf16"
    assert len(calls) == 2 and "no bf16 here" in w.status.value
    labels = [lab for lab, _ in w.controls["precision"].options]
    assert labels[1] == "bf16 (not available here)"  # short: a long reason is cut off
    assert "bf16: no bf16 here" in w.controls["precision"].tooltip
    assert "still the last one that ran" in w.status.value


def test_explorer_shows_errors_instead_of_raising():
    def run(n):
        raise ValueError("block size 0 is not allowed")
    w = widgets.explore(run, str, n=widgets.block_size_slider())
    assert isinstance(w.error, ValueError) and "block size 0" in w.status.value
    assert 100 in w.controls["n"].options and 48 in w.controls["n"].options


def test_widget_controls_refuse_bad_settings_in_one_sentence():
    from gpucourse import widgets
    from gpucourse.errors import CourseError

    with pytest.raises(CourseError, match="1 <= min <= max"):
        widgets.log2_slider(4096, 0, 8192)  # used to loop for ever
    with pytest.raises(CourseError, match="1000 is not one of the elements options"):
        widgets.log2_slider(1000, 1, 4096, description="elements")
    with pytest.raises(CourseError, match="300 is not one of"):
        widgets.block_size_slider(value=300)
    with pytest.raises(CourseError, match="'c' is not one of"):
        widgets.choice(["a", "b"], value="c")
    with pytest.raises(CourseError, match="at least one option"):
        widgets.precision_dropdown({})
    assert widgets.log2_slider(64, 1, 64).options[-1] == 64


def test_ladder_names_its_metrics():
    with pytest.raises(ValueError, match="not one of 'time', 'gbps', 'gflops'"):
        plot.ladder(_timings(), metric="GFLOPS")


def test_a_widget_can_start_from_a_result_the_notebook_measured():
    calls = []
    ex = widgets.explore(lambda n: calls.append(n) or n * 2, lambda r: f"result {r}", auto=False,
                         initial=14, n=widgets.int_slider(7, 1, 9))
    assert calls == [] and ex.result == 14 and "press Run" in ex.status.value
    ex.update()
    assert calls == [7] and ex.result == 14  # 7 * 2, measured afresh


def test_explorer_sets_its_output_as_base64_png_in_one_update(monkeypatch):
    """No display() captured inside `with output:` (a notebook runner mirrors that back to the
    kernel while it waits for the cell's reply), and the PNG travels as base64 text."""
    import base64

    from IPython.core.formatters import DisplayFormatter
    from matplotlib.figure import Figure

    formatter = DisplayFormatter()  # a notebook's, with the PNG the plot module registers there
    formatter.formatters["image/png"].for_type(Figure, plot._figure_png)
    monkeypatch.setattr(widgets, "_formatter", lambda: formatter)

    def render(r):
        fig, ax = plot.new_figure()
        ax.plot([0, r])
        return fig

    ex = widgets.explore(lambda n=1: n, render, n=widgets.int_slider(1, 1, 3, description="n"))
    [out] = ex.output.outputs
    assert out["output_type"] == "display_data" and out["data"]["text/plain"].startswith("<Figure")
    assert base64.b64decode(out["data"]["image/png"]).startswith(b"\x89PNG")
    assert ex.output.msg_id == ""  # nothing was captured through the output context
    ex.controls["n"].value = 2  # a new result replaces the old one
    assert len(ex.output.outputs) == 1

