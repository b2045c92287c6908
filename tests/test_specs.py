"""The GPU spec table, the occupancy-limit table and the spec lookups."""
import dataclasses
import json
from importlib import resources
from types import SimpleNamespace

import pytest

from gpucourse import precision, specs
from gpucourse.errors import CourseError, DeviceError, PrecisionError, SpecError


def _raw(name):
    return json.loads(resources.files("gpucourse").joinpath("data", name).read_text())


# --------------------------------------------------------------------------- the table

REQUIRED = {"T4", "V100-SXM2-16GB", "V100-SXM2-32GB", "A10", "L4", "A100-SXM4-40GB",
            "A100-SXM4-80GB", "H100-SXM", "H100-PCIe", "H200", "RTX-3090", "RTX-4090"}


def test_table_covers_the_gpus_the_course_names():
    assert REQUIRED <= set(specs.names())
    assert len(specs.names()) == len(set(specs.names())) == len(specs.all_gpus())


@pytest.mark.parametrize("row", _raw("gpus.json")["gpus"], ids=lambda r: r["key"])
def test_every_row_names_its_source_and_lists_every_precision(row):
    assert row["source"]["name"].strip()
    assert row["source"]["url"].startswith("https://")
    for extra in row["other_sources"]:
        assert extra["name"].strip()
    # null (no such unit) must be written out, never left implicit
    assert set(row["peak_tflops"]) == set(precision.PRECISIONS)
    assert row["notes"].strip()


@pytest.mark.parametrize("gpu", specs.all_gpus(), ids=lambda g: g.key)
def test_every_row_has_sane_values(gpu):
    """Positive sizes, a known compute capability, and peaks in the order the hardware implies."""
    assert gpu.sm_count > 0 and gpu.memory_bytes >= 16 * 2**30 and gpu.l2_bytes >= 2**20
    assert 200e9 <= gpu.bandwidth_Bps <= 10e12
    specs.occupancy_limits(gpu.compute_capability)  # raises if the cc is unknown
    peaks = gpu.peak_tflops
    assert set(peaks) <= set(precision.PRECISIONS) and "fp32" in peaks and "fp16" in peaks
    assert all(v > 0 for v in peaks.values())
    # every part here has tensor cores: half precision runs at least as fast as fp32
    assert peaks["fp16"] >= peaks["fp32"]
    if "fp64" in peaks:
        assert peaks["fp64"] <= peaks["fp32"]
    if "tf32" in peaks:
        assert peaks["fp32"] <= peaks["tf32"] <= peaks["fp16"]
    if "bf16" in peaks:
        assert peaks["bf16"] == peaks["fp16"]
    if "int8" in peaks:
        assert peaks["int8"] >= peaks["fp16"]
    if "fp8" in peaks:
        assert peaks["fp8"] >= peaks["fp16"]
    assert gpu.pcie_gen in (3, 4, 5) and gpu.pcie_lanes == 16
    assert gpu.source and gpu.source_url.startswith("https://") and not gpu.estimated


def test_sm_counts_follow_from_cuda_cores():
    """SM count = datasheet CUDA cores / FP32 cores per SM: T4 2560/64 = 40, V100 5120/64 = 80,
    A100 6912/64 = 108, A10 9216/128 = 72, L4 7424/128 = 58, H100 SXM 16896/128 = 132,
    H100 PCIe 14592/128 = 114, RTX 3090 10496/128 = 82, RTX 4090 16384/128 = 128."""
    expected = {"T4": 40, "V100-SXM2-16GB": 80, "A100-SXM4-40GB": 108, "A10": 72, "L4": 58,
                "H100-SXM": 132, "H100-PCIe": 114, "RTX-3090": 82, "RTX-4090": 128, "H200": 132}
    assert {k: specs.lookup(k).sm_count for k in expected} == expected


DEVICE_NAMES = [
    ("Tesla T4", "T4"), ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB"),
    ("Tesla V100-SXM2-32GB", "V100-SXM2-32GB"), ("NVIDIA A10", "A10"), ("NVIDIA L4", "L4"),
    ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"), ("A100-SXM4-40GB", "A100-SXM4-40GB"),
    ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"), ("NVIDIA H100 80GB HBM3", "H100-SXM"),
    ("NVIDIA H100 PCIe", "H100-PCIe"), ("NVIDIA H200", "H200"),
    ("NVIDIA GeForce RTX 3090", "RTX-3090"), ("NVIDIA GeForce RTX 4090", "RTX-4090"),
]


@pytest.mark.parametrize("reported,key", DEVICE_NAMES)
def test_lookup_matches_the_names_devices_report(reported, key):
    assert specs.lookup(reported).key == key


@pytest.mark.parametrize("short,key", [("t4", "T4"), ("A100", "A100-SXM4-40GB"),
                                       ("a100 80gb", "A100-SXM4-80GB"), ("H100", "H100-SXM"),
                                       ("h100-pcie", "H100-PCIe"), ("RTX 4090", "RTX-4090"),
                                       ("A10", "A10"), ("H200", "H200")])
