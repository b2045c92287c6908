"""The course's precisions in one place: their names and sizes, their NumPy and PyTorch dtypes,
the tolerances and rounding-error bounds that float checks state, which of them run here (and
why not, in one sentence, where one does not), whether PyTorch's INT8 product is exact on this
device, and the dynamic loss-scaling rule of mixed-precision training.

PyTorch is imported only inside the functions that need it: it is heavy, and the names, sizes,
tolerances and bounds serve code that never touches it.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from .device import synchronize, to_host, torch_device
from .errors import (DeviceError, PrecisionError, integer_argument, nonnegative_argument,
                     ModelInputError)

# --------------------------------------------------------------------------- names

#: Every precision the course names, widest first: the order of every table and menu.
PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "int8", "fp8")


def _of(*names: str) -> tuple[str, ...]:
    return tuple(p for p in PRECISIONS if p in names)


#: Storage formats of the bandwidth and footprint experiments (chapters 1 and 2).
STORAGE = _of("fp32", "fp16", "bf16")
#: Matrix-multiply precisions of tensor cores (chapter 5).
MATMUL = _of("fp32", "tf32", "fp16", "bf16")
#: What inference may run in (chapter 6): the matmul precisions and INT8.
INFERENCE = _of("fp32", "tf32", "fp16", "bf16", "int8")

#: Bytes of one value (TF32 is stored as FP32).
BYTES = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "int8": 1, "fp8": 1}
#: PyTorch's dtype of each precision, by name (TF32 is FP32 storage with a tensor-core mode).
TORCH_NAMES = {"fp64": "float64", "fp32": "float32", "tf32": "float32", "fp16": "float16",
               "bf16": "bfloat16", "int8": "int8", "fp8": "float8_e4m3fn"}
#: NumPy's dtype of each precision it has (NumPy has no bfloat16 and no FP8).
NUMPY_DTYPES = {"fp64": np.dtype(np.float64), "fp32": np.dtype(np.float32),
                "tf32": np.dtype(np.float32), "fp16": np.dtype(np.float16),
                "int8": np.dtype(np.int8)}


def _known(name) -> str:
    key = str(name).lower()
    if key not in PRECISIONS:
        raise PrecisionError(f"{name!r} is not a precision; choose one of {', '.join(PRECISIONS)}.")
    return key


def torch_dtype(name: str):
    """The torch dtype of a precision ("bf16" -> torch.bfloat16)."""
    import torch  # heavy: only callers that compute with PyTorch load it

    return getattr(torch, TORCH_NAMES[_known(name)])


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype of a precision, or a PrecisionError for one NumPy lacks (bf16, fp8)."""
    key = _known(name)
    if key not in NUMPY_DTYPES:
        raise PrecisionError(f"NumPy has no {key} dtype; use PyTorch for it "
                             f"(precision.torch_dtype({key!r})).")
    return NUMPY_DTYPES[key]


# --------------------------------------------------------------------------- tolerances

# (rtol, atol) by dtype for a result a few roundings away from its reference, such as one
# elementwise operation: float32's rtol is 168 roundings of 2^-24, float16's 10 of 2^-11. Not
# for sums: a float32 sum of n terms may be off by gamma_n * sum|x| in some order (6e-5 of
# sum|x| at n = 1000, and relative to |sum x| without limit when terms cancel), so a check of a
# sum, dot product, matmul or recurrence passes its own bound (sum_error_bound,
# matmul_error_bound, affine_steps_error_bound).
TOLERANCES = {
    np.dtype(np.float64): (1e-9, 1e-12),
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float16): (5e-3, 1e-4),
}
# bfloat16 has 8 significant bits: about 0.4 % per rounding.
BF16_TOLERANCE = (2e-2, 1e-3)
TF32_TOLERANCE = (2e-3, 1e-4)


def tolerance(dtype) -> tuple[float, float]:
    """(rtol, atol) suited to ``dtype``; exact for integers and booleans."""
    name = str(dtype).replace("torch.", "")
    if name == "bfloat16":
        return BF16_TOLERANCE
    if name == "tf32":
        return TF32_TOLERANCE
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = np.dtype(name)
    if dt.kind in "iub":
        return (0.0, 0.0)
    return TOLERANCES.get(dt, TOLERANCES[np.dtype(np.float32)])


