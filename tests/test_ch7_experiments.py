"""Chapter 7 on the CPU: the model, each rung's check (which must fail on a deliberately broken
variant of that rung), the profile, SDPA's memory and graph breaks.

Most compiled setups use the ``aot_eager`` backend (Dynamo and AOTAutograd without Inductor's
C++ compilation) so that the tests stay quick; the runner's test compiles with Inductor."""
import math

import pytest
import torch
import torch.nn.functional as F

from gpucourse.check import ch7 as check7
from gpucourse.errors import DeviceError, InputError
from gpucourse.experiments import ch7
from gpucourse.experiments.ch7 import checks, custom_op, ladder, model as model7, profile
from gpucourse.experiments.ch7 import step as step7
from gpucourse.experiments.ch7 import triton_fusion

CFG = ch7.GPTConfig()
FAST = "aot_eager"


def check(setup, cfg=CFG, **kw):
    return ch7.check_trainer(ch7.Trainer(cfg, setup, compile_backend=FAST, **kw))


def off_by_one_attention(q, k, v, dropout=0.0, training=True):
    """The naive attention with its mask shifted: each query also sees the next token."""
    t = q.shape[-2]
    s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    s = s.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(1), float("-inf"))
    return torch.matmul(torch.softmax(s, -1), v)


# --------------------------------------------------------------------------- the model

def test_every_setup_starts_from_the_naive_weights():
    a = step7.build(CFG, ch7.Setup())
    b = step7.build(CFG, ch7.Setup(attention="sdpa", bias_gelu="custom_op"))
    for (n, p), (m, q) in zip(a.named_parameters(), b.named_parameters()):
        assert n == m and torch.equal(p, q)
    x, y = model7.make_batch(CFG)
    assert x.shape == y.shape == (CFG.batch, CFG.seq) and torch.equal(x[:, 1:], y[:, :-1])
    loss = a(x, y).detach()
    # Random tokens over 256 values: the untrained model's loss is near ln(256).
    assert abs(float(loss) - math.log(CFG.vocab)) < 0.5


def test_the_naive_attention_is_causal():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 9, 4, generator=g) for _ in range(3))
    out = model7.naive_attention(q, k, v)
    k2, v2 = k.clone(), v.clone()
    k2[..., 5:, :] += 3
    v2[..., 5:, :] -= 2
    changed = model7.naive_attention(q, k2, v2)
    assert torch.equal(out[..., :5, :], changed[..., :5, :])
    assert not torch.equal(out[..., 5:, :], changed[..., 5:, :])


def test_bad_sizes_and_switches_are_one_sentence():
    with pytest.raises(InputError, match="not a multiple of heads"):
        ch7.GPTConfig(d=30, heads=4)
    with pytest.raises(InputError, match="pick one of them"):
        ch7.Setup(attention="flash")
    with pytest.raises(InputError, match="use True or False"):
        ch7.Setup(compile="yes")
    with pytest.raises(DeviceError, match="need a CUDA GPU"):
        ch7.Trainer(CFG, ch7.Setup(cuda_graphs=True), "cpu")


# --------------------------------------------------------------------------- tolerances

def test_the_fp32_bound_holds_against_float64():
    """The derivation's premise: FP32 differs from exact (float64) arithmetic by less than
    the FP32 bound, so two FP32 orders differ by less than twice it."""
    ref_loss, ref_grads = checks.naive_reference(CFG)
    t = ch7.Trainer(CFG, ch7.Setup())
    t.model.double()
    loss = t.forward_backward()
    report = check7.compare_loss_and_grads(loss, check7.flat_grads(t.model), ref_loss, ref_grads,
                                           check7.tolerance(CFG, "fp32"))
    assert report["grad_rel_error"] < check7.tolerance(CFG, "fp32") / 10


def test_the_bf16_rung_needs_its_own_bound():
    trainer = ch7.Trainer(CFG, ch7.Setup(precision="bf16"))
    with pytest.raises(AssertionError, match="does not match the naive version"):
        ch7.check_trainer(trainer, tol=check7.tolerance(CFG, "fp32"))  # too tight
    report = check(ch7.Setup(precision="bf16"))
    assert report["passed"] and report["grad_rel_error"] > check7.tolerance(CFG, "fp32")


def test_tolerances_grow_with_unit_roundoff():
    t = {p: check7.tolerance(CFG, p) for p in ("fp32", "fp16", "bf16")}
    assert t["fp32"] < t["fp16"] < t["bf16"] < 0.5
    assert "2^-8" in check7.tolerance_text(CFG, "bf16")


# --------------------------------------------------------------------------- one test per rung

def test_naive_check_fails_with_a_mask_off_by_one(monkeypatch):
    checks.naive_reference(CFG)  # the reference, before the break
    assert check(ch7.Setup())["passed"]
    monkeypatch.setattr(model7, "naive_attention", off_by_one_attention)
    with pytest.raises(AssertionError, match="gradients: relative error"):
        check(ch7.Setup())


