"""Chapter 1 lab checkers: each accepts the solution and rejects plausible wrong answers."""
import statistics
import time

import pytest

from gpucourse import models, specs
from gpucourse.check import ch1 as c1
from gpucourse.check import expect_failure

CHUNKED = "    return t * per_thread + k;  // each thread takes a contiguous chunk, as one would on a CPU"


def _scale(body: str) -> str:
    assert CHUNKED in c1.CHUNKED_ELEMENT
    return c1.CHUNKED_ELEMENT.replace(CHUNKED, body)


# --------------------------------------------------------------------------- 1.1

def test_coalesced_indexing_accepts_grid_stride():
    c1.check_coalesced_scale(_scale("    return t + (long long)k * T;"))


@pytest.mark.parametrize("wrong,match", [
    (CHUNKED, "not coalesced"),                                            # the given CPU-style chunk
    ("    return t + (long long)k * blockDim.x;", "must cover"),           # steps overlap, tail missed
    ("    return threadIdx.x + (long long)k * T;", "must cover"),          # forgot the block index
    # transposed order: lane l of every warp jumps T/32 elements (and a grid of 80 threads
    # leaves some elements out)
    ("    return (long long)k * T + (t % 32) * (T / 32) + t / 32;", "must cover"),
    # coalesced and covers everything, but wraps round: some elements are scaled twice
    ("    return ((long long)k * T + t) % n;", "taken 32 times"),
    # the grid's thread count rounded up to whole warps: elements between are never taken
    ("    const long long P = (T + 31) / 32 * 32;\n    return (long long)k * P + t;", "must cover"),
])
def test_coalesced_indexing_rejects(wrong, match):
    with expect_failure(match):
        c1.check_coalesced_scale(_scale(wrong))


def test_pasting_the_whole_printed_cell_says_to_submit_element_only():
    with expect_failure("Submit only your element() function"):
        c1.check_coalesced_scale(_scale("    return t + (long long)k * T;") + c1.SCALE_KERNEL)


def test_coalesced_indexing_needs_element_function():
    with expect_failure("define `__device__ long long element"):
        c1.check_coalesced_scale("__device__ int index() { return 0; }")
    with expect_failure("does not build"):
        c1.check_coalesced_scale("__device__ long long element(int k, int n) { return k + ; }")
    with expect_failure("not done yet"):
        c1.check_coalesced_scale('raise NotImplementedError("Exercise 1.1")')


# --------------------------------------------------------------------------- 1.4

def _bandwidth(warmup=10, sync=True, scale=1e9, stat=statistics.median, repeats=9):
    def f(launch, synchronize, nbytes):
        for _ in range(warmup):
            launch()
        if sync:
            synchronize()
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            launch()
            if sync:
                synchronize()
            ts.append(time.perf_counter() - t0)
        if not sync:
            synchronize()
        return nbytes / stat(ts) / scale
    return f


def test_bandwidth_timer_accepts_solution():
    gbps = c1.check_bandwidth_timer(_bandwidth())
    assert 5 < gbps < 40


@pytest.mark.parametrize("fn,match", [
    (_bandwidth(sync=False), "synchronize"),
    (_bandwidth(warmup=0), "warm up"),
    (_bandwidth(warmup=0, stat=statistics.mean, repeats=20), "warm up"),
    (_bandwidth(scale=1), "what bytes per second gives"),
    (_bandwidth(scale=2**30), "what GiB/s"),
    (_bandwidth(scale=1e6), "what MB/s"),
    (_bandwidth(scale=1e12), "what TB/s"),
    (_bandwidth(scale=0.5e9), "twice the true bandwidth"),   # read and write counted again
    (lambda launch, sync, nbytes: nbytes / _bandwidth()(launch, sync, nbytes) / 1e9,
     "not seconds"),                                          # returned seconds
])
def test_bandwidth_timer_rejects(fn, match):
    with expect_failure(match):
        c1.check_bandwidth_timer(fn)


def _clock_stopped_before_sync(launch, synchronize, nbytes):
    """Warm-up and a median, but each sample stops the clock before synchronize() returns."""
    for _ in range(10):
        launch()
    synchronize()
    ts = []
    for _ in range(9):
        t0 = time.perf_counter()
        launch()
        ts.append(time.perf_counter() - t0)
        synchronize()
    return nbytes / statistics.median(ts) / 1e9


def test_bandwidth_timer_names_a_clock_stopped_before_synchronize():
    # A launch takes microseconds, about 1000 x faster than the copy: the same ratio as a
    # result in MB/s, which must not be the message this classic mistake gets.
    with pytest.raises(AssertionError, match="before you read the clock") as failure:
        c1.check_bandwidth_timer(_clock_stopped_before_sync)
    assert "MB/s" not in str(failure.value)


# --------------------------------------------------------------------------- 1.5

def transfer_seconds(nbytes, gpu, pinned=True):
    return 10e-6 + nbytes / specs.lookup(gpu).link_bandwidth_Bps(pinned)


