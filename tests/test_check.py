import numpy as np
import pytest

from gpucourse import check, precision
from gpucourse.check.timing import SimulatedAsyncDevice, check_timer


def test_assert_close_passes_and_fails_with_a_diff():
    x = check.random_array(100, seed=1)
    check.assert_close(x * (1 + 1e-7), x)
    y = x.copy()
    y[17] += 1.0
    with pytest.raises(AssertionError) as e:
        check.assert_close(y, x, name="out")
    msg = str(e.value)
    assert "1 of 100 elements differ" in msg and "(17,)" in msg


def test_nan_and_shape_never_pass():
    x = check.random_array((4, 5), seed=2)
    bad = x.copy()
    bad[1, 2] = np.nan
    with pytest.raises(AssertionError, match="NaN"):
        check.assert_close(bad, x)
    with pytest.raises(AssertionError, match="shape"):
        check.assert_close(x.T, x)


def test_tolerances_follow_dtype():
    assert precision.tolerance(np.float16)[0] > precision.tolerance(np.float32)[0] > \
        precision.tolerance(np.float64)[0]
    assert precision.tolerance(np.int32) == (0.0, 0.0)
    assert precision.tolerance("torch.bfloat16")[0] > precision.tolerance(np.float16)[0]
    # fp16 error passes at fp16 tolerance and fails at fp32's.
    x = check.random_array(1000, seed=3)
    h = x.astype(np.float16)
    check.assert_close(h, x)
    with pytest.raises(AssertionError):
        check.assert_close(h.astype(np.float32), x)


def test_random_inputs_are_non_uniform_and_seeded():
    for kind in ("normal", "uniform", "positive", "skewed", "int"):
        a = check.random_array(1000, seed=5, kind=kind)
        assert np.unique(a).size > 2, kind
        assert np.count_nonzero(a) > 100, kind
        np.testing.assert_array_equal(a, check.random_array(1000, seed=5, kind=kind))
    s = check.random_array(10_000, np.int32, kind="skewed")
    assert np.mean(s < 2) > 0.6, "skewed data puts most values in a few bins"


def test_awkward_sizes():
    sizes = check.awkward_sizes(block=128)
    assert 1 in sizes and 127 in sizes and 129 in sizes
    assert any(s % 128 for s in sizes) and max(sizes) > 1 << 20
    assert all(r % 32 or c % 32 for r, c in check.awkward_shapes(32) if (r, c) != (32, 32))


def test_exercise_prints_one_line_or_raises(capsys):
    with check.Exercise("9.1", "demo"):
        pass
    assert capsys.readouterr().out.strip() == "Exercise 9.1 passed: demo."
    with pytest.raises(AssertionError, match="Exercise 9.2 .* not yet right"):
        with check.Exercise("9.2", "demo"):
            assert False, "wrong"
    with pytest.raises(AssertionError, match="not done yet"):
        with check.Exercise("9.3"):
            raise NotImplementedError("Exercise 9.3")


def test_check_function_catches_a_wrong_index():
    def shifted(x):
        return np.roll(x * 2, 1)
    cases = [(check.random_array(n, seed=n),) for n in (1, 33)]
    check.check_function(lambda x: x * 2, lambda x: x * 2, cases, "9.4")
    with pytest.raises(AssertionError, match="9.4"):
        check.check_function(shifted, lambda x: x * 2, cases, "9.4")


def test_simulated_device_is_asynchronous():
    import time
    dev = SimulatedAsyncDevice(work_s=0.01, cold_calls=0)
    t0 = time.perf_counter()
    dev.launch()
    assert time.perf_counter() - t0 < 0.005
    dev.synchronize()
    assert time.perf_counter() - t0 >= 0.01


def _timed(launch, sync, warmup, do_sync):
    import statistics
    import time
    for _ in range(warmup):
        launch()
    sync()
    s = []
    for _ in range(7):
        t0 = time.perf_counter()
        launch()
        if do_sync:
            sync()
        s.append(time.perf_counter() - t0)
    sync()
    return float(statistics.median(s))


def test_timer_checker_accepts_right_and_rejects_wrong(capsys):
    check_timer(lambda l, s: _timed(l, s, 10, True))
    assert "passed" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="synchronize"):
        check_timer(lambda l, s: _timed(l, s, 10, False))
    with pytest.raises(AssertionError, match="warm up"):
        check_timer(lambda l, s: _timed(l, s, 0, True))


def test_the_course_timing_harness_passes_the_timer_checks():
    """Lab 0 says: time everything with gc.bench. Its warm-up must outlast the simulated cold start."""
    import gpucourse as gc
    from gpucourse.check import ch1

    def step(launch, sync):
        return lambda: (launch(), sync())

    check_timer(lambda l, s: gc.bench.benchmark(step(l, s)).median_s)
    ch1.check_bandwidth_timer(lambda l, s, nbytes: gc.bench.benchmark(step(l, s), bytes=nbytes).gbps)


def test_a_time_in_milliseconds_is_named_as_a_unit_slip():
    with pytest.raises(AssertionError, match="check the unit"):
        check_timer(lambda l, s: 1e3 * _timed(l, s, 10, True))


def test_assert_close_takes_bfloat16_tensors():
    torch = pytest.importorskip("torch")
    x = torch.tensor([1.0, 2.5, -3.0])
    check.assert_close(x.to(torch.bfloat16), x)  # bf16 tolerance
    with pytest.raises(AssertionError):
        check.assert_close(x.to(torch.bfloat16), x + 1)


def test_learner_kernel_says_what_to_write_and_runs_isolated():
    import numpy as np

    from gpucourse import check

    with pytest.raises(AssertionError, match="as a string with an `extern \"C\" __global__ void twice"):
        check.learner_kernel(None, "twice.cu", "twice")
    other = 'extern "C" __global__ void thrice(float* y, int n) { }'
    with pytest.raises(AssertionError, match="must define .*twice.*it defines thrice"):
        check.learner_kernel(other, "twice.cu", "twice")
    src = ('extern "C" __global__ void twice(float* y, int n) {\n'
           '  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  y[i] *= 2.0f;\n}\n')  # no bounds check
    k = check.learner_kernel(src, "twice.cu", "twice")
    y = check.random_array(64, np.float32, seed=3)
    want = 2 * y
    check.run_learner_kernel(k, (2,), (32,), (y, np.int32(64)), "n=64")
    assert np.array_equal(y, want)
    with pytest.raises(AssertionError, match="^n=5: "):
        check.run_learner_kernel(k, (1,), (1 << 20,), (y, np.int32(5)), "n=5")


@pytest.mark.parametrize("error, hint", [
    ("unsupported operand type(s) for *: 'NoneType' and 'float'", "does your function end with `return"),
    ("'function' object is not subscriptable", "call it first"),
    ("'LossScaler' object is not callable", "not its result or an instance"),
])
def test_exercise_names_the_likely_slip_behind_a_type_error(error, hint):
    from gpucourse.check import Exercise

    with pytest.raises(AssertionError, match=r"Exercise 9\.9 \(t\) not yet right:\n.*" + hint):
        with Exercise("9.9", "t"):
            raise TypeError(error)
    with pytest.raises(TypeError, match="something else"):  # other errors pass through untouched
        with Exercise("9.9", "t"):
            raise TypeError("something else")
