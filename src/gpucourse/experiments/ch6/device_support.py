"""What this device offers for low precision: the CPU's BF16 and FP16 instructions, and on a
GPU what a size off a multiple of 8 costs (section 1) and whether BF16 is native, BF16 vs FP16
matmul rate (section 3), each matmul checked against float64 before it is timed; reference
data or the spec table stand in where there is no GPU."""
from __future__ import annotations

import torch

from ... import device, precision, reference, specs
from ...display import Table
from .common import bench_on, cpu_flags


def cpu_low_precision_support() -> dict:
    """What this CPU offers for BF16 and FP16 arithmetic, and one sentence saying what it means."""
    flags = cpu_flags()
    cap = torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, "cpu") else "?"
    bf16 = sorted(f for f in flags if f in ("avx512_bf16", "amx_bf16"))
    fp16 = sorted(f for f in flags if f in ("avx512_fp16", "amx_fp16"))
    if bf16:
        s_bf16 = (f"it has BF16 dot-product instructions ({', '.join(bf16)}), so oneDNN runs BF16 "
                  "matmuls natively: they can beat FP32 by moving half the bytes")
    else:
        s_bf16 = ("it has no BF16 instructions, so every BF16 value is widened to FP32 in software "
                  "before it is multiplied: BF16 matmuls are much slower than FP32")
    if fp16:
        s_fp16 = f"and FP16 arithmetic ({', '.join(fp16)})"
    else:
        s_fp16 = ("and no FP16 arithmetic (only F16C conversions), so FP16 matmuls take a slow "
                  "generic path, several to hundreds of times slower than FP32 depending on the size and the "
                  "threads (the measurement beside this shows how much here)")
    return {"capability": cap, "bf16_flags": bf16, "fp16_flags": fp16,
            "sentence": f"PyTorch uses this CPU's {cap} code path; {s_bf16}; {s_fp16}."}


# --------------------------------------------------------------------------- matrix products on a GPU

def _output_rounding_rtol(dtype) -> float:
    """``precision.LOW_PRECISION_MATMUL_RTOL`` of a torch dtype whose products are rounded to
    it (FP16, BF16); 0 for FP32."""
    return next((rtol for p, rtol in precision.LOW_PRECISION_MATMUL_RTOL.items()
                 if precision.torch_dtype(p) == dtype), 0.0)


def check_square_matmul(a: torch.Tensor, name: str, product=torch.matmul) -> float:
    """``product(a, a)`` (the matmul that is timed) in a's own type against float64 on the
    same, already rounded, inputs, over its first 64 rows; returns the relative error and
    raises when it is over the type's tolerance."""
    rows = a[:64]
    got = product(rows, a).double().cpu()
    r64, a64 = rows.double().cpu(), a.double().cpu()
    ref = r64 @ a64
    err = float((got - ref).norm() / ref.norm())
    # Plus the worst case of FP32 accumulation, in any order and on any number of cores: a sum
    # of n products errs by at most n * 2^-24 * sum|products| (about 1e-2 at n = 4096).
    sums = a.shape[0] * 2.0 ** -24 * float((r64.abs() @ a64.abs()).norm() / ref.norm())
    rtol = _output_rounding_rtol(a.dtype) + sums
    assert err < rtol, f"{name}: relative error {err:.3g} of a @ a is over {rtol:.3g}"
    return err


def bf16_vs_fp16_matmul(n: int = 4096, min_time_s: float = 0.2, dev: str = "cuda") -> dict:
    """TFLOP/s of an n x n x n matmul in FP16 and in BF16: far apart when BF16 is emulated."""
    out = {}
    for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        a = torch.randn(n, n, device=dev).to(dtype)
        try:
            check_square_matmul(a, f"{name} matmul, n={n}")
            out[name] = bench_on(lambda a=a: a @ a, name, dev, min_time_s, flops=2 * n ** 3).gflops / 1e3
        except RuntimeError as exc:  # a GPU or build without BF16 GEMMs at all
            out[name], out[name + "_error"] = 0.0, str(exc)[:120]
    out["bf16_over_fp16"] = out["bf16"] / out["fp16"] if out["fp16"] else None
    return out


def alignment(n: int = 8192, min_time_s: float = 0.2, dev: str = "cuda") -> dict:
    """BF16 matmul TFLOP/s at a size that is a multiple of 8 and one that is not."""
    out = {}
    for size in (n, n - 1):
        a = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
        check_square_matmul(a, f"bf16 matmul, n={size}")
        tm = bench_on(lambda a=a: a @ a, str(size), dev, min_time_s, flops=2 * size ** 3)
        out[str(size)] = tm.gflops / 1e3
    return out


# --------------------------------------------------------------------------- what the notebook shows

def alignment_note(n: int = 4096) -> Table:
    """BF16 matmul rate at a multiple of 8 and one below it: measured on a GPU, reference data elsewhere."""
    if device.torch_device() == "cuda":
        a = alignment(n, min_time_s=0.1)
        return Table([{"size": int(k), "TFLOP/s (measured)": v} for k, v in a.items()],
                     caption=f"{n}^3 vs {n - 1}^3 BF16 matrix products on {device.describe().name}")
    rows = [{"GPU": ref.gpu, "size": int(k), "TFLOP/s": v, "source": ref.provenance}
            for ref, val in reference.find("ch6", "alignment_tflops") for k, v in val.items()]
    if rows:
        return Table(rows, caption="BF16 matrix products, aligned vs not (reference measurements)")
    return Table([], caption="No GPU here and no reference data for chapter 6 yet: on a GPU this "
                             "cell times an n^3 and an (n-1)^3 BF16 product (make gpu-check records "
                             "them as reference data).")


def bf16_report() -> Table:
    """Whether BF16 is native: measured BF16 vs FP16 matmul on a GPU; the table's GPUs by compute capability elsewhere."""
    if device.torch_device() == "cuda":
        r = bf16_vs_fp16_matmul(4096, min_time_s=0.1)
        cc = torch.cuda.get_device_capability()
        verdict = "native" if r["bf16_over_fp16"] and r["bf16_over_fp16"] > 0.7 else "emulated"
        return Table([{"GPU": device.describe().name, "cc": "%d.%d" % cc,
                       "torch says BF16 supported": torch.cuda.is_bf16_supported(),
                       "FP16 TFLOP/s": r["fp16"], "BF16 TFLOP/s": r["bf16"],
                       "BF16 / FP16": r["bf16_over_fp16"], "verdict": verdict}],
                     caption="4096^3 matrix products, measured here")
    rows = [{"GPU": g.key, "cc": g.cc,
             "BF16 tensor cores": "yes" if precision.bf16_is_native(g.compute_capability) else
             "no: emulated, slower than FP16", "bf16 peak TFLOP/s": g.peak_tflops.get("bf16"),
             "fp16 peak TFLOP/s": g.peak_tflops.get("fp16")} for g in specs.all_gpus()]
    return Table(rows, caption="No GPU here: the rule (cc >= 8.0) applied to the spec table "
                               "(datasheet peaks; a missing bf16 peak means no BF16 tensor cores)")
