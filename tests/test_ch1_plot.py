"""Chapter 1's figures on the CPU: the widget views, reference data drawn hollow and labelled,
and the GPU-shaped stride sweep."""
import math

import pytest

from gpucourse.experiments import ch1
from gpucourse.experiments.ch1 import rooflines
from gpucourse.plot import ch1 as plot1


@pytest.fixture(autouse=True)
def _cpu(monkeypatch):
    monkeypatch.setenv("GPUCOURSE_DEVICE", "cpu")


def test_widget_views_draw():
    fig = plot1.copy_view(ch1.copy_explorer(stride=32, block_size=256, gpu="T4"))
    assert "model" in fig.axes[0].get_title()
    fig = plot1.model_views_figure(ch1.model_views("H200", "fp16"))
    assert "H200" in fig.axes[0].get_title()
    assert math.isclose(ch1.model_views("T4")["roofline"]["ceilings"]["bandwidth_Bps"], 320e9)


def test_reference_data_is_drawn_hollow_and_labelled():
    label = "reference: NVIDIA H200, 2026-01-01, `make gpu-check`"
    ref = {"strides": [1, 2, 32], "gbps": [2000.0, 1400.0, 170.0]}
    fig = plot1.stride_figure({"device": "cpu", "strides": [1, 2, 32], "gbps": [4.0, 3.0, 0.5],
                               "ceiling_gbps": 4.0, "model_gbps": [4.0, 2.0, 0.25]},
                              ch1.sector_model("H200", strides=[1, 2, 32]),
                              reference_rows=[(label, ref)])
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert label in labels and "sector model" in labels
    rows = [{"group": "copy kernel on the GPU, 480 MiB", "method": "host timer, no synchronize",
             "seconds": 4e-5, "kind": "measured"}]
    fig = plot1.timing_figure({"device": "cpu", "rows": [
        {"group": "g", "method": "gc.bench: warm-up, median", "seconds": 1e-3, "kind": "measured"}]},
        reference_rows=[(label, rows)])
    assert any(label in t.get_text() for t in fig.axes[0].texts)
    assert "No reference" in ch1.reference_summary() or "measured" in ch1.reference_summary()
    # measured roofline points of the modelled GPU, never of another one
    roof = {"device": "NVIDIA H200", "kind": "measured",
            "points": [{"name": "vector add", "intensity": 1 / 12, "rate": 2.5e11}]}
    cpu = rooflines.cpu_roofline(n=1 << 14, matmul_n=32, min_time_s=0.01)
    fig = plot1.roofline_figure(cpu, ch1.gpu_roofline_model("H200"), reference_rows=[(label, roof)])
    assert f"vector add ({label})" in [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    fig = plot1.roofline_figure(cpu, ch1.gpu_roofline_model("T4"), reference_rows=[(label, roof)])
    assert not any(label in t.get_text() for t in fig.axes[1].get_legend().get_texts())


def test_gpu_stride_figure_shows_every_coalesced_version():
    """The GPU-shaped result (as gpu_stride_sweep returns it) draws one marker per version."""
    strides = [1, 2, 4, 8, 16, 32]
    result = {"device": "a GPU", "strides": strides, "gbps": [2000 / s ** 0.8 for s in strides],
              "ceiling_gbps": 4100.0, "peak_gbps": 4800.0, "model_gbps": [4800 / s for s in strides],
              "coalesced_gbps": 3900.0, "coalesced_kernel": "copy_v3_float4",
              "coalesced_versions": {"copy_v1_coalesced": 2470.0, "copy_v3_float4": 3900.0}}
    fig = plot1.stride_figure(result, ch1.sector_model("H200"), reference_rows=[])
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert any(l.startswith("copy_v1_coalesced (measured") for l in labels)
    assert any(l.startswith("copy_v3_float4 (measured") for l in labels)
    assert "measured copy ceiling (4100 GB/s)" in labels
