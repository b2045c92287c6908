"""Lab 1's wrong-answer tables: for each exercise, plausible wrong answers of a learner who
half-understood the chapter, each rejected with a message that names the real mistake."""
import statistics
import time


from gpucourse import specs
from gpucourse.check import ch1 as c1
from wrong_answer_table import table_tests

CHUNKED = "    return t * per_thread + k;  // each thread takes a contiguous chunk, as one would on a CPU"


def element(body):
    assert CHUNKED in c1.CHUNKED_ELEMENT
    return c1.CHUNKED_ELEMENT.replace(CHUNKED, body)


def limited(share=lambda p, c: c1.roof_share(p, c), strict=False, ridge_tie="compute",
            roof_cap=True, overhead=True, intensity=lambda p: p["flops"] / p["bytes"]):
    """A learner's limited_by; the keywords are the mistakes."""
    def limited_by(point, ceilings):
        i = intensity(point)
        ridge = ceilings["peak_flops"] / ceilings["bandwidth_Bps"]
        bound = "memory" if i < ridge else "compute" if i > ridge else ridge_tie
        s = share(point, ceilings)
        ok = not overhead or (s > 0.5 if strict else s >= 0.5)
        if not roof_cap:
            ok = ok and s <= 1
        return bound if ok else "overhead"
    return limited_by


def first(pick=lambda pts, c: max(pts, key=lambda p: c1.time_to_save(p, c)), bound=None):
    def optimize_first(points, ceilings):
        p = pick(points, ceilings)
        b = bound or c1._roof(p, ceilings).bound
        return p["name"], b
    return optimize_first


def bandwidth(warmup=10, sync=True, unit=1e9, repeats=9, nbytes_factor=1):
    def effective_bandwidth(launch, synchronize, nbytes):
        for _ in range(warmup):
            launch()
        if sync:
            synchronize()
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            launch()
            if sync:
                synchronize()
            samples.append(time.perf_counter() - t0)
        if not sync:
            synchronize()
        return nbytes_factor * nbytes / statistics.median(samples) / unit
    return effective_bandwidth


def transfer_seconds(nbytes, gpu, pinned=True):
    return 10e-6 + nbytes / specs.lookup(gpu).link_bandwidth_Bps(pinned)


def worth(transfer=transfer_seconds, back=True, gpu_per_pass=True, copies_per_pass=False):
    def worth_moving(batch, result, cpu_s, gpu_s, gpu, pinned=True, reuses=1):
        copies = transfer(batch, gpu, pinned) + (transfer(result, gpu, pinned) if back else 0)
        if copies_per_pass:
            copies *= reuses
        return copies + (reuses if gpu_per_pass else 1) * gpu_s < reuses * cpu_s
    return worth_moving


CHECKS = {"1.1": c1.check_coalesced_scale,
          "1.2": lambda answer: c1.check_limited_by(answer, guess="memory"),
          "1.3": lambda answer: c1.check_optimize_first(answer, guess="matmul"),
          "1.4": c1.check_bandwidth_timer,
          "1.5": lambda answer: c1.check_transfer(*answer)}
REFERENCES = {"1.1": element("    return t + (long long)k * T;"), "1.2": limited(),
              "1.3": first(), "1.4": bandwidth(), "1.5": (transfer_seconds, worth())}

WRONG_ANSWERS = {
    "1.1": [
        ("the CPU-style chunk as given", element(CHUNKED), "not coalesced"),
        ("steps of one block", element("    return t + (long long)k * blockDim.x;"), "must cover"),
        ("the block index left out", element("    return threadIdx.x + (long long)k * T;"), "must cover"),
        ("wrapped round n", element("    return ((long long)k * T + t) % n;"), "taken 32 times"),
        ("the grid rounded up to whole warps",
         element("    const long long P = (T + 31) / 32 * 32;\n    return (long long)k * P + t;"),
         "must cover"),
        ("the whole printed cell pasted", element("    return t + (long long)k * T;") + c1.SCALE_KERNEL,
         "Submit only your element() function"),
    ],
    "1.2": [
        ("the intensity against the ridge only", limited(overhead=False), "return 'overhead'"),
        ("a share of the compute peak, not of the roof",
         limited(share=lambda p, c: p["flops"] / p["seconds"] / c["peak_flops"]),
         "not with the compute peak"),
        ("more than half, not at least half", limited(strict=True), "at least half counts"),
        ("memory-bound on the ridge", limited(ridge_tie="memory"), "exactly on the ridge point"),
        ("a rate above the roof taken for overhead", limited(roof_cap=False), "is noise"),
        ("bytes per FLOP", limited(intensity=lambda p: p["bytes"] / p["flops"]), "not bytes per FLOP"),
    ],
    "1.3": [
        ("the slowest kernel", first(pick=lambda pts, c: max(pts, key=lambda p: p["seconds"])),
         "takes the longest"),
        ("the furthest below its roof in per cent",
         first(pick=lambda pts, c: min(pts, key=lambda p: c1._roof(p, c).time / p["seconds"])),
         "furthest below its roof"),
        ("the roofline time from the FLOPs only", first(pick=lambda pts, c: max(
            pts, key=lambda p: p["seconds"] - p["flops"] / c["peak_flops"])),
         "minus the roofline time max(FLOPs / peak, bytes / bandwidth)"),
        ("always memory-bound", first(bound="memory"), "compute-bound, not memory-bound"),
        ("the lowest FLOP rate", first(pick=lambda pts, c: min(pts, key=lambda p: p["flops"] / p["seconds"])),
         "optimize"),
        ("only the name", lambda pts, c: c1.optimize_first_reference(pts, c)[0], "return a pair"),
    ],
    "1.4": [
        ("no synchronize", bandwidth(sync=False), "synchronize"),
        ("no warm-up", bandwidth(warmup=0), "warm up"),
        ("Gb/s (bits)", bandwidth(unit=1e9 / 8), "Gb/s (bits"),
        ("GiB/s", bandwidth(unit=2**30), "GiB/s"),
        ("MB/s", bandwidth(unit=1e6), "MB/s"),
        ("read and write counted again", bandwidth(nbytes_factor=2), "twice the true bandwidth"),
        ("bytes per second", bandwidth(unit=1), "bytes per second"),
    ],
    "1.5": [
        ("no latency", (lambda n, g, p=True: n / specs.lookup(g).link_bandwidth_Bps(p), worth()),
         "the latency is missing"),
        ("the theoretical PCIe rate",
         (lambda n, g, p=True: 10e-6 + n / specs.lookup(g).pcie_bandwidth_Bps, worth()),
         "theoretical PCIe rate"),
        ("always pinned", (lambda n, g, p=True: transfer_seconds(n, g, True), worth()),
         "the pinned bandwidth: pass pinned on"),
        ("GiB against GB/s",
         (lambda n, g, p=True: 10e-6 + n / 2**30 / (specs.lookup(g).link_bandwidth_Bps(p) / 1e9), worth()),
         "GiB against GB/s"),
        ("the result never copied back", (transfer_seconds, worth(back=False)), "worth_moving"),
        ("the copies paid every pass", (transfer_seconds, worth(copies_per_pass=True)), "worth_moving"),
        ("the GPU time counted once", (transfer_seconds, worth(gpu_per_pass=False)), "worth_moving"),
    ],
}


test_the_reference_passes, test_a_wrong_answer_is_rejected_and_named = \
    table_tests(CHECKS, REFERENCES, WRONG_ANSWERS)