def test_sdpa_check_fails_without_the_causal_flag(monkeypatch):
    assert check(ch7.Setup(attention="sdpa"))["passed"]
    real = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention",
                        lambda q, k, v, dropout_p=0.0, is_causal=False: real(q, k, v, dropout_p=dropout_p))
    with pytest.raises(AssertionError, match="does not match"):
        check(ch7.Setup(attention="sdpa"))


def test_compile_check_passes_and_fails_on_a_broken_compiled_model(monkeypatch):
    assert check(ch7.Setup(attention="sdpa", compile=True))["passed"]
    monkeypatch.setattr(model7, "naive_attention", off_by_one_attention)
    torch._dynamo.reset()
    try:
        with pytest.raises(AssertionError, match="does not match"):
            check(ch7.Setup(compile=True))
    finally:
        torch._dynamo.reset()


class RecordedStep:
    """A stand-in for a CUDA Graph on the CPU: like a graph, it keeps the tensors it was
    recorded with and reads them at every replay."""

    def __init__(self, trainer):
        self.trainer, self.x, self.y = trainer, trainer.x, trainer.y

    def replay(self):
        t = self.trainer
        t.opt.zero_grad(set_to_none=True)
        t.static_loss = t.model(self.x, self.y)
        t.static_loss.backward()
        t.opt.step()


def test_graph_replay_check_catches_inputs_that_were_not_copied():
    t = ch7.Trainer(CFG, ch7.Setup())
    t.graph = RecordedStep(t)
    assert checks.check_replay(t)["passed"]

    def rebind(trainer, x, y):  # the classic bug: a new tensor, not the captured one
        trainer.x, trainer.y = x, y

    t = ch7.Trainer(CFG, ch7.Setup())
    t.graph = RecordedStep(t)
    with pytest.raises(AssertionError, match="replayed CUDA Graph does not match"):
        checks.check_replay(t, load=rebind)


def test_checkpoint_check_catches_dropout_recomputed_with_other_masks(monkeypatch):
    cfg = CFG.with_(dropout=0.1)
    assert check(ch7.Setup(checkpoint=True), cfg)["passed"]
    real = step7.checkpoint
    monkeypatch.setattr(step7, "checkpoint",
                        lambda fn, x, **kw: real(fn, x, **{**kw, "preserve_rng_state": False}))
    with pytest.raises(AssertionError, match="does not match"):
        check(ch7.Setup(checkpoint=True), cfg)


def test_fused_adamw_check_catches_a_wrong_learning_rate():
    assert checks.check_optimizer("fused", CFG)["optimizer_passed"]
    assert checks.check_optimizer("foreach", CFG)["optimizer_passed"]

    def wrong_lr(params, kind, **kw):
        return step7.make_optimizer(params, kind, lr=1.1e-3, **kw)

    with pytest.raises(AssertionError, match="same weights, gradients and hyperparameters"):
        checks.check_optimizer("fused", CFG, make=wrong_lr)


