"""Chapter 7 headless: ``python -m gpucourse run --chapter 7`` (the whole ladder, compiled with
Inductor for real: it also fills Inductor's cache that the notebook then loads), its figures
written and looked at, and ``gpu_check`` taking its steps on the CPU."""
import json
import subprocess
import sys

import pytest

from fakecuda.testing import assert_jsonable, assert_threshold, thresholds_printed, with_arguments
from gpucourse.experiments import ch7
from gpucourse.experiments.ch7 import headless, ladder


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("ch7run")
    r = subprocess.run([sys.executable, "-m", "gpucourse", "run", "--chapter", "7", "--out",
                        str(out)], capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return out, json.loads((out / "report.json").read_text())


def test_run_all_climbs_the_whole_ladder_checked(report):
    out, rep = report
    ch = rep["chapters"]["7"]
    assert "error" not in ch, ch.get("traceback")
    rows = {r["rung"]: r for r in ch["results"]["ladder"]["rows"]}
    assert list(rows) == list(ch7.RUNG_NAMES)
    for name, r in rows.items():
        if "skipped" in r:
            assert name in ("cuda_graphs", "triton"), (name, r["skipped"])
            continue
        assert r["check"]["passed"] and r["median_ms"] > 0 and r["tokens_per_s"] > 0, name
        assert r["peak_bytes"] > 0 and r["kernels"] > 0, name
    # torch.compile fuses the blocks' elementwise chains: fewer kernels than the setup before.
    assert rows["compile"]["kernels"] < rows["sdpa"]["kernels"]
    assert rows["checkpoint"]["peak_bytes"] < rows["compile"]["peak_bytes"]
    assert rows["fused_adamw"]["kernels"] < rows["checkpoint"]["kernels"]
    comp = ch["results"]["compile"]
    assert comp["kernels_after"] < comp["kernels_before"] and comp["first_call_s"] > 0


def test_the_figures_are_written(report):
    out, rep = report
    figs = rep["chapters"]["7"]["figures"]
    assert set(figs) == {"ch7_profile.png", "ch7_ladder.png", "ch7_attention_memory.png"}
    for f in figs:
        assert (out / f).read_bytes()[:4] == b"\x89PNG"


def test_the_ladder_figure_names_the_device_and_says_there_is_no_reference(report,
                                                                           reference_folder):
    from gpucourse.plot import ch7 as p7

    _, rep = report
    fig = p7.ladder_figure(rep["chapters"]["7"]["results"]["ladder"])
    texts = " ".join(t.get_text() for t in fig.findobj(lambda o: hasattr(o, "get_text")))
    assert rep["device"]["backend"] == "cpu" and "CPU" in texts
    assert "No GPU reference data for chapter 7 yet" in texts
    assert "% of the naive step" in texts


SMALL = ch7.GPTConfig(seq=32, batch=2)


def test_gpu_check_takes_its_steps_on_the_cpu(monkeypatch, capsys, tmp_path):
    calls = []
    with_arguments(monkeypatch, ladder, "run_ladder", calls, compile_backend="aot_eager",
                   min_time_s=0.01)
    monkeypatch.setattr(headless, "ladder", ladder)
    out = ch7.gpu_check(dev="cpu", cfg=SMALL, seqs=(64, 128))
    assert calls and calls[0].get("min_time_s") == 0.3
    assert set(out["checks"]) == {"ladder_speedup", "sdpa_memory_saving", "compile_fewer_kernels",
                                  "cuda_graphs_replay_checked"}
    for name, c in out["checks"].items():
        assert_threshold(name, c, yes_no=name == "cuda_graphs_replay_checked")
    assert out["passed"] == all(c["passed"] for c in out["checks"].values())
    assert [r["rung"] for r in out["ladder"]] == list(ch7.RUNG_NAMES)
    assert_jsonable(out)
    from gpucourse import reference

    saved = reference.load(reference.write({"ch7": out}, gpu="Test GPU", command="test",
                                           folder=tmp_path))
    assert saved.get("ch7", "ladder")[0]["rung"] == "naive"
    lines = thresholds_printed(capsys, {"7": out})
    assert len(lines) == 4