def test_lookup_accepts_short_names_without_confusing_similar_parts(short, key):
    assert specs.lookup(short).key == key


def test_lookup_returns_a_spec_unchanged():
    gpu = specs.lookup("L4")
    assert specs.lookup(gpu) is gpu


def test_unknown_gpu_error_lists_the_known_names():
    with pytest.raises(SpecError) as err:
        specs.lookup("NVIDIA GeForce GTX 1080")
    assert isinstance(err.value, CourseError)
    for key in ("T4", "H100-SXM", "RTX-4090"):
        assert key in str(err.value)


def test_spec_is_frozen():
    gpu = specs.lookup("T4")
    with pytest.raises(dataclasses.FrozenInstanceError):
        gpu.sm_count = 1
    with pytest.raises(TypeError):
        gpu.peak_tflops["fp32"] = 1.0
    with pytest.raises(TypeError):
        gpu.peak_tflops.update(fp32=1.0)


def test_spec_converts_copies_and_pickles():
    """Experiments turn records into dicts and send them between processes."""
    import copy
    import pickle

    gpu = specs.lookup("A100")
    assert dataclasses.asdict(gpu)["peak_tflops"]["bf16"] == 312.0
    assert copy.deepcopy(gpu) == gpu
    assert pickle.loads(pickle.dumps(gpu)) == gpu


# --------------------------------------------------------------------------- units

def test_peak_flops_is_in_flop_per_second():
    """H100 SXM dense bf16 = 1979 (2:4-sparse datasheet figure) / 2 = 989.5 TFLOP/s."""
    assert specs.lookup("H100").peak_flops("bf16") == pytest.approx(989.5e12)
    assert specs.lookup("A100").peak_flops("tf32") == pytest.approx(156e12)
    assert specs.lookup("T4").peak_flops("FP16") == pytest.approx(65e12)


def test_missing_precision_names_what_the_part_has():
    with pytest.raises(PrecisionError) as err:
        specs.lookup("T4").peak_flops("bf16")
    assert isinstance(err.value, CourseError)
    assert "fp32" in str(err.value) and "fp16" in str(err.value) and "int8" in str(err.value)
    with pytest.raises(PrecisionError, match="not a precision"):
        specs.lookup("H100").peak_flops("fp4")


def test_bandwidth_and_ridge_point():
    """A100 80GB: 2039 GB/s = 2.039e12 B/s. H100 SXM bf16 ridge = 989.5e12 / 3.35e12 = 295.4 FLOP/byte."""
    assert specs.lookup("A100 80GB").bandwidth_Bps == pytest.approx(2.039e12)
    assert specs.lookup("H100").ridge_point("bf16") == pytest.approx(295.37, rel=1e-3)


def test_link_bandwidth_model():
    """PCIe gen 3 x16: 8 GT/s x 16 lanes x 128/130 / 8 bits = 15.754 GB/s per direction;
    pinned model 0.85 x 15.754 = 13.391 GB/s; pageable half of that, 6.695 GB/s.
    Gen 5 x16 is four times gen 3: 63.015 GB/s theoretical."""
    t4 = specs.lookup("T4")
    assert t4.pcie_bandwidth_Bps == pytest.approx(15.754e9, rel=1e-4)
    assert t4.link_bandwidth_Bps() == pytest.approx(13.391e9, rel=1e-4)
    assert t4.link_bandwidth_Bps(pinned=False) == pytest.approx(6.695e9, rel=1e-3)
    assert specs.lookup("H100").pcie_bandwidth_Bps == pytest.approx(4 * t4.pcie_bandwidth_Bps)


def test_spec_prints_its_source():
    gpu = specs.lookup("H200")
    assert "source" in str(gpu) and "nvidia.com" in str(gpu)
    assert "datasheet" in gpu._repr_html_()


# --------------------------------------------------------------------------- occupancy limits

