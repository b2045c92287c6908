"""Chapter 5 experiments on the CPU at small sizes: every kernel and library path is checked,
results have the documented shape, ratios (never absolute times) go the expected way."""
import json
import pathlib
import re

import numpy as np
import pytest
from matplotlib.figure import Figure

import gpucourse as gc
from gpucourse.errors import DeviceError, PrecisionError
from gpucourse.experiments import ch5
from gpucourse.experiments.ch5 import kernel_fusion, sgemm, sparse, tensor_cores
from gpucourse.kernels import matmul
from gpucourse.paths import KERNEL_DIR
from gpucourse.plot import ch5 as p5

pytestmark = pytest.mark.skipif(gc.device.is_cuda(), reason="CPU-path tests")


# --------------------------------------------------------------------------- matmul.cu

@pytest.mark.cpu_check
def test_every_matmul_version_is_right_on_the_emulator():
    table = ch5.check_matmul()
    assert len(table.rows) == len(sgemm.CHECK_SHAPES)
    assert table.columns[1:] == [v.replace("matmul_", "") for v in matmul.VERSIONS]


def test_matmul_versions_pass_the_race_check():
    ch5.check_matmul(shapes=((31, 33, 17), (64, 132, 36)), race_check=True)


@pytest.mark.parametrize("defines", [{"TILE": 16}, {"BM": 64, "BN": 128, "BK": 8},
                                     {"BM": 128, "BN": 64, "BK": 16}])
def test_tile_defines_are_honoured(defines):
    mod = matmul.load(defines)
    A = gc.check.random_array((37, 44), seed=1)
    B = gc.check.random_array((44, 136), seed=2)
    ref = A.astype(np.float64) @ B
    for v in ("matmul_v3_shared", "matmul_v5_2d_blocking", "matmul_v6_vectorized"):
        C = matmul.run(v, A, B, module=mod, defines=defines)
        gc.check.assert_close(C, ref, *matmul.tolerance(A, B), name=f"{v} {defines}")


def test_a_missing_barrier_is_caught():
    src = (KERNEL_DIR / "matmul.cu").read_text()
    start = src.index("void matmul_v3_shared")
    end = src.index("// ---", start)
    body = src[start:end]
    broken = src[:start] + body.replace("__syncthreads();  // nobody overwrites", "//", 1) + src[end:]
    mod = gc.kernels.from_source(broken, name="matmul_broken", backend="cpu")
    A = gc.check.random_array((40, 70), seed=3)
    B = gc.check.random_array((70, 33), seed=4)
    with pytest.raises(AssertionError):
        C = matmul.run("matmul_v3_shared", A, B, module=mod)
        gc.check.assert_close(C, A.astype(np.float64) @ B, *matmul.tolerance(A, B))


def test_reuse_model_falls_down_the_ladder():
    m = ch5.reuse_model()
    g = m["global_bytes_per_fma"]
    assert g[0] == pytest.approx(33.0) and g[1] == pytest.approx(5.0)
    assert all(a >= b for a, b in zip(g, g[1:]))
    s = m["shared_loads_per_fma"]
    assert s[2] == 2.0 and s[-1] == pytest.approx(1 / 16) and s[-2] == pytest.approx(0.25)


def test_sgemm_ladder_on_the_cpu_says_where_its_numbers_come_from():
    res = ch5.sgemm_ladder()
    assert res["source"] in ("reference", "none")
    if res["source"] == "none":
        assert "make gpu-check" in res["note"]
    assert isinstance(p5.sgemm_figure(res), Figure)
    str(ch5.sgemm_summary(res))


def test_cpu_ladder_blas_beats_python_loops():
    t = ch5.cpu_ladder(n=64, n_python=16, min_time_s=0.01)
    by = [x.gflops for x in t]
    assert len(t) == 4 and all(g > 0 for g in by)
    assert by[-1] > 10 * by[0]  # BLAS vs interpreted loops: thousands of times in practice
    assert ch5.matmul_size_point(32, min_time_s=0.01)[0].label.startswith("Python loops")
    assert len(ch5.matmul_size_point(128, min_time_s=0.01)) == 3


def test_cpu_threads_restores_the_thread_count():
    import torch

    before = torch.get_num_threads()
    with gc.bench.cpu_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


# --------------------------------------------------------------------------- conv

