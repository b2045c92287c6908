"""The memory-traffic profiler: its counts against hand-computed patterns and gpucourse.models."""
from __future__ import annotations

import numpy as np
import pytest

import gpucourse as gc
from gpucourse import models
from gpucourse.errors import CourseError, LaunchError, SpecError
from gpucourse.paths import KERNEL_DIR
from gpucourse.profiler import Counters, ProfilerError, profile

WARP = 32

# One source for the inline test kernels: one compilation for all of them.
SOURCE = r"""
extern "C" __global__ void strided_copy(const float* in, float* out, int n, int stride) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = in[i * stride];  // STRIDED
}

extern "C" __global__ void gather(const float* in, const int* idx, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int j = idx[i];
  const float v = in[j];  // GATHER-4B
  out[i] = v;
}

extern "C" __global__ void gather4(const float4* in, const int* idx, float4* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int j = idx[i];
  const float4 v = in[j];  // GATHER-16B
  out[i] = v;
}

extern "C" __global__ void tile_column(float* out) {
  __shared__ float tile[32][32];
  tile[threadIdx.y][threadIdx.x] = (float)(threadIdx.y * 32 + threadIdx.x);  // ROW WRITE
  __syncthreads();
  out[threadIdx.y * 32 + threadIdx.x] = tile[threadIdx.x][threadIdx.y];  // COLUMN READ
}

extern "C" __global__ void tile_column_padded(float* out) {
  __shared__ float tile[32][33];
  tile[threadIdx.y][threadIdx.x] = (float)(threadIdx.y * 32 + threadIdx.x);
  __syncthreads();
  out[threadIdx.y * 32 + threadIdx.x] = tile[threadIdx.x][threadIdx.y];  // PADDED READ
}

extern "C" __global__ void shared_gather(const int* sidx, float* out, int n) {
  extern __shared__ float buf[];  // 1024 floats
  for (int k = threadIdx.x; k < 1024; k += blockDim.x) buf[k] = (float)k;
  __syncthreads();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = buf[sidx[i]];  // SHARED-4B
}

extern "C" __global__ void shared_gather8(const int* sidx, double* out, int n) {
  extern __shared__ double buf8[];  // 512 doubles
  for (int k = threadIdx.x; k < 512; k += blockDim.x) buf8[k] = (double)k;
  __syncthreads();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = buf8[sidx[i]];  // SHARED-8B
}

extern "C" __global__ void odd_even(const float* in, float* odd, float* even, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (i & 1)
    odd[i / 2] = in[i] * 2.0f;  // ODD
  else
    even[i / 2] = in[i] + 1.0f;  // EVEN
}

// Warp-aggregated counts into a block's bins (block-scoped atomics), then into the grid's.
extern "C" __global__ void scoped_histogram(const int* d, unsigned* bins) {
  __shared__ unsigned s_bins[16];
  for (int b = threadIdx.x; b < 16; b += blockDim.x) s_bins[b] = 0;
  __syncthreads();
  const int bin = d[blockIdx.x * blockDim.x + threadIdx.x];
  const unsigned peers = __match_any_sync(0xffffffffu, bin);
  if ((threadIdx.x & 31) == __ffs(peers) - 1)
    atomicAdd_block(&s_bins[bin], (unsigned)__popc(peers));  // SCOPED SHARED
  __syncthreads();
  for (int b = threadIdx.x; b < 16; b += blockDim.x)
    atomicAdd_system(&bins[b], s_bins[b]);  // SCOPED GLOBAL
}
"""


@pytest.fixture(scope="module")
def mod():
    return gc.kernels.from_source(SOURCE, name="profiler_cases", backend="cpu")


def line_of(source: str, marker: str, after: str = "") -> int:
    """Number of the one line holding ``marker`` (the first after the line holding ``after``)."""
    text = source.splitlines()
    start = next(i for i, t in enumerate(text) if after in t) if after else 0
    lines = [i + 1 for i, t in enumerate(text) if i >= start and marker in t]
    assert lines and (after or len(lines) == 1), marker
    return lines[0]


