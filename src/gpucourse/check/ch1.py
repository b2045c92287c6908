"""Lab checkers of chapter 1: coalesced indexing, what limits a measured operation (memory,
compute or overhead), which kernel of a GPU's reference measurements to optimize first, timing
an asynchronous operation, and the cost of a host-to-device transfer.

Each checker raises AssertionError saying what is wrong and prints one line when right.
They use ``kernels`` and ``models`` (never ``experiments``).
"""
from __future__ import annotations

import math
import os
from typing import Callable

import numpy as np

from .. import device, kernels, models, precision, reference, specs
from ..errors import CourseError
from .compare import assert_close, random_array
from .lab import (Exercise, answer_error, callable_answer, choice_answer, number_answer,
                  text_answer, tuple_answer)
from .predict import prediction
from .timing import SimulatedAsyncDevice, check_timer

# --------------------------------------------------------------------------- 1.1 coalescing

CHUNKED_ELEMENT = r"""
// The index of the k-th element (k = 0, 1, ...) that this thread handles, of n.
__device__ long long element(int k, int n) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;  // this thread
    const long long T = (long long)gridDim.x * blockDim.x;                  // threads in the grid
    const long long per_thread = (n + T - 1) / T;
    return t * per_thread + k;  // each thread takes a contiguous chunk, as one would on a CPU
}
"""

SCALE_KERNEL = r"""
// y[i] = a * x[i] for n floats. A grid of T threads handles n > T elements, so each thread
// handles several: the k-th is element(k, n).
extern "C" __global__ void scale(const float* x, float* y, float a, int n) {
    const long long T = (long long)gridDim.x * blockDim.x;
    const int iterations = (int)((n + T - 1) / T);
    for (int k = 0; k < iterations; ++k) {
        const long long i = element(k, n);
        if (i >= 0 && i < n) y[i] = a * x[i];
    }
}
"""

# Appended to the learner's element(): records which element each thread takes at each step,
# so the sector model can look at every warp's addresses.
_PROBE = r"""
extern "C" __global__ void ch1_probe_element(long long* idx, int n, int iterations) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long T = (long long)gridDim.x * blockDim.x;
    for (int k = 0; k < iterations; ++k) idx[(long long)k * T + t] = element(k, n);
}
"""

# (n, blocks, threads per block): n larger than the grid so every thread loops, sizes that
# divide nothing, and a block that is not a multiple of the warp size.
SCALE_CASES = ((1, 1, 32), (1000, 2, 128), (4099, 3, 96), (10007, 4, 64), (5000, 2, 80),
               (200, 1, 80))  # 80 threads in all: a stride rounded up to whole warps skips some


def warp_accesses(idx: np.ndarray, n: int, blocks: int, threads: int, iterations: int):
    """Yield (step, block, warp, element indices of its active lanes) from a probe run."""
    total = blocks * threads
    for k in range(iterations):
        step = idx[k * total:(k + 1) * total]
        for b in range(blocks):
            for w in range(math.ceil(threads / 32)):
                lanes = step[b * threads + 32 * w: b * threads + min(threads, 32 * (w + 1))]
                active = lanes[(lanes >= 0) & (lanes < n)]
                if active.size:
                    yield k, b, w, active


def _min_sectors(count: int, elem_bytes: int = 4) -> int:
    """Sectors a warp needs for ``count`` contiguous elements (one more if not aligned)."""
    return math.ceil(count * elem_bytes / models.SECTOR_BYTES) + 1


def _assert_each_once(taken: np.ndarray, n: int, blocks: int, threads: int) -> None:
    """Every element 0..n-1 taken by exactly one (thread, step): y = a * x gives the same
    value when written twice, so the scale results alone cannot show a repeat."""
    counts = np.bincount(taken[(taken >= 0) & (taken < n)], minlength=n)
    twice = np.flatnonzero(counts > 1)
    if twice.size:
        raise AssertionError(
            f"element {int(twice[0])} is taken {int(counts[twice[0]])} times (n={n}, {blocks} block"
            f"{'s' * (blocks != 1)} of {threads}; {twice.size} elements in all are taken more than once): "
            "each element must be handled by exactly one thread at one step k.")