@pytest.mark.cpu_check
def test_conv_versions_agree_and_are_timed():
    cfg = {"batch": 2, "channels": 4, "size": 9, "out_channels": 6, "kernel": 3}
    res = ch5.conv_ladder(cfg, min_time_s=0.01)
    assert [t.label.split(" ")[0] for t in res["timings"]] == ["loop", "unfold", "conv2d"]
    assert res["im2col_bytes"] == 2 * 4 * 9 * 81 * 4
    assert isinstance(p5.conv_figure(res), Figure)
    with pytest.raises(DeviceError):
        ch5.cudnn_benchmark_mode()


@pytest.mark.cpu_check
def test_cudnn_benchmark_mode_checks_then_times_both_modes_on_the_cpu_stand_in():
    """Its GPU run is the only other caller: the same steps on the CPU, where the switch does
    nothing (so no figure is looked at), at awkward shapes with a stride."""
    import torch

    before = torch.backends.cudnn.benchmark
    res = ch5.cudnn_benchmark_mode(shapes=((2, 5, 6, 13, 3, 1), (1, 3, 4, 21, 7, 2)),
                                   min_time_s=0.01, dev="cpu")
    assert torch.backends.cudnn.benchmark == before  # the switch is put back
    assert [r["shape"] for r in res["rows"]] == ["2×5×13×14, 6 filters 3×3, stride 1",
                                                 "1×3×21×22, 4 filters 7×7, stride 2"]
    for r in res["rows"]:
        assert all(r[k] > 0 for k in ("first_call_off_s", "first_call_on_s", "steady_off_s",
                                      "steady_on_s", "speedup"))
    assert res["rows"][1]["flops"] == 2.0 * 1 * 4 * 3 * 49 * 11 * 11
    assert res["device"].startswith("CPU")
    assert "first call ms" in str(ch5.cudnn_table(res))


# --------------------------------------------------------------------------- sparse

def test_crossover_interpolates_on_log_axes():
    d = [0.01, 0.1, 1.0]
    assert sparse.crossover_density(d, [1.0, 5.0, 50.0], 10.0) == pytest.approx(0.1 * 10 ** (np.log(2) / np.log(10)))
    assert sparse.crossover_density(d, [20.0, 30.0, 40.0], 10.0) is None  # sparse never wins
    assert sparse.crossover_density(d, [1.0, 2.0, 3.0], 10.0) is None     # sparse always wins


@pytest.mark.cpu_check
def test_sparse_sweep_checks_and_finds_a_crossover_or_says_why():
    s = ch5.sparse_sweep(n=256, k=16, densities=(0.002, 0.05, 0.6), min_time_s=0.01)
    assert len(s["sparse_s"]) == 3 and s["dense_s"] > 0
    assert s["nnz"][0] < s["nnz"][1] < s["nnz"][2]
    text = ch5.crossover_text(s)
    assert ("beats dense" in text) == (s["crossover"] is not None)
    assert isinstance(p5.sparse_figure(s, point=0.05), Figure)
    pt = ch5.sparse_point(0.05, n=128, k=8, min_time_s=0.01)
    assert [t.label.split(" ")[0] for t in pt] == ["dense", "CSR"]
    p5.sparse_point_figure(pt)


def test_sparse_matrix_density():
    S = sparse.sparse_matrix(300, 0.1, seed=2)
    assert 0.08 < np.count_nonzero(S) / S.size < 0.12
    assert len(np.unique(S[S != 0])) > 100  # random values, not all equal


# --------------------------------------------------------------------------- fusion

def test_fusion_counts_bytes_and_checks_versions():
    res = ch5.fusion(n=(1 << 15) + 3, use_compile=False, min_time_s=0.01)
    assert res["bytes"] == {"unfused": 40 * res["n"], "fused": 8 * res["n"]}
    labels = [t.label for t in res["timings"]]
    assert labels == ["eager: 5 ops, 5 new tensors", "5 ops into one buffer"]
    assert res["compile_s"] is None and res["speedup"] == {}
    str(ch5.fusion_table(res))
    fig = p5.fusion_figure(res)
    assert isinstance(fig, Figure)
    # each time's note starts past its error bar, inside the axes
    notes = [t for t in fig.axes[0].texts if t.get_text().endswith(" ms")]
    assert len(notes) == len(res["timings"])
    for note, t in zip(notes, res["timings"]):
        assert t.p80_s * 1e3 - 1e-12 <= note.xy[0] < fig.axes[0].get_xlim()[1]


