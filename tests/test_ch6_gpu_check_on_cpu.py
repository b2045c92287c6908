"""Chapter 6's ``gpu_check`` runs PyTorch on CUDA, which the fake CuPy does not cover: here the
same steps run on the CPU (``dev="cpu"``) at small sizes, so that what the function composes
(its calls, keys and threshold records, and make gpu-check's printout of them) is exercised
without a GPU. The figures mean nothing on the CPU; no test looks at them or at a verdict."""
import pytest

from fakecuda.testing import (assert_jsonable, assert_threshold, finite, thresholds_printed,
                              with_arguments)
from gpucourse.experiments import ch6
from gpucourse.experiments.ch6 import headless

# gpu_check's GPU-sized calls, made small for the CPU (bf16 matmuls are slow on AVX2 cores)
SMALL = {"int8_inference": {"batch": 64, "hidden": 64}, "int8_gemm": {"m": 64, "k": 64, "n": 64},
         "alignment": {"n": 64}, "bf16_vs_fp16_matmul": {"n": 64}, "loss_scaling": {"steps": 20}}
TIMED = ("amp_training", "loss_scaling", "int8_inference", "int8_gemm", "alignment",
         "bf16_vs_fp16_matmul")


@pytest.fixture(scope="module")
def result():
    mp = pytest.MonkeyPatch()
    calls = {name: [] for name in TIMED}
    try:
        for name in TIMED:
            with_arguments(mp, headless, name, calls[name], **SMALL.get(name, {}), min_time_s=0.01)
        out = ch6.gpu_check(dev="cpu")
        yield out, [(name, kw.get("dev")) for name, kws in calls.items() for kw in kws]
    finally:
        mp.undo()


def test_every_step_runs_on_the_device_it_is_given(result):
    out, seen = result
    assert sorted(name for name, _ in seen) == sorted(TIMED)
    assert {dev for _, dev in seen} == {"cpu"}


def test_it_reports_the_four_thresholds_as_records(result):
    out, _ = result
    assert set(out["checks"]) == {"bf16_autocast_speedup", "fp16_scaled_matches_fp32",
                                  "fp16_unscaled_loses_gradients", "int8_gemm_faster_than_bf16"}
    for name, c in out["checks"].items():
        assert_threshold(name, c)
    assert out["passed"] == all(c["passed"] for c in out["checks"].values())


def test_its_figures_are_numbers_and_the_result_saves_as_reference_data(result):
    out, _ = result
    assert finite(out["int8_gemm"]["int8_rel_error"]) and out["int8_gemm"]["shape"] == [64, 64, 64]
    assert set(out["alignment_tflops"]) == {"64", "63"}
    assert set(out["int8"]) == {"batch", "hidden", "rows", "int8_speedup", "accuracy_drop",
                                "size_ratio"}
    assert "fp32" in out["amp"]["speedup_vs_fp32"]
    assert_jsonable(out)


def test_make_gpu_check_prints_one_line_per_threshold(result, capsys):
    out, _ = result
    lines = thresholds_printed(capsys, {"6": out})
    assert len(lines) == 4 and all(" (limit at " in l or " (limit more than " in l for l in lines)
