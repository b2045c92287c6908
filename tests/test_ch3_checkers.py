"""Lab 3 checkers: each accepts the solution and rejects the plausible wrong answers."""
import math

import numpy as np
import pytest

from gpucourse import models
from gpucourse.check import ch3 as c3
from gpucourse.check import expect_failure


# --------------------------------------------------------------------------- 3.2 (synthetic)

def _result(transform, p=2, seed=0):
    """Gradients that a function `transform(local_grads_per_rank)` would leave on each rank."""
    g = np.random.default_rng(seed)
    shapes = [(5, 4), (5,), (3, 5), (3,)]
    local = [[g.normal(size=s) * np.exp(g.uniform(-2, 2, s)) for s in shapes] for _ in range(p)]
    ref = [sum(local[r][i] for r in range(p)) / p for i in range(len(shapes))]
    return {"world_size": p, "names": ["0.weight", "0.bias", "1.weight", "1.bias"],
            "local": local, "manual": transform(local, p), "reference": ref}


def _avg(local, p):
    return [[sum(local[r][i] for r in range(p)) / p for i in range(len(local[0]))] for _ in range(p)]


def test_average_gradients_accepts_the_average(capsys):
    c3.check_average_gradients(_result(_avg))
    assert "Exercise 3.2 passed" in capsys.readouterr().out


@pytest.mark.parametrize("transform, match", [
    (lambda local, p: [[x * p for x in rank] for rank in _avg(local, p)], "divide by the world"),
    (lambda local, p: local, "own gradient"),
    (lambda local, p: [[x / p for x in rank] for rank in local], "only divided"),
    (lambda local, p: [[x / p for x in rank] for rank in _avg(local, p)], "divide once"),
    (lambda local, p: [rank[:2] + local[r][2:] for r, rank in enumerate(_avg(local, p))],
     "1.weight"),
    # an all-reduce in float16 to halve the traffic: off by more than float32 rounding
    (lambda local, p: [[sum(x.astype(np.float16) for x in grads) / p for grads in zip(*local)]
                       for _ in range(p)], "float32 rounding allows"),
])
def test_average_gradients_rejects_wrong_answers(transform, match):
    with expect_failure(match):
        c3.check_average_gradients(_result(transform))


@pytest.mark.parametrize("p", [2, 3, 8])
def test_average_gradients_accepts_float32_averages_in_any_order(p, capsys):
    """All-reduce in float32 (rounded at every step, in either order), then divide: within the
    stated bound of the exact average."""
    def float32_average(local, p):
        out = []
        for grads in zip(*local):
            terms = [x.astype(np.float32) for x in grads]
            ascending = np.cumsum(terms, axis=0, dtype=np.float32)[-1] / np.float32(p)
            descending = np.cumsum(terms[::-1], axis=0, dtype=np.float32)[-1] * np.float32(1 / p)
            out.append((ascending, descending))
        return [[pair[r % 2] for pair in out] for r in range(p)]

    result = _result(lambda local, p: None, p=p)
    result["local"] = [[x.astype(np.float32) for x in rank] for rank in result["local"]]
    result["manual"] = float32_average(result["local"], p)
    c3.check_average_gradients(result)
    assert "Exercise 3.2 passed" in capsys.readouterr().out


def test_average_gradients_must_use_the_world_size():
    fixed = {**_result(_avg), "reads_world_size": False}
    with expect_failure("never uses world_size"):
        c3.check_average_gradients(fixed)


@pytest.mark.parametrize("body, reads", [
    ("for p in model.parameters():\n        dist.all_reduce(p.grad)\n        p.grad /= world_size", True),
    ("for p in model.parameters():\n        dist.all_reduce(p.grad)\n        p.grad /= dist.get_world_size()", True),
    ("for p in model.parameters():\n        dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)", True),
    ("for p in model.parameters():\n        dist.all_reduce(p.grad)\n        p.grad /= 2  # world_size", False),
])
def test_a_fixed_divisor_is_told_apart_from_the_world_size(body, reads):
    from gpucourse.experiments.ch3 import lab

    assert lab._reads_world_size(f"def average_gradients(model, world_size):\n    {body}\n") is reads


def test_average_gradients_needs_two_workers():
    with expect_failure("at least 2 workers"):
        c3.check_average_gradients(_result(lambda local, p: local, p=1))


