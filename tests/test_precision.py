"""The precision module: names from one tuple, dtypes, tolerances, error bounds, and which
precisions run here, with the reason for those that do not."""
import numpy as np
import pytest
import torch

from gpucourse import bench, check, models, precision, specs
from gpucourse.check import ch6 as c6
from gpucourse.errors import ModelInputError, PrecisionError
from gpucourse.experiments import ch5, ch6


@pytest.fixture
def fresh_availability():
    precision._availability.cache_clear()
    yield
    precision._availability.cache_clear()


# --------------------------------------------------------------------------- names

def test_every_offer_is_a_part_of_the_one_tuple_in_its_order():
    for offer in (precision.STORAGE, precision.MATMUL, precision.INFERENCE):
        assert offer == tuple(p for p in precision.PRECISIONS if p in offer)
    assert not hasattr(specs, "PRECISIONS")  # precision.PRECISIONS is the one
    assert ch5.PRECISIONS == ("fp32", "tf32", "fp16", "bf16")
    assert precision.INFERENCE == ("fp32", "tf32", "fp16", "bf16", "int8")  # chapter 6's


def test_dtypes_of_each_precision():
    assert precision.torch_dtype("bf16") is torch.bfloat16
    assert precision.torch_dtype("TF32") is torch.float32
    assert {p: precision.torch_dtype(p) for p in precision.MATMUL} == {
        "fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
        "bf16": torch.bfloat16}
    assert precision.numpy_dtype("fp16") == np.float16
    with pytest.raises(PrecisionError, match="NumPy has no bf16"):
        precision.numpy_dtype("bf16")
    with pytest.raises(PrecisionError, match="not a precision"):
        precision.torch_dtype("fp12")
    assert all(precision.BYTES[p] * 8 == torch.finfo(precision.torch_dtype(p)).bits
               for p in ("fp64", "fp32", "fp16", "bf16"))


def test_tolerances_and_bounds_have_one_home():
    assert not hasattr(check, "tolerance")  # precision.tolerance is the one
    assert precision.tolerance("bfloat16") == precision.BF16_TOLERANCE
    assert precision.tolerance(np.int32) == (0.0, 0.0)
    for name in ("gamma", "sum_error_bound", "matmul_error_bound", "affine_steps_error_bound",
                 "U32", "U64", "ModelInputError", "ceil_div"):
        assert not hasattr(models, name), name
    assert ch5.tensor_cores.UNIT_ROUNDOFF["bf16"] == 2.0 ** -8 and precision.U32 == 2.0 ** -24
    assert not hasattr(ch6, "AMP_LOSS_RTOL") and not hasattr(ch6, "LOW_PRECISION_MATMUL_RTOL")
    assert precision.LOW_PRECISION_MATMUL_RTOL == {"fp16": 5e-3, "bf16": 3e-2}
    with pytest.raises(ModelInputError, match="blocks"):
        precision.gamma(1 << 24)


# --------------------------------------------------------------------------- what runs here

def test_availability_on_the_cpu(fresh_availability):
    a = precision.availability("cpu")
    assert list(a) == list(precision.INFERENCE)
    assert a["fp32"] is None and a["fp16"] is None and a["bf16"] is None
    assert "tensor-core" in a["tf32"] and "tensor cores" in a["tf32"]
    assert ch5.precision_availability() == {p: a[p] for p in precision.MATMUL}
    assert ch6.precision_availability("cpu") == a


@pytest.mark.parametrize("cc,off", [((9, 0), set()), ((8, 6), set()),
                                    ((7, 5), {"tf32", "bf16"}), ((6, 1), {"tf32", "bf16"}),
                                    ((5, 2), {"tf32", "bf16", "fp16"})])
def test_availability_on_a_gpu_follows_the_compute_capability(cc, off, monkeypatch,
                                                                fresh_availability):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: cc)
    monkeypatch.setattr(precision, "int8_runs", lambda dev: None)
    a = precision.availability("cuda", precision.MATMUL)
    assert {p for p, why in a.items() if why} == off
    ccs = "%d.%d" % cc
    assert all(ccs in why for why in a.values() if why)
    if "bf16" in off:
        assert "emulated" in a["bf16"]


def test_require_says_what_is_wrong_in_one_sentence(fresh_availability):
    precision.require("fp32", precision.MATMUL, "cpu")
    with pytest.raises(PrecisionError, match="tf32 does not run here: TF32 is a tensor-core"):
        precision.require("tf32", precision.MATMUL, "cpu")
    with pytest.raises(PrecisionError, match="'int8' is not one of fp32, tf32, fp16, bf16"):
        precision.require("int8", precision.MATMUL, "cpu")


def test_bf16_rule_takes_a_compute_capability():
    assert precision.bf16_is_native((8, 0)) and not precision.bf16_is_native((7, 5))
    assert precision.bf16_is_native(specs.parse_cc("7.5")) is False
    assert precision.bf16_is_native(specs.parse_cc("sm_90")) is True


# --------------------------------------------------------------------------- shared algorithms

def test_the_loss_scaler_and_the_int8_product_have_one_home():
    assert not hasattr(ch6, "DynamicLossScaler") and not hasattr(ch6, "int8_mm")
    assert issubclass(c6.ReferenceScaler, precision.DynamicLossScaler)
    assert not hasattr(c6, "int8_gemm_probe") and not hasattr(c6, "int8_mm")
    s = precision.DynamicLossScaler(init_scale=8.0, growth_interval=2)
    grads, found = s.unscale([torch.tensor([8.0, float("inf")], dtype=torch.float16)])
    assert found and grads[0].dtype == torch.float32 and grads[0][0] == 1.0
    s.update(True)
    assert s.scale == 4.0
    s.update(False)
    s.update(False)
    assert s.scale == 8.0


def test_cpu_threads_has_one_meaning():
    assert not hasattr(ch6, "cpu_threads")  # bench.cpu_threads is the one
    before = torch.get_num_threads()
    with bench.cpu_threads():
        assert torch.get_num_threads() == bench.CPU_THREADS
        blas = bench.openblas()
        if blas:
            assert blas[1]() == bench.CPU_THREADS
    assert torch.get_num_threads() == before
