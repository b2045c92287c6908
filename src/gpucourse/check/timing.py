"""Checkers for timing code: a simulated asynchronous device with a cold start.

A GPU launch returns before the work is done, and the first calls pay one-off costs
(compilation, allocation, clock ramp). ``SimulatedAsyncDevice`` reproduces both on the
CPU with a worker thread, so a learner's timing function can be checked anywhere: it must
warm up and synchronize to report the true steady-state time.
"""
from __future__ import annotations

import threading
import time

from .lab import Exercise, callable_answer, number_answer


class SimulatedAsyncDevice:
    """``launch()`` queues ``work_s`` of work and returns at once; ``synchronize()`` waits.

    The first ``cold_calls`` launches cost ``cold_extra_s`` more (a cold start), so a
    handful of timed calls without warm-up gets the wrong median.
    """

    # Five cold calls: more than a handful of timed calls without warm-up can outvote, fewer
    # than gc.bench's warm-up and first samples absorb (the course's own harness must pass).
    def __init__(self, work_s: float = 0.004, cold_calls: int = 5, cold_extra_s: float = 0.03):
        self.work_s, self.cold_calls, self.cold_extra_s = work_s, cold_calls, cold_extra_s
        self.launches = 0
        self.syncs = 0
        self._busy_until = time.perf_counter()
        self._lock = threading.Lock()

    def launch(self) -> None:
        with self._lock:
            cost = self.work_s + (self.cold_extra_s if self.launches < self.cold_calls else 0.0)
            start = max(time.perf_counter(), self._busy_until)
            self._busy_until = start + cost
            self.launches += 1

    def synchronize(self) -> None:
        self.syncs += 1
        while True:
            with self._lock:
                remaining = self._busy_until - time.perf_counter()
            if remaining <= 0:
                return
            if remaining > 3e-4:  # sleep most of the wait, spin the end: a few µs late, not 100
                time.sleep(min(remaining - 2e-4, 0.001))


def check_timer(measure, number: str = "0.2", title: str = "a correct timing function") -> float:
    """Check ``measure(launch, synchronize) -> seconds per call`` on a simulated device.

    Fails when the result is far from the true per-call time: the usual causes are a
    missing synchronize (far too fast) or a missing warm-up (far too slow).
    """
    with Exercise(number, title):
        callable_answer(measure, "the timing function is", "def measure(launch, synchronize): ...")
        dev = SimulatedAsyncDevice()
        got = number_answer(measure(dev.launch, dev.synchronize),
                            "the timing function returned", "seconds per call")
        true = dev.work_s
        assert dev.syncs > 0, ("your function never called synchronize(): it timed the launch, "
                               "not the work (asynchronous launches return at once).")
        assert got < 20 * true, (
            f"{got:.4g} s per call is {got / true:.3g} x the true {true:.4g} s: check the unit "
            "(return seconds, not milliseconds or microseconds).")
        # The simulated device is accurate to a few µs in 4 ms, so a right timer lands within
        # a few per cent; outside 0.8-1.25 something is missing.
        assert got > 0.8 * true, (
            f"measured {got * 1e3:.3f} ms per call but the work takes {true * 1e3:.1f} ms: "
            "synchronize before you stop the clock.")
        assert got < 1.25 * true, (
            f"measured {got * 1e3:.1f} ms per call but the steady state is {true * 1e3:.1f} ms: "
            "warm up first (the first calls are slow) and report the median of several calls.")
        assert dev.launches >= dev.cold_calls + 3, "run several timed calls after the warm-up."
    return got
