"""The fake CUDA GPU itself (tests/fakecuda) and what runs across chapters on it:
bench's CUDA-event timer and L2 flusher, the buffer-size rule, ``gpu_check()`` of chapters 1
and 4 saved as reference data and read back by the CPU figures, and the in-process steps of
``tools/gpu_check.py``. A SMOKE TEST on a FAKE CUDA device: not a measurement.

What the fake is and what its tests assert (shapes only, never timings): fakecuda/testing.py.

Each chapter's own GPU branches are in tests/test_chN_fake_gpu.py.
"""
from __future__ import annotations

import ctypes
import inspect
import json
import sys

import numpy as np
import pytest

import fakecuda
from fakecuda.testing import (CH1_BUFFER_BYTES, CH1_MATMUL_N, CH4_DIVERGENCE_N,
                              CH4_HISTOGRAM_N, CH4_REDUCTION_N, CH4_STREAMS_BYTES, CH4_SWEEP_N,
                              all_finite, assert_jsonable, assert_threshold, finite, installed,
                              small_ch1_ch4, small_fake_gpu)
from gpucourse import bench, device, kernels, reference, specs
from gpucourse.errors import CompileError, LaunchError
from gpucourse.experiments import ch1, ch4, ch5
from gpucourse.experiments.ch1 import common as ch1_common
from gpucourse.experiments.ch2 import transpose as ch2_transpose
from gpucourse.experiments.ch4 import block_size
from gpucourse.kernels import divergence as divergence_cu
from gpucourse.kernels import reduce as reduce_cu

TOOL_N, TOOL_SIDE = 1 << 15, 128
OFF_GRID_BLOCK = 160  # a block size that kernels.BLOCK_SIZES does not hold


@pytest.fixture
def fake_gpu():
    """The fake CUDA GPU (chapters 1 and 4 at small sizes), for one test."""
    with small_fake_gpu(small_ch1_ch4) as cp:
        yield cp


def _assert_ch1_result(r) -> None:
    assert set(r) >= {"device", "timing", "stride_sweep", "checks", "roofline", "passed"}
    assert r["device"] == "NVIDIA H200"
    assert isinstance(r["passed"], bool)
    assert set(r["checks"]) == {"coalesced_pct_of_copy", "stride32_slowdown"}
    for name, c in r["checks"].items():
        assert_threshold(name, c)

    rows = r["timing"]["rows"]
    gpu_rows = [row for row in rows if row["group"].startswith("copy kernel on the GPU")]
    assert [row["method"] for row in gpu_rows] == [
        "host timer, no synchronize", "one cold call + synchronize",
        "one warm call + synchronize (host timer)", "gc.bench: warm-up, CUDA events, median"]
    assert all(finite(row["seconds"]) for row in rows if row["kind"] != "skipped")
    assert r["timing"]["backend"] == "cuda"

    sweep = r["stride_sweep"]
    assert sweep["strides"] == list(ch1_common.STRIDES)
    assert len(sweep["gbps"]) == len(sweep["seconds"]) == len(ch1_common.STRIDES)
    assert all_finite(sweep["gbps"]) and all_finite(sweep["seconds"])
    assert set(sweep["coalesced_versions"]) == {"copy_v1_coalesced", "copy_v3_float4"}
    assert sweep["coalesced_kernel"] in sweep["coalesced_versions"]
    assert all_finite(list(sweep["coalesced_versions"].values()))
    assert finite(sweep["ceiling_gbps"]) and finite(sweep["coalesced_gbps"])
    assert sweep["peak_gbps"] == specs.lookup("H200").memory_bandwidth_GBps  # the spec table
    assert len(sweep["model_gbps"]) == len(ch1_common.STRIDES)
    assert sweep["nbytes"] == CH1_BUFFER_BYTES
    assert sweep["l2_bytes"] == fakecuda.PROPERTIES["l2CacheSize"]

    roof = r["roofline"]
    assert roof["kind"] == "measured"
    assert [p["name"] for p in roof["points"]] == [
        "vector add (vector_add_v1_naive)", "reduction (reduce_v5_float4_unrolled)",
        f"matmul {CH1_MATMUL_N}x{CH1_MATMUL_N} (cuBLAS)"]
    for p in roof["points"]:
        assert all(finite(p[k]) for k in ("flops", "bytes", "intensity", "seconds", "rate")), p
    assert finite(roof["ceilings"]["bandwidth_Bps"]) and finite(roof["ceilings"]["peak_flops"])
    assert_jsonable(r)


