"""Chapter 1 without a notebook: the stride sweep and roofline of the active device, the
reference data's summary, every experiment for the headless runner (``run_all``) and the GPU
acceptance check of ``make gpu-check`` (``gpu_check``)."""
from __future__ import annotations

from ... import check, device, reference
from ...errors import CourseError
from .common import MiB, cupy_or_none, default_gpu, progress_to, torch_cuda
from .rooflines import cpu_ceilings, cpu_roofline, gpu_roofline, gpu_roofline_model
from .strided import check_copy_kernels, cpu_stride_sweep, gpu_stride_sweep, sector_model
from .timing import timing_wrong_vs_right
from .transfer import transfer_sweep, transfer_vs_compute


def stride_sweep(progress=None) -> dict:
    """The stride sweep of the active device: copy.cu on a GPU, NumPy on the CPU."""
    if cupy_or_none() is not None:
        return gpu_stride_sweep(progress=progress)
    return cpu_stride_sweep(progress=progress)


def roofline(progress=None) -> dict:
    """The measured roofline of the active device: kernels and cuBLAS on a GPU, NumPy on the CPU."""
    if cupy_or_none() is not None:
        return gpu_roofline()
    ceilings = cpu_ceilings()
    progress_to(progress, 0.5)
    return cpu_roofline(ceilings)


def reference_summary() -> str:
    """One sentence per GPU whose reference file has chapter-1 data, or a note that none does."""
    refs = [r for r, _ in reference.find("ch1")]  # each with chapter 1's own date and command
    if not refs:
        return ("No reference measurements of chapter 1 from a real GPU are in this copy of the "
                "course yet (`make gpu-check` on a GPU writes them), so GPU numbers below are models.")
    lines = []
    for r in refs:
        figures = []
        for key, v in r.get("ch1", "checks", default={}).items():
            if not (isinstance(v, dict) and v.get("value") is not None):
                continue
            # "passed" since check.threshold; files measured before it say "pass".
            met = "met" if v.get("passed", v.get("pass")) else "not met"
            target = f"; the course's target is {check.limit_text(v)}: {met}" \
                if v.get("threshold") is not None else f": {met}"
            figures.append(f"  {key} = {v['value']:.3g} ({v.get('what', key)}{target})")
        lines.append(r.provenance + r.kernel_caveat("copy.cu", "vector_add.cu", "reduce.cu")
                     + (":" if figures else ""))
        lines += figures
    return "\n".join(lines)


# Problem sizes of the headless run on the CPU (quick, full); tests make them smaller.
RUN_SIZES = {"timing_n": (1 << 22, 1 << 24), "stride_bytes": (64 * MiB, 256 * MiB),
             "transfer_bytes": (4 * MiB, 64 * MiB), "transfer_matmul_n": (1024, 2048),
             "copy_bytes": (64 * MiB, 256 * MiB),
             "roofline_n": (1 << 24, 1 << 25), "matmul_sizes": ((512, 1024), (1024, 2048))}


def run_all(quick: bool = True, progress=None) -> dict:
    """Every experiment of the chapter, as JSON-ready results (for the headless runner)."""
    q = 0 if quick else 1
    size = {k: v[q] for k, v in RUN_SIZES.items()}
    mt = 0.05 if quick else 0.2
    out = {"device": device.describe().short_name, "backend": device.backend(),
           "target_gpu": default_gpu()}
    out["timing"] = timing_wrong_vs_right(n=size["timing_n"], min_time_s=mt)
    progress_to(progress, 0.2)
    if cupy_or_none() is not None:
        out["stride_sweep"] = gpu_stride_sweep(min_time_s=mt)
    else:
        out["stride_sweep"] = cpu_stride_sweep(footprint_bytes=size["stride_bytes"], min_time_s=mt)
    out["sector_model"] = sector_model()
    try:
        out["kernel_check"] = check_copy_kernels()
    except CourseError as exc:  # no C++ compiler: the chapter's other results stay useful
        out["kernel_check"] = {"error": str(exc)}
    progress_to(progress, 0.5)
    out["transfer"] = transfer_vs_compute(nbytes=size["transfer_bytes"],
                                          matmul_n=size["transfer_matmul_n"], min_time_s=mt)
    out["transfer_sweep"] = transfer_sweep()
    progress_to(progress, 0.7)
    if cupy_or_none() is not None:
        out["roofline"] = gpu_roofline(min_time_s=mt)
    else:
        ceil = cpu_ceilings(copy_bytes=size["copy_bytes"], matmul_sizes=size["matmul_sizes"],
                            min_time_s=mt)
        out["roofline"] = cpu_roofline(ceil, n=size["roofline_n"], min_time_s=mt)
    out["roofline_model"] = gpu_roofline_model()
    progress_to(progress, 1.0)
    return out


def gpu_check() -> dict:
    """On a CUDA GPU (about 30 s): the chapter's GPU figures and the issue's two thresholds.

    The coalesced copy must reach 80 % of the measured device copy bandwidth (a large
    library copy), and the stride-32 copy must be at least 5x slower than stride 1.
    """
    device.require_cuda("chapter 1's gpu_check", needs="cupy")  # copy.cu runs through CuPy
    out = {"device": device.describe().short_name}
    # First, while the copy kernel has not been built in this process: its cold first call.
    out["timing"] = timing_wrong_vs_right(n=1 << 22, min_time_s=0.05)
    sweep = gpu_stride_sweep(min_time_s=0.2)
    i1, i32 = sweep["strides"].index(1), sweep["strides"].index(32)
    pct = 100 * sweep["coalesced_gbps"] / sweep["ceiling_gbps"]
    slow = sweep["gbps"][i1] / sweep["gbps"][i32]
    out["stride_sweep"] = sweep
    out["checks"] = {
        "coalesced_pct_of_copy": check.at_least(
            pct, 80.0, f"{sweep['coalesced_kernel']} (the fastest coalesced version of copy.cu) "
                       "as % of the library's device copy"),
        "stride32_slowdown": check.at_least(
            slow, 5.0, "copy_v2_strided: time at stride 32 / time at stride 1")}
    if torch_cuda():
        out["transfer"] = transfer_vs_compute(gpu=default_gpu(), nbytes=256 * MiB, matmul_n=2048,
                                              min_time_s=0.1)
    out["roofline"] = gpu_roofline(min_time_s=0.1)
    out["passed"] = all(c["passed"] for c in out["checks"].values())
    return out
