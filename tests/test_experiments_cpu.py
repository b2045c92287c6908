import numpy as np
import pytest

from gpucourse import check
from gpucourse.experiments import cpu

#: make test-cpu-checks runs this whole file (AVX2 cap, one core).
pytestmark = pytest.mark.cpu_check


@pytest.mark.parametrize("n", [1, 3, 4099, 1 << 16])
def test_dot_on_every_core_counts_each_array_once(n):
    x = check.random_array(n, np.float32, seed=n)
    y = check.random_array(n, np.float32, seed=n + 1)
    t = cpu.dot_on_every_core(x, min_time_s=0.001)
    assert t.bytes == x.nbytes and t.size == n  # x . x reads x once
    assert cpu.dot_on_every_core(x, y, min_time_s=0.001).bytes == 2 * x.nbytes
    assert "core" in t.label


def test_dot_on_every_core_uses_one_chunk_per_core(monkeypatch):
    calls = []
    real = cpu.blocked_dot
    monkeypatch.setattr(cpu, "blocked_dot", lambda a, b: calls.append(a.size) or real(a, b))
    monkeypatch.setattr(cpu, "cpu_cores", lambda: 3)
    x = check.random_array(3000, np.float32, seed=1)
    cpu.dot_on_every_core(x, min_time_s=0.001, min_samples=1, max_samples=1, warmup_s=0)
    # every call of the timed dot splits the array into three chunks
    assert calls and set(calls) == {1000} and len(calls) % 3 == 0


@pytest.mark.parametrize("cores", [1, 2])
def test_dot_on_every_core_of_one_signed_data_passes_on_any_core_count(monkeypatch, cores):
    # x . x of 2^24 mixed-magnitude values: one float32 BLAS dot per core was off by 1e-4 to
    # 3e-4 of sum|x*x| (more than its old tolerance allowed), by kernel and core count
    monkeypatch.setattr(cpu, "cpu_cores", lambda: cores)
    x = check.random_array(1 << 24, np.float32, seed=3)
    t = cpu.dot_on_every_core(x, min_time_s=0.001, min_samples=1, max_samples=1, warmup_s=0)
    assert t.bytes == x.nbytes
