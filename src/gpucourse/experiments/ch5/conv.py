"""Chapter 5, section 2: convolution as a loop over the kernel's taps, as im2col (unfold +
one matmul) and as the library's conv2d (cuDNN on a GPU, oneDNN on the CPU), checked then
timed; and cuDNN's benchmark mode off and on, on a GPU."""
from __future__ import annotations

import time

from ... import bench, check, device, precision
from ...display import Table
from ...emulator.launch import ceil_div
from .common import load_torch, threads_for, torch_on_gpu


CONV_CPU = {"batch": 8, "channels": 32, "size": 32, "out_channels": 64, "kernel": 3}
CONV_GPU = {"batch": 32, "channels": 64, "size": 56, "out_channels": 128, "kernel": 3}


def conv_taps(x, w, padding: int):
    """Convolution as one small matmul per kernel tap (k·k of them), summed: explicit loops."""
    torch = load_torch()
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = torch.nn.functional.pad(x, (padding, padding, padding, padding))
    ho, wo = h + 2 * padding - kh + 1, wd + 2 * padding - kw + 1
    out = x.new_zeros((n, o, ho, wo))
    for dy in range(kh):
        for dx in range(kw):
            patch = xp[:, :, dy:dy + ho, dx:dx + wo]              # (n, c, ho, wo)
            out += torch.einsum("oc,nchw->nohw", w[:, :, dy, dx], patch)
    return out


def conv_unfold(x, w, padding: int):
    """im2col: unfold every k×k patch into a column, then ONE matmul with the weights."""
    torch = load_torch()
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    cols = torch.nn.functional.unfold(x, (kh, kw), padding=padding)  # (n, c·kh·kw, ho·wo)
    ho, wo = h + 2 * padding - kh + 1, wd + 2 * padding - kw + 1
    return (w.reshape(o, -1) @ cols).reshape(n, o, ho, wo)


def conv_library(x, w, padding: int):
    """torch.nn.functional.conv2d: cuDNN on a GPU, oneDNN on the CPU."""
    return load_torch().nn.functional.conv2d(x, w, padding=padding)


def conv_error_bound(x, w, padding: int = 0, stride: int = 1) -> float:
    """Largest error of a float32 convolution computed as dot products (direct, im2col + GEMM,
    implicit GEMM), any order: each output sums C*kh*kw products, gamma_K * max(|x| conv |w|).

    Winograd and FFT algorithms (cuDNN may pick them) transform the data first; their error is
    not bounded by this derivation.
    """
    torch = load_torch()
    k = int(w.shape[1] * w.shape[2] * w.shape[3])
    with torch.no_grad():
        mag = torch.nn.functional.conv2d(x.abs().float(), w.abs().float(), stride=stride,
                                         padding=padding)
    # |x| conv |w| has no cancellation, so its own float32 error is at most gamma_K low.
    top = float(mag.max()) / (1 - precision.gamma(k)) if mag.numel() else 0.0
    return precision.sum_error_bound(k, top)


def conv_library_name() -> str:
    return "cuDNN" if torch_on_gpu() else "oneDNN"


def _conv_inputs(cfg: dict, seed: int, dev: str):
    torch = load_torch()
    x = check.random_array((cfg["batch"], cfg["channels"], cfg["size"], cfg["size"]),
                           seed=seed, kind="uniform")
    w = check.random_array((cfg["out_channels"], cfg["channels"], cfg["kernel"], cfg["kernel"]),
                           seed=seed + 1, kind="uniform")
    return torch.from_numpy(x).to(dev), torch.from_numpy(w).to(dev)


def check_conv(seed: int = 0) -> None:
    """Both hand-built versions agree with conv2d in float64 at an awkward shape."""
    cfg = {"batch": 2, "channels": 3, "size": 11, "out_channels": 5, "kernel": 3}
    x, w = _conv_inputs(cfg, seed, "cpu")
    ref = conv_library(x.double(), w.double(), 1).numpy()
    allowed = conv_error_bound(x, w, 1)  # float32 dots of 3*3*3 terms against float64
    for fn in (conv_taps, conv_unfold, conv_library):
        check.assert_close(fn(x, w, 1).numpy(), ref, rtol=0, atol=allowed,
                           name=f"{fn.__name__} at {tuple(x.shape)}")
    # the same on the device the timing uses, at the timed shape's channel counts
    if torch_on_gpu():
        with device.tf32(False):
            xg, wg = x.cuda(), w.cuda()
            for fn in (conv_taps, conv_unfold, conv_library):
                check.assert_close(fn(xg, wg, 1).cpu().numpy(), ref, rtol=0, atol=allowed,
                                   name=f"{fn.__name__} on the GPU")


