"""Chapter 2's figures on the CPU: the GPU and reference-data branches of every figure, and
the bank map's legends."""
from gpucourse.bench import Timing
from gpucourse.experiments import ch2
from gpucourse.experiments.ch2 import loops, transpose
from gpucourse.plot import ch2 as fig2

MiB = 2**20


def _timing(label, seconds, nbytes=None, size=None, device="NVIDIA H200"):
    return Timing(label=label, samples_s=[seconds * f for f in (0.98, 1.0, 1.02)], batch=1,
                  device=device, backend="cuda", method="CUDA events", bytes=nbytes,
                  size=size).to_dict()


def test_gpu_and_reference_branches_of_the_figures():
    sizes = [64 * MiB, 256 * MiB]
    sweep = {"kind": "measured", "device": "NVIDIA H200", "gpu": "NVIDIA H200 SXM", "sizes": sizes,
             "link_peak_gbps": 63.0, "model": {"pageable": [26, 27], "pinned": [52, 53]},
             "series": {"pageable (torch)": [7, 6], "pinned (torch)": [54, 55], "pinned (CuPy)": [55, 55]}}
    ref = [("reference: NVIDIA H200, 2026-11-29, `make gpu-check`", sweep)]
    f = fig2.transfer_figure(sweep, reference_rows=ref)
    labels = [t.get_text() for t in f.axes[0].get_legend().get_texts()]
    assert any("measured" in t for t in labels) and any("model" in t for t in labels)
    assert any("reference: NVIDIA H200" in t for t in labels)
    cpu = {"tile": 32, "device": "CPU", "timings": [], "conflicts": transpose.transpose_conflicts(32)}
    gbps = {"copy (copy.cu)": 2500.0, "tile copy (tile_copy.cu)": 3500.0, "naive": 500.0,
            "shared tile": 1600.0, "padded tile": 3300.0}
    f = fig2.transpose_figure(cpu, reference_rows=[(ref[0][0], {"gbps": gbps})])
    assert "reference: NVIDIA H200" in f.axes[0].get_title()
    gpu = dict(cpu, timings=[_timing(k, 2 * MiB / (v * 1e9), 2 * MiB) for k, v in gbps.items()])
    f = fig2.transpose_figure(gpu)
    assert any("tile copy" in t.get_text() for t in f.axes[0].get_legend().get_texts())
    tl = ch2.loop_timelines(gpu="H200")
    meas = [_timing(name, 0.02 * (i + 1), size=16) for i, name in enumerate(tl["versions"])]
    assert len(fig2.loop_figure(tl, meas).axes) == 4
    # a reference run of the same loop sits beside the model; one of another loop does not
    per_step = {name: {"per_step_ms": 2.5 * v["per_step_ms"]} for name, v in tl["versions"].items()}
    same = {**per_step, "gpu": "NVIDIA H200", "config": dict(loops.GPU_LOOP_CONFIG)}
    other = {**same, "config": {**same["config"], "batch": 1024}}
    label = "reference: NVIDIA H200, 2026-11-29"
    f = fig2.loop_figure(tl, reference_rows=[(label, same)])
    assert len(f.axes) == 4 and label in f.axes[-1].get_legend_handles_labels()[1]
    assert any("2.5x the model" in t.get_text() for t in f.axes[-1].texts)
    assert len(fig2.loop_figure(tl, reference_rows=[(label, other)]).axes) == 3
    alloc = {"n": 1 << 20, "device": "NVIDIA H200", "allocations": {},
             "timings": [_timing("CuPy: new arrays, pool OFF", 2e-4, 16 * MiB),
                         _timing("CuPy: out= buffer", 5e-5, 16 * MiB)]}
    assert fig2.allocation_figure(alloc).axes[0].get_xlabel() == "median time per call (ms)"
    # the GPU versions of a reference run sit beside a CPU run, never beside that GPU's own run
    ref = [(label, {"n": 1 << 22, "gpu": "NVIDIA H200", "median_ms": {"CuPy: out= buffer": 0.05}})]
    assert len(fig2.allocation_figure(alloc, reference_rows=ref).axes) == 1
    f = fig2.allocation_figure({**alloc, "device": "CPU: test"}, reference_rows=ref)
    assert len(f.axes) == 2 and label in f.axes[1].get_title()
    bars = fig2.transfer_bars({**ch2.transfer_at(MiB, gpu="H200"),
                               "measured": {"pinned": {"time_s": 3e-5, "gbps": 35.0}}})
    assert len(bars.axes[0].get_yticklabels()) == 3
    assert fig2.bank_map(ch2.transpose_config(32, True)).axes[1].get_ylabel() == "distinct words requested"


def test_bank_map_legends_sit_below_the_panels():
    """At tile 16 with padding the column read reaches banks 27-31 at lanes 11-15: a legend in
    the upper left corner hid them."""
    fig = fig2.bank_map(ch2.transpose_config(16, True))
    fig.canvas.draw()
    for ax in fig.axes:
        legend = ax.get_legend().get_window_extent()
        assert legend.y1 <= ax.get_window_extent().y0, ax.get_title()
