"""Lab 3's wrong-answer tables: for each exercise, plausible wrong answers of a learner who
half-understood the chapter, each rejected with a message that names the real mistake."""
import math

import numpy as np

from gpucourse import models
from gpucourse.check import ch3 as c3
from wrong_answer_table import table_tests


def ring(nbytes, workers, bandwidth, latency):
    p = workers
    return 2 * (p - 1) / p * nbytes / bandwidth + 2 * (p - 1) * latency


def scenario(fn=ring, bytes_per_grad=None):
    s = c3.SCENARIO_3_1
    return fn(s["params"] * (bytes_per_grad or s["bytes_per_grad"]), s["workers"], s["bandwidth"],
              s["latency"])


def _gradients(transform, p=2, seed=0):
    """What ``transform(local gradients per rank, p)`` leaves on each rank, as the workers
    report it (experiments.ch3.try_average_gradients)."""
    g = np.random.default_rng(seed)
    shapes = [(5, 4), (5,), (3, 5), (3,)]
    local = [[g.normal(size=s) * np.exp(g.uniform(-2, 2, s)) for s in shapes] for _ in range(p)]
    ref = [sum(local[r][i] for r in range(p)) / p for i in range(len(shapes))]
    return {"world_size": p, "names": ["0.weight", "0.bias", "1.weight", "1.bias"],
            "local": local, "manual": transform(local, p), "reference": ref}


def _average(local, p):
    return [[sum(local[r][i] for r in range(p)) / p for i in range(len(local[0]))] for _ in range(p)]


def microbatches(stages, target=0.2):
    m = 1
    while models.pipeline_bubble(stages, m).bubble_fraction >= target:
        m += 1
    return m


def _search(first=1, last=10**6, condition=lambda b, t: b < t):
    def smallest(stages, target=0.2):
        for m in range(first, last):
            if condition(models.pipeline_bubble(stages, m).bubble_fraction, target):
                return m
        return last - 1
    return smallest


def choose(params, activations, device_bytes, devices, need=None,
           stages=lambda need, mem: math.ceil(need / mem),
           fits=lambda k, d: k <= d):
    need = need or models.training_memory(int(params), int(activations), dtype="bf16",
                                          optimizer="adam").total
    if need <= device_bytes:
        return ("data", 1)
    k = stages(need, device_bytes)
    return ("pipeline", k) if fits(k, devices) else ("does not fit", k)


def _strategy(**how):
    return lambda p, a, m, n: choose(p, a, m, n, **how)


CHECKS = {"3.1": lambda answer: c3.check_allreduce_time(*answer),
          "3.2": c3.check_average_gradients, "3.3": c3.check_microbatches,
          "3.4": c3.check_strategy}
REFERENCES = {"3.1": (ring, scenario()), "3.2": _gradients(_average), "3.3": microbatches,
              "3.4": choose}

WRONG_ANSWERS = {
    "3.1": [
        ("no 2(p-1)/p factor", (lambda n, p, bw, lat: n / bw + 2 * (p - 1) * lat, None),
         "lacks the factor 2(p-1)/p"),
        ("the reduce-scatter half only",
         (lambda n, p, bw, lat: (p - 1) / p * n / bw + (p - 1) * lat, None), "reduce-scatter half"),
        ("no latency term", (lambda n, p, bw, lat: 2 * (p - 1) / p * n / bw, None),
         "latency term"),
        ("(p - 1) // p", (lambda n, p, bw, lat: 2 * ((p - 1) // p) * n / bw + 2 * (p - 1) * lat,
                          None), "integer division"),
        ("bits, not bytes", (lambda n, p, bw, lat: 8 * ring(n, p, bw, lat / 8), None),
         "bytes, not bits"),
        ("t_step in milliseconds", (ring, scenario() * 1e3), "milliseconds"),
        ("t_step with 4-byte gradients", (ring, scenario(bytes_per_grad=4)), "2 bytes each"),
        ("0 for an empty message", (lambda n, p, bw, lat: ring(n, p, bw, lat) if n else 0.0, None),
         "2(p-1) x latency, not 0"),
    ],
    "3.2": [
        ("summed, not averaged", _gradients(lambda local, p: [[x * p for x in r]
                                                              for r in _average(local, p)]),
         "divide by the world"),
        ("nothing exchanged", _gradients(lambda local, p: local), "own gradient"),
        ("divided without the all-reduce",
         _gradients(lambda local, p: [[x / p for x in r] for r in local]), "only divided"),
        ("divided twice", _gradients(lambda local, p: [[x / p for x in r] for r in _average(local, p)]),
         "divide once"),
        ("the last layer left out",
         _gradients(lambda local, p: [r[:2] + local[i][2:] for i, r in enumerate(_average(local, p))]),
         "1.weight"),
        ("an all-reduce in float16",
         _gradients(lambda local, p: [[sum(x.astype(np.float16) for x in g) / p for g in zip(*local)]
                                      for _ in range(p)]), "float32 rounding allows"),
        ("a fixed divisor of 2", {**_gradients(_average), "reads_world_size": False},
         "never uses world_size"),
    ],
    "3.3": [
        ("<= instead of <", _search(condition=lambda b, t: b <= t), "strictly below"),
        ("the bubble as (p-1)/m", lambda p, t=0.2: next(m for m in range(1, 10**6) if (p - 1) / m < t),
         "not (p-1)/m"),
        ("a search from 2", _search(first=2), "expected 1"),
        ("a search capped at 100", _search(last=101), "expected 134"),
        ("a float", lambda p, t=0.2: float(microbatches(p, t)), "an int"),
        ("one too few", lambda p, t=0.2: max(1, microbatches(p, t) - 1), "not strictly below"),
    ],
    "3.4": [
        ("need // memory + 1 stages", _strategy(stages=lambda need, mem: int(need // mem) + 1),
         "exact multiple"),
        ("need < memory for one device",
         lambda p, a, m, n: ("pipeline", 1) if choose(p, a, m, n) == ("data", 1) and
         models.training_memory(int(p), int(a), dtype="bf16").total == m else choose(p, a, m, n),
         "exactly the device memory"),
        ("stages rounded down", _strategy(stages=lambda need, mem: max(1, math.floor(need / mem))),
         "round the number of stages up"),
        ("k < devices", _strategy(fits=lambda k, d: k < d), "stages <= devices"),
        ("the fp32 footprint", lambda p, a, m, n: choose(
            p, a, m, n, need=models.training_memory(int(p), int(a)).total), 'dtype="bf16"'),
        ("the weights only", lambda p, a, m, n: choose(p, a, m, n, need=2 * p + 2 * a),
         "16 bytes per parameter"),
        ("('data', devices)", lambda p, a, m, n: ("data", n) if choose(p, a, m, n)[0] == "data"
         else choose(p, a, m, n), "return ('data', 1)"),
    ],
}


test_the_reference_passes, test_a_wrong_answer_is_rejected_and_named = \
    table_tests(CHECKS, REFERENCES, WRONG_ANSWERS)