#: Relative gap allowed between one forward pass's loss under a precision and FP32's, same
#: weights. The loss is a mean of squares: a relative change r of its residuals (output -
#: target) changes it by at most 2r + r^2 (Cauchy-Schwarz). Autocast rounds about three values
#: on the way through each block (a matmul's input, its output, the GELU) to within u of
#: themselves (u = 2^-8 for BF16, 2^-11 for FP16; TF32 rounds the two matmuls' inputs only,
#: to 2^-11); a matmul sums such errors with random signs instead of lining them up, and the
#: residuals are larger than the blocks' outputs (the target is independent noise), so to
#: first order r < 2 blocks x 3 x u, and the limits are 2r + r^2 rounded up. FP32 repeats the
#: reference's own kernels on the same data (a gap of 0); 1e-5 is room for a library that
#: picks another kernel the second time. Measured on the CPU: BF16 2.6e-6, FP16 5.7e-7.
AMP_LOSS_RTOL = {"fp32": 1e-5, "tf32": 5e-3, "fp16": 6e-3, "bf16": 5e-2}

#: Relative error (Frobenius norm) allowed for a product whose OUTPUT is rounded to the type:
#: about ten units of its last place (2^-11 for FP16, 2^-8 for BF16), room for the reduced-
#: precision split-K sums cuBLAS may use. A wrong product is off by about 1.4.
LOW_PRECISION_MATMUL_RTOL = {"fp16": 5e-3, "bf16": 3e-2}


# --------------------------------------------------------------------------- rounding error
# Worst-case bounds (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., 2002,
# Lemma 3.1 and sections 3.1 and 4.2). They hold for every order of the additions (any BLAS
# kernel, SIMD width, thread split or GPU schedule), with or without fused multiply-adds.