@pytest.mark.parametrize("cc", ["7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "12.0"])
def test_occupancy_limits_exist_and_are_consistent(cc):
    lim = specs.occupancy_limits(cc)
    assert lim.cc == cc and lim.source.startswith("CUDA C++ Programming Guide")
    assert lim.max_threads_per_sm == lim.max_warps_per_sm * lim.warp_size
    assert lim.max_threads_per_block == 1024 and lim.max_registers_per_thread == 255
    assert lim.registers_per_sm == lim.max_registers_per_block == 64 * 1024
    # the largest block allocation plus the driver's per-block reserve fills the SM exactly
    assert (lim.max_shared_memory_per_block + lim.reserved_shared_memory_per_block
            == lim.shared_memory_per_sm)
    assert lim.reserved_shared_memory_per_block == (1024 if float(cc) >= 8.0 else 0)


def test_occupancy_limits_by_architecture():
    """Programming guide: 8.6 has 48 warps, 16 blocks and 100 KB per SM; 8.9 raised blocks to 24;
    7.5 has only 32 warps; 9.0 has 228 KB of shared memory per SM."""
    a = specs.occupancy_limits("8.6")
    assert (a.max_warps_per_sm, a.max_blocks_per_sm, a.shared_memory_per_sm) == (48, 16, 100 * 1024)
    assert specs.occupancy_limits("8.9").max_blocks_per_sm == 24
    assert specs.occupancy_limits("7.5").max_warps_per_sm == 32
    assert specs.occupancy_limits("9.0").shared_memory_per_sm == 228 * 1024


@pytest.mark.parametrize("form", ["9.0", "sm_90", "sm_90a", (9, 0), 9.0, "H100", "NVIDIA H200"])
def test_occupancy_limits_accept_every_way_of_naming_a_cc(form):
    assert specs.occupancy_limits(form).cc == "9.0"


def test_unknown_compute_capability_lists_the_known_ones():
    with pytest.raises(SpecError) as err:
        specs.occupancy_limits("6.1")
    assert "7.0" in str(err.value) and "12.0" in str(err.value)
    with pytest.raises(SpecError, match="compute capability"):
        specs.occupancy_limits((8, "x"))


# --------------------------------------------------------------------------- unknown devices

H200_PROPS = dict(name="Some Future GPU", compute_capability=(9, 0), sm_count=132,
                  memory_bytes=150109880320, memory_clock_khz=3201000,
                  memory_bus_width_bits=6016, l2_bytes=62914560)


def test_from_device_estimates_bandwidth_and_says_so():
    """2 x 3.201e9 Hz x 6016 bits / 8 = 3.201e9 x 1504 = 4.8143e12 B/s (what an H200 reports)."""
    gpu = specs.from_device(H200_PROPS)
    assert gpu.bandwidth_Bps == pytest.approx(4.8143e12, rel=1e-4)
    assert gpu.estimated and gpu.source == specs.ESTIMATED_SOURCE
    assert gpu.sm_count == 132 and gpu.l2_bytes == 62914560
    with pytest.raises(PrecisionError):  # no tensor peaks are invented
        gpu.peak_flops("bf16")


def test_from_device_estimates_fp32_only_with_a_clock():
    """FP32 = 2 x 132 SMs x 128 lanes x 1.98e9 Hz = 66.9 TFLOP/s."""
    gpu = specs.from_device(SimpleNamespace(**H200_PROPS, clock_khz=1980000))
    assert gpu.peak_flops("fp32") == pytest.approx(66.9e12, rel=1e-3)
    assert gpu.precisions == ("fp32",)


def test_from_device_needs_the_memory_fields():
    with pytest.raises(SpecError, match="memory_clock_khz"):
        specs.from_device({**H200_PROPS, "memory_clock_khz": None})


def test_for_active_device_without_a_gpu(monkeypatch):
    from gpucourse import device

    monkeypatch.setattr(device, "backend", lambda: "cpu")
    with pytest.raises(DeviceError, match="specs.lookup"):
        specs.for_active_device()


def test_for_active_device_uses_the_table_then_falls_back(monkeypatch):
    from gpucourse import device

    monkeypatch.setattr(device, "backend", lambda: "cuda")
    monkeypatch.setattr(device, "describe", lambda: SimpleNamespace(**{**H200_PROPS, "name": "NVIDIA H200"}))
    assert specs.for_active_device().key == "H200"
    monkeypatch.setattr(device, "describe", lambda: SimpleNamespace(**H200_PROPS))
    assert specs.for_active_device().estimated


# --------------------------------------------------------------------------- the GPU the models describe

def _on_a_gpu(monkeypatch, active):
    monkeypatch.setattr(specs.device, "is_cuda", lambda: True)
    monkeypatch.setattr(specs, "for_active_device", lambda: active)


def test_model_gpu_without_a_gpu_is_the_fallback_else_the_default(monkeypatch):
    monkeypatch.setattr(specs.device, "is_cuda", lambda: False)
    assert specs.model_gpu().key == specs.DEFAULT_GPU
    assert specs.model_gpu(fallback="T4").key == "T4"
    assert specs.model_gpu("L4", fallback="T4").key == "L4"
    t4 = specs.lookup("T4")
    assert specs.model_gpu(t4) is t4


def test_model_gpu_on_a_gpu_is_the_active_one_unless_another_is_asked_for(monkeypatch):
    _on_a_gpu(monkeypatch, specs.lookup("H100-SXM"))
    assert specs.model_gpu().key == "H100-SXM"
    assert specs.model_gpu(fallback="T4").key == "H100-SXM"
    assert specs.model_gpu("T4").key == "T4"  # a learner's choice holds on a GPU too


def test_model_gpu_takes_the_active_gpus_own_name_where_the_table_lacks_it(monkeypatch):
    props = SimpleNamespace(name="Lab GPU 9000", compute_capability=(9, 0), sm_count=100,
                            memory_clock_khz=2_000_000, memory_bus_width_bits=4096,
                            memory_bytes=2**36, l2_bytes=2**25)
    estimated = specs.from_device(props)
    _on_a_gpu(monkeypatch, estimated)
    assert specs.model_gpu() is estimated
    assert specs.model_gpu("Lab GPU 9000") is estimated
    with pytest.raises(SpecError, match="Unknown GPU"):
        specs.model_gpu("Lab GPU 9001")
