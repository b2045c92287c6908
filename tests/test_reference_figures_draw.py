"""Every chapter's figures drawn from reference data at the edges of what a reference file may
hold: a GPU name with math-text characters, the smallest and largest numbers and empty lists.
What they draw comes from the given data and the models, so the CPU matrix leaves them to
`make test` (tests/matrix_scope.py, marker ``tooling``)."""
import pytest


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