#: Unit roundoff of each format's values (TF32 keeps 10 of float32's 23 fraction bits).
UNIT_ROUNDOFF = {"fp64": 2.0 ** -53, "fp32": 2.0 ** -24, "tf32": 2.0 ** -11,
                 "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
#: Unit roundoff of float32 (round to nearest): |fl(x) - x| <= U32 * |x|.
U32 = UNIT_ROUNDOFF["fp32"]
#: Unit roundoff of float64: the error of a float64 reference.
U64 = UNIT_ROUNDOFF["fp64"]


def gamma(n: int, u: float = U32) -> float:
    """gamma_n = n*u / (1 - n*u): the largest relative error ``n`` roundings of unit roundoff ``u`` add up to."""
    n = integer_argument(n, "n")
    if n * u >= 0.5:
        raise ModelInputError(f"{n} roundings of {u:.3g} can lose every digit (n*u >= 0.5): split "
                              "the sum into blocks and add the block sums in float64.")
    return n * u / (1 - n * u)


def sum_error_bound(depth: int, abs_sum: float, u: float = U32, terms: int | None = None) -> float:
    """Largest |computed - exact| of a sum or dot product whose terms each pass through at most ``depth`` roundings, in any order: gamma_depth * sum|terms|.

    ``depth`` is the longest chain of float32 additions a term goes through: n for n terms added
    one after another (or in any other order), less when float32 partial sums of at most
    ``depth`` terms are added in float64. ``abs_sum`` is sum|x_i| (sum|x_i * y_i| for a dot
    product). The error of a float64 reference over ``terms`` (default ``depth``) terms is added.
    """
    return (gamma(depth, u) + gamma(terms or depth, U64)) * nonnegative_argument(abs_sum, "abs_sum")


def matmul_error_bound(a, b, u: float = U32) -> float:
    """Largest elementwise |computed - exact| of ``a @ b`` in float32 with K = a.shape[-1]: gamma_K * max(|a| @ |b|).

    Works on NumPy, CuPy and torch arrays; |a| @ |b| is computed in the inputs' precision
    (terms >= 0, so it is at most gamma_K below the exact value, which the bound allows for).
    """
    k = int(a.shape[-1])
    if k == 0 or int(a.shape[0]) == 0 or int(b.shape[-1]) == 0:
        return 0.0
    mag = abs(a) @ abs(b)
    # NumPy, CuPy and torch arrays have .max(); the tests' stand-in for CuPy takes np.max.
    top = mag.max() if hasattr(mag, "max") else np.max(mag)
    return sum_error_bound(k, float(top) / (1 - gamma(k, u)), u)


def affine_steps_error_bound(top: float, a: float, b: float, k: int, u: float = U32) -> float:
    """Largest error of ``k`` float32 steps y <- a*y + b from any |y_0| <= ``top`` (|a| < 1).

    Each step rounds at most twice (once with a fused multiply-add): at most
    gamma_2 * (|a|*Y + |b|), Y bounding |y| (max(top, |b| / (1 - |a|))); an earlier step's
    error shrinks by |a| per step, so k steps add up to 1 + |a| + ... + |a|^(k-1) of it. The
    float64 reference's own error (2k roundings of 2^-53) is included. First order in ``u``.
    """
    k = integer_argument(k, "k")
    a, b = float(a), float(b)
    if not abs(a) < 1:
        raise ModelInputError(f"|a| = {abs(a):g} must be below 1 for the error to stay bounded: "
                              "use a contracting step (|a| < 1).")
    y = max(nonnegative_argument(top, "top"), abs(b) / (1 - abs(a)))
    worst = (abs(a) * y + abs(b)) * sum(abs(a) ** j for j in range(k))
    return sum_error_bound(2, worst, u, terms=2 * max(1, k))


# --------------------------------------------------------------------------- what runs here

def bf16_is_native(cc: tuple[int, int]) -> bool:
    """True when a GPU of compute capability ``cc`` ((major, minor)) has BF16 tensor cores (8.0 and newer)."""
    return tuple(cc) >= (8, 0)


def bf16_emulated_reason(cc) -> str:
    """Why BF16 is no choice on a GPU of compute capability ``cc`` before 8.0."""
    ccs = "%d.%d" % tuple(cc)
    return (f"PyTorch reports BF16 as supported on compute capability {ccs}, but there are no BF16 "
            "tensor cores before 8.0: it is emulated and slower than FP16")


def int8_runs(dev: str) -> str | None:
    """None when ``torch._int_mm`` runs on ``dev`` ("cpu" or "cuda"), else the reason."""
    import torch  # heavy: only asked where INT8 is offered

    if not hasattr(torch, "_int_mm"):
        return "this PyTorch has no INT8 matrix multiply (torch._int_mm); update PyTorch"
    try:
        a = torch.ones(32, 32, dtype=torch.int8, device=dev)
        torch._int_mm(a, a.t())
        synchronize(dev)
        return None
    except Exception as exc:  # noqa: BLE001 - any failure means "not here", with the reason
        return f"torch._int_mm fails on this device ({type(exc).__name__}: {str(exc)[:80]})"


@functools.lru_cache(maxsize=8)
def _availability(dev: str, precisions: tuple[str, ...]) -> tuple:
    if dev != "cuda":
        rules = {"tf32": lambda: "TF32 is a tensor-core mode of NVIDIA GPUs (compute capability "
                                 "8.0+); a CPU has no TF32 tensor cores"}
    else:
        import torch  # heavy: the GPU's compute capability as PyTorch sees it

        cc = torch.cuda.get_device_capability()
        ccs = "%d.%d" % cc
        rules = {
            "tf32": lambda: None if cc >= (8, 0) else
            f"TF32 tensor cores need compute capability 8.0 (Ampere) or newer; this GPU is {ccs}",
            "fp16": lambda: None if cc >= (5, 3) else
            f"FP16 arithmetic needs compute capability 5.3 or newer; this GPU is {ccs}",
            "bf16": lambda: None if bf16_is_native(cc) else bf16_emulated_reason(cc),
        }
    rules["int8"] = lambda: int8_runs(dev)
    return tuple((p, rules.get(p, lambda: None)()) for p in precisions)


def availability(dev: str | None = None, precisions=INFERENCE) -> dict[str, str | None]:
    """Each of ``precisions`` mapped to None (it runs on ``dev`` here: "cpu" or "cuda", default
    where PyTorch runs) or one sentence saying why it does not.

    The rule: FP32 and FP64 run everywhere; TF32 is a tensor-core mode of compute capability
    8.0+ (none on a CPU); FP16 needs compute capability 5.3+; BF16 is native from 8.0 (PyTorch
    emulates it before); INT8 runs where ``torch._int_mm`` does.
    """
    for p in precisions:
        _known(p)
    return dict(_availability(dev or torch_device(), tuple(precisions)))


def require(precision: str, precisions=INFERENCE, dev: str | None = None) -> None:
    """A PrecisionError in one sentence unless ``precision`` is one of ``precisions`` and runs here."""
    if precision not in precisions:
        raise PrecisionError(f"{precision!r} is not one of {', '.join(precisions)}; pick one of "
                             "those.")
    reason = availability(dev, precisions)[precision]
    if reason:
        raise PrecisionError(f"{precision} does not run here: {reason}. Pick fp32, or look at the "
                             "model and the reference data for this precision.")


# --------------------------------------------------------------------------- INT8 products

#: The probe of :func:`int8_gemm_probe`: more than 16 rows (CUDA's ``torch._int_mm`` wants
#: them), k and n multiples of 8, and k = 2048 so that same-sign sums of 127 * 127 pass 2**24
#: (where FP32 sums start to round) as well as INT16's 32 767.
PROBE_SHAPE = (24, 2048, 32)


@dataclasses.dataclass(frozen=True)
class Int8GemmProbe:
    """What the probe found about ``torch._int_mm`` on one device, and the INT8 product used there."""

    device: str
    status: str   # "exact", "wrong" (runs, but some sums differ) or "fails" (does not run)
    wrong: int    # probe sums that differ from the exact INT64 product
    total: int
    worst: int    # the largest difference
    detail: str = ""

    @property
    def exact(self) -> bool:
        """True when ``torch._int_mm`` gave every probe sum exactly."""
        return self.status == "exact"

    @property
    def path(self) -> str:
        """The INT8 product :func:`int8_mm` uses on this device."""
        return "torch._int_mm" if self.exact else "float64 matmul of the INT8 values"

    @property
    def sentence(self) -> str:
        """The probe's finding in one sentence."""
        m, k, n = PROBE_SHAPE
        what = f"a {m} x {k} x {n} product of INT8 values (with rows and columns of +-127)"
        if self.status == "exact":
            return (f"torch._int_mm is exact on this {self.device.upper()}: all {self.total} sums of "
                    f"{what} equal the exact integer product, so the course uses it.")
        if self.status == "wrong":
            return (f"torch._int_mm is WRONG on this {self.device.upper()}: {self.wrong} of "
                    f"{self.total} sums of {what} differ from the exact integer product (by up "
                    f"to {self.worst:,}), so the course multiplies INT8 values as float64 "
                    "instead, which is exact (every partial sum is an integer below 2**53) "
                    "but not an INT8 kernel.")
        return (f"torch._int_mm does not run on this {self.device.upper()} ({self.detail}), so "
                "the course multiplies INT8 values as float64 instead, which is exact but not "
                "an INT8 kernel.")


_PROBES: dict = {}


def _probe_operands():
    """INT8 operands whose sums show saturation: random values, and rows and columns of +-127.

    oneDNN's u8 x s8 kernels add 128 to each signed activation; without VNNI they add pairs
    of products in INT16 with saturation (vpmaddubsw), and a row of 127s (255 after the
    shift) meets a column of 127s as pairs of 2 * 255 * 127 = 64 770 > 32 767.
    """
    import torch  # heavy: the probe runs only where INT8 products are asked for

    m, k, n = PROBE_SHAPE
    g = torch.Generator().manual_seed(6)
    a = torch.randint(-127, 128, (m, k), generator=g)
    bt = torch.randint(-127, 128, (n, k), generator=g)
    a[:4], a[4:8], bt[:4], bt[4:8] = 127, -127, 127, -127
    # b as the transpose of a row-major (n, k) tensor: the layout INT8 GEMMs want (Int8Linear's)
    return a.to(torch.int8), bt.to(torch.int8).t()


def _int8_float64_mm(qa, qb):
    """INT8 product as float64 matmul: exact, as every partial sum is an integer below 2**53
    (k * 127**2 < 2**53 for k up to 5e11), in any summation order."""
    import torch  # heavy: only INT8 products use it

    return (qa.to(torch.float64) @ qb.to(torch.float64)).to(torch.int32)


def _run_probe(dev: str, int_mm) -> Int8GemmProbe:
    a, b = _probe_operands()
    exact = a.numpy().astype(np.int64) @ b.numpy().astype(np.int64)  # NumPy's integer loops
    total = exact.size
    fallback = to_host(_int8_float64_mm(a.to(dev), b.to(dev))).astype(np.int64)
    if not np.array_equal(fallback, exact):  # cannot happen with IEEE float64; say so if it does
        raise DeviceError(f"float64 products of INT8 values are not exact on this {dev}: its "
                          "matmul is broken; run the course on another device.")
    if int_mm is None:
        return Int8GemmProbe(dev, "fails", 0, total, 0, "this PyTorch has no torch._int_mm")
    try:
        got = to_host(int_mm(a.to(dev), b.to(dev))).astype(np.int64)
    except Exception as exc:  # noqa: BLE001 - any failure means "not here", with the reason
        return Int8GemmProbe(dev, "fails", 0, total, 0, f"{type(exc).__name__}: {str(exc)[:80]}")
    if got.shape != exact.shape:
        return Int8GemmProbe(dev, "wrong", total, total, 0, f"result of shape {got.shape}")
    diff = np.abs(got - exact)
    wrong = int((diff != 0).sum())
    return Int8GemmProbe(dev, "wrong" if wrong else "exact", wrong, total, int(diff.max()))


def int8_gemm_probe(dev: str = "cpu") -> Int8GemmProbe:
    """Whether ``torch._int_mm`` gives exact INT32 sums on ``dev`` ("cpu" or "cuda").

    On x86 CPUs without VNNI it can run through oneDNN kernels whose 16-bit intermediate
    sums saturate. Measured on first use against NumPy's exact INT64 product, and kept per
    device (and per ``torch._int_mm``, so a replaced function is probed again).
    """
    import torch  # heavy: only INT8 products use it

    dev = torch.device(dev).type
    int_mm = getattr(torch, "_int_mm", None)
    key = (dev, int_mm)
    if key not in _PROBES:
        _PROBES[key] = _run_probe(dev, int_mm)
    return _PROBES[key]


def int8_mm(qa, qb):
    """``qa @ qb`` of INT8 matrices as exact INT32 sums: ``torch._int_mm`` where the probe found
    it exact on this device, else float64 products of the INT8 values (exact too, slower).

    On a GPU ``torch._int_mm`` wants more than 16 rows of ``qa`` and k and n multiples of 8:
    other shapes are padded with zeros here (which add nothing to the sums); callers that
    time it pad their operands once instead (as ``Int8Linear`` does).
    """
    import torch  # heavy: only INT8 products use it

    if not int8_gemm_probe(qa.device.type).exact:
        return _int8_float64_mm(qa, qb)
    (m, k), n = qa.shape, qb.shape[1]
    if qa.is_cuda and (m <= 16 or k % 8 or n % 8):
        rows, inner, cols = max(m, 17), -(-k // 8) * 8, -(-n // 8) * 8
        pa = torch.zeros(rows, inner, dtype=qa.dtype, device=qa.device)
        pb = torch.zeros(cols, inner, dtype=qb.dtype, device=qb.device).t()  # column-major
        pa[:m, :k], pb[:k, :n] = qa, qb
        return torch._int_mm(pa, pb)[:m, :n]
    return torch._int_mm(qa, qb)


# --------------------------------------------------------------------------- loss scaling

class DynamicLossScaler:
    """The dynamic loss scaling of ``torch.amp.GradScaler``, written out.

    Multiply the loss by ``scale``; after backward, unscale the gradients in FP32. If any is
    inf or NaN, skip the step and multiply the scale by ``backoff_factor``; after
    ``growth_interval`` clean steps in a row, multiply it by ``growth_factor``.
    """

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000):
        self.scale, self.growth_factor = float(init_scale), growth_factor
        self.backoff_factor, self.growth_interval = backoff_factor, growth_interval
        self.clean_steps = 0

    def unscale(self, grads):
        """(the gradients divided by the scale in FP32, whether any is inf or NaN)."""
        import torch  # heavy: gradients are torch tensors, so torch is loaded already

        out = [g.float() / self.scale for g in grads]
        return out, not all(bool(torch.isfinite(g).all()) for g in out)

    def update(self, found_inf: bool) -> None:
        """Back off after an overflow, grow after ``growth_interval`` clean steps in a row."""
        if found_inf:
            self.scale *= self.backoff_factor
            self.clean_steps = 0
        else:
            self.clean_steps += 1
            if self.clean_steps == self.growth_interval:
                self.scale *= self.growth_factor
                self.clean_steps = 0
