"""Checkers of lab 3 (parallelism): an all-reduce bucket size from measured times, gradient
averaging by hand, a micro-batch count from measured pipeline steps, and choosing a parallel
strategy from memory models.

They use ``gpucourse.models`` only; the distributed exercise is checked on the gradients
that the workers return (``experiments.ch3.try_average_gradients`` produces them).
"""
from __future__ import annotations

import math

import numpy as np

from .. import models, precision
from .lab import Exercise, answer_error, callable_answer, choice_answer, whole_answer
from .predict import prediction

# At least this share of the best measured algorithm bandwidth: latency no longer dominates.
BANDWIDTH_SHARE = 0.5
_EXACT = 1e-9  # relative: a share this close to a limit is on it


def bucket_bytes_reference(sizes, seconds) -> int:
    """The smallest message size whose algorithm bandwidth (size / time) reaches at least
    BANDWIDTH_SHARE of the best measured one."""
    bw = [n / t for n, t in zip(sizes, seconds)]
    best = max(bw)
    return int(min(n for n, b in zip(sizes, bw) if b >= BANDWIDTH_SHARE * best * (1 - _EXACT)))


def _ring_times(sizes, workers, bandwidth, latency, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    return [models.ring_allreduce_time(n, workers, bandwidth, latency).time
            * float(np.exp(rng.normal(0, noise))) for n in sizes]


def bucket_cases() -> list[tuple[str, list, list]]:
    """(what, sizes, seconds): the ring model with noise; data where the largest message is
    not the fastest (a cache or a protocol switch); exactly half the best; every size already
    past half."""
    sizes = [2**k for k in range(10, 25, 2)]
    out = [("4 workers, noisy (ring model x noise)", sizes,
            _ring_times(sizes, 4, 2e9, 3e-5, noise=0.15, seed=3)),
           ("8 GPUs over NVLink (ring model)", [2**k for k in range(12, 31, 2)],
            _ring_times([2**k for k in range(12, 31, 2)], 8, 4e11, 8e-6))]
    # Algorithm bandwidth in GB/s per size: the best is in the middle, the largest drops.
    peaked = [0.02, 0.08, 0.3, 1.0, 2.0, 1.1, 0.6]
    out.append(("gloo, the largest messages slower (made-up)", sizes[:7],
                [n / (g * 1e9) for n, g in zip(sizes[:7], peaked)]))
    # Powers of two: the bandwidth of 2^16 bytes is exactly half of the best.
    out.append(("exactly half the best at 64 KiB", sizes[:6],
                [2.0**10 / 2**30, 2.0**12 / 2**31, 2.0**14 / 2**32, 2.0**16 / 2**33,
                 2.0**18 / 2**34, 2.0**20 / 2**34]))
    out.append(("every size past half (made-up)", sizes[:4],
                [n / (g * 1e9) for n, g in zip(sizes[:4], (0.9, 1.0, 1.1, 0.95))]))
    return out


def check_bucket_bytes(bucket_bytes, sweep=None, guess=None, number: str = "3.1",
                       title: str = "an all-reduce bucket from measured times") -> None:
    """``bucket_bytes(sizes, seconds) -> bytes`` on the learner's own ``sweep`` (what
    ``experiments.ch3.allreduce_sweep`` returned) and on data with awkward cases; ``guess``
    is the prediction, checked only for its type."""
    with Exercise(number, title):
        prediction(guess, f"guess_{number.replace('.', '_')}", unit="bytes")
        callable_answer(bucket_bytes, "bucket_bytes is", "def bucket_bytes(sizes, seconds): ...")
        cases = bucket_cases()
        if sweep is not None:
            if not (hasattr(sweep, "sizes") and hasattr(sweep, "allreduce")):
                raise answer_error("sweep is", sweep, "pass what ch3.allreduce_sweep(pool) returned")
            cases.insert(0, ("your measured sweep", list(sweep.sizes),
                             [t.median_s for t in sweep.allreduce]))
        for what, sizes, seconds in cases:
            got = whole_answer(bucket_bytes(list(sizes), list(seconds)),
                               f"bucket_bytes(...) on {what} returned", "bytes")
            want = bucket_bytes_reference(sizes, seconds)
            if got == want:
                continue
            bw = [n / t for n, t in zip(sizes, seconds)]
            best = max(bw)
            if got not in sizes:
                why = (f"return one of the measured sizes in bytes, not its index"
                       if 0 <= got < len(sizes) else "return one of the measured sizes")
            elif got > want and abs(bw[sizes.index(want)] / best - BANDWIDTH_SHARE) <= _EXACT:
                why = f"{want} bytes reach exactly half of the best, and at least half counts"
            elif got == sizes[int(np.argmax(bw))]:
                why = "that size has the best bandwidth; a smaller one already reaches half of it"
            elif got < want:
                why = (f"{got} bytes reach only {bw[sizes.index(got)] / best:.0%} of the best "
                       "bandwidth: latency still dominates there")
                if bw[-1] < best and got == min(n for n, b in zip(sizes, bw)
                                                if b >= BANDWIDTH_SHARE * bw[-1] * (1 - _EXACT)):
                    why += (" (that is half of the largest message's bandwidth: take half of the "
                            "best measured one, wherever it is)")
            else:
                why = "take the smallest size that reaches half of the best"
            raise AssertionError(
                f"{what}: {want} bytes, not {got}: the best algorithm bandwidth (bytes / "
                f"seconds) is {best / 1e9:.3g} GB/s, and {want} bytes is the smallest size "
                f"that reaches half of it; {why}.")



# --------------------------------------------------------------------------- 3.2

def _max_rel(a, b) -> float:
    scale = float(np.abs(b).max()) or 1.0
    return float(np.abs(np.asarray(a) - np.asarray(b)).max()) / scale


def average_error_bound(grads) -> np.ndarray:
    """Elementwise bound on how far a float32 average of the ranks' gradients ``grads`` (one
    array per rank) may lie from the exact average: gamma_(p+1) * sum_r |g_r| / p.

    Summing p terms in any order (ring, tree, buckets) rounds each at most p - 1 times, and
    dividing by p (or multiplying by a rounded 1/p, before or after the sum) at most twice
    more: (p + 1) * 2^-24 * sum|g| / p to first order. The float64 reference's own rounding is
    added (the same with 2^-53).
    """
    g = np.asarray(grads, dtype=np.float64)
    p = len(g)
    return (precision.gamma(p + 1) + precision.gamma(p + 1, precision.U64)) * np.abs(g).sum(axis=0) / p


def check_average_gradients(result: dict, number: str = "3.2",
                            title: str = "gradients averaged with all_reduce match DDP") -> None:
    """``result`` from ``experiments.ch3.try_average_gradients``: after your function every
    rank must hold the full-batch gradient of every parameter (what DDP computes): the average
    of the ranks' own gradients, within ``average_error_bound`` of float32 rounding."""
    with Exercise(number, title):
        keys = ("world_size", "reference", "names", "manual", "local")
        if not (isinstance(result, dict) and all(k in result for k in keys)):
            raise answer_error("result is", result, "pass what "
                               "experiments.ch3.try_average_gradients(your_function) returns (a "
                               "dict of the workers' gradients)")
        p = whole_answer(result["world_size"], "result['world_size'] is", "workers")
        assert p >= 2, (f"run it on at least 2 workers (got {p}): with one worker any function "
                        "that leaves the gradients alone looks right.")
        ref, names = result["reference"], result["names"]
        # What every rank must hold: the exact average of the ranks' own float32 gradients (the
        # full-batch gradient, as the shards are of equal size), within float32 rounding of it.
        locals_ = [[np.asarray(g, dtype=np.float64) for g in rank] for rank in result["local"]]
        average = [np.mean([rank[i] for rank in locals_], axis=0) for i in range(len(ref))]
        bound = [average_error_bound([rank[i] for rank in locals_]) for i in range(len(ref))]
        tol = 1e-4  # only to name a mistake once the bound has rejected the answer
        for rank, (manual, local) in enumerate(zip(result["manual"], result["local"])):
            assert len(manual) == len(ref), (
                f"rank {rank} returned {len(manual)} gradients for {len(ref)} parameters.")
            for name, g, loc, want, allowed in zip(names, manual, local, average, bound):
                try:  # a gradient that is not an array of numbers counts as missing
                    g = None if g is None else np.asarray(g, dtype=np.float64)
                except (TypeError, ValueError):
                    g = None
                if g is None or not np.isfinite(g).all():
                    raise AssertionError(f"rank {rank}: the gradient of {name} is missing or not "
                                         "finite; average the existing p.grad in place.")
                if g.shape == want.shape and np.all(np.abs(g - want) <= allowed):
                    continue
                if g.shape != want.shape:
                    raise AssertionError(f"rank {rank}: the gradient of {name} has shape "
                                         f"{g.shape}, the parameter {want.shape}; average p.grad "
                                         "in place.")
                err = _max_rel(g, want)
                if _max_rel(g, loc) <= 1e-6:
                    why = ("it still holds this rank's own gradient: call dist.all_reduce on "
                           "p.grad itself (every parameter, every rank); it works in place, so "
                           "reducing a copy, or p.data, leaves p.grad as it was")
                elif _max_rel(g, p * np.asarray(want)) <= tol:
                    why = (f"it is {p} x the average: all_reduce sums, so divide by the world "
                           "size")
                elif _max_rel(g, np.asarray(want) / p) <= tol:
                    why = f"it is the average divided by {p} again: divide once"
                elif _max_rel(g, np.asarray(loc) / p) <= 1e-6:
                    why = ("it is only divided by the world size: all_reduce it first so that it "
                           "holds the sum over ranks")
                else:
                    why = "it is neither the sum nor the average over ranks"
                i = np.unravel_index(int(np.argmax(np.abs(g - want) - allowed)), g.shape)
                raise AssertionError(
                    f"rank {rank}: the gradient of {name} differs from the full-batch gradient "
                    f"(relative error {err:.2g}; element {tuple(map(int, i))} is off by "
                    f"{abs(g[i] - want[i]):.3g}, float32 rounding allows {allowed[i]:.3g}); {why}.")
        assert result.get("reads_world_size") is not False, (
            f"the gradients are right on {p} workers, but the function never uses world_size "
            "(or dist.get_world_size()): divide by it, not by a fixed number, so that it is "
            "right on any number of workers.")


# --------------------------------------------------------------------------- 3.3 micro-batches

STEP_SLACK = 0.05  # a count whose step is within 5 % of the fastest is as good


def choose_microbatches_reference(step_seconds: dict) -> int:
    """The fewest micro-batches whose measured step is within STEP_SLACK of the fastest."""
    best = min(step_seconds.values())
    return min(m for m, t in step_seconds.items() if t <= best * (1 + STEP_SLACK) * (1 + _EXACT))


def smallest_microbatches_reference(stages: int, target: float) -> int:
    """The fewest micro-batches whose GPipe bubble is strictly below ``target``: the bubble
    model's count, which a learner may return instead of deciding from the measured steps.

    The closed form m > (p-1)(1-t)/t gives the neighbourhood; the model decides the
    boundary, so rounding in the closed form cannot move the answer.
    """
    def bubble(m: int) -> float:
        return models.pipeline_bubble(stages, m).bubble_fraction

    m = max(1, math.floor((stages - 1) * (1 - target) / target) + 1)
    while bubble(m) >= target:
        m += 1
    while m > 1 and bubble(m - 1) < target:
        m -= 1
    return m


MICROBATCH_STEPS = [
    ("4 GPUs, large layers (made-up)", {1: 1.0, 2: 0.7, 4: 0.55, 8: 0.5, 16: 0.49}),
    ("2 CPU workers over gloo (made-up)", {1: 0.08, 2: 0.1, 4: 0.13, 8: 0.2}),
    ("exactly 5 % slower with fewer", {1: 1.05, 2: 1.0, 4: 1.2}),
    ("noisy, not monotone (made-up)", {1: 0.3, 2: 0.21, 4: 0.24, 8: 0.2, 16: 0.26}),
    ("measured in another order (made-up)", {8: 0.5, 1: 1.0, 4: 0.52, 2: 0.7}),
]


def check_choose_microbatches(choose_microbatches, pipe=None, guess=None, number: str = "3.3",
                              title: str = "micro-batches from measured steps") -> None:
    """``choose_microbatches(step_seconds) -> m`` on the learner's own ``pipe`` (what
    ``experiments.ch3.pipeline`` returned) and on data with awkward cases; ``guess`` is the
    prediction, checked only for its type."""
    with Exercise(number, title):
        prediction(guess, f"guess_{number.replace('.', '_')}", unit="micro-batches",
                   whole=True)
        callable_answer(choose_microbatches, "choose_microbatches is",
                        "def choose_microbatches(step_seconds): ...")
        cases = list(MICROBATCH_STEPS)
        if pipe is not None:
            if not hasattr(pipe, "runs"):
                raise answer_error("pipe is", pipe, "pass what ch3.pipeline(pool, ...) returned")
            cases.insert(0, ("your measured pipeline",
                             {r.microbatches: r.timing.median_s for r in pipe.runs}))
        for what, steps in cases:
            got = whole_answer(choose_microbatches(dict(steps)),
                               f"choose_microbatches(...) on {what} returned", "micro-batches",
                               strict=True)
            want = choose_microbatches_reference(steps)
            if got == want:
                continue
            best = min(steps, key=steps.get)
            model = smallest_microbatches_reference(2, 0.2)
            slack = f"{STEP_SLACK * 100:g} %"
            if got not in steps:
                why = (f"{got} was not measured: choose one of {sorted(steps)}"
                       + (" (that is the bubble model's count for a 20 % bubble, which the "
                          "measurement decides against here)" if got == model else ""))
            elif got > want and math.isclose(steps[want], steps[best] * (1 + STEP_SLACK)):
                why = f"{want} is exactly {slack} slower, and within {slack} includes {slack}"
            elif got == best:
                why = (f"{got} is the fastest, but {want} is within {slack} of it with "
                       "fewer micro-batches (fewer messages, less memory)")
            elif got > want:
                why = f"{want} is also within {slack} of the fastest, and fewer"
            else:
                why = (f"its step ({steps[got]:.3g} s) is more than {slack} slower than "
                       f"the fastest ({steps[best]:.3g} s with {best})")
            raise AssertionError(f"{what}: {want} micro-batches, not {got}: {why}.")


# --------------------------------------------------------------------------- 3.4

GIB = 2**30

# (params, activations kept for backward, device memory bytes, devices) -> expected answer.
# Mixed precision with Adam: bf16 weights and gradients, fp32 master weights and two fp32
# optimizer states: 16 bytes per parameter, plus 2 bytes per activation value.
STRATEGY_CASES = [
    (350e6, 2e8, 80 * GIB, 8),     # fits on one GPU: data parallel
    (7e9, 4e9, 80 * GIB, 8),       # weights (14 GB) fit, the training state (120 GB) does not
    (70e9, 2e10, 80 * GIB, 8),     # 1.16 TB: more than 8 x 80 GiB
    (1.3e9, 1e9, 16 * GIB, 4),     # 22.8 GB on 16 GiB: 2 stages (1.33 rounds down to 1)
    (3e9, 2.5e9, 24 * GIB, 4),     # 53 GB on 24 GiB: 2.06 -> 3 stages
    (20e9, 1e10, 80 * GIB, 4),     # 340 GB on 80 GiB: 3.96 -> 4 stages, all devices
    (100e6, 5e7, 16 * GIB, 1),     # one device, fits
    # exact multiples of the device memory (18 GB of state): need // memory + 1 is one too many
    (1e9, 1e9, 9e9, 4),            # exactly 2 devices' worth: 2 stages
    (1e9, 1e9, 18e9, 4),           # exactly one device's worth: data parallel
    (1e9, 1e9, 4.5e9, 4),          # exactly 4 devices' worth on 4 devices: 4 stages, all of them
    (1e9, 1e9, 6e9, 2),            # exactly 3 devices' worth on 2: does not fit, 3 stages
]


def training_bytes(params: float, activations: float) -> int:
    """Bytes one replica needs to train with bf16 mixed precision and Adam (the model)."""
    return models.training_memory(int(params), int(activations), dtype="bf16",
                                  optimizer="adam").total


def choose_strategy_reference(params: float, activations: float, device_bytes: float,
                              devices: int) -> tuple[str, int]:
    """("data", 1) when one device holds a replica; ("pipeline", k) with the fewest k stages
    that fit when the devices suffice; ("does not fit", k) otherwise."""
    return _strategy_for(training_bytes(params, activations), device_bytes, devices)


def _strategy_for(need: float, device_bytes: float, devices: int) -> tuple[str, int]:
    if need <= device_bytes:
        return ("data", 1)
    k = math.ceil(need / device_bytes)
    return ("pipeline", k) if k <= devices else ("does not fit", k)


def check_strategy(choose_strategy, number: str = "3.4",
                   title: str = "a parallel strategy from the memory model") -> None:
    """``choose_strategy(params, activations, device_bytes, devices) -> (name, stages)``."""
    with Exercise(number, title):
        callable_answer(choose_strategy, "choose_strategy is",
                        "def choose_strategy(params, activations, device_bytes, devices): ...")
        for params, acts, mem, n in STRATEGY_CASES:
            got = choose_strategy(params, acts, mem, n)
            assert isinstance(got, tuple) and len(got) == 2, (
                f"choose_strategy returned {got!r}: return a pair (name, stages), e.g. "
                "('pipeline', 2).")
            call = f"choose_strategy({params:g}, {acts:g}, {mem:g}, {n}) returned"
            name = choice_answer(got[0], f"{call} a name that is", ("data", "pipeline", "does not fit"))
            k = whole_answer(got[1], f"{call} a number of stages that is", "stages")
            got = (name, k)
            want = choose_strategy_reference(params, acts, mem, n)
            need = training_bytes(params, acts)
            case = (f"{params / 1e9:g} B parameters, {acts:.3g} activations, "
                    f"{mem / GIB:g} GiB x {n} devices (training state {need / 1e9:.1f} GB)")
            if (name, k) == want:
                continue
            weights_only = params * 2 + acts * 2
            fp32 = models.training_memory(int(params), int(acts)).total
            if need % mem == 0 and k == need // mem + 1:
                why = (f"the state is exactly {need // mem:g} x the device memory, so "
                       f"{need // mem:g} stage(s) hold it: round up with math.ceil(need / memory), "
                       "not need // memory + 1, which adds a stage at an exact multiple")
            elif need == mem and name != "data":
                why = ("the state is exactly the device memory: it fits on one device (the "
                       "condition is need <= memory)")
            elif need != fp32 and (name, k) == _strategy_for(fp32, mem, n):
                why = ("that is the fp32 footprint (training_memory's default dtype): pass "
                       "dtype=\"bf16\", which keeps the activations in 2 bytes")
            elif want == ("pipeline", n) and (name, k) == ("does not fit", n):
                why = (f"{n} stages on {n} devices is a pipeline that fits: the condition is "
                       "stages <= devices")
            elif name == "data" == want[0]:
                why = ("the second value counts pipeline stages: a data-parallel replica is one "
                       "stage, so return ('data', 1) whatever the number of devices")
            elif want[0] != "data" and name == "data" and weights_only <= mem:
                why = ("the weights fit, but training also keeps gradients, fp32 master weights "
                       "and two Adam states: 16 bytes per parameter (models.training_memory)")
            elif name != want[0]:
                why = f"expected {want[0]!r}"
            elif k == math.floor(need / mem) or k == round(need / mem):
                why = (f"{k} stage(s) hold {k * mem / 1e9:.1f} GB < {need / 1e9:.1f} GB: round "
                       "the number of stages up")
            else:
                why = f"expected {want[1]} stage(s), the fewest whose memory holds the state"
            raise AssertionError(f"for {case} you chose {got!r}, expected {want!r}: {why}.")
