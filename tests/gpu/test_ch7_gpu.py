"""Chapter 7 on a real GPU: the custom operator's CuPy kernels, Triton compiled, a whole step
captured as a CUDA Graph and replayed, the profiler's kernels, and the whole gpu_check."""
import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

from gpucourse.experiments import ch7  # noqa: E402
from gpucourse.experiments.ch7 import checks, triton_fusion  # noqa: E402

CFG = ch7.GPTConfig(seq=128, batch=8)


def test_the_custom_operator_runs_the_course_kernels_on_the_gpu():
    pytest.importorskip("cupy")
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(37, 96, device="cuda", generator=g) * 3
    b = torch.randn(96, device="cuda", generator=g)
    dy = torch.randn(37, 96, device="cuda", generator=g)
    y = torch.ops.gpucourse.bias_gelu(x, b)
    dx = torch.ops.gpucourse.bias_gelu_backward(dy, x, b)
    cpu_y = torch.ops.gpucourse.bias_gelu(x.cpu(), b.cpu())
    cpu_dx = torch.ops.gpucourse.bias_gelu_backward(dy.cpu(), x.cpu(), b.cpu())
    v = (x + b).abs().cpu()
    assert ((y.cpu() - cpu_y).abs() <= 16 * 2.0 ** -24 * (cpu_y.abs() + v)).all()
    assert ((dx.cpu() - cpu_dx).abs() <= 16 * 2.0 ** -24 * dy.abs().cpu() * (1 + v)).all()
    torch.library.opcheck(torch.ops.gpucourse.bias_gelu.default, (x, b))


def test_every_rung_is_checked_on_the_gpu_and_graphs_replay_a_new_batch():
    lad = ch7.run_ladder(CFG, "cuda", min_time_s=0.05)
    rows = {r["rung"]: r for r in lad["rows"]}
    for name, r in rows.items():
        if name == "triton" and triton_fusion.missing_reason():
            continue
        assert "skipped" not in r, (name, r.get("skipped"))
        assert r["check"]["passed"], name
    assert rows["cuda_graphs"]["check"]["replay"]["passed"]
    assert rows["compile"]["kernels"] < rows["sdpa"]["kernels"]
    assert rows["fused_adamw"]["kernels"] < rows["checkpoint"]["kernels"]


def test_a_replay_that_reads_the_old_batch_is_caught():
    t = ch7.Trainer(CFG, ch7.Setup(precision="bf16", attention="sdpa", cuda_graphs=True,
                                   optimizer="fused"), "cuda")
    ch7.check_trainer(t)
    t.capture()

    def rebind(trainer, x, y):
        trainer.x, trainer.y = x, y

    with pytest.raises(AssertionError, match="replayed CUDA Graph"):
        checks.check_replay(t, load=rebind)


def test_sdpa_backends_are_listed_and_flash_memory_is_linear():
    mem = ch7.attention_memory(seqs=(1024, 4096), heads=8, head_dim=64, dev="cuda")
    small, big = mem["rows"]
    assert big["naive"] / small["naive"] > 10 and big["sdpa"] / small["sdpa"] < 6
    assert mem["sdpa_backends"]["available"]["math"] is None


@pytest.mark.full_gpu_check
def test_gpu_check_passes():
    out = ch7.gpu_check()
    failed = {k: c for k, c in out["checks"].items() if not c["passed"]}
    assert not failed, failed