def _assert_ch4_result(r) -> None:
    assert set(r) == {"checks", "passed", "block_sweep", "divergence", "histogram", "streams",
                      "reduction"}
    assert isinstance(r["passed"], bool)
    assert set(r["checks"]) == {"block_size", "histogram_skewed_speedup", "streams_overlap",
                                "reduction_vs_copy"}
    for name, c in r["checks"].items():
        assert_threshold(name, c)

    sweep = r["block_sweep"]
    assert sweep["block_sizes"] == list(kernels.BLOCK_SIZES) and sweep["n"] == CH4_SWEEP_N
    assert len(sweep["gbps"]) == len(sweep["median_s"]) == len(kernels.BLOCK_SIZES)
    assert all_finite(sweep["gbps"]) and all_finite(sweep["median_s"])
    assert sweep["regs_per_thread"] == fakecuda.NUM_REGS  # read from the "compiled" kernel
    assert isinstance(sweep["recommended"], int)

    div = r["divergence"]
    assert div["versions"] == list(divergence_cu.VERSIONS) and div["n"] == CH4_DIVERGENCE_N
    assert len(div["median_s"]) == len(div["versions"]) and all_finite(div["median_s"])

    hist = r["histogram"]
    assert hist["skews"] == [0.0, 1.0] and hist["n"] == CH4_HISTOGRAM_N
    for k in ("v1_s", "v2_s", "speedup"):
        assert len(hist[k]) == 2 and all_finite(hist[k]), k

    st = r["streams"]
    assert st["n_streams"] == 4 and st["chunks"] == 32 and st["bytes"] == CH4_STREAMS_BYTES
    assert st["copy_engines"] == fakecuda.PROPERTIES["asyncEngineCount"]
    for k in ("h2d_s", "compute_s", "d2h_s", "duplex_s", "copy_s", "bound_s", "bound_isolated_s",
              "overlap_vs_bound", "overlap_vs_isolated_bound", "serial_s", "synced_s", "multi_s"):
        assert finite(st[k]), k
    assert len(st["multi_ops"]) == 3 * 32  # copy in, compute, copy out per chunk
    for eng, op, start, end, sid in st["multi_ops"]:
        assert op in ("H2D", "kernel", "D2H") and 0 <= sid < 4 and finite(start) and finite(end)

    red = r["reduction"]
    # torch.sum joins only where PyTorch has CUDA too (not here: this torch is a CPU build)
    assert red["labels"] == [*reduce_cu.VERSIONS, "ref: cupy.sum"]
    assert len(red["gbps"]) == len(red["median_s"]) == len(red["labels"])
    assert all_finite(red["gbps"]) and finite(red["copy_gbps"]) and red["n"] == CH4_REDUCTION_N
    assert_jsonable(r)


# --------------------------------------------------------------------------- the fake itself

def test_the_fake_gpu_is_seen_as_an_h200(fake_gpu):
    assert device.backend() == "cuda" and device.cupy_works()
    info = device.describe()
    assert info.name == "NVIDIA H200" and info.sm_count == 132
    assert info.compute_capability == (9, 0) and info.l2_bytes == 60 * 2**20
    # The memory clock and bus width come from deviceGetAttribute, as with a CUDA 13 runtime.
    assert info.peak_bandwidth_Bps == pytest.approx(2 * 3_201_000e3 * 6016 / 8)
    assert str(device.banner()).startswith("GPU mode: NVIDIA H200")
    assert specs.for_active_device().key == "H200" and ch1.default_gpu() == "H200"
    assert device.on_gpu() and ch4.gpu_choices() == ["H200"]
    x = device.asarray(np.arange(5, dtype=np.float32))
    assert type(x).__module__ == "cupy"
    assert np.array_equal(device.to_host(x), np.arange(5, dtype=np.float32))
    assert np.isnan(device.to_host(device.empty(3))).all()  # fresh memory is poisoned
    device.synchronize()


def test_the_fake_keeps_host_and_device_arrays_apart(fake_gpu):
    cp = fake_gpu
    x = cp.arange(4, dtype=cp.float32)
    with pytest.raises(TypeError):
        np.asarray(x)
    with pytest.raises(TypeError):
        x + np.ones(4, np.float32)
    y = cp.empty(4, dtype=cp.float32)
    copy = kernels.load("copy").copy_v1_coalesced
    with pytest.raises(LaunchError, match="host memory"):
        copy(1, 32, (np.ones(4, np.float32), y, np.int32(4)))
    copy(1, 32, (x, y, np.int32(4)))
    assert bool(cp.array_equal(x, y))
    with pytest.raises(CompileError, match=r"bad\.cu line 2"):
        kernels.from_source('extern "C" __global__ void k(float* a) {\n  a[0] = nope;\n}',
                            name="bad.cu")


