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


# --------------------------------------------------------------------------- text drawn as written

# matplotlib reads $...$ as math: "$x_1$" would be typeset, "$^$" stops the figure from drawing.
ODD_NAME = "NVIDIA H200 $x_1$ \\ ^ $^$"


@pytest.fixture
def odd_reference(reference_folder):
    """The shipped reference data, as measured on a GPU whose name holds math-text characters,
    plus a chapter-3 all-reduce and a chapter-5 SGEMM ladder (the shipped file has neither)."""
    import json

    from gpucourse import reference
    from gpucourse.paths import REFERENCE_DIR

    data = json.loads((REFERENCE_DIR / "nvidia_h200.json").read_text(encoding="utf-8"))
    results = data["results"]
    for section in results.values():
        for key in ("device", "gpu"):
            for node in (section, *[v for v in section.values() if isinstance(v, dict)]):
                if key in node and isinstance(node[key], str):
                    node[key] = ODD_NAME
    results["ch3"] = {"allreduce": {"sizes": [2**10, 2**20], "algbw_GBps": [0.5, 80.0],
                                    "busbw_GBps": [0.5, 80.0], "median_s": [2e-6, 1.3e-5]}}
    results["ch5"] = {"sgemm": {"n": 4096, "labels": ["matmul_v1_naive $1$", "ref (cuBLAS)"],
                                "gflops": [500.0, 50000.0], "cublas_gflops": 50000.0},
                      "precision_tflops": {"fp32": 50.0, "bf16": 700.0}, "precision_n": 8192}
    reference.write(results, gpu=ODD_NAME, command="echo $HOME $x$", folder=reference_folder,
                    date="2026-11-29", merge=False)
    assert reference.find("ch1")[0][0].gpu == ODD_NAME
    return results


def _draws_literally(fig, name="figure"):
    """Lay ``fig`` out as a draw does and return every text it shows (tick labels unescaped)."""
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    assert isinstance(fig, Figure), name
    fig.draw_without_rendering()  # math text that fails to parse raises here
    return " ".join(t.get_text().replace("\\$", "$") for t in fig.findobj(Text))


def _reference_figures(results: dict, monkeypatch, only_references: bool = False) -> list[str]:
    """Every chapter's figures that show reference data (from ``results``, the sections the
    reference folder holds), drawn; the texts of each."""
    from gpucourse.bench import Timing
    from gpucourse.experiments import ch1, ch2, ch3, ch4, ch5
    from gpucourse.experiments.ch2 import transpose as ch2_transpose
    from gpucourse.plot import ch0 as p0, ch1 as p1, ch2 as p2, ch3 as p3, ch4 as p4
    from gpucourse.plot import ch5 as p5, ch6 as p6

    from gpucourse.experiments.ch4 import atomics, block_size, reduce_ladder, warp_divergence
    from gpucourse.kernels import reduce as reduce_cu

    for module, name in ((block_size, "check_saxpy"), (warp_divergence, "check_divergence"),
                         (atomics, "check_histogram")):  # kernels: tested elsewhere
        monkeypatch.setattr(module, name, lambda *a, **k: 0)
    r = results
    shown = []

    def timing(label, s, **kw):
        return Timing(label=label, samples_s=[s * 0.98, s, s * 1.02], batch=1, device=ODD_NAME,
                      backend="cuda", method="CUDA events", **kw)

    # chapter 0: labels from data go through the shared ladder and sweep
    figs = {} if only_references else p0.figures({"loop_vs_vectorized": [timing("loop $a$", 1e-2, flops=1e6).to_dict(),
                                              timing("numpy $^$", 1e-4, flops=1e6).to_dict()],
                       "size_sweep": {"sizes": [10, 100], "loop $^$": [1e-5, 1e-4],
                                      "numpy": [1e-6, 2e-6]}})
    shown += [_draws_literally(f, n) for n, f in figs.items()]
    # chapter 1: this device's panels are the reference run's own results where they draw
    # (a CPU run's shape); the other panels overlay the reference data
    shown.append(_draws_literally(p1.timing_figure(
        {"rows": [{"group": "NumPy", "method": "median", "seconds": 1e-3}]})))
    sweep = {"strides": [1, 2], "gbps": [20.0, 10.0], "ceiling_gbps": 30.0, "device": ODD_NAME}
    shown.append(_draws_literally(p1.stride_figure(sweep, ch1.sector_model())))
    shown.append(_draws_literally(p1.roofline_figure(ch1.gpu_roofline_model("H100-SXM", "fp32"),
                                                     ch1.gpu_roofline_model())))
    # chapter 2
    shown.append(_draws_literally(p2.transfer_figure(ch2.transfer_sweep())))
    shown.append(_draws_literally(p2.loop_figure(ch2.loop_timelines(gpu="H200"))))
    cpu = {"tile": 32, "device": ODD_NAME, "timings": [], "conflicts": ch2_transpose.transpose_conflicts(32)}
    shown.append(_draws_literally(p2.transpose_figure(cpu)))
    alloc = {"n": 1 << 20, "device": "CPU: $x$", "allocations": {},
             "timings": [timing("new $x$", 2e-4, bytes=16 << 20).to_dict(),
                         timing("out= $^$", 5e-5, bytes=16 << 20).to_dict()]}
    shown.append(_draws_literally(p2.allocation_figure(alloc)))
    # chapter 3: the all-reduce figure overlays the reference sweep
    sw = ch3.AllReduceSweep(sizes=[2**10, 2**20], allreduce=[timing("ar", 1e-5), timing("ar", 1e-3)],
                            pingpong=[], workers=2, backend="gloo", device="CPU $^$",
                            latency_s=None, bandwidth_Bps=None)
    shown.append(_draws_literally(p3.allreduce(sw)))
    # chapter 4: without a GPU each panel shows the reference run
    sweep = ch4.block_size_sweep(block_sizes=(32, 64, 96, 100, 128, 192, 200, 256, 384, 512,
                                              768, 1024), gpu="H200")
    shown.append(_draws_literally(p4.block_size_figure(ch4.block_size_point(256, sweep))))
    shown.append(_draws_literally(p4.divergence_figure(ch4.divergence(n=1 << 12))))
    shown.append(_draws_literally(p4.histogram_figure(ch4.histogram(n=1 << 12, check_first=False))))
    red = p4.reduction_reference_figure({"versions": list(reduce_cu.VERSIONS),
                                         "reference": reduce_ladder.reduction_references()})
    if not hasattr(red, "savefig"):  # a Note: no reference run has the ladder
        red = p4.reduction_figure({"copy": {"gbps": 30.0, "label": "dot $^$"}, "n": 1 << 20,
                                   "device": ODD_NAME, "cpu_measured": [
                                       timing("numpy.sum $x$", 1e-4, bytes=4 << 20).to_dict()]})
    shown.append(_draws_literally(red))
    # chapter 5
    shown.append(_draws_literally(p5.sgemm_figure(ch5.sgemm_ladder())))
    shown.append(_draws_literally(p5.precision_figure(ch5.precision_model(), None,
                                                      ch5.reference_for())))
    # chapter 6 (its figures are built on the same new_figure)
    amp = r.get("ch6", {}).get("amp")
    if amp and amp.get("rows") and amp.get("speedup_vs_fp32"):
        shown.append(_draws_literally(p6.amp_figure({**amp, "device": ODD_NAME, "backend": "cuda"})))
    return shown