@torch.library.custom_op("test7::bias_gelu_wrong_backward", mutates_args=())
def _wrong(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.gelu(x + bias)


@_wrong.register_fake
def _(x, bias):
    return torch.empty_like(x)


def _wrong_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _wrong_backward(ctx, dy):
    x, bias = ctx.saved_tensors
    v = x + bias
    dx = dy * 0.5 * (1 + torch.erf(v / math.sqrt(2)))  # Phi(v) only: the v phi(v) term is missing
    return dx, dx.reshape(-1, bias.numel()).sum(0)


_wrong.register_autograd(_wrong_backward, setup_context=_wrong_setup)


def test_custom_op_check_catches_a_wrong_derivative():
    report = check(ch7.Setup(bias_gelu="custom_op"))
    assert report["passed"] and report["emulator_kernel_error"] < 16 * 2.0 ** -24
    with pytest.raises(AssertionError, match="gradients: relative error"):
        check(ch7.Setup(bias_gelu="custom_op"), bias_gelu=torch.ops.test7.bias_gelu_wrong_backward)


def test_the_custom_op_runs_in_eager_and_compiled_code():
    torch.library.opcheck(torch.ops.gpucourse.bias_gelu.default,
                          (torch.randn(3, 5, 8), torch.randn(8)))
    f = torch.compile(lambda x, b: custom_op.custom_bias_gelu(x, b) * 2, fullgraph=True,
                      backend=FAST)
    x, b = torch.randn(2, 3, 8), torch.randn(8)
    assert torch.allclose(f(x, b), 2 * F.gelu(x + b), rtol=1e-5, atol=1e-6)


def test_triton_check_catches_a_kernel_that_indexes_the_bias_by_row(monkeypatch):
    if triton_fusion.missing_reason():
        pytest.skip(triton_fusion.missing_reason())
    assert check(ch7.Setup(bias_gelu="triton"))["passed"]
    triton, tl = triton_fusion._triton()

    @triton.jit
    def by_row(x_ptr, b_ptr, y_ptr, n, cols, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        inside = offs < n
        v = tl.load(x_ptr + offs, mask=inside) + tl.load(b_ptr + (offs // cols) % cols, mask=inside)
        tl.store(y_ptr + offs, 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476)), mask=inside)

    @torch.library.custom_op("test7::bias_gelu_triton_by_row", mutates_args=())
    def broken(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        xc, y = x.float().contiguous(), torch.empty(x.shape)
        by_row[(triton.cdiv(xc.numel(), 4096),)](xc, bias.float(), y, xc.numel(), bias.numel(),
                                                 BLOCK=4096)
        return y.to(x.dtype)

    broken.register_fake(lambda x, bias: torch.empty_like(x))
    broken.register_autograd(lambda ctx, dy: (dy, dy.reshape(-1, dy.shape[-1]).sum(0)))
    with pytest.raises(AssertionError, match="does not match"):
        check(ch7.Setup(bias_gelu="triton"), bias_gelu=broken)


def test_without_triton_the_rung_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(triton_fusion, "_triton", lambda: None)
    reason = triton_fusion.missing_reason()
    assert "pip install" in reason and len(reason.splitlines()) == 1 and reason.endswith(".")
    with pytest.raises(DeviceError, match="pip install"):
        ch7.Trainer(CFG, ch7.Setup(bias_gelu="triton"))
    rung = ladder.rungs()[-1]
    assert ladder.why_not_here(rung, "cpu") == reason


def test_the_course_kernels_match_the_fallback_on_the_emulator():
    assert custom_op.check_kernels_on_emulator() < 16 * 2.0 ** -24


# --------------------------------------------------------------------------- profile, SDPA, compile

def test_the_profile_sorts_the_step_and_counts_its_kernels():
    p = ch7.profile_naive(CFG, steps=2)
    cats = p["ms_by_category"]
    assert {"matmul", "attention", "optimizer"} <= set(cats)
    assert abs(sum(cats.values()) - p["step_ms"]) < 0.02 * p["step_ms"]
    fused = profile.profile_trainer(ch7.Trainer(CFG, ch7.Setup(optimizer="fused")), steps=2)
    # AdamW's loop runs several kernels per parameter tensor; the fused one, a few in all.
    params = len(list(ch7.GPT(CFG).parameters()))
    assert p["kernels"] - fused.kernels >= 3 * params
    assert p["peak_bytes"] > fused.peak_bytes * 0.5 > 0


def test_a_ladder_row_is_checked_then_measured_and_graphs_are_modelled():
    lad = ch7.run_ladder(CFG, "cpu", names=["naive", "sdpa", "cuda_graphs", "fused_adamw"],
                         min_time_s=0.01, compile_backend=FAST)
    rows = {r["rung"]: r for r in lad["rows"]}
    assert rows["naive"]["time_vs_naive"] == 1.0 and rows["sdpa"]["check"]["passed"]
    assert "no CUDA GPU" in rows["cuda_graphs"]["skipped"]
    model = rows["cuda_graphs"]["model"]
    assert model["kernels"] == rows["sdpa"]["kernels"] and "model" in model["label"]
    assert rows["fused_adamw"]["kernels"] < rows["sdpa"]["kernels"]
    assert rows["fused_adamw"]["check"]["optimizer_passed"]
    assert "rung" in ch7.ladder_table(lad).columns


def test_sdpa_memory_grows_as_t_and_the_naive_one_as_t_squared():
    mem = ch7.attention_memory(seqs=(64, 256))
    small, big = mem["rows"]
    assert big["naive"] / small["naive"] > 10       # 16 for T^2
    assert big["sdpa"] / small["sdpa"] < 6           # 4 for T
    assert big["sdpa, math backend"] / small["sdpa, math backend"] > 10
    assert "flash" in mem["sdpa_backends"]["chosen_op"]
    assert mem["sdpa_backends"]["available"]["math"] is None


def test_explain_finds_the_graph_break_and_the_fix_removes_it():
    demo = ch7.graph_break_demo()
    assert demo["with .item()"]["breaks"] == 1 and "item" in demo["with .item()"]["reasons"][0]
    assert demo["tensor kept"]["breaks"] == 0 and demo["tensor kept"]["graphs"] == 1


def test_the_widget_compares_the_naive_step_with_a_setup():
    out = ch7.compare(seq=32, precision="fp32", switches=("SDPA", "fused AdamW"), min_time_s=0.01)
    assert out["naive"]["median_ms"] > 0 and out["chosen"]["check"]["passed"]
    with pytest.raises(Exception, match="is not a switch"):
        ch7.compare(switches=("flash",))