def test_the_fake_pools_memory_and_runs_elementwise_kernels_and_sparse_products(fake_gpu):
    cp = fake_gpu
    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    used, held = pool.used_bytes(), pool.total_bytes()
    x = cp.empty(1 << 16, dtype=cp.float32)
    assert pool.used_bytes() - used == x.nbytes
    del x
    assert pool.used_bytes() == used and pool.total_bytes() - held == 1 << 18  # cached
    pool.free_all_blocks()
    assert pool.total_bytes() == used
    cp.cuda.set_allocator(None)  # no pool: not counted
    y = cp.empty(1 << 16, dtype=cp.float32)
    assert pool.used_bytes() == used
    cp.cuda.set_allocator(pool.malloc)
    del y

    ek = cp.ElementwiseKernel("float32 x", "float32 y", ch5.kernel_fusion.CUPY_CHAIN, "chain")
    host = np.linspace(-2, 2, 1003, dtype=np.float32)
    got = ek(cp.asarray(host))
    assert type(got).__module__ == "cupy"
    np.testing.assert_allclose(got.get(), ch5.kernel_fusion.chain_numpy(host), rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError):
        ek(host)  # a NumPy array, as with CuPy
    with pytest.raises(TypeError):
        ek(cp.asarray(host.astype(np.float64)))  # the fake does not cast

    import cupyx.scipy.sparse as cps

    dense = np.where(np.arange(60).reshape(6, 10) % 7 == 0, 1.5, 0.0).astype(np.float32)
    s = cps.csr_matrix(cp.asarray(dense))
    assert s.nnz == np.count_nonzero(dense)
    b = np.arange(30, dtype=np.float32).reshape(10, 3)
    np.testing.assert_allclose(cp.asnumpy(s @ cp.asarray(b)), dense @ b)
    with pytest.raises(TypeError):
        s @ b

    dst = cp.zeros(8, dtype=cp.float32)
    src = np.arange(8, dtype=np.float32)
    dst.data.copy_from_host_async(ctypes.c_void_p(src.ctypes.data), 32, cp.cuda.Stream())
    assert np.array_equal(dst.get(), src)
    assert float(cp.linalg.norm(cp.asarray(np.array([3.0, 4.0])))) == 5.0


# --------------------------------------------------------------------------- across chapters

def test_what_the_gpu_checks_record_is_what_the_cpu_figures_read(reference_folder):
    """gpu_check() results, saved as reference data the way make gpu-check saves them, feed the
    CPU path's reference overlays: chapter 1's summary, chapter 4's register count and its
    reduction-ladder figure (which shows a note instead when the keys do not match)."""
    from matplotlib.figure import Figure

    from gpucourse.plot import ch4 as plot4

    with installed() as (cp, mp):
        small_ch1_ch4(mp)
        results = {"ch1": ch1.gpu_check(), "ch4": ch4.gpu_check()}
    _assert_ch1_result(results["ch1"])
    _assert_ch4_result(results["ch4"])
    reference.write(results, gpu="NVIDIA H200", folder=reference_folder,
                    command="python tools/gpu_check.py (fake GPU)")
    assert device.backend() == "cpu"
    assert "coalesced_pct_of_copy = " in ch1.reference_summary()
    assert block_size._saxpy_regs_without_gpu()[0] == fakecuda.NUM_REGS
    red = ch4.reduction(n=1 << 12, min_time_s=0.01)
    assert isinstance(plot4.reduction_reference_figure(red), Figure)