@pytest.mark.cpu_check
def test_chain_versions_match_the_reference():
    import torch

    x = gc.check.random_array(1001, seed=5)
    ref = kernel_fusion.chain_numpy(x)
    t = torch.from_numpy(x)
    for y in (kernel_fusion.chain_eager(t), kernel_fusion.chain_into(t, torch.empty_like(t)),
              kernel_fusion.chain_fused_into(t, torch.empty_like(t))):
        gc.check.assert_close(y.numpy(), ref, rtol=1e-5, atol=1e-5)
    assert (x < -0.17).any() and (x > 0).any()  # ReLU cuts some values


# --------------------------------------------------------------------------- precision

def test_precision_availability_on_the_cpu():
    av = ch5.precision_availability()
    assert av["fp32"] is None and "tensor cores" in av["tf32"]
    with pytest.raises(PrecisionError, match="tf32 does not run here"):
        tensor_cores.matmul_throughput("tf32", n=64)
    with pytest.raises(PrecisionError, match="not one of"):
        tensor_cores.matmul_throughput("fp8", n=64)
    dd = gc.widgets.precision_dropdown(av)
    assert "tf32" in dd.unavailable


@pytest.mark.cpu_check
def test_precision_sweep_measures_what_runs_and_lists_the_rest():
    res = ch5.precision_sweep(n=64, precisions=("fp32", "tf32", "bf16"), min_time_s=0.01)
    assert [t.label for t in res["timings"]] == ["fp32", "bf16"]
    assert "tf32" in res["skipped"]
    assert res["timings"][1].meta["rel_err"] > res["timings"][0].meta["rel_err"]  # bf16 rounds more
    str(ch5.precision_table(res))
    pt = ch5.precision_point("fp32", 64, min_time_s=0.01)
    assert pt["model_gpu"] == gc.specs.lookup(gc.specs.DEFAULT_GPU).name
    p5.precision_point_figure(pt)


def test_precision_model_reaches_the_peaks_for_large_matrices():
    m = ch5.precision_model("H200")
    assert set(m["tflops"]) == {"fp32", "tf32", "fp16", "bf16"}
    for p, ys in m["tflops"].items():
        assert ys[-1] == pytest.approx(m["peak_tflops"][p], rel=1e-3)  # compute-bound at 16384
        assert ys[0] < 0.5 * m["peak_tflops"][p]  # small: the launch (and memory) dominate
    assert m["peak_tflops"]["bf16"] > 10 * m["peak_tflops"]["fp32"]
    # A 64^3 fp16 matmul is no 5 ns job: its 3 µs launch keeps it far below the peak.
    tiny = ch5.precision_model("H200", sizes=(64,))["tflops"]["fp16"][0]
    assert tiny == pytest.approx(2 * 64**3 / (3e-6 + 2 * 64**3 / 989.5e12) / 1e12, rel=0.05)
    fig = p5.precision_figure(m, reference=[{"label": "reference: NVIDIA H200, 2026-01-01, `x`",
                                             "value": {"precision_tflops": {"bf16": 700.0},
                                                       "precision_n": 8192}}])
    assert isinstance(fig, Figure)


def test_percent_of_peak():
    assert tensor_cores.percent_of_peak(67e12, 1.0, "H200", "fp32") == pytest.approx(100.0)


# --------------------------------------------------------------------------- headless

def test_figures_draw_run_all_shaped_results():
    """figures() takes JSON-ready results like run_all's (built here at small sizes)."""
    res = {"cpu_ladder": [t.to_dict() for t in ch5.cpu_ladder(n=32, n_python=8, min_time_s=0.005)],
           "sgemm": ch5.sgemm_ladder(), "reuse_model": ch5.reuse_model()}
    conv = ch5.conv_ladder({"batch": 1, "channels": 2, "size": 6, "out_channels": 3, "kernel": 3},
                           min_time_s=0.005)
    res["conv"] = {**conv, "timings": [t.to_dict() for t in conv["timings"]]}
    res["sparse"] = ch5.sparse_sweep(n=64, k=4, densities=(0.01, 0.5), min_time_s=0.005)
    fu = ch5.fusion(n=1000, use_compile=False, min_time_s=0.005)
    res["fusion"] = {**fu, "timings": [t.to_dict() for t in fu["timings"]], "copy": fu["copy"].to_dict()}
    pr = ch5.precision_sweep(n=32, precisions=("fp32",), min_time_s=0.005)
    res["precision"] = {**pr, "timings": [t.to_dict() for t in pr["timings"]]}
    res["precision_model"] = ch5.precision_model()
    json.dumps(res)
    figs = p5.figures(res)
    assert set(figs) == {"cpu_ladder", "sgemm", "reuse_model", "conv", "sparse", "fusion", "precision"}
    assert all(isinstance(f, Figure) for f in figs.values())