def rows(p, marker: str, access: str, source: str = SOURCE, after: str = ""):
    """The counters of one access kind on the line carrying ``marker``."""
    number = line_of(source, marker, after)
    found = [r for r in p.line(number) if r.access == access]
    assert len(found) == 1, (marker, access, p.line(number))
    return found[0]


def rand(n, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).random(n).astype(dtype) + 0.5


# --------------------------------------------------------------------------- the cases

@pytest.mark.parametrize("stride, sectors, efficiency", [(1, 4, 1.0), (2, 8, 0.5)])
def test_strided_float_copy(mod, stride, sectors, efficiency):
    n = 4096
    a, out = rand(n * stride), np.zeros(n, np.float32)
    p = profile(mod.strided_copy, n // 256, 256, (a, out, np.int32(n), np.int32(stride)))
    np.testing.assert_array_equal(out, a[::stride])  # the launch is real
    load = rows(p, "STRIDED", "global load").counters
    assert load.requests == n // WARP
    assert load.sectors_per_request == sectors
    assert load.efficiency == pytest.approx(efficiency)
    assert load.active_lanes == WARP
    store = rows(p, "STRIDED", "global store").counters
    assert (store.sectors_per_request, store.efficiency) == (4, 1.0)


def test_course_copy_kernels():
    ks = gc.kernels.load("copy", backend="cpu")
    n = 8192
    a, out = rand(n), np.zeros(n, np.float32)
    p = profile(ks.copy_v1_coalesced, n // 256, 256, (a, out, np.int32(n)))
    assert (p.global_load.sectors_per_request, p.global_load.efficiency) == (4, 1.0)
    assert (p.global_store.sectors_per_request, p.global_store.lines_per_request) == (4, 1)
    p = profile(ks.copy_v2_strided, n // 256, 256, (a, out, np.int32(n), np.int32(2)))
    np.testing.assert_array_equal(out, a)
    assert (p.global_load.sectors_per_request, p.global_load.efficiency) == (8, 0.5)


@pytest.fixture(scope="module")
def transposes():
    ks = gc.kernels.load("transpose", backend="cpu")
    a = rand(256 * 256).reshape(256, 256)
    out = {}
    for name in ("transpose_v1_naive", "transpose_v2_shared", "transpose_v3_padded"):
        o = np.zeros_like(a)
        out[name] = profile(getattr(ks, name), (8, 8), (32, 8), (a, o, np.int32(256), np.int32(256)))
        np.testing.assert_array_equal(o, a.T)
    return out


def test_naive_transpose_stores_touch_32_sectors(transposes):
    p = transposes["transpose_v1_naive"]
    source = (KERNEL_DIR / "transpose.cu").read_text()
    store = rows(p, "out[x * rows + y + j] = in[", "global store", source).counters
    assert store.sectors_per_request == 32 and store.lines_per_request == 32
    assert store.efficiency == pytest.approx(4 / 32)
    assert p.global_load.sectors_per_request == 4
    for name in ("transpose_v2_shared", "transpose_v3_padded"):
        assert transposes[name].global_store.sectors_per_request == 4


def test_transpose_tiles_conflict_and_padding(transposes):
    shared, padded = transposes["transpose_v2_shared"], transposes["transpose_v3_padded"]
    assert shared.shared_load.conflict_ways == 32 and shared.shared_load.max_ways == 32
    assert shared.shared_load.replays == 31 * shared.shared_load.requests
    assert shared.shared_store.max_ways == 1
    assert padded.shared_load.max_ways == 1 and padded.shared_load.replays == 0
    assert shared.divergence.barriers == 64  # one per block


def test_column_of_a_32x32_tile(mod):
    out = np.zeros(1024, np.float32)
    p = profile(mod.tile_column, 1, (32, 32), (out,))
    np.testing.assert_array_equal(out.reshape(32, 32), np.arange(1024, dtype=np.float32).reshape(32, 32).T)
    column = rows(p, "COLUMN READ", "shared load").counters
    assert (column.requests, column.conflict_ways, column.max_ways) == (32, 32, 32)
    assert column.wavefronts == 32 * 32 and column.replays == 32 * 31
    assert rows(p, "ROW WRITE", "shared store").counters.max_ways == 1
    expected = models.bank_conflicts([4 * 32 * lane for lane in range(WARP)])
    assert column.conflict_ways == expected.ways

    p = profile(mod.tile_column_padded, 1, (32, 32), (out,))
    padded = rows(p, "PADDED READ", "shared load").counters
    assert (padded.max_ways, padded.replays) == (1, 0)
    assert models.bank_conflicts([4 * 33 * lane for lane in range(WARP)]).ways == 1


@pytest.fixture(scope="module")
def histogram():
    return gc.kernels.load("histogram", backend="cpu")


def test_histogram_on_skewed_data_shows_same_address_atomics(histogram):
    n, grid, block = 16384, 16, 256
    rng = np.random.default_rng(3)
    skewed = np.where(rng.random(n) < 0.9, 7, rng.integers(0, 256, n)).astype(np.int32)
    uniform = rng.integers(0, 256, n).astype(np.int32)
    results = {}
    for label, data in (("skewed", skewed), ("uniform", uniform)):
        bins = np.zeros(256, np.uint32)
        p = profile(histogram.histogram_v1_global_atomics, grid, block, (data, bins, np.int32(n)))
        np.testing.assert_array_equal(bins, np.bincount(data, minlength=256))
        at = p.global_atomic
        assert at.lanes == n and at.requests == n // WARP
        # Each request is 32 consecutive elements (grid-stride loop, stride a multiple of 32).
        chunks = data.reshape(-1, WARP)
        distinct = sum(len(np.unique(c)) for c in chunks)
        assert at.same_address_lanes == n - distinct
        assert at.same_address_sum == sum(np.bincount(c).max() for c in chunks)
        assert p.hottest_atomic_ops == np.bincount(data).max()
        results[label] = at
    assert results["skewed"].same_address_lanes > 0.8 * n
    assert results["uniform"].same_address_per_request < 4
    assert results["skewed"].same_address_per_request > 25


def test_privatized_histogram_moves_atomics_to_shared_memory(histogram):
    n = 16384
    data = np.where(np.random.default_rng(4).random(n) < 0.9, 0, 5).astype(np.int32)
    bins = np.zeros(256, np.uint32)
    p = profile(histogram.histogram_v2_shared_privatized, 16, 256, (data, bins, np.int32(n)))
    np.testing.assert_array_equal(bins, np.bincount(data, minlength=256))
    assert p.shared_atomic.lanes == n
    assert p.global_atomic.lanes == 16 * 2  # two non-empty bins per block
    assert p.shared_atomic.same_address_lanes > 0.8 * n


def test_scoped_atomics_and_matches_are_counted_as_atomics(mod):
    grid, block = 8, 128
    n = grid * block
    data = np.where(np.random.default_rng(5).random(n) < 0.7, 2,
                    np.random.default_rng(6).integers(0, 16, n)).astype(np.int32)
    bins = np.zeros(16, np.uint32)
    p = profile(mod.scoped_histogram, grid, block, (data, bins))
    np.testing.assert_array_equal(bins, np.bincount(data, minlength=16))
    leaders = sum(len(np.unique(w)) for w in data.reshape(-1, WARP))  # one per bin per warp
    assert p.shared_atomic.lanes == leaders
    assert rows(p, "SCOPED SHARED", "shared atomic").counters.lanes == leaders
    assert p.global_atomic.lanes == rows(p, "SCOPED GLOBAL", "global atomic").counters.lanes == 16 * grid


def test_odd_even_branch_has_half_the_lanes_active(mod):
    n = 4096
    a = rand(n)
    odd, even = np.zeros(n // 2, np.float32), np.zeros(n // 2, np.float32)
    p = profile(mod.odd_even, n // 256, 256, (a, odd, even, np.int32(n)))
    np.testing.assert_allclose(odd, a[1::2] * 2)
    np.testing.assert_allclose(even, a[0::2] + 1)
    half = models.warp_efficiency([16, 16])
    for marker in ("ODD", "EVEN"):
        store = rows(p, marker, "global store")
        assert store.counters.active_lanes == 16
        assert store.counters.requests == n // WARP
        assert store.active_lanes / WARP == half.efficiency
        # The line's basic blocks: the branch's own (16 lanes) and shared code (32).
        assert rows(p, marker, "branch").active_lanes < WARP


def test_divergence_kernels():
    ks = gc.kernels.load("divergence", backend="cpu")
    n = 4096
    x, y = rand(n), np.zeros(n, np.float32)
    args = (x, y, np.int32(n), np.int32(32))
    lanes = {name: profile(getattr(ks, name), n // 256, 256, args).divergence.active_lanes
             for name in ("divergence_v1_odd_even_lanes", "divergence_v2_per_warp",
                          "divergence_v3_branch_free")}
    # v1's loops (most of its blocks) run with 16 lanes; the others never diverge.
    assert 16 < lanes["divergence_v1_odd_even_lanes"] < 18
    p = profile(ks.divergence_v1_odd_even_lanes, n // 256, 256, args)
    source = (KERNEL_DIR / "divergence.cu").read_text()
    for body in ("v = fmaf(v, A0, B0)", "v = fmaf(v, A1, B1)"):
        assert rows(p, body, "branch", source, after="divergence_v1").active_lanes == 16
    assert lanes["divergence_v2_per_warp"] == 32
    assert lanes["divergence_v3_branch_free"] == 32


def test_requests_follow_barrier_epochs_in_a_shared_tree():
    ks = gc.kernels.load("reduce", backend="cpu")
    n, block = 64 * 256, 256
    x, out = rand(n), np.zeros(1, np.float32)
    p = profile(ks.reduce_v2_shared_tree, n // block, block, (x, out, np.int32(n)), block * 4)
    assert out[0] == pytest.approx(x.sum(), rel=1e-4)
    source = (KERNEL_DIR / "reduce.cu").read_text()
    fold = rows(p, "partial[t] += partial[t + s]", "shared load", source).counters
    # Per block and step s = 128 ... 1: threads t < s load twice; a warp is one request.
    steps = [128, 64, 32, 16, 8, 4, 2, 1]
    assert fold.requests == 64 * 2 * sum(-(-s // WARP) for s in steps)
    assert fold.lanes == 64 * 2 * sum(steps)
    assert p.divergence.barriers == 64 * (1 + len(steps))


# --------------------------------------------------------------------------- agreement with models

def index_patterns(n: int, span: int):
    rng = np.random.default_rng(11)
    lane = np.arange(n)
    yield "stride 1", lane % span
    yield "misaligned by one", (lane + 1) % span
    for s in (2, 3, 4, 8, 16, 32, 33):
        yield f"stride {s}", (lane * s) % span
    yield "broadcast", np.zeros(n, int)
    yield "two addresses per warp", (lane % 2) * 64
    yield "random", rng.integers(0, span, n)
    yield "random in 256 bytes", rng.integers(0, 64, n)
    yield "reversed", (span - 1 - lane) % span


def per_warp(values, n):
    return [values[w:min(w + WARP, n)] for w in range(0, n, WARP)]


@pytest.mark.parametrize("elem", [4, 16])
def test_global_sectors_agree_with_the_model(mod, elem):
    n = 1000  # not a multiple of 32: the last warp has 8 lanes
    span = 4096
    kernel = mod.gather if elem == 4 else mod.gather4
    src = rand(span * elem // 4)
    for label, idx in index_patterns(n, span):
        out = np.zeros(n * elem // 4, np.float32)
        p = profile(kernel, (n + 127) // 128, 128, (src, idx.astype(np.int32), out, np.int32(n)))
        np.testing.assert_array_equal(out.reshape(n, -1), src.reshape(span, -1)[idx])
        got = rows(p, f"GATHER-{elem}B", "global load").counters
        want = [models.sectors([int(i) * elem for i in w], elem) for w in per_warp(idx, n)]
        assert got.requests == len(want), label
        assert got.sectors == sum(m.sectors for m in want), label
        assert got.lines == sum(m.lines for m in want), label
        assert got.requested_bytes == sum(m.requested_bytes for m in want), label
        assert got.lanes == n, label


@pytest.mark.parametrize("elem", [4, 8])
def test_bank_conflicts_agree_with_the_model(mod, elem):
    n = 1000
    span = 4096 // elem  # the shared buffer holds 4 KB
    kernel = mod.shared_gather if elem == 4 else mod.shared_gather8
    for label, idx in index_patterns(n, span):
        out = np.zeros(n, np.float32 if elem == 4 else np.float64)
        p = profile(kernel, (n + 255) // 256, 256, (idx.astype(np.int32), out, np.int32(n)), 4096)
        np.testing.assert_array_equal(out, idx.astype(out.dtype))
        got = rows(p, f"SHARED-{elem}B", "shared load").counters
        want = [models.bank_conflicts([int(i) * elem for i in w], elem) for w in per_warp(idx, n)]
        assert got.requests == len(want), label
        assert got.wavefronts == sum(m.wavefronts for m in want), label
        assert got.ideal_wavefronts == sum(m.phases for m in want), label
        assert got.ways_sum == sum(m.ways for m in want), label
        assert got.max_ways == max(m.ways for m in want), label


# --------------------------------------------------------------------------- record, model, errors

def test_profile_renders_and_models_time_on_a_gpu(transposes):
    naive, padded = transposes["transpose_v1_naive"], transposes["transpose_v3_padded"]
    text = str(naive)
    assert "transpose_v1_naive" in text and "per line" in text and "32.00" in text
    page = naive._repr_html_()
    assert "<table" in page and "global store" in page
    for gpu in ("T4", "H100-SXM"):
        slow, fast = naive.model_time(gpu), padded.model_time(gpu)
        assert str(slow).startswith("model:") and "model" in slow._repr_html_()
        assert slow.dram_bytes == 32 * naive.global_memory.sectors
        assert slow.dram_bytes > 4 * fast.dram_bytes
        assert slow.time_s >= fast.time_s
        assert slow.cached_dram_s == pytest.approx(fast.cached_dram_s)  # the same bytes touched
    assert naive.model_time("T4").bound == "DRAM sectors"
    with pytest.raises(SpecError):
        naive.model_time("no such GPU")


def test_counters_add_up():
    a = Counters(requests=2, lanes=64, sectors=8, max_ways=3)
    b = Counters(requests=1, lanes=32, sectors=4, max_ways=2)
    total = a + b
    assert (total.requests, total.lanes, total.sectors, total.max_ways) == (3, 96, 12, 3)
    assert total.sectors_per_request == 4


def test_errors_are_course_errors(mod):
    a, out = rand(64), np.zeros(64, np.float32)
    with pytest.raises(ProfilerError, match="gc.kernels"):
        profile("strided_copy", 1, 64, (a, out, np.int32(64), np.int32(1)))
    with pytest.raises(LaunchError):
        profile(mod.strided_copy, 0, 64, (a, out, np.int32(64), np.int32(1)))
    with pytest.raises(LaunchError):
        profile(mod.strided_copy, 1, 64, (a, out, 64, np.int32(1)))
    assert issubclass(ProfilerError, CourseError)


FRESH_PROCESS = r"""
import json, sys
import numpy as np
import gpucourse as gc
import gpucourse.profiler as prof
ks = gc.kernels.load("transpose", backend="cpu")
a = np.random.default_rng(0).random((256, 256), dtype=np.float32)
p = prof.profile(ks.transpose_v1_naive, (8, 8), (32, 8), (a, np.zeros_like(a), np.int32(256), np.int32(256)))
(b,) = prof._builds.values()
n = b.dll.gcprof_count()
pcs, kinds, sizes, skips = (np.zeros(n, t) for t in (np.uint64, np.uint8, np.uint32, np.uint8))
stats = np.zeros((n, len(prof._STATS)), np.uint64)
b.dll.gcprof_read(*(prof._ptr(x) for x in (pcs, kinds, sizes, skips, stats)), n)
internal = {o for o, site in b.sites.items() if site[1] == "internal"}
unskipped = [hex(int(pc) - b.base) for pc, s in zip(pcs[1:], skips[1:]) if int(pc) - b.base in internal and not s]
print(json.dumps({"sectors": p.global_store.sectors, "unskipped": unskipped, "internal": len(internal)}))
"""


def test_a_fresh_process_takes_lines_from_the_disk_cache(transposes):
    import json
    import subprocess
    import sys

    naive = transposes["transpose_v1_naive"]
    assert naive.unique_global_bytes == 2 * 256 * 256 * 4  # in and out, each sector once
    proc = subprocess.run([sys.executable, "-c", FRESH_PROCESS], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["sectors"] == naive.global_store.sectors
    # The emulator's own accesses (launch arguments) are known from the cache and not counted.
    assert out["internal"] > 0 and out["unskipped"] == []


# --------------------------------------------------------------------------- tools/ncu_compare.py

def test_ncu_compare_reads_both_csv_layouts():
    import ncu_compare

    m1, m2 = ncu_compare.COUNTS[0][1][0], ncu_compare.COUNTS[1][1][0]
    raw = "\n".join([
        "==PROF== Connected to process 1",
        f'"ID","Process ID","Kernel Name","{m1}","{m2}"',
        '"","","","request","sector"',
        '"0","7","copy_v1_coalesced","32,768","131,072"',
        '"1","7","transpose_v1_naive","2048","65536"'])
    details = "\n".join([
        '"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"',
        f'"0","copy_v1_coalesced(const float *, float *, int)","Command line profiler metrics","{m1}","request","32,768"',
        f'"0","copy_v1_coalesced(const float *, float *, int)","Command line profiler metrics","{m2}","sector","131,072"'])
    assert ncu_compare.parse_ncu_csv(raw, [m1, m2]) == [
        ("copy_v1_coalesced", {m1: 32768.0, m2: 131072.0}),
        ("transpose_v1_naive", {m1: 2048.0, m2: 65536.0})]
    assert ncu_compare.parse_ncu_csv(details, [m1, m2]) == [
        ("copy_v1_coalesced", {m1: 32768.0, m2: 131072.0})]
    assert ncu_compare.parse_ncu_csv("==PROF== nothing", [m1]) == []


def test_ncu_compare_takes_its_launch_shapes_from_the_kernel_homes():
    import ncu_compare

    n, m, k = 1 << 20, 1024, 256
    got = [(c["kernel"], c["tag"], c["grid"], c["block"], c["shared"])
           for c in ncu_compare.cases()]
    assert got == [
        ("copy_v1_coalesced", "", n // 256, 256, 0),
        ("copy_v2_strided", "stride 2", n // 256, 256, 0),
        ("copy_v2_strided", "stride 32", n // 256, 256, 0),
        *[(f"transpose_v{i}", "", (m // 32, m // 32), (32, 8), 0)
          for i in ("1_naive", "2_shared", "3_padded")],
        ("reduce_v2_shared_tree", "", n // 256, 256, 256 * 4),
        ("matmul_v3_shared", "", (k // 32, k // 32), (32, 32), 0),
        ("histogram_v1_global_atomics", "skewed", 64, 256, 0)]
    assert [len(c["args"]()) for c in ncu_compare.cases()] == [3, 4, 4, 4, 4, 4, 3, 6, 3]


def test_ncu_compare_skips_in_one_line_without_ncu(monkeypatch, capsys):
    import ncu_compare

    monkeypatch.setattr(ncu_compare.shutil, "which", lambda name, *a, **k: None)
    assert ncu_compare.main([]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("ncu_compare: skipped")


class FakeCupyArray:
    """Stands in for a CuPy array: the profiler copies it to the host and the result back."""

    __module__ = "cupy.fake"

    def __init__(self, host):
        self.host = host.copy()
        self.dtype, self.shape = host.dtype, host.shape

    def get(self):
        return self.host.copy()

    def set(self, value):
        self.host[...] = value


def test_device_arrays_are_copied_in_and_out(mod):
    n = 256
    a = rand(n)
    x, out = FakeCupyArray(a), FakeCupyArray(np.zeros(n, np.float32))
    p = profile(mod.strided_copy, 1, n, (x, out, np.int32(n), np.int32(1)))
    np.testing.assert_array_equal(out.host, a)
    assert p.global_load.sectors_per_request == 4
