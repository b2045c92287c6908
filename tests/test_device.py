import numpy as np
import pytest

from gpucourse import device
from gpucourse.errors import DeviceError


def test_cpu_override(monkeypatch):
    monkeypatch.setenv("GPUCOURSE_DEVICE", "cpu")
    assert device.backend() == "cpu"
    assert not device.is_cuda()


def test_bad_override_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("GPUCOURSE_DEVICE", "tpu")
    with pytest.raises(DeviceError, match="'cpu' or 'cuda'"):
        device.backend()


def test_cuda_override_without_gpu_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("GPUCOURSE_DEVICE", "cuda")
    monkeypatch.setattr(device, "cuda_available", lambda: False)
    with pytest.raises(DeviceError, match="no CUDA GPU"):
        device.backend()


def test_default_follows_availability(monkeypatch):
    monkeypatch.delenv("GPUCOURSE_DEVICE", raising=False)
    monkeypatch.setattr(device, "cuda_available", lambda: True)
    assert device.backend() == "cuda"
    monkeypatch.setattr(device, "cuda_available", lambda: False)
    assert device.backend() == "cpu"


def test_describe_cpu(monkeypatch):
    monkeypatch.setenv("GPUCOURSE_DEVICE", "cpu")
    info = device.describe()
    assert info.backend == "cpu" and info.cpu_cores >= 1
    assert info.compute_capability is None
    assert "CPU" in info.short_name
    assert "torch" in str(info) and "<table>" in info._repr_html_()


def test_banner_says_what_runs_where(monkeypatch):
    monkeypatch.setenv("GPUCOURSE_DEVICE", "cpu")
    text = str(device.banner())
    assert text.startswith("CPU mode")
    assert "emulator" in text and "model" in text and "reference" in text
    gpu = device.Banner(device.DeviceInfo(backend="cuda", name="NVIDIA H200",
                                          compute_capability=(9, 0), sm_count=132,
                                          cupy_cuda=True, torch_cuda=True))
    assert str(gpu).startswith("GPU mode: NVIDIA H200 (compute capability 9.0, 132 SMs)")
    assert "CUDA events" in str(gpu)


def test_arrays_round_trip_on_cpu(monkeypatch):
    monkeypatch.setenv("GPUCOURSE_DEVICE", "cpu")
    x = np.arange(10, dtype=np.float64)[::2]
    d = device.asarray(x, dtype=np.float32)
    assert d.flags.c_contiguous and d.dtype == np.float32
    np.testing.assert_array_equal(device.to_host(d), x.astype(np.float32))
    e = device.empty((3,), np.float32)
    assert np.isnan(e).all(), "fresh CPU buffers are poisoned, never zero"


def test_to_host_accepts_torch():
    torch = pytest.importorskip("torch")
    t = torch.arange(4, dtype=torch.float32)
    np.testing.assert_array_equal(device.to_host(t), np.arange(4, dtype=np.float32))


def test_to_host_widens_bfloat16():
    torch = pytest.importorskip("torch")
    x = torch.tensor([1.0, 2.5, -3.0], dtype=torch.bfloat16)
    host = device.to_host(x)
    assert host.dtype == np.float32 and host.tolist() == [1.0, 2.5, -3.0]


def test_on_gpu_needs_a_cuda_backend_and_cupy(monkeypatch):
    monkeypatch.setattr(device, "cupy_works", lambda: True)
    monkeypatch.setattr(device, "is_cuda", lambda: False)
    assert not device.on_gpu()
    monkeypatch.setattr(device, "is_cuda", lambda: True)
    assert device.on_gpu()
    monkeypatch.setattr(device, "cupy_works", lambda: False)
    assert not device.on_gpu()