# --------------------------------------------------------------------------- 3.4

def choose(params, activations, device_bytes, devices):
    need = models.training_memory(int(params), int(activations), dtype="bf16").total
    if need <= device_bytes:
        return ("data", 1)
    k = math.ceil(need / device_bytes)
    return ("pipeline", k) if k <= devices else ("does not fit", k)


def test_strategy_accepts_the_model(capsys):
    c3.check_strategy(choose)
    assert "Exercise 3.4 passed" in capsys.readouterr().out


def _weights_only(params, activations, device_bytes, devices):
    need = params * 2 + activations * 2
    return ("data", 1) if need <= device_bytes else ("pipeline", math.ceil(need / device_bytes))


def _floor_stages(params, activations, device_bytes, devices):
    name, k = choose(params, activations, device_bytes, devices)
    if name == "pipeline":
        need = models.training_memory(int(params), int(activations), dtype="bf16").total
        k = max(1, math.floor(need / device_bytes))
    return name, k


def _always_pipeline(params, activations, device_bytes, devices):
    return ("pipeline", devices)


def _fp32_footprint(params, activations, device_bytes, devices):  # training_memory's default
    need = models.training_memory(int(params), int(activations)).total
    if need <= device_bytes:
        return ("data", 1)
    k = math.ceil(need / device_bytes)
    return ("pipeline", k) if k <= devices else ("does not fit", k)


def _stages_below_devices(params, activations, device_bytes, devices):  # k < devices
    name, k = choose(params, activations, device_bytes, devices)
    return ("does not fit", k) if name == "pipeline" and k == devices else (name, k)


@pytest.mark.parametrize("wrong, match", [
    (_weights_only, "16 bytes per parameter"),
    (_floor_stages, "round the number of stages up"),
    (_always_pipeline, "expected 'data'"),
    (lambda *a: "data", "pair"),
    (lambda p, a, m, n: choose(p, a, m, n) if choose(p, a, m, n)[0] != "does not fit"
     else ("pipeline", n), "does not fit"),
    (_fp32_footprint, 'dtype="bf16"'),
    (_stages_below_devices, "stages <= devices"),
    (lambda p, a, m, n: ("data", n) if choose(p, a, m, n)[0] == "data" else choose(p, a, m, n),
     "return ('data', 1)"),
])
def test_strategy_rejects_wrong_answers(wrong, match):
    with expect_failure(match):
        c3.check_strategy(wrong)


# --------------------------------------------------------------------------- 3.1 and 3.3 (measured)

def _bucket(sizes, seconds):
    bw = [n / t for n, t in zip(sizes, seconds)]
    return min(n for n, b in zip(sizes, bw) if b >= 0.5 * max(bw))


def _choose(steps):
    best = min(steps.values())
    return min(m for m, t in steps.items() if t <= 1.05 * best)


@pytest.mark.parametrize("check, answer, guess", [(c3.check_bucket_bytes, _bucket, 2**16),
                                                  (c3.check_choose_microbatches, _choose, 4)])
def test_the_decisions_pass_within_two_seconds(check, answer, guess, capsys):
    import time

    t = time.perf_counter()
    check(answer, guess=guess)
    assert time.perf_counter() - t < 2.0
    assert "passed" in capsys.readouterr().out


def test_the_learners_own_measurements_are_decided_on():
    from types import SimpleNamespace as NS

    sweep = NS(sizes=[1024, 4096, 16384], allreduce=[NS(median_s=s) for s in (1e-3, 1e-3, 2e-3)])
    with expect_failure("your measured sweep"):
        c3.check_bucket_bytes(lambda s, t: 16384 if s == sweep.sizes else _bucket(s, t), sweep, 1)
    pipe = NS(runs=[NS(microbatches=m, timing=NS(median_s=t)) for m, t in ((1, 0.1), (2, 0.3))])
    with expect_failure("your measured pipeline"):
        c3.check_choose_microbatches(lambda s: 2 if s == {1: 0.1, 2: 0.3} else _choose(s), pipe, 2)


def test_a_prediction_must_be_a_number():
    with expect_failure("guess_3_1 is the text 'big': set it to your guess, a number (bytes)"):
        c3.check_bucket_bytes(_bucket, guess="big")
    with expect_failure("guess_3_3 is None: set it to your guess, a whole number"):
        c3.check_choose_microbatches(_choose)