def conv_ladder(cfg: dict | None = None, min_time_s: float = 0.1, seed: int = 0) -> dict:
    """Taps loop → unfold + matmul → conv2d (oneDNN/cuDNN), FP32, checked first.

    Returns the timings (GFLOP/s) and the extra memory im2col needs for its columns.
    """
    check_conv(seed=seed)
    dev = device.torch_device()
    cfg = dict(cfg or (CONV_GPU if dev == "cuda" else CONV_CPU))
    x, w = _conv_inputs(cfg, seed, dev)
    k = cfg["kernel"]
    flops = 2.0 * cfg["batch"] * cfg["out_channels"] * cfg["size"] ** 2 * cfg["channels"] * k * k
    backend = dev
    with device.tf32(False), threads_for(backend):
        ref = conv_library(x, w, k // 2)
        # Two float32 results, each within conv_error_bound of the exact convolution.
        allowed = 2 * conv_error_bound(x, w, k // 2)
        for fn in (conv_taps, conv_unfold):
            check.assert_close(fn(x, w, k // 2).cpu(), ref.cpu(), rtol=0, atol=allowed,
                               name=f"{fn.__name__} at the timed shape")
        timings = bench.Timings(
            bench.benchmark(fn, x, w, k // 2, label=label, flops=flops, size=cfg["batch"],
                            backend=backend, min_time_s=min_time_s, min_samples=3)
            for label, fn in ((f"loop over the {k}×{k} taps ({k * k} matmuls)", conv_taps),
                              ("unfold + one matmul (im2col)", conv_unfold),
                              (f"conv2d ({conv_library_name()})", conv_library)))
    im2col_bytes = cfg["batch"] * cfg["channels"] * k * k * cfg["size"] ** 2 * 4
    return {"config": cfg, "timings": timings, "flops": flops, "im2col_bytes": im2col_bytes,
            "input_bytes": x.numel() * 4, "device": timings[0].device}


CUDNN_SHAPES = (  # (batch, in, out, size, kernel, stride): a few layer shapes of common CNNs
    (32, 64, 128, 56, 3, 1), (32, 3, 64, 224, 7, 2), (32, 256, 256, 14, 3, 1),
    (32, 512, 2048, 7, 1, 1))


def cudnn_benchmark_mode(shapes=CUDNN_SHAPES, min_time_s: float = 0.05, seed: int = 0,
                         dev: str = "cuda") -> dict:
    """conv2d with ``torch.backends.cudnn.benchmark`` off, then on, on a GPU.

    cuDNN caches the algorithm it chose per shape, whichever mode chose it, so each mode is
    timed on its own shape: "on" uses the input with height and width swapped (the same work).
    Each is checked against float64 on the CPU first (one image). Reports the first call
    (benchmark mode tries several algorithms in it) and the steady time. ``dev="cpu"`` takes
    the same steps on the CPU, where the switch does nothing: for the tests of this function.
    """
    if dev == "cuda":
        device.require_cuda("cuDNN's benchmark mode", needs="torch")
    torch = load_torch()
    F = torch.nn.functional
    wait = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    rows = []
    old = torch.backends.cudnn.benchmark
    try:
        with device.tf32(False):
            for i, (n, ci, co, s, k, st) in enumerate(shapes):
                g = torch.Generator(device=dev).manual_seed(seed + i)
                w = torch.rand(co, ci, k, k, device=dev, generator=g) - 0.5
                # ceil(s / st) output rows, ceil((s + 1) / st) columns (odd k, padding k // 2)
                row = {"shape": f"{n}×{ci}×{s}×{s + 1}, {co} filters {k}×{k}, stride {st}",
                       "flops": 2.0 * n * co * ci * k * k * ceil_div(s, st) * ceil_div(s + 1, st)}
                for mode, (h, wd) in (("off", (s, s + 1)), ("on", (s + 1, s))):
                    torch.backends.cudnn.benchmark = mode == "on"
                    x = torch.rand(n, ci, h, wd, device=dev, generator=g)
                    wait()
                    t0 = time.perf_counter()
                    out = F.conv2d(x, w, stride=st, padding=k // 2)
                    wait()
                    row[f"first_call_{mode}_s"] = time.perf_counter() - t0
                    ref = F.conv2d(x[:1].cpu().double(), w.cpu().double(), stride=st, padding=k // 2)
                    # Each output sums ci*k*k products: float32's rounding is relative to the
                    # sum of their magnitudes, not to the (cancelling) result (conv_error_bound).
                    allowed = conv_error_bound(x[:1].cpu(), w.cpu(), k // 2, st)
                    check.assert_close(out[:1].cpu(), ref, rtol=0, atol=allowed,
                                       name=f"conv2d, cudnn.benchmark {mode}, {row['shape']}")
                    t = bench.benchmark(F.conv2d, x, w, stride=st, padding=k // 2,
                                        label=f"benchmark {mode}", min_time_s=min_time_s,
                                        backend=dev)
                    row[f"steady_{mode}_s"] = t.median_s
                row["speedup"] = row["steady_off_s"] / row["steady_on_s"]
                rows.append(row)
    finally:
        torch.backends.cudnn.benchmark = old
    return {"rows": rows, "device": device.describe(dev).short_name}


def cudnn_table(result: dict) -> Table:
    rows = [[r["shape"], f"{r['first_call_off_s'] * 1e3:.1f} / {r['first_call_on_s'] * 1e3:.1f}",
             f"{r['steady_off_s'] * 1e3:.3f} / {r['steady_on_s'] * 1e3:.3f}", f"{r['speedup']:.2f}×"]
            for r in result["rows"]]
    return Table.from_lists(["layer", "first call ms (off / on)", "steady ms (off / on)", "on vs off"], rows,
                            caption=f"cudnn.benchmark on {result['device']} (measured now)")

