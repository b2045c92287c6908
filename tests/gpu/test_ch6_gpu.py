"""Chapter 6 on a real GPU: INT8 kernels, FP16 loss scaling, autocast speed and memory."""
import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

from gpucourse.check import ch6 as c6  # noqa: E402
from gpucourse.experiments import ch6  # noqa: E402
from gpucourse.experiments.ch6 import int8  # noqa: E402

CC = torch.cuda.get_device_capability() if torch.cuda.is_available() else (0, 0)


def test_availability_matches_the_device():
    a = ch6.precision_availability("cuda")
    assert a["fp32"] is None
    assert (a["bf16"] is None) == (CC >= (8, 0))
    assert (a["tf32"] is None) == (CC >= (8, 0))


def test_int8_linear_on_gpu_matches_fp32():
    if ch6.precision_availability("cuda")["int8"]:
        pytest.skip("torch._int_mm does not run on this GPU")
    torch.manual_seed(0)
    for rows, fin, fout in ((1, 13, 7), (5, 64, 10), (300, 1000, 520)):
        lin = torch.nn.Linear(fin, fout).cuda()
        x = torch.randn(rows, fin, device="cuda")
        with torch.no_grad():
            ref = lin(x)
            for mode in ("dynamic", "weight-only"):
                err = float((int8.Int8Linear(lin, mode)(x) - ref).norm() / ref.norm())
                assert err < 0.03, (rows, fin, fout, mode, err)


def test_int8_gemm_reference_answer_on_gpu():
    a = torch.randn(64, 256, device="cuda")
    b = torch.randn(256, 40, device="cuda")
    got = c6.reference_int8_matmul(a.cpu(), b.cpu())
    ref = a.cpu() @ b.cpu()
    assert float((got - ref).norm() / ref.norm()) < 0.02


def test_loss_scaling_on_gpu():
    r = ch6.loss_scaling(steps=60, dev="cuda")
    assert r["max_zeroed_unscaled"] > 0.05
    assert all(r["scaled_match"].values()), r["max_rel_gap"]


def test_amp_speed_and_memory():
    r = ch6.amp_training(("fp32", "bf16", "fp16"), min_time_s=0.2, dev="cuda")
    rows = {row["precision"]: row for row in r["rows"] if "skipped" not in row}
    assert rows["fp16"]["activations_MB"] < rows["fp32"]["activations_MB"]
    if CC >= (8, 0):
        assert r["speedup_vs_fp32"]["bf16"] >= 2.0, r["speedup_vs_fp32"]
    if CC >= (7, 0):
        assert r["speedup_vs_fp32"]["fp16"] >= 2.0, r["speedup_vs_fp32"]


def test_run_precision_every_available_choice():
    for p, reason in ch6.precision_availability("cuda").items():
        if reason:
            continue
        r = ch6.run_precision(p, batch=256, min_time_s=0.02, dev="cuda")
        assert r[p]["rel_error"] < 0.05 and r[p]["peak_bytes"] > 0


@pytest.mark.full_gpu_check
def test_gpu_check_runs_and_passes():
    r = ch6.gpu_check()
    failed = {k: c for k, c in r["checks"].items() if not c["passed"]}
    assert not failed, failed