def test_the_package_exports_what_the_notebook_the_lab_and_the_tools_call():
    root = pathlib.Path(__file__).resolve().parent.parent
    used = {"run_all", "gpu_check"}  # the headless runner and make gpu-check
    for nb in ("notebooks/05_accelerated_libraries.ipynb", "solutions/05_accelerated_libraries_lab.ipynb"):
        for cell in json.loads((root / nb).read_text())["cells"]:
            if cell["cell_type"] == "code":
                used |= set(re.findall(r"\bch5\.(\w+)", "".join(cell["source"])))
    assert sorted(ch5.__all__) == sorted(used)
    assert all(hasattr(ch5, name) for name in used)


def test_gpu_check_needs_a_gpu():
    with pytest.raises(DeviceError, match="needs a CUDA GPU"):
        ch5.gpu_check()


def _fake_gpu_check() -> dict:
    """The shape gpu_check() returns (numbers made up for the test, not shown to anyone)."""
    labels = list(matmul.VERSIONS) + ["ref (cuBLAS, cupy.matmul)"]
    gflops = [500.0, 6000.0, 9000.0, 16000.0, 30000.0, 40000.0, 50000.0]
    return {"sgemm": {"n": 4096, "labels": labels, "gflops": gflops, "median_s": [1.0] * 7,
                      "cublas_gflops": 50000.0, "peak_gflops": 67000.0,
                      "best": "matmul_v6_vectorized", "best_pct_of_cublas": 80.0, "configs": {}},
            "precision_tflops": {"fp32": 50.0, "tf32": 400.0, "fp16": 740.0, "bf16": 770.0},
            "precision_n": 8192}


def test_reference_data_is_drawn_and_labelled(reference_folder):
    from gpucourse import reference

    reference.write({"ch5": _fake_gpu_check()}, gpu="NVIDIA H200", command="make gpu-check",
                    folder=reference_folder, date="2026-01-02")
    res = ch5.sgemm_ladder()
    assert res["source"] == "reference" and res["reference"][0]["gpu"] == "NVIDIA H200"
    table = ch5.sgemm_summary(res)
    assert table[-2]["version"] == "matmul_v6_vectorized" and table[-2]["% of cuBLAS"] == "80.0%"
    fig = p5.sgemm_figure(res)
    assert "reference" in fig.axes[0].get_title()
    refs = ch5.reference_for()
    assert refs and refs[0]["value"]["precision_n"] == 8192
    fig = p5.precision_figure(ch5.precision_model(), None, refs)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert any("2026-01-02" in lab and "H200" in lab for lab in labels)


def test_a_matrix_size_below_one_is_one_sentence():
    from gpucourse.errors import LaunchError

    with pytest.raises(LaunchError, match="must be at least 1"):
        ch5.matmul_size_point(0)


def test_a_density_outside_0_1_is_one_sentence():
    from gpucourse.errors import InputError

    for bad in (5, -0.1, float("nan"), 0, "0.1"):
        with pytest.raises(InputError, match="use a fraction above 0 and at most 1 .e.g. 0.01, 1 % "
                                             "non-zeros"):
            ch5.sparse_point(bad)
    with pytest.raises(InputError, match="density=2"):  # the sweep too, before it times anything
        ch5.sparse_sweep(densities=(0.1, 2))


def test_a_fusion_or_matmul_size_that_is_not_a_whole_number_is_one_sentence():
    from gpucourse.errors import InputError

    with pytest.raises(InputError, match="n=-1: use a whole number of at least 1"):
        ch5.fusion(n=-1)
    with pytest.raises(InputError, match="n='512'"):
        ch5.precision_point("fp32", "512")