def test_every_chapters_figures_draw_a_gpu_name_with_math_text_characters(odd_reference,
                                                                          monkeypatch):
    from gpucourse.plot import ch1 as p1

    shown = _reference_figures(odd_reference, monkeypatch)
    # this device's panels of chapter 1, with the reference run's results (a GPU's shape)
    r = odd_reference["ch1"]
    shown.append(_draws_literally(p1.timing_figure(r["timing"])))
    shown.append(_draws_literally(p1.stride_figure(r["stride_sweep"])))
    shown.append(_draws_literally(p1.roofline_figure(r["roofline"])))
    shown.append(_draws_literally(p1.transfer_figure(r["transfer"])))
    # The name is drawn as written, wherever it is shown (never typeset as math).
    assert sum(ODD_NAME in text for text in shown) >= 15


def _leaves(node, path=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _leaves(v, path + (i,))
        yield path, node
    else:
        yield path, node


def _set(node, path, value):
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value


@pytest.mark.parametrize("variant", ["smallest", "largest", "empty lists"])
def test_reference_data_at_the_edge_of_what_is_accepted_draws(variant, odd_reference,
                                                              reference_folder, monkeypatch):
    """Every number at the least (0, else 1, else 1e-12 where it must be above 0) or the most a
    reference file may hold, or every list empty: accepted data, so every figure draws."""
    import re

    from gpucourse import reference

    results = odd_reference
    edge = {"smallest": 0, "largest": reference.MAX_NUMBER}.get(variant)
    for path, value in list(_leaves(results)):
        if variant == "empty lists" and isinstance(value, list):
            _set(results, path, [])
        elif edge is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
            _set(results, path, edge)
    # Where the file refuses the edge (a field above 0, lists drawn against one another, a
    # field with its own maximum), the next value it takes, field by field.
    for _ in range(300):
        try:
            reference.validate({"format": reference.FORMAT, "version": 1, "gpu": "G",
                                "date": "2026-01-01", "command": "c", "results": results})
            break
        except reference.ReferenceError as exc:
            path = exc.field[1:]  # below "results"
            node = results
            for p in path[:-1]:
                node = node[p]
            old = node[path[-1]]
            if variant == "empty lists":  # a list that must not be empty, or a row's field
                node[path[-1]] = [1.0] if isinstance(old, list) else 1.0
            elif "at most" in str(exc):
                node[path[-1]] = float(re.search(r"at most (\S+?),", str(exc)).group(1))
            else:
                node[path[-1]] = 1 if old == 0 else 1e-12
    else:
        pytest.fail("no accepted file found")
    reference.write(results, gpu="NVIDIA H200", command="c", folder=reference_folder,
                    date="2026-11-29", merge=False)
    assert reference.find("ch1"), reference.problems(reference_folder)
    _reference_figures(results, monkeypatch, only_references=True)