def _kernel_backend() -> str:
    """Where the learner's kernel runs: the GPU when CuPy works there (and GPUCOURSE_DEVICE
    does not ask for the CPU), else the emulator.

    Only CuPy is asked: without it the kernel runs on the emulator whatever PyTorch finds, and
    ``device.backend()`` would import PyTorch to look for a GPU, seconds on a 2-core machine.
    """
    if os.environ.get(device.ENV_VAR, "").strip().lower() != "cpu" and device.cupy_works():
        return device.backend()
    return "cpu"


def _on(backend: str, array: np.ndarray):
    """``array`` where a kernel of ``backend`` reads it."""
    return device.asarray(array) if backend == "cuda" else np.ascontiguousarray(array)


def check_coalesced_scale(element_source: str, number: str = "1.1") -> None:
    """The learner's ``element(k, n)`` in ``SCALE_KERNEL``: right at awkward sizes and grids (on
    the emulator without a GPU), and every warp access as few 32-byte sectors as its lanes need
    (the sector model, on the element each thread takes)."""
    with Exercise(number, "coalesced indexing"):
        text_answer(element_source, "element_source is",
                    "pass your element() function as CUDA C source in a string")
        if "NotImplementedError" in element_source:
            raise NotImplementedError
        assert "element" in element_source, (
            "define `__device__ long long element(int k, int n)`: the kernel and the checker "
            "call it to see which element each thread takes.")
        backend = _kernel_backend()
        try:
            mod = kernels.from_source(element_source + SCALE_KERNEL + _PROBE, name="exercise_1_1.cu",
                                      backend=backend)
            mod.scale, mod.ch1_probe_element  # noqa: B018 (both must exist)
        except CourseError as exc:
            hint = ("\nSubmit only your element() function: the checker adds the scale kernel "
                    "itself." if "redefinition" in str(exc) and "scale" in str(exc) else "")
            raise AssertionError(f"the kernel does not build: {exc}{hint}") from None
        for n, blocks, threads in SCALE_CASES:
            x_host = random_array(n, np.float32, seed=n)
            x, y = _on(backend, x_host), _on(backend, np.full(n, np.nan, np.float32))
            a = np.float32(1.75)
            mod.scale((blocks,), (threads,), (x, y, a, np.int32(n)))
            try:  # one float32 multiply, rounded once: within 2^-24 of the exact product
                assert_close(device.to_host(y), x_host.astype(np.float64) * a, rtol=precision.U32,
                             atol=0, name=f"y for n={n} with {blocks} blocks of {threads} threads")
            except AssertionError as exc:
                raise AssertionError(f"{exc}\nEvery element must be scaled exactly once for any "
                                     "grid: the steps k = 0, 1, ... of all threads together must "
                                     "cover 0..n-1.") from None
        for n, blocks, threads in SCALE_CASES:
            total = blocks * threads
            iterations = math.ceil(n / total)
            idx = _on(backend, np.full(iterations * total, -1, np.int64))
            mod.ch1_probe_element((blocks,), (threads,), (idx, np.int32(n), np.int32(iterations)))
            taken = device.to_host(idx)
            _assert_each_once(taken, n, blocks, threads)
            for k, b, w, lanes in warp_accesses(taken, n, blocks, threads, iterations):
                # The sector model's count for aligned 4-byte elements, in one NumPy call (the
                # model itself, per warp, took most of the check's time); it explains a failure.
                if np.unique(lanes * 4 // models.SECTOR_BYTES).size > _min_sectors(lanes.size):
                    sec = models.sectors([int(i) * 4 for i in lanes], 4)
                    shown = ", ".join(str(int(i)) for i in lanes[:4])
                    raise AssertionError(
                        f"not coalesced: at step k={k}, warp {w} of block {b} reads elements "
                        f"{shown}, ... (n={n}, {blocks} blocks of {threads}). Its {lanes.size} lanes "
                        f"touch {sec.sectors} sectors of 32 B where {_min_sectors(lanes.size) - 1} "
                        f"would do ({sec.efficiency:.0%} efficiency in the sector model). "
                        "Neighbouring threads should take neighbouring elements at each step.")


# --------------------------------------------------------------------------- 1.2 what limits it

# At least this share of the roof at its intensity: the ceiling that sets the roof limits the
# operation; below it neither does (call overhead, caches, too little parallel work).
ROOF_SHARE = 0.5
_EXACT = 1e-9  # relative: a share this close to ROOF_SHARE is exactly on the boundary


def _roof(point: dict, ceilings: dict) -> models.Roofline:
    return models.roofline(point["flops"], point["bytes"], peak_flops=ceilings["peak_flops"],
                           bandwidth=ceilings["bandwidth_Bps"])


def roof_share(point: dict, ceilings: dict) -> float:
    """The measured rate of ``point`` as a share of the roof at its intensity."""
    return models.roof_share(point["flops"] / point["seconds"], point["flops"] / point["bytes"],
                             ceilings["peak_flops"], ceilings["bandwidth_Bps"])


def limited_by_reference(point: dict, ceilings: dict) -> str:
    """"memory" or "compute" (the ceiling that sets the roof at the point's intensity) when
    the point reaches at least ROOF_SHARE of that roof, else "overhead"."""
    share = roof_share(point, ceilings)
    return _roof(point, ceilings).bound if share >= ROOF_SHARE * (1 - _EXACT) else "overhead"


def _point(name, flops, nbytes, share, ceilings) -> dict:
    """A point that reaches ``share`` of its roof (an exact power of two stays exact)."""
    t = _roof({"flops": flops, "bytes": nbytes}, ceilings).time / share
    return {"name": name, "flops": flops, "bytes": nbytes, "seconds": t,
            "intensity": flops / nbytes, "rate": flops / t}


def limited_by_cases() -> list[tuple[str, dict]]:
    """(what, roofline data) the check decides on: the reference GPU measurements, and data
    where the chapter's intensity-against-ridge rule alone decides wrongly (an operation far
    below its roof), boundaries (exactly half the roof, exactly on the ridge) and noise (a
    rate a little above a measured roof)."""
    out = [(f"the reference roofline ({ref.provenance})", data)
           for ref, data in reference.find("ch1", "roofline")]
    cpu = {"bandwidth_Bps": 6e9, "peak_flops": 9e10}
    out.append(("a CPU's roofline", {"ceilings": cpu, "points": [
        _point("vector add 2^12", 2**12, 12 * 2**12, 0.08, cpu),       # a call's overhead
        _point("vector add 2^24", 2**24, 12 * 2**24, 0.8, cpu),
        _point("matmul 64x64", 2 * 64**3, 12 * 64**2, 0.3, cpu),       # above the ridge, slow
        _point("matmul 1024x1024", 2 * 1024**3, 12 * 1024**2, 0.9, cpu),
        _point("sum 2^24, one core", 2**24, 4 * 2**24, 0.35, cpu)]}))
    exact = {"bandwidth_Bps": 2.0**32, "peak_flops": 2.0**36}            # ridge: 16 FLOP/byte
    out.append(("exact boundaries", {"ceilings": exact, "points": [
        _point("half the bandwidth roof", 2.0**30, 2.0**30, 0.5, exact),
        _point("half the compute roof", 2.0**36, 2.0**30, 0.5, exact),
        _point("on the ridge", 2.0**34, 2.0**30, 0.75, exact),
        _point("just below half", 2.0**30, 2.0**30, 0.4375, exact),
        _point("above the measured roof", 2.0**30, 2.0**28, 1.0625, exact)]}))
    return out


def _why_not(got: str, want: str, point: dict, ceilings: dict) -> str:
    """The likely mistake behind ``got`` where ``want`` is right."""
    r, share = _roof(point, ceilings), roof_share(point, ceilings)
    roof = f"{r.attainable_flops / 1e9:.3g} GFLOP/s"
    if want == "overhead":
        return (f"it reaches only {share:.0%} of the roof at its intensity ({roof}): below "
                f"{ROOF_SHARE:.0%}, neither ceiling limits it, so the intensity against the ridge "
                "point cannot be the whole answer: return 'overhead'")
    if got == "overhead":
        if abs(share - ROOF_SHARE) <= ROOF_SHARE * _EXACT:
            return f"it reaches exactly {ROOF_SHARE:.0%} of its roof, and at least half counts"
        if share > 1:
            return (f"it runs at {share:.0%} of its roof: a rate a little above a measured roof "
                    f"is noise, and it is {want}-bound")
        if want == "memory":
            return (f"it reaches {share:.0%} of the roof at its intensity ({roof}): compare with "
                    "that roof, min(peak FLOP/s, intensity x bandwidth), not with the compute peak")
        return f"it reaches {share:.0%} of its roof ({roof}), at least {ROOF_SHARE:.0%}"
    if math.isclose(r.compute_time, r.memory_time, rel_tol=1e-12):
        return ("it sits exactly on the ridge point, where both ceilings meet: count it as "
                "compute-bound (compute time >= memory time), as models.roofline does")
    side = "below" if want == "memory" else "above"
    return (f"its intensity {r.intensity:.3g} FLOP/byte (FLOPs per byte, not bytes per FLOP) is "
            f"{side} the ridge point {r.ridge_point:.3g}, so the {want} ceiling sets its roof")


def check_limited_by(limited_by: Callable, measured: dict | None = None, guess=None,
                     number: str = "1.2") -> None:
    """``limited_by(point, ceilings) -> "memory" | "compute" | "overhead"`` on the learner's own
    measured roofline (``measured``), the reference GPU's and data with awkward cases; ``guess``
    is the prediction, checked only for its type."""
    with Exercise(number, "what limits a measured operation"):
        prediction(guess, f"guess_{number.replace('.', '_')}", LIMITS)
        callable_answer(limited_by, "limited_by is", "def limited_by(point, ceilings): ...")
        cases = limited_by_cases()
        if measured is not None:
            if not (isinstance(measured, dict) and "points" in measured and "ceilings" in measured):
                raise answer_error("measured is", measured, "pass the roofline dict that "
                                   "ch1.roofline() returned")
            cases.insert(0, ("your measured roofline", measured))
        for what, data in cases:
            ceilings = data["ceilings"]
            for point in data["points"]:
                got = choice_answer(limited_by(dict(point), dict(ceilings)),
                                    f"limited_by({point['name']!r} point, ceilings) returned",
                                    LIMITS)
                want = limited_by_reference(point, ceilings)
                assert got == want, (
                    f"{point['name']} ({what}): {want}, not {got}: "
                    f"{_why_not(got, want, point, ceilings)}.")


LIMITS = ("memory", "compute", "overhead")


# --------------------------------------------------------------------------- 1.3 what to optimize

def time_to_save(point: dict, ceilings: dict) -> float:
    """Seconds an operation would save by running at its roof (its roofline time)."""
    return point["seconds"] - _roof(point, ceilings).time


def optimize_first_reference(points: list, ceilings: dict) -> tuple[str, str]:
    """(name, bound) of the point with the most seconds to save; the first such on a tie."""
    best = max(points, key=lambda p: time_to_save(p, ceilings))
    return best["name"], _roof(best, ceilings).bound


def _at(name, flops, nbytes, seconds) -> dict:
    return {"name": name, "flops": flops, "bytes": nbytes, "seconds": seconds,
            "intensity": flops / nbytes, "rate": flops / seconds}


def optimize_first_cases() -> list[tuple[str, dict]]:
    """(what, data): the reference GPU's measured kernels, and data where the slowest kernel,
    the one furthest below its roof in per cent, or the compute-bound one is not the answer."""
    out = [(f"the reference measurements ({ref.provenance})", data)
           for ref, data in reference.find("ch1", "roofline")]
    gpu = {"bandwidth_Bps": 3.0e12, "peak_flops": 6.0e13}
    out.append(("a training step's kernels (made-up data)", {"ceilings": gpu, "points": [
        _at("layer norm", 8 * 2**26, 4 * 2**26, 1.2e-4),           # 75 % of its roof, short
        _at("softmax", 5 * 2**20, 8 * 2**20, 2.0e-5),              # 14 % of its roof, tiny
        _at("attention matmul", 2 * 4096**3, 6 * 4096**2, 3.0e-3),  # 76 %, the longest
        _at("bias + GELU", 10 * 2**28, 8 * 2**28, 2.4e-3)]}))      # memory-bound, 30 %
    out.append(("an inference step (made-up data)", {"ceilings": gpu, "points": [
        _at("KV-cache read", 2**32, 2**34, 6.0e-3),                     # 95 %, the longest
        _at("embedding gather", 2**20, 4 * 2**24, 1.2e-4),              # 19 %
        _at("prefill matmul", 2 * 512 * 8192**2, 2 * (2 * 512 * 8192 + 8192**2), 2.3e-3)]}))
    return out


def check_optimize_first(optimize_first: Callable, guess=None, number: str = "1.3") -> None:
    """``optimize_first(points, ceilings) -> (name, "memory" | "compute")`` on reference GPU
    measurements and awkward data; ``guess`` is the prediction, checked only for its type."""
    with Exercise(number, "which kernel to optimize first"):
        prediction(guess, f"guess_{number.replace('.', '_')}",
                   ("vector add", "reduction", "matmul"))
        callable_answer(optimize_first, "optimize_first is",
                        "def optimize_first(points, ceilings): ...")
        for what, data in optimize_first_cases():
            points, ceilings = data["points"], data["ceilings"]
            call = f"optimize_first(...) on {what} returned"
            got = tuple_answer(optimize_first([dict(p) for p in points], dict(ceilings)), call, 2,
                               "a pair (name of the point, 'memory' or 'compute')")
            name = choice_answer(got[0], f"{call} a name that is", [p["name"] for p in points])
            bound = choice_answer(got[1], f"{call} a bound that is", ("memory", "compute"))
            want_name, want_bound = optimize_first_reference(points, ceilings)
            by_name = {p["name"]: p for p in points}
            saves = {n: time_to_save(p, ceilings) for n, p in by_name.items()}
            if name != want_name:
                p = by_name[name]
                slowest = max(points, key=lambda q: q["seconds"])["name"]
                furthest = min(points, key=lambda q: _roof(q, ceilings).time / q["seconds"])["name"]
                if name == slowest:
                    why = "it takes the longest, but most of that time is its roof's"
                elif name == furthest:
                    why = ("it is furthest below its roof in per cent, but a small share of a "
                           "long kernel saves more seconds")
                else:
                    why = "compare the seconds each would save, not its rate or its bound"
                raise AssertionError(
                    f"{what}: optimize {want_name!r} first, not {name!r}: at its roof it would "
                    f"save {saves[want_name] * 1e3:.3g} ms, {name!r} only "
                    f"{saves[name] * 1e3:.3g} ms of its {p['seconds'] * 1e3:.3g} ms; {why}. "
                    "The time to save is the measured time minus the roofline time "
                    "max(FLOPs / peak, bytes / bandwidth).")
            r = _roof(by_name[name], ceilings)
            assert bound == want_bound, (
                f"{what}: {name!r} is {want_bound}-bound, not {bound}-bound: its intensity "
                f"{r.intensity:.3g} FLOP/byte is {'below' if want_bound == 'memory' else 'above'} "
                f"the ridge point {r.ridge_point:.3g} of these ceilings.")


# --------------------------------------------------------------------------- 1.4 timing

# Ratios to the true GB/s that a wrong unit gives (the simulated device's synchronize is
# accurate to a few µs in 4 ms, so a correct timer lands within about 1 %).
_WRONG_UNITS = ((0.915, 0.945, "GiB/s (2^30 bytes per second)"),
                (7.3, 8.7, "Gb/s (bits: 8 per byte)"), (300.0, 3000.0, "MB/s"), (3e-4, 3e-3, "TB/s"),
                (3e8, 3e12, "bytes per second"))


def check_bandwidth_timer(effective_bandwidth: Callable, nbytes: int = 64 * 2**20,
                          number: str = "1.4") -> float:
    """``effective_bandwidth(launch, synchronize, nbytes) -> GB/s`` on a simulated asynchronous device.

    Uses ``check_timer``: a version without synchronization or without warm-up fails.
    """
    def ratio_on(launch, synchronize, work_s):
        callable_answer(effective_bandwidth, "effective_bandwidth is",
                        "def effective_bandwidth(launch, synchronize, nbytes): ...")
        gbps = number_answer(effective_bandwidth(launch, synchronize, nbytes),
                             "effective_bandwidth(launch, synchronize, nbytes) returned", "GB/s")
        assert gbps > 0, f"return the bandwidth as a positive number of GB/s, got {gbps!r}"
        return gbps, gbps / (nbytes / work_s / 1e9)

    def measure(launch, synchronize):
        gbps, ratio = ratio_on(launch, synchronize, SimulatedAsyncDevice().work_s)
        if ratio > 1.25:
            # Far too fast: a wrong unit, or a clock stopped before synchronize() returned (a
            # launch takes microseconds, which looks like MB/s). Only the second stays about the
            # same when each copy takes eight times as long (a wrong unit scales with it).
            slower = SimulatedAsyncDevice(work_s=8 * SimulatedAsyncDevice().work_s)
            _, ratio8 = ratio_on(slower.launch, slower.synchronize, slower.work_s)
            assert ratio8 < 2 * ratio, (
                f"{gbps:.4g} GB/s is {ratio:.3g} x the true bandwidth, and your result barely "
                "changes when each copy takes eight times as long: the clock stops before the "
                "copy has finished. Call synchronize() before you read the clock, not after.")
        assert not 1.8 < ratio < 2.2, (
            f"{float(gbps):.4g} GB/s is twice the true bandwidth: nbytes already counts every "
            "byte the copy moves; divide it by the time once.")
        for low, high, unit in _WRONG_UNITS:
            assert not low < ratio < high, (
                f"{float(gbps):.4g} is {ratio:.3g} x the true bandwidth, which is what {unit} "
                "gives: return GB/s (10^9 bytes per second).")
        # A timer without warm-up is at most ~9x slow; far below that is a unit, not timing.
        assert ratio > 0.05, (
            f"{float(gbps):.4g} is {ratio:.3g} x the true bandwidth: return GB/s "
            "(nbytes / seconds / 1e9), not seconds or another unit.")
        return float(nbytes / (float(gbps) * 1e9))

    seconds = check_timer(measure, number=number, title="effective bandwidth of an asynchronous copy")
    return nbytes / seconds / 1e9


# --------------------------------------------------------------------------- 1.5 transfers

TRANSFER_CASES = ((4 * 2**10, "T4", True), (2**20, "H100-SXM", True), (256 * 2**20, "A10", False),
                  (3 * 224 * 224 * 4 * 256, "L4", True), (1, "H200", False),
                  (10**9, "V100-SXM2-16GB", True))


def _ref_transfer(nbytes, gpu, pinned=True) -> float:
    return models.transfer_time(nbytes, gpu, pinned=pinned).time


def _ref_worth_moving(batch_bytes, result_bytes, cpu_s, gpu_s, gpu, pinned=True, reuses=1) -> bool:
    move = _ref_transfer(batch_bytes, gpu, pinned) + reuses * gpu_s + _ref_transfer(result_bytes, gpu, pinned)
    return move < reuses * cpu_s


def _decision_cases():
    """Cases whose answers flip when one part of the cost is left out or mis-scaled."""
    cases = []

    def near(batch, result, gpu, pinned, reuses, gpu_s, leave_out, part=0.5):
        """A case whose CPU time sits ``part`` of ``leave_out``'s share below the cost, so that
        leaving that share out (or part of it) flips the answer."""
        up, down = _ref_transfer(batch, gpu, pinned), _ref_transfer(result, gpu, pinned)
        total = up + reuses * gpu_s + down
        share = {"latency": 2 * models.TRANSFER_LATENCY_S, "d2h": down,
                 "pageable": up + down - _ref_transfer(batch, gpu, True)
                 - _ref_transfer(result, gpu, True),
                 "pageable result": down - _ref_transfer(result, gpu, True),
                 "gpu reuses": (reuses - 1) * gpu_s}.get(leave_out, 0.0)
        if leave_out == "reuses":  # worth it only when the copies are shared by all the passes
            return (batch, result, 1.1 * total / reuses, gpu_s, gpu, pinned, reuses)
        cpu = (total - share * part) / reuses  # worth it only without the left-out part
        return (batch, result, cpu, gpu_s, gpu, pinned, reuses)

    # A quarter of the two copies' latencies: one latency for both copies flips it too.
    cases.append(near(2**10, 2**10, "H100-SXM", True, 1, 1e-6, "latency", part=0.25))
    cases.append(near(64 * 2**20, 64 * 2**20, "A100-SXM4-80GB", True, 1, 2e-5, "d2h"))
    cases.append(near(64 * 2**20, 2**10, "A10", False, 1, 1e-4, "pageable"))
    cases.append(near(512 * 2**20, 2**20, "L4", True, 50, 1e-3, "reuses"))
    cases.append(near(2**20, 2**20, "H100-SXM", True, 50, 1e-3, "gpu reuses"))
    cases.append(near(2**10, 64 * 2**20, "A100-SXM4-80GB", False, 1, 1e-4, "pageable result"))
    cases.append((2**30, 2**20, 5.0, 0.01, "H200", True, 1))      # clearly worth it
    cases.append((2**30, 2**30, 0.01, 0.001, "T4", True, 1))      # clearly not
    return cases


def check_transfer(transfer_seconds: Callable, worth_moving: Callable, number: str = "1.5") -> None:
    """``transfer_seconds(nbytes, gpu, pinned)`` against the transfer model, and the move decision."""
    with Exercise(number, "transfer time and the move/don't-move decision"):
        callable_answer(transfer_seconds, "transfer_seconds is",
                        "def transfer_seconds(nbytes, gpu, pinned=True): ...")
        callable_answer(worth_moving, "worth_moving is", "def worth_moving(batch_bytes, "
                        "result_bytes, cpu_s, gpu_s, gpu, pinned=True, reuses=1): ...")
        for nbytes, gpu, pinned in TRANSFER_CASES:
            got = number_answer(transfer_seconds(nbytes, gpu, pinned),
                                f"transfer_seconds({nbytes}, {gpu!r}, {pinned}) returned", "seconds")
            want = _ref_transfer(nbytes, gpu, pinned)
            spec = specs.lookup(gpu)
            if not math.isclose(got, want, rel_tol=1e-3):
                lat = models.TRANSFER_LATENCY_S
                mistakes = (
                    (nbytes / spec.link_bandwidth_Bps(pinned), "the latency is missing"),
                    (lat + nbytes / spec.pcie_bandwidth_Bps, "that is the theoretical PCIe rate: "
                     "copies reach spec.link_bandwidth_Bps(pinned), 85 % of it when pinned"),
                    (lat + nbytes / spec.link_bandwidth_Bps(not pinned),
                     f"that is the {'pageable' if pinned else 'pinned'} bandwidth: pass pinned on"),
                    (lat + nbytes / 2**30 / (spec.link_bandwidth_Bps(pinned) / 1e9),
                     "that counts GiB against GB/s: divide bytes by bytes/s"),
                )
                why = next((w for v, w in mistakes if math.isclose(got, v, rel_tol=1e-3)
                            and not math.isclose(v, want, rel_tol=1e-3)), "")
                raise AssertionError(
                    f"transfer_seconds({nbytes:,} bytes, {gpu!r}, pinned={pinned}) = {got:.4g} s, "
                    f"expected {want:.4g} s = {lat * 1e6:g} µs latency + bytes / "
                    f"{spec.link_bandwidth_Bps(pinned) / 1e9:.3g} GB/s "
                    f"(spec.link_bandwidth_Bps(pinned={pinned}) for the {spec.name})"
                    + (f": {why}." if why else "."))
        for case in _decision_cases():
            batch, result, cpu_s, gpu_s, gpu, pinned, reuses = case
            want = _ref_worth_moving(*case)
            got = worth_moving(batch, result, cpu_s, gpu_s, gpu, pinned=pinned, reuses=reuses)
            if not isinstance(got, (bool, np.bool_)):
                raise answer_error(f"worth_moving(batch={batch:,} B, ...) returned", got,
                                   "return True or False")
            assert bool(got) == want, (
                f"worth_moving(batch={batch:,} B, result={result:,} B, cpu {cpu_s:.3g} s, gpu "
                f"{gpu_s:.3g} s, {gpu}, pinned={pinned}, reuses={reuses}) should be {want}: compare "
                "reuses x CPU time with sending the batch once + reuses x GPU time + bringing the "
                "result back once, each copy with its latency and the same kind of host memory.")