def test_gpu_check_tool_runs_chapters_1_and_4_on_the_fake_gpu(fake_gpu, monkeypatch, tmp_path,
                                                              capsys):
    """tools/gpu_check.py in-process, as the next GPU session runs it (--skip-tests --chapters 1,4),
    plus --no-reference and a temporary --out so that nothing in the repository changes."""
    import gpu_check
    import ncu_compare

    real_sizes = gpu_check._sizes

    def small_sizes(cp):
        sizes = real_sizes(cp)  # still computed from the fake H200's L2 and free memory
        assert sizes["n"] >= 1 << 20 and sizes["side"] ** 2 <= sizes["n"]
        return {**sizes, "n": TOOL_N, "side": TOOL_SIDE}

    monkeypatch.setattr(gpu_check, "_sizes", small_sizes)
    # ch4.gpu_check times the recommended block size separately when the sweep lacks it:
    # recommend one the sweep does not have, so that this run takes that branch (the
    # gpu_check round-trip test above takes the other).
    real_recommend = block_size.recommend_block_size

    def recommend_off_grid(*args, **kwargs):
        real_recommend(*args, **kwargs)
        return OFF_GRID_BLOCK

    monkeypatch.setattr(block_size, "recommend_block_size", recommend_off_grid)
    # Chapter 1 times the copy kernel's cold first call: no step may build copy.cu first.
    copy_builds = []
    real_load = kernels.load

    def logged_load(name, *args, **kwargs):
        if name == "copy":
            copy_builds.append("".join(f.function for f in inspect.stack()[1:3]))
        return real_load(name, *args, **kwargs)

    monkeypatch.setattr(kernels, "load", logged_load)
    monkeypatch.setattr(ncu_compare, "compare", lambda: "Nsight Compute is not used on the fake GPU")
    monkeypatch.setattr(sys, "path", list(sys.path))  # main() prepends tools/
    monkeypatch.setattr(sys, "argv", ["tools/gpu_check.py", "--skip-tests", "--chapters", "1,4",
                             "--no-reference", "--out", str(tmp_path)])
    rc = gpu_check.main()
    out = capsys.readouterr().out
    written = list(tmp_path.glob("gpu_check-*.json"))
    assert len(written) == 1
    record = json.loads(written[0].read_text())
    for n in ("1", "4"):
        chapter = record["chapters"][n]
        assert chapter["status"] == "ok", chapter.get("trace") or chapter
    assert rc == 0, out
    assert copy_builds and "copy_kernels" in copy_builds[0], copy_builds
    assert record["gpu"] == "NVIDIA H200" and record["tests"] == {"status": "skipped"}
    assert record["kernel_sizes"]["n"] == TOOL_N
    wrong = [r for r in record["kernels"] if not r.get("correct")]
    assert not wrong, wrong
    assert {r["file"] for r in record["kernels"]} == {"vector_add", "copy", "transpose", "reduce"}
    timed = {r["kernel"] for r in record["kernels"]}
    assert set(reduce_cu.VERSIONS) <= timed  # every rung, with chapter 4's launch shapes
    assert {"copy_v1_coalesced", *ch1_common.copy_kernels()["others"]} <= timed
    assert all(finite(r["median_s"]) and finite(r["gbps"]) for r in record["kernels"])
    _assert_ch1_result(record["chapters"]["1"]["result"])
    _assert_ch4_result(record["chapters"]["4"]["result"])
    assert OFF_GRID_BLOCK not in kernels.BLOCK_SIZES
    assert record["chapters"]["4"]["result"]["block_sweep"]["recommended"] == OFF_GRID_BLOCK
    # The summary prints one line per threshold, PASS or FAIL (which one is meaningless here).
    lines = [l for l in out.splitlines() if l.startswith(("  ch1 ", "  ch4 "))]
    assert len(lines) == 2 + 4 and all(" PASS " in l or " FAIL " in l for l in lines), out