def _worth(transfer=transfer_seconds, d2h=True, shared=True, result_pinned=None, gpu_reused=True):
    def f(batch, result, cpu_s, gpu_s, gpu, pinned=True, reuses=1):
        back = pinned if result_pinned is None else result_pinned
        copies = transfer(batch, gpu, pinned) + (transfer(result, gpu, back) if d2h else 0)
        if not shared:
            return reuses * (copies + gpu_s) < reuses * cpu_s
        return copies + (reuses if gpu_reused else 1) * gpu_s < reuses * cpu_s
    return f


def test_transfer_accepts_solution():
    c1.check_transfer(transfer_seconds, _worth())


@pytest.mark.parametrize("transfer", [
    lambda nbytes, gpu, pinned=True: nbytes / specs.lookup(gpu).link_bandwidth_Bps(pinned),  # no latency
    lambda nbytes, gpu, pinned=True: 10e-6 + nbytes / specs.lookup(gpu).pcie_bandwidth_Bps,  # theoretical
    lambda nbytes, gpu, pinned=True: 10e-6 + nbytes / specs.lookup(gpu).link_bandwidth_Bps(True),
    lambda nbytes, gpu, pinned=True: 10e-6 + nbytes / 2**30 / (specs.lookup(gpu).link_bandwidth_Bps(pinned) / 1e9),
])
def test_transfer_time_rejects(transfer):
    with expect_failure("transfer_seconds"):
        c1.check_transfer(transfer, _worth(transfer))


@pytest.mark.parametrize("worth", [
    _worth(d2h=False),
    _worth(shared=False),
    _worth(transfer=lambda nbytes, gpu, pinned=True: nbytes / specs.lookup(gpu).link_bandwidth_Bps(pinned)),
    _worth(transfer=lambda nbytes, gpu, pinned=True: transfer_seconds(nbytes, gpu, True)),
    _worth(result_pinned=True),   # the result copied back as if always pinned
    _worth(gpu_reused=False),     # the GPU time counted once, not once per pass
    # one transfer of batch + result: a single latency for two copies
    lambda b, r, cpu, g, gpu, pinned=True, reuses=1:
        transfer_seconds(b + r, gpu, pinned) + reuses * g < reuses * cpu,
])
def test_move_decision_rejects(worth):
    with expect_failure("worth_moving"):
        c1.check_transfer(transfer_seconds, worth)


# --------------------------------------------------------------------------- 1.1 speed

def test_the_coalescing_check_does_not_import_torch_and_is_fast():
    """Without CuPy the learner's kernel runs on the emulator: the check must not import
    PyTorch to look for a GPU (seconds on 2 cores). A fresh process, a fresh source."""
    import subprocess
    import sys

    code = ("import sys, time, random\nfrom gpucourse.check import ch1 as c1\n"
            f"src = {_scale('    return t + (long long)k * T;')!r} + '// %d' % random.random()\n"
            "t = time.perf_counter(); c1.check_coalesced_scale(src)\n"
            "print(time.perf_counter() - t, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, "GPUCOURSE_DEVICE": ""})
    seconds, torch_loaded = out.stdout.split()[-2:]
    assert torch_loaded == "False"
    assert float(seconds) < 2.0, f"check 1.1 took {float(seconds):.2f} s"


# --------------------------------------------------------------------------- 1.2 and 1.3

def _limited_by(point, ceilings):
    r = models.roofline(point["flops"], point["bytes"], peak_flops=ceilings["peak_flops"],
                        bandwidth=ceilings["bandwidth_Bps"])
    return r.bound if point["flops"] / point["seconds"] >= 0.5 * r.attainable_flops else "overhead"


def _optimize_first(points, ceilings):
    return c1.optimize_first_reference(points, ceilings)


@pytest.mark.parametrize("check, answer", [(c1.check_limited_by, _limited_by),
                                           (c1.check_optimize_first, _optimize_first)])
def test_the_decisions_pass_within_two_seconds(check, answer, capsys):
    guess = "memory" if check is c1.check_limited_by else "matmul"
    t = time.perf_counter()
    check(answer, guess=guess)
    assert time.perf_counter() - t < 2.0
    assert "passed" in capsys.readouterr().out


def test_limited_by_decides_on_the_learners_own_measurement():
    own = {"ceilings": {"bandwidth_Bps": 5e9, "peak_flops": 8e9},
           "points": [{"name": "sum", "flops": 2**22, "bytes": 2**24, "seconds": 2**24 / 5e9 / 0.3}]}
    with expect_failure("your measured roofline"):   # 30 % of its roof: overhead
        c1.check_limited_by(lambda p, c: "memory" if p["name"] == "sum" else _limited_by(p, c),
                            own, guess="memory")
    c1.check_limited_by(_limited_by, own, guess="overhead")


def test_a_prediction_must_be_there_and_of_the_right_kind():
    with expect_failure("guess_1_2 is None: set it to your guess"):
        c1.check_limited_by(_limited_by)
    with expect_failure("guess_1_2 is the text 'fast'"):
        c1.check_limited_by(_limited_by, guess="fast")
    with expect_failure("guess_1_3 is 3: set it to your guess, one of"):
        c1.check_optimize_first(_optimize_first, guess=3)


def test_the_reference_gpu_case_is_labelled_with_its_provenance():
    what = [w for w, _ in c1.optimize_first_cases()]
    assert any("measured" in w and "with `" in w for w in what)
