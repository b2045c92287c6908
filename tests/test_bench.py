import time

import pytest

from gpucourse import bench
from gpucourse.errors import DeviceError


def test_median_tracks_the_work():
    """A 2 ms sleep measures near 2 ms; the spread is ordered."""
    t = bench.benchmark(time.sleep, 0.002, label="sleep", min_time_s=0.05, backend="cpu")
    assert 0.0019 < t.median_s < 0.01
    assert t.p20_s <= t.median_s <= t.p80_s
    assert t.count >= 5 and t.batch == 1
    assert t.method == "perf_counter" and t.backend == "cpu"


def test_warmup_keeps_cold_calls_out():
    """The first call costs 50 ms; the median must not see it."""
    calls = []

    def fn():
        calls.append(1)
        time.sleep(0.05 if len(calls) == 1 else 0.001)

    t = bench.benchmark(fn, min_time_s=0.03, backend="cpu")
    assert t.median_s < 0.01
    assert max(t.samples_s) < 0.04


def test_short_calls_are_batched():
    t = bench.benchmark(lambda: None, min_time_s=0.02, backend="cpu")
    assert t.batch > 10
    assert t.median_s < 1e-5


def test_rates_and_ratios():
    t = bench.Timing("a", [0.5, 1.0, 1.5], 1, "cpu", "cpu", "perf_counter", bytes=2e9, flops=4e9)
    assert t.median_s == 1.0
    assert t.gbps == pytest.approx(2.0) and t.gflops == pytest.approx(4.0)
    u = bench.Timing("b", [0.25], 1, "cpu", "cpu", "perf_counter")
    assert u.speedup_over(t) == pytest.approx(4.0)
    assert u.gbps is None
    d = t.to_dict()
    assert d["median_s"] == 1.0 and bench.Timing.from_dict(d).samples_s == t.samples_s


def test_renders_without_printing(capsys):
    ts = bench.compare({"x": lambda: sum(range(100)), "y": lambda: sum(range(10))},
                       min_time_s=0.01, backend="cpu")
    html = ts._repr_html_()
    assert "speed-up vs x" in html and "<table>" in html
    assert "median" in str(ts[0])
    assert capsys.readouterr().out == ""


def test_cuda_without_gpu_is_a_clear_error(monkeypatch):
    from gpucourse import device
    monkeypatch.setattr(device, "cuda_available", lambda: False)
    with pytest.raises(DeviceError, match="needs a CUDA GPU"):
        bench.benchmark(lambda: None, backend="cuda")


def test_exceptions_propagate():
    def bad():
        raise ValueError("boom")
    with pytest.raises(ValueError, match="boom"):
        bench.benchmark(bad, backend="cpu")


def test_bad_settings_are_one_sentence():
    from gpucourse.errors import DeviceError

    with pytest.raises(DeviceError, match="not one of 'cpu' or 'cuda'"):
        bench.benchmark(lambda: None, backend="gpu")
    with pytest.raises(ValueError, match="at least 1 call per sample"):
        bench.benchmark(lambda: None, batch=0)
    with pytest.raises(ValueError, match="cannot be negative"):
        bench.benchmark(lambda: None, bytes=-1)
    with pytest.raises(ValueError, match="min_samples=0: use a whole number of at least 1"):
        bench.benchmark(lambda: None, min_samples=0)
    with pytest.raises(ValueError, match="max_samples=3: use a whole number of at least 5"):
        bench.benchmark(lambda: None, max_samples=3)


def test_units_never_switch_to_scientific_notation():
    assert bench.format_bytes(1000) == "1000 B" and bench.format_bytes(1000 * 1024) == "1000 KiB"
    assert bench.format_bytes(64 * 2**20) == "64 MiB" and bench.format_time(0.9997) == "1000 ms"
    assert bench.format_time(1.5e-6) == "1.5 µs"
