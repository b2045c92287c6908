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


def intensity(vector_add=lambda e: 1 / (3 * e), sum_=lambda e: 1 / e,
              matmul=lambda m, n, k, e: 2 * m * n * k / (e * (m * k + k * n + m * n))):
    return vector_add, sum_, matmul


def roofline(combine=max, fixed=None, bandwidth=lambda g: g.bandwidth_Bps, bound=None):
    def roofline_time(flops, nbytes, gpu, precision):
        g = specs.lookup(gpu)
        tc, tm = flops / g.peak_flops(fixed or precision), nbytes / bandwidth(g)
        return combine(tc, tm), (bound(flops, nbytes) if bound else
                                 "compute" if tc >= tm else "memory")
    return roofline_time


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


CHECKS = {"1.1": c1.check_coalesced_scale, "1.2": lambda answer: c1.check_intensity(*answer),
          "1.3": c1.check_bound, "1.4": c1.check_bandwidth_timer,
          "1.5": lambda answer: c1.check_transfer(*answer)}
REFERENCES = {"1.1": element("    return t + (long long)k * T;"), "1.2": intensity(),
              "1.3": roofline(), "1.4": bandwidth(), "1.5": (transfer_seconds, worth())}

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
        ("the output of vector add forgotten", intensity(vector_add=lambda e: 1 / (2 * e)), "vector_add_ai"),
        ("always fp32", intensity(vector_add=lambda e: 1 / 12), "vector_add_ai"),
        ("one FLOP per multiply-add", intensity(matmul=lambda m, n, k, e: m * n * k / (e * (m * k + k * n + m * n))),
         "2*m*n*k FLOPs"),
        ("C not counted", intensity(matmul=lambda m, n, k, e: 2 * m * n * k / (e * (m * k + k * n))),
         "C (m x n)"),
        ("a sum that reads and writes every element", intensity(sum_=lambda e: 1 / (2 * e)), "sum_ai"),
        ("bits, not bytes", intensity(vector_add=lambda e: 1 / (24 * e)), "vector_add_ai"),
    ],
    "1.3": [
        ("compute and memory added", roofline(combine=lambda a, b: a + b), "not their sum"),
        ("the faster of the two", roofline(combine=min), "the slower one sets the time"),
        ("the fp32 peak for every precision", roofline(fixed="fp32"), "uses the fp32 peak"),
        ("GB/s taken as bytes/s", roofline(bandwidth=lambda g: g.bandwidth_Bps / 1e9), "in bytes/s"),
        ("one ridge point for every GPU",
         roofline(bound=lambda f, b: "compute" if f / b > 10 else "memory"), "ridge point"),
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
