"""Chapter 6 figures from the chapter's own results: every figure draws with titles, figures of
CPU-only experiments name the CPU, legends and notes leave the data visible."""
import json
import math

import pytest

from ch6_support import quick_results
from gpucourse import device
from gpucourse.experiments import ch6
from gpucourse.plot import ch6 as p6


@pytest.fixture(scope="module")
def results():
    return quick_results()


def test_run_all_is_json_ready_and_draws(results):
    json.dumps(results, allow_nan=False)
    figs = p6.figures(results)
    assert set(figs) == {"formats", "gradients", "loss_scaling", "scale_sweep", "amp", "int8"}
    for f in figs.values():
        assert f.axes and all(ax.get_title() for ax in f.axes)


def test_widget_figures_draw():
    sweep = ch6.scale_sweep(log2_scales=(0, 16, 40))
    p6.scale_sweep_figure(sweep, ch6.zeroed_at_scale(16))
    p6.precision_figure(ch6.run_precision("bf16", batch=32, min_time_s=0.01, dev="cpu"))
    p6.gradient_histogram(ch6.gradient_magnitudes())
    assert math.isfinite(ch6.zeroed_at_scale(16)["grad_error"])


def test_cpu_only_figures_name_the_cpu_even_beside_gpu_results(results):
    """The gradient checkpoint always runs on the CPU; on a GPU machine its figures must not
    carry the GPU's name from the other experiments."""
    cpu = device.describe("cpu").short_name
    on_gpu = dict(results, loss_scaling=dict(results["loss_scaling"], device="NVIDIA H200"),
                  amp=dict(results["amp"], device="NVIDIA H200"))
    figs = p6.figures(on_gpu)
    for name in ("gradients", "scale_sweep"):
        assert results[name]["device"] == cpu
        text = " ".join(ax.get_title() for ax in figs[name].axes)
        assert cpu in text and "H200" not in text, name


def _overlaps(fig, ax, artist) -> bool:
    """True when ``artist`` (a legend) covers any bar of ``ax``, in display coordinates."""
    fig.canvas.draw()
    box = artist.get_window_extent()
    return any(box.overlaps(bar.get_window_extent()) for bar in ax.patches)


def test_int8_accuracy_legend_leaves_the_bars_visible(results):
    fig = p6.int8_figure(results["int8"])
    ax = fig.axes[2]
    assert not _overlaps(fig, ax, ax.get_legend())


def test_precision_widget_notes_sit_above_their_error_bars():
    r = ch6.run_precision("int8", batch=32, min_time_s=0.01, dev="cpu")
    ax = p6.precision_figure(r).axes[0]
    tops = {n: (r[n]["p80_s"]) * 1e3 for n in ("fp32", "int8")}
    notes = [t for t in ax.texts if t.get_text().endswith(" ms")]
    assert len(notes) == 2
    for note, n in zip(notes, ("fp32", "int8")):
        assert note.xy[1] >= tops[n] - 1e-12


def test_amp_figure_draws_no_model_marker_on_fp32_whose_ratio_is_one_by_definition():
    r = ch6.amp_training(("fp32", "bf16"), tokens=32, d=64, min_time_s=0.01)
    fig = p6.amp_figure(r, model_gpu="H200")
    [diamonds] = [line for line in fig.axes[1].get_lines() if line.get_marker() == "D"]
    fp32, bf16 = diamonds.get_ydata()
    assert math.isnan(fp32) and bf16 > 1  # the fp32 bar's "1x" note stays clear