def test_gpu_check_tool_keeps_what_it_measured_when_later_steps_fail(fake_gpu, monkeypatch,
                                                                     tmp_path, capsys):
    """Chapter 4 raises a CUDA error, which is sticky, so the kernel step fails as a whole and
    so does the Nsight Compute step: chapter 1's thresholds are still printed with GPU, date
    and command, and its figures reach the reference data, which keeps the earlier H200
    kernel rows and chapter 4; the run exits 1."""
    import functools

    import gpu_check
    import ncu_compare

    def sticky(*args, **kwargs):
        raise fake_gpu.cuda.runtime.CUDARuntimeError("cudaErrorIllegalAddress: an illegal memory access")

    monkeypatch.setattr(ch4, "gpu_check", sticky)
    monkeypatch.setattr(gpu_check, "kernel_benchmarks", sticky)
    monkeypatch.setattr(ncu_compare, "compare", sticky)
    ref_folder = tmp_path / "reference"
    before = reference.write(
        {"kernels": {"sizes": {}, "rows": [{"file": "copy", "kernel": "copy_v1_coalesced",
                                            "correct": True, "gbps": 4000.0}]},
         "ch4": {"checks": {}, "passed": True}},
        gpu="NVIDIA H200", command="an earlier run", folder=ref_folder, date="2026-11-29")
    monkeypatch.setattr(reference, "write", functools.partial(reference.write, folder=ref_folder))
    monkeypatch.setattr(sys, "path", list(sys.path))  # main() prepends tools/
    monkeypatch.setattr(sys, "argv", ["tools/gpu_check.py", "--skip-tests", "--chapters", "1,4",
                                      "--out", str(tmp_path / "out")])
    rc = gpu_check.main()
    out = capsys.readouterr().out
    assert rc == 1, out
    record = json.loads(next((tmp_path / "out").glob("gpu_check-*.json")).read_text())
    assert record["chapters"]["1"]["status"] == "ok"
    assert record["chapters"]["4"]["status"] == "error"
    assert "cudaErrorIllegalAddress" in record["kernels_error"] and record["kernels"] == []
    assert record["ncu_compare"].startswith("failed: ")
    assert f"NVIDIA H200, {record['date']}, measured with `{record['command']}`" in out
    assert len([l for l in out.splitlines() if l.startswith("  ch1 ")]) == 2, out
    assert "  ch4: error: CUDARuntimeError" in out
    results = json.loads(before.read_text())["results"]
    assert results["ch1"]["_provenance"]["command"] == record["command"]
    assert results["ch4"]["_provenance"]["command"] == "an earlier run"
    assert results["kernels"]["rows"][0]["gbps"] == 4000.0


def test_bench_times_with_cuda_events_and_flushes_l2_on_the_fake_gpu(fake_gpu):
    x = fake_gpu.zeros(1024, dtype=fake_gpu.float32)
    t = bench.benchmark(x.fill, 1.0, bytes=4096, min_time_s=0.01, min_samples=2, flush_l2=True)
    assert t.backend == "cuda" and t.method == "CUDA events" and t.l2_flushed
    assert t.device == "NVIDIA H200" and t.count >= 2 and all_finite(t.samples_s)


def test_a_cuda_timing_waits_for_the_gpu_before_each_l2_flush_also_in_cpu_mode(fake_gpu,
                                                                               monkeypatch):
    """GPUCOURSE_DEVICE=cpu makes the CPU the active backend, but benchmark(backend="cuda")
    times GPU work: it must still wait for the GPU before timing around a cache flush."""
    monkeypatch.setenv(device.ENV_VAR, "cpu")
    waits = []
    monkeypatch.setattr(fake_gpu.cuda.Device, "synchronize", lambda self: waits.append(1))
    x = fake_gpu.random.random(1024, dtype=fake_gpu.float32)
    t = bench.benchmark(x.fill, 1.0, min_time_s=0.01, min_samples=3, max_samples=3,
                        flush_l2=True, backend="cuda")
    assert t.backend == "cuda" and t.l2_flushed and t.count == 3
    assert len(waits) == 3  # one per sample, after its flush
    device.synchronize()  # the active backend is the CPU: nothing to wait for
    assert len(waits) == 3


def test_bandwidth_experiments_size_their_buffers_well_over_ten_times_l2():
    """The course's rule for a GPU: a bandwidth experiment streams buffers well over ten times
    the L2, so the cache cannot serve them (sizes only; nothing is allocated here)."""
    with installed():
        l2 = device.describe().l2_bytes
        assert l2 == fakecuda.PROPERTIES["l2CacheSize"]
        for cap in (1 << 30, 2 << 30):  # the caps chapters 1 and 5 use
            assert device.bandwidth_buffer_bytes(cap=cap) >= 10 * l2
        assert block_size.default_sweep_n() * 4 >= 10 * l2  # saxpy: each of x and y
        assert ch2_transpose.transpose_side() ** 2 * 4 >= 10 * l2


def test_gpu_check_skips_chapters_whose_library_is_missing(fake_gpu, capsys):
    """CuPy works but PyTorch is a CPU build (as here): chapters 3 and 6, which run PyTorch on
    the GPU, are skipped with the reason, not reported as errors."""
    import time

    import gpu_check

    record: dict = {}
    gpu_check.chapter_checks(time.perf_counter() + 60, lambda: None, record, only={3, 6})
    for n in ("3", "6"):
        assert record["chapters"][n]["status"] == "skipped", record["chapters"][n]
        assert "CUDA build of PyTorch" in record["chapters"][n]["reason"]
    assert capsys.readouterr().out.count("skip: chapter") == 2
