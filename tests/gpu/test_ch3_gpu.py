"""Chapter 3 on real GPUs: the same code paths select NCCL, DDP and the pipeline stay exact
on the GPU, and the multi-GPU experiments run when there are two or more GPUs."""
import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

if not torch.cuda.is_available() or torch.cuda.device_count() < 1:
    pytest.skip("no CUDA GPU visible to PyTorch", allow_module_level=True)

import torch.distributed as dist  # noqa: E402

from gpucourse import device  # noqa: E402
from gpucourse.experiments import ch3  # noqa: E402
from gpucourse.experiments.ch3 import pool as ch3_pool  # noqa: E402

if not device.is_cuda():
    pytest.skip("the course runs in CPU mode here (GPUCOURSE_DEVICE=cpu?)", allow_module_level=True)
if not dist.is_nccl_available():
    pytest.skip("this PyTorch has no NCCL", allow_module_level=True)

GPUS = torch.cuda.device_count()
multi = pytest.mark.skipif(GPUS < 2, reason="needs 2 or more GPUs")


@pytest.fixture(scope="module")
def pool():
    with ch3.Workers(GPUS, backend="nccl") as p:
        yield p


def test_nccl_is_chosen_when_every_worker_has_a_gpu():
    assert ch3_pool.choose_backend(GPUS) == "nccl"
    assert ch3_pool.choose_backend(GPUS + 1) == "gloo"
    assert ch3.max_workers() == GPUS


def test_workers_own_one_gpu_each(pool):
    hello = ch3.hello(pool)
    assert [h["device"] for h in hello] == [f"cuda:{r}" for r in range(GPUS)]
    assert all(h["backend"] == "nccl" for h in hello)
    assert all(h["sum_of_ranks"] == GPUS * (GPUS - 1) / 2 for h in hello)
    assert "nccl process group on one GPU each" in pool.describe()


def test_ddp_on_gpus_equals_the_full_batch_gradient(pool):
    assert str(ch3.ddp_check(pool)).startswith(f"DDP gradients on {GPUS} workers match")


def test_ddp_step_is_timed_with_cuda_events(pool):
    s = ch3.ddp_scaling(pool, per_worker=512, samples=3)
    assert s.multi.method == "CUDA events" and s.backend == "nccl"
    assert s.multi.median_s > 0


def test_ddp_timeline_on_gpu(pool):
    tl = ch3.ddp_timeline(pool, bucket_cap_mb=1.0, samples=2)
    names = [n for n, _, _ in tl.events[0]]
    assert "forward" in names and "backward" in names
    assert any(n.startswith("all-reduce") for n in names)
    assert all(b >= a for _, a, b in tl.events[0])


def test_pipeline_stages_on_gpus_are_exact(pool):
    p = ch3.pipeline(pool, microbatches=(1, 4), rows=256, samples=2)
    assert p.stages == GPUS and p.backend == "nccl"
    assert all(v is not None and v > 0 for v in p.peak_bytes)
    assert all(0 <= r.bubble < 1 for r in p.runs)


def test_allreduce_sweep_on_gpus(pool):
    sw = ch3.allreduce_sweep(pool, sizes=[2**12, 2**20, 2**26], samples=3)
    assert len(sw.allreduce) == 3 and all(t.method == "CUDA events" for t in sw.allreduce)


@multi
def test_multi_gpu_allreduce_reaches_a_real_link_bandwidth(pool):
    sw = ch3.allreduce_sweep(pool, sizes=[2**20, 2**28], samples=3)
    assert sw.busbw_GBps[-1] > 5.0  # far above any loopback TCP path: NVLink or PCIe P2P
    assert sw.bandwidth_Bps and sw.latency_s is not None


@multi
def test_multi_gpu_pipeline_gains_from_micro_batches(pool):
    p = ch3.pipeline(pool, microbatches=(1, 8), rows=2048, samples=3)
    assert p.runs[-1].bubble < p.runs[0].bubble


def test_more_workers_than_gpus_fall_back_to_gloo_on_the_cpu():
    with ch3.Workers(GPUS + 1) as p:
        assert p.backend == "gloo"
        assert "no NCCL" in p.describe()
        assert all(h["device"] == "cpu" for h in ch3.hello(p))


@pytest.mark.full_gpu_check
def test_gpu_check_reports_its_thresholds():
    out = ch3.gpu_check()
    assert out["backend"] == "nccl" and out["checks"]["nccl_selected"]["passed"]
    assert out["passed"], out
    if GPUS < 2:
        assert "not measured" in out["multi_gpu"]
