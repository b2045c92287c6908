import numpy as np
import pytest

from gpucourse import check
from gpucourse.experiments import cpu


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
    real = np.dot
    monkeypatch.setattr(cpu.np, "dot", lambda a, b: calls.append(a.size) or real(a, b))
    monkeypatch.setattr(cpu, "cpu_cores", lambda: 3)
    x = check.random_array(3000, np.float32, seed=1)
    cpu.dot_on_every_core(x, min_time_s=0.001, min_samples=1, max_samples=1, warmup_s=0)
    # the float64 check dots the whole array; the timed dot splits it into three
    assert calls.count(1000) >= 3 and 3000 in calls
