"""Lab 3's wrong-answer tables: for each exercise, plausible wrong answers of a learner who
half-understood the chapter, each rejected with a message that names the real mistake."""
import math

import numpy as np

from gpucourse import models
from gpucourse.check import ch3 as c3
from wrong_answer_table import table_tests


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


def bucket(share=lambda bw: 0.5 * max(bw), strict=False, pick=min):
    """A learner's bucket_bytes; the keywords are the mistakes."""
    def bucket_bytes(sizes, seconds):
        bw = [n / t for n, t in zip(sizes, seconds)]
        limit = share(bw)
        return pick(n for n, b in zip(sizes, bw) if (b > limit if strict else b >= limit))
    return bucket_bytes


def steps(pick=lambda s, best: min(m for m, t in s.items() if t <= best * 1.05 * (1 + 1e-12)),
          best=lambda s: min(s.values())):
    """A learner's choose_microbatches."""
    return lambda s: pick(s, best(s))


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


CHECKS = {"3.1": lambda answer: c3.check_bucket_bytes(answer, guess=2**16),
          "3.2": c3.check_average_gradients,
          "3.3": lambda answer: c3.check_choose_microbatches(answer, guess=4),
          "3.4": c3.check_strategy}
REFERENCES = {"3.1": bucket(), "3.2": _gradients(_average), "3.3": steps(),
              "3.4": choose}

WRONG_ANSWERS = {
    "3.1": [
        ("half of the largest message's bandwidth", bucket(share=lambda bw: 0.5 * bw[-1]),
         "half of the largest message"),
        ("more than half, not at least half", bucket(strict=True), "at least half counts"),
        ("the size of the best bandwidth", lambda s, t: s[max(range(len(s)), key=lambda i: s[i] / t[i])],
         "best bandwidth; a smaller one"),
        ("the index of the size", lambda s, t: s.index(bucket()(s, t)), "not its index"),
        ("one step short", lambda s, t: s[max(0, s.index(bucket()(s, t)) - 1)], "latency still dominates"),
        ("a tenth of the best", bucket(share=lambda bw: 0.1 * max(bw)), "latency still dominates"),
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
        ("the fastest count", lambda s: min(s, key=s.get), "is the fastest"),
        ("strictly within 5 %", steps(pick=lambda s, best: min(m for m, t in s.items() if t < best * 1.05)),
         "within 5 % includes 5 %"),
        ("the first within 5 % in the dict's order",
         steps(pick=lambda s, best: next(m for m, t in s.items() if t <= best * 1.05 * (1 + 1e-12))),
         "with fewer micro-batches"),
        ("the bubble model's count", lambda s: c3.smallest_microbatches_reference(2, 0.2),
         "bubble model's count"),
        ("within 5 % of one micro-batch", steps(best=lambda s: s[1]), "more than 5 % slower"),
        ("a float", lambda s: float(c3.choose_microbatches_reference(s)), "an int"),
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
