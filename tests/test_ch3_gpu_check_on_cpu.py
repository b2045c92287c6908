"""Chapter 3's ``gpu_check`` has only run where NCCL and GPUs are: here the same steps run on two
gloo workers (``backend="gloo"``) at small sizes, so that what the function composes (its calls,
keys, threshold records, make gpu-check's printout) is exercised on every machine. Its figures
mean nothing here. The pipeline's gradient check at the GPU's batch size is tested in-process
in test_ch3_bounds.py."""
import pytest

from fakecuda.testing import (assert_jsonable, assert_threshold, thresholds_printed,
                              with_arguments)
from gpucourse.experiments import ch3
from gpucourse.experiments.ch3 import headless  # where gpu_check finds the experiments

SMALL = {"ddp_scaling": {"per_worker": 64, "samples": 2}, "allreduce_sweep": {"samples": 2},
         "pipeline": {"rows": 256, "samples": 1}}


@pytest.fixture(scope="module")
def result():
    mp = pytest.MonkeyPatch()
    try:
        for name, sizes in SMALL.items():
            with_arguments(mp, headless, name, **sizes)
        yield ch3.gpu_check(backend="gloo")
    finally:
        mp.undo()


def test_every_figure_of_two_workers_is_reported(result):
    assert result["backend"] == "gloo" and result["gpus"] == 2 and result["sum_of_ranks_ok"]
    assert set(result["checks"]) == {"nccl_selected", "ddp_exact", "all_reduce_correct",
                                     "scaling_efficiency", "pipeline_speedup"}
    for name, c in result["checks"].items():
        assert_threshold(name, c, yes_no=c["threshold"] is None)
    assert result["checks"]["nccl_selected"]["passed"] is False  # gloo, as asked
    assert len(result["pipeline"]["bubble_measured"]) == 2 and "multi_gpu" not in result
    assert_jsonable(result)


def test_make_gpu_check_prints_one_line_per_threshold(result, capsys):
    lines = thresholds_printed(capsys, {"3": result})
    assert len(lines) == 5 and any("FAIL nccl_selected" in l for l in lines)
