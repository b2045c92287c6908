"""Lab checkers of chapter 6 (mixed precision and quantization).

Each ``check_*`` runs a learner's function or class on edge cases (outlier channels, an
all-zero channel, NaN as well as inf, overflow on the step a scale would grow, GPUs
without BF16 or with slow FP16, training steps measured on both sides of the size where
16 bits start to save memory), prints one success line, and otherwise raises an
AssertionError that says what is wrong; an answer of the wrong type (a string, a list, a
function, None) is named in one sentence. References are written here again on purpose:
checkers never import ``experiments``.

The INT8 product (``precision.int8_gemm_probe``, ``precision.int8_mm``) and the loss-scaling
rule (``precision.DynamicLossScaler``) live in ``precision``, which the chapter uses too:
``torch._int_mm`` is exact on some CPUs and not on others, and both must know which.
"""
from __future__ import annotations

import dataclasses
import functools
import numbers
from types import MappingProxyType

import numpy as np

from .. import models, precision, specs
from ..device import to_host
from ..display import Table
from ..errors import InputError, whole_number
from .lab import (Exercise, answer_error, callable_answer, choice_answer, number_answer,
                  text_answer, tuple_answer)
from .predict import prediction


def _torch():
    import torch  # heavy: loaded by the checks that use it, not when the module is imported

    return torch


# --------------------------------------------------------------------------- wrong-typed answers

def _numbers(x, what: str, want: str) -> np.ndarray:
    """``x`` (a tensor, array or number) as a NumPy array of numbers; otherwise the course's
    one sentence (``what``: "int8_matmul(a, b) returned", ``want``: what to return)."""
    bad = x is None or isinstance(x, (str, bytes, list, tuple, dict, set)) or callable(x)
    if not bad:
        try:
            arr = np.asarray(to_host(x))
        except (TypeError, ValueError, RuntimeError, AttributeError):
            bad = True
        else:
            bad = arr.dtype.kind not in "biuf"
    if bad:
        raise answer_error(what, x, f"return {want}")
    return arr


# --------------------------------------------------------------------------- NaN hidden by a cast

class _NaNCasts:
    """Counts the NaN and inf values that a learner's function converts to an integer type,
    in torch (every function, seen through a function mode) and in NumPy (its "invalid value
    encountered in cast" warning). A cast hides them: ``.to(torch.int8)`` turns NaN into 0 on
    x86 and into anything on a GPU, so the output alone cannot show a 0/0 inside."""

    def __init__(self):
        self.count = 0

    def __enter__(self):
        import warnings

        # A function mode, not a dispatch mode: the first dispatch mode of a process imports
        # torch._dynamo (2-4 s), and every cast a learner can write is a torch function.
        from torch.overrides import TorchFunctionMode  # with torch, loaded lazily

        torch, watch = _torch(), self

        def integers(value) -> bool:  # bool results (isnan, comparisons) are no cast
            return isinstance(value, torch.Tensor) and value.dtype != torch.bool and \
                not (value.dtype.is_floating_point or value.dtype.is_complex)

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                out = func(*args, **kwargs)
                if integers(out):  # t.to(torch.int8), t.char(), torch.round(t).int(), ...
                    sources = (*args, *kwargs.values())
                elif args and integers(args[0]):  # q.copy_(t), q[...] = t: into integers
                    sources = (*args[1:], *kwargs.values())
                else:
                    return out
                for a in sources:  # a float tensor that holds NaN or inf, made integers
                    if isinstance(a, torch.Tensor) and a.dtype.is_floating_point:
                        watch.count += int((~torch.isfinite(a)).sum())
                return out

        self._mode = Mode()
        self._warnings = warnings.catch_warnings(record=True)
        self._caught = self._warnings.__enter__()
        warnings.simplefilter("always", RuntimeWarning)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        self._mode.__exit__(*exc)
        self._warnings.__exit__(*exc)
        self.count += sum("invalid value encountered in cast" in str(w.message)
                          for w in self._caught)
        return False


# --------------------------------------------------------------------------- 6.1 per-channel INT8

def weights_with_outliers(rows: int, cols: int, seed: int = 0, outliers: int = 3,
                          zero_rows: int = 1):
    """FP32 weights whose rows differ in scale, with a few outlier rows (one negative-dominated) and all-zero rows."""
    torch = _torch()
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(rows, cols, generator=g) * torch.exp(torch.randn(rows, 1, generator=g))
    if rows > 2:
        idx = torch.randperm(rows, generator=g)
        for k, i in enumerate(idx[:outliers].tolist()):
            w[i] *= 50.0
            if k == 0:  # its largest magnitude is negative: max() instead of abs().max() fails
                w[i] = -w[i].abs()
                w[i, 0] *= 0.1
        for i in idx[outliers:outliers + zero_rows].tolist():
            w[i] = 0.0
    return w


QUANT_SHAPES = ((1, 1), (1, 33), (7, 13), (64, 256), (97, 61))


def check_quantize(quantize, number: str = "6.1",
                   title: str = "symmetric per-channel INT8 quantization") -> None:
    """``quantize(w) -> (q, scale)``: INT8 ``q`` (rows x cols) and one FP32 scale per row.

    Dequantized ``q * scale[:, None]`` must be within half a step (``scale / 2``) of ``w``
    element by element, the scale must be the row's max |w| / 127, and all-zero rows must
    come back as zeros (no NaN).
    """
    with Exercise(number, title):
        callable_answer(quantize, "quantize is", "def quantize(w): ...")
        for i, (r, c) in enumerate(QUANT_SHAPES):
            w = weights_with_outliers(r, c, seed=i)
            with _NaNCasts() as casts:
                answer = quantize(w.clone())
            q, scale = tuple_answer(answer, "quantize(w) returned", 2,
                                    "a tuple (q, scale): the INT8 values and one scale per row")
            if casts.count:
                raise AssertionError(
                    f"shape {(r, c)}: {casts.count} NaN or inf value{'s' * (casts.count != 1)} "
                    "became integers in your function: an all-zero row has max |w| = 0, and "
                    "0 / 0 is NaN before the cast to int8 hides it (0 on this CPU, anything on "
                    "a GPU). Guard the scale first (use scale 1 for such a row).")
            qn = _numbers(q, "quantize(w) returned a q that is", "a tensor of INT8 values (torch.int8)")
            sn = _numbers(scale, "quantize(w) returned a scale that is",
                          "a tensor with one FP32 scale per row").astype(np.float64)
            assert qn.shape == (r, c), f"q has shape {qn.shape}, expected {(r, c)} (same as w)."
            assert qn.dtype == np.int8, (f"q has dtype {qn.dtype}; store it as int8 "
                                         "(torch.int8): one byte per weight is the point.")
            if sn.shape == (r, 1):
                sn = sn[:, 0]
            if sn.size == 1 and sn.shape != (r,):
                raise AssertionError(
                    f"scale has shape {sn.shape}: one scale for the whole tensor (per-tensor). "
                    f"Give each row (output channel) its own scale, shape ({r},), so that an "
                    "outlier row does not coarsen every other row.")
            assert sn.shape == (r,), (f"scale has shape {sn.shape}; expected one scale per row "
                                      f"(output channel), shape ({r},). A scale per column or "
                                      "per tensor is a different scheme.")
            assert np.isfinite(sn).all() and (sn > 0).all(), (
                "a scale is 0, NaN or inf: an all-zero row has max |w| = 0, and anything that "
                "later divides by its scale gets NaN; guard it (use scale 1 for such a row).")
            assert int(qn.min()) >= -127 and int(qn.max()) <= 127, (
                f"q spans {int(qn.min())}..{int(qn.max())}; symmetric INT8 uses -127..127 "
                "(divide by 127 and clamp).")
            wn = w.numpy().astype(np.float64)
            amax = np.abs(wn).max(axis=1)
            nz = amax > 0
            want = amax[nz] / 127
            # max|w| is exact in FP32; "/ 127" rounds once (2^-24), "* (1 / 127)" twice. 1e-6
            # is 16 such roundings, and a scale from the wrong row or a signed max is off by far more.
            bad = np.abs(sn[nz] - want) > 1e-6 * want
            if bad.any():
                k = int(np.flatnonzero(nz)[np.argmax(bad)])
                hint = (" (that is max(w)/127: use the largest MAGNITUDE, a row's biggest weight "
                        "can be negative)" if abs(sn[k] - wn[k].max() / 127) < 1e-6 * amax[k]
                        else "")
                if np.allclose(sn[nz], amax[nz] / 128, rtol=1e-6, atol=0):
                    raise AssertionError(
                        f"row {k}: scale {sn[k]:.6g} is max|w|/128; symmetric INT8 uses "
                        "-127..127, so the scale is max|w|/127 (with 128, -128 is used and +max "
                        "does not fit: +128 overflows int8).")
                if np.allclose(sn, np.abs(wn).max() / 127, rtol=1e-6, atol=0):
                    raise AssertionError(
                        f"every row has the scale {sn[k]:.6g}, the whole tensor's max|w|/127 "
                        "(per-tensor): give each row (output channel) its own scale from its "
                        "own largest |w|.")
                raise AssertionError(f"row {k}: scale {sn[k]:.6g} but max|w|/127 = "
                                     f"{amax[k] / 127:.6g}{hint}. Each row (output channel) "
                                     "gets its own scale from its own largest |w|.")
            deq = qn.astype(np.float64) * sn[:, None]
            zero_rows = ~nz
            assert np.all(deq[zero_rows] == 0), "an all-zero row must dequantize to zeros."
            err = np.abs(deq - wn)
            # q * scale (exact in FP64) lies within half a step of w, plus what rounding w / scale
            # in FP32 can add where w / scale is next to a half: each rounding is at most
            # 2^-24 * 127 = 7.6e-6 of a step, 1.5e-5 of half a step; w * (127 / max|w|) rounds
            # three times. 2^-12 of half a step covers 32 roundings; truncating instead of
            # rounding misses by up to a whole step.
            limit = sn[:, None] / 2 * (1 + 2.0 ** -12) + 1e-12
            if (err > limit).any():
                k, j = np.unravel_index(int(np.argmax(err - limit)), err.shape)
                raise AssertionError(
                    f"shape {(r, c)}: w[{k},{j}] = {wn[k, j]:.6g} came back as {deq[k, j]:.6g}, "
                    f"off by {err[k, j]:.3g} > half a step ({sn[k] / 2:.3g}). Round to the "
                    "nearest integer (torch.round) before converting to int8; a plain cast "
                    "truncates toward zero.")
        rel = float(np.linalg.norm(deq - wn) / max(np.linalg.norm(wn), 1e-30))
        # With every value within half a step (checked above), this is at most 0.997 % on
        # these weights (each error exactly half a step); rounding gives about 0.54 %.
        assert rel < 0.01, f"relative error {rel:.3g} on the 97 x 61 case; expected < 1 %."


# --------------------------------------------------------------------------- 6.2 dynamic loss scaler

class ReferenceScaler(precision.DynamicLossScaler):
    """The dynamic loss scaling rule of torch.amp.GradScaler (``precision.DynamicLossScaler``),
    under the name the checker and its tests give the reference."""


# Which steps overflow, and how: "inf", "-inf" or "nan" in one of the gradient tensors.
SCALER_SCRIPT = (None, None, "inf", None, None, None, None, "nan", None, None, "-inf", "inf",
                 None, None, None, None, None, None, None, "inf", None, None, None, None, None)


def _scripted_grads(step: int, scale: float, event, seed: int = 0):
    """True FP32 gradients (some tiny) and their scaled FP16 copies, with an injected overflow."""
    torch = _torch()
    g = torch.Generator().manual_seed(seed + step)
    true = [torch.randn(17, 9, generator=g) * 1e-6, torch.randn(33, generator=g) * 3e-7,
            torch.randn(5, 5, generator=g) * 1e-4]
    raw = [(t * scale).to(torch.float16) for t in true]
    if event:
        value = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}[event]
        raw[step % 3].view(-1)[step % 5] = value
    return true, raw


def check_loss_scaler(scaler_class, number: str = "6.2",
                      title: str = "dynamic loss scaling with back-off and growth") -> None:
    """``scaler_class(init_scale, growth_factor, backoff_factor, growth_interval)`` with
    ``.scale``, ``.unscale(grads) -> (fp32 grads, found_inf)`` and ``.update(found_inf)``.

    Driven through a scripted sequence of FP16 gradients with inf, -inf and NaN at chosen
    steps (one of them on the step the scale would grow), against the GradScaler rule.
    """
    torch = _torch()
    with Exercise(number, title):
        if not isinstance(scaler_class, type):
            raise answer_error("the scaler you passed is", scaler_class,
                               "pass the class LossScaler itself (the checker makes its own "
                               "scalers from it)")
        for interval, init in ((3, 2.0 ** 10), (5, 2.0 ** 16)):
            mine = scaler_class(init_scale=init, growth_factor=2.0, backoff_factor=0.5,
                                growth_interval=interval)
            missing = [a for a in ("scale", "unscale", "update") if not hasattr(mine, a)]
            assert not missing, (f"a {scaler_class.__name__} needs .scale, .unscale and .update; "
                                 f"it has no .{missing[0]}.")
            ref = ReferenceScaler(init, 2.0, 0.5, interval)
            for step, event in enumerate(SCALER_SCRIPT):
                scale = _scale_number(mine.scale, step)
                assert scale == ref.scale, (
                    f"growth_interval={interval}: before step {step} the scale is "
                    f"{scale:g}, expected {ref.scale:g}. "
                    + _scaler_hint(SCALER_SCRIPT, step))
                true, raw = _scripted_grads(step, ref.scale, event)
                grads, found = tuple_answer(mine.unscale([r.clone() for r in raw]),
                                            "unscale(grads) returned", 2,
                                            "a tuple (list of unscaled gradients, found_inf)")
                if not (isinstance(found, (bool, np.bool_)) or
                        (torch.is_tensor(found) and found.numel() == 1)):
                    raise answer_error("unscale(grads) returned a found_inf that is", found,
                                       "return True or False")
                assert bool(found) == bool(event), (
                    f"step {step}: found_inf is {bool(found)} but the gradients "
                    + (f"contain {event}: check with torch.isfinite, which catches inf, -inf "
                       "and NaN." if event else "are all finite."))
                if not event:
                    if not isinstance(grads, (list, tuple)):
                        raise answer_error("unscale(grads) returned unscaled gradients that are",
                                           grads, "return a list of tensors, one per gradient")
                    assert len(grads) == len(raw), "return one unscaled gradient per input."
                    for k, (gk, tk) in enumerate(zip(grads, true)):
                        if not torch.is_tensor(gk):
                            raise answer_error(f"unscale(grads) returned an unscaled gradient {k} "
                                               "that is", gk, "return a tensor")
                        assert gk.dtype == torch.float32, (
                            f"unscaled gradient {k} is {gk.dtype}: unscale in FP32 "
                            "(g.float() / scale). Dividing in FP16 underflows again.")
                        want = (raw[k].float() / ref.scale)
                        err = float((gk - want).abs().max())
                        in_fp16 = (raw[k].half() / ref.scale).float()  # the FP16-first slip
                        why = ("divide in FP32 (g.float() / scale): dividing in FP16 first loses "
                               "the small values again" if torch.equal(gk, in_fp16) and
                               not torch.equal(in_fp16, want) else "divide by the current scale")
                        # Every scale is a power of two, so g.float() / scale is exact in FP32
                        # (and so is g.float() * (1 / scale)); 1e-6 of the largest value still
                        # lets through an extra rounding (2^-24) of another order of operations.
                        assert err <= 1e-6 * float(want.abs().max()) + 1e-30, (
                            f"step {step}: gradient {k} is off by {err:.3g} after unscaling; "
                            f"{why}.")
                        # Against the true gradient the error is FP16's rounding of the scaled
                        # values: 2^-11 relative where they are normal, more for the few
                        # subnormal ones (5.2e-4 at most in this script); 1 % is far above it,
                        # and a gradient left scaled is off by the scale (2^7 at least here).
                        rel = float((gk - tk).norm() / tk.norm())
                        assert rel < 1e-2, (f"step {step}: gradient {k} differs from the true "
                                            f"gradient by {rel:.2%}; divide by the scale.")
                mine.update(bool(found))
                ref.update(bool(event))
            scale = _scale_number(mine.scale, len(SCALER_SCRIPT))
            assert scale == ref.scale, (
                f"after the script the scale is {scale:g}, expected {ref.scale:g}.")


def _scale_number(value, step: int) -> float:
    """A scaler's ``.scale`` as a float (a 0-d tensor too), or one sentence saying what it is
    instead. An infinite or NaN scale is a number: the comparison with the rule names it."""
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
        return float(value)
    return number_answer(value, f"before step {step} the scaler's .scale is", "the loss scale")


def _scaler_hint(script, step: int) -> str:
    prev = script[step - 1] if step else None
    if prev:
        return ("The step before overflowed: multiply the scale by backoff_factor and reset the "
                "count of clean steps to 0.")
    return ("Grow the scale (x growth_factor) after exactly growth_interval clean steps in a row, "
            "then restart the count; an overflow resets the count.")


# --------------------------------------------------------------------------- 6.3 choose a precision

# The course's rule, shared with the notebook (experiments.ch6.gpu_choice.training_precision).
_expected_choice = models.training_precision


def synthetic_gpus() -> list:
    """GPUs the table does not have: a Pascal-like part with slow FP16, a P100-like one with fast
    FP16 (cc 6.0), one without FP16 at all, and a newer part whose name gives nothing away."""
    base = specs.lookup("T4")
    mk = lambda **kw: dataclasses.replace(base, **kw)  # noqa: E731
    return [
        mk(key="P-slow-fp16", name="Lab GPU (cc 6.1, FP16 at 1/64 rate)", compute_capability=(6, 1),
           peak_tflops=MappingProxyType({"fp64": 0.3, "fp32": 10.0, "fp16": 0.16}),
           device_names=(), aliases=()),
        # a P100-like part: cc 6.0 (before Volta's tensor cores) with FP16 at twice FP32, so
        # that a rule from the compute capability instead of the peaks gives the wrong answer
        mk(key="P-fast-fp16", name="Lab GPU (cc 6.0, FP16 at 2x FP32)", compute_capability=(6, 0),
           peak_tflops=MappingProxyType({"fp64": 5.3, "fp32": 10.6, "fp16": 21.2}),
           device_names=(), aliases=()),
        mk(key="K-fp32-only", name="Lab GPU (cc 3.7, FP32 only)", compute_capability=(3, 7),
           peak_tflops=MappingProxyType({"fp64": 1.5, "fp32": 4.4}), device_names=(), aliases=()),
        mk(key="X-unnamed", name="Lab GPU X", compute_capability=(8, 9),
           peak_tflops=MappingProxyType({"fp32": 40.0, "tf32": 80.0, "fp16": 160.0,
                                         "bf16": 160.0, "int8": 320.0, "fp8": 320.0}),
           device_names=(), aliases=()),
    ]


def check_choose_precision(choose, number: str = "6.3",
                           title: str = "a training precision for each GPU") -> None:
    """``choose(gpu: GPUSpec) -> (precision, loss_scaling)`` for every GPU in the table and three
    synthetic ones (slow FP16, no FP16, an unfamiliar name)."""
    with Exercise(number, title):
        callable_answer(choose, "choose is", "def choose(gpu): ...")
        for gpu in list(specs.all_gpus()) + synthetic_gpus():
            call = f"choose(gpu) for the {gpu.key} returned"
            got = tuple_answer(choose(gpu), call, 2,
                               "a tuple (precision, needs_loss_scaling), e.g. ('fp16', True)")
            text_answer(got[0], f"{call} a precision that is", "return a name such as 'bf16'")
            if not isinstance(got[1], (bool, np.bool_)):
                raise answer_error(f"{call} a needs_loss_scaling that is", got[1],
                                   "return True or False")
            prec, scaling = got[0].lower(), bool(got[1])
            want, want_scaling = _expected_choice(gpu)
            if prec in ("int8", "fp8"):
                raise AssertionError(f"{gpu.key}: {prec} is an inference format here; training "
                                     "uses fp32, tf32, fp16 or bf16 (with FP32 master weights).")
            if prec != want and gpu.compute_capability < (7, 0) and want == "fp16":
                raise AssertionError(
                    f"{gpu.key} (cc {gpu.cc}, peaks {dict(gpu.peak_tflops)} TFLOP/s): you chose "
                    f"{prec}, expected fp16: this GPU is older than Volta, yet its FP16 peak is "
                    "twice its FP32 peak. Decide from the peaks (gpu.peak_flops), not from the "
                    "compute capability.")
            assert prec == want, (
                f"{gpu.key} (cc {gpu.cc}, peaks {dict(gpu.peak_tflops)} TFLOP/s): you chose "
                f"{prec}, expected {want}. Decide from the table's peaks: bf16 where the GPU "
                "has BF16 tensor cores, else fp16 where FP16 is faster than FP32, else fp32.")
            assert scaling == want_scaling, (
                f"{gpu.key}: {prec} with loss scaling={scaling}; "
                + ("FP16 needs loss scaling (its range ends at 6e-8)." if prec == "fp16" else
                   f"{prec} has FP32's exponent range, so it needs no loss scaling."))


# --------------------------------------------------------------------------- 6.4 memory of a step

#: The parts of a training step's memory that ``step_memory`` counts.
STEP_PARTS = ("weights", "gradients", "optimizer state", "saved activations",
              "16-bit weight copies")
VERDICTS = ("smaller", "same", "larger")
_UNSET = object()


def step_memory(model, x, target, precision_name: str = "fp32") -> dict:
    """Bytes of one training step (forward, MSE loss, backward, AdamW step) of ``model`` on
    ``x``, by part (``STEP_PARTS``), counted from the live tensors: the parameters, their
    gradients, AdamW's state, and the tensors autograd saves for the backward pass, split into
    16-bit copies of the weights (autocast's casts) and the rest (activations).

    ``precision_name``: "fp32", or "bf16" / "fp16" for ``torch.autocast``. The sum of the parts
    bounds the step's peak from above: gradients appear while backward frees the activations.
    """
    torch = _torch()
    import torch.nn.functional as F  # with torch, loaded lazily

    if precision_name not in ("fp32", "bf16", "fp16"):
        raise InputError(f"precision {precision_name!r} is not one a training step runs in: "
                         "use 'fp32', 'bf16' or 'fp16'.")
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3)
    own = {q.untyped_storage().data_ptr() for q in params}
    saved: dict[int, object] = {}

    def pack(t):
        key = t.untyped_storage().data_ptr()
        if key not in own and t.untyped_storage().nbytes():
            saved[key] = t
        return t

    dtype = torch.float32 if precision_name == "fp32" else precision.torch_dtype(precision_name)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast(x.device.type, dtype=dtype, enabled=precision_name != "fp32"):
            out = model(x)
        loss = F.mse_loss(out.float(), target)
    copies = activations = 0
    for t in saved.values():
        size = t.untyped_storage().nbytes()
        if _is_weight_copy(t, params):
            copies += size
        else:
            activations += size
    del saved
    loss.backward()
    opt.step()
    nbytes = lambda ts: sum(t.numel() * t.element_size() for t in ts)  # noqa: E731
    return {"weights": nbytes(params),
            "gradients": nbytes(q.grad for q in params if q.grad is not None),
            "optimizer state": nbytes(t for s in opt.state.values() for t in s.values()
                                      if torch.is_tensor(t)),
            "saved activations": activations, "16-bit weight copies": copies}


def _is_weight_copy(t, params) -> bool:
    """Whether the storage under the saved tensor ``t`` holds a parameter cast to ``t``'s
    16-bit dtype (autocast saves such a copy, often through a transposed view of it)."""
    torch = _torch()
    if t.dtype not in (torch.float16, torch.bfloat16):
        return False
    n = t.untyped_storage().nbytes() // t.element_size()
    flat = t.detach().as_strided((n,), (1,), 0)
    return any(q.numel() == n and torch.equal(flat, q.detach().to(t.dtype).reshape(-1))
               for q in params)


def measure_step_memory(make_model, tokens: int, d: int, precisions=("fp32", "bf16"),
                        seed: int = 0) -> dict:
    """``{precision: step_memory(...)}`` for a fresh ``make_model(d)`` per precision on the
    same seeded inputs of ``tokens`` rows of width ``d``, on the CPU."""
    torch = _torch()
    tokens = whole_number(tokens, "tokens", 64)
    d = whole_number(d, "d", 128)
    g = torch.Generator().manual_seed(seed)
    x, target = torch.randn(tokens, d, generator=g), torch.randn(tokens, d, generator=g)
    return {p: step_memory(make_model(d), x, target, p) for p in precisions}


def _most_saved(fp32: dict, low: dict):
    """(the part whose bytes fell the most, by how many), or (None, 0) when none fell."""
    falls = {k: fp32.get(k, 0) - low.get(k, 0) for k in dict.fromkeys([*fp32, *low])}
    part = max(falls, key=falls.get, default=None)
    return (part, falls[part]) if part is not None and falls[part] > 0 else (None, 0)


def memory_table(measured: dict, predicted_ratio=None, predicted_part=None) -> Table:
    """The measured parts of fp32 and 16-bit steps side by side, with the learner's prediction
    (``predicted_ratio``: 16-bit bytes / fp32 bytes; ``predicted_part``: the part expected to
    shrink the most) beside what the counts say."""
    ratio = prediction(predicted_ratio, "predicted_ratio", unit="16-bit bytes / fp32 bytes",
                       example=0.5)
    if ratio <= 0:
        raise answer_error("predicted_ratio is", predicted_ratio,
                           "a ratio of two byte counts is above 0, e.g. 0.5")
    prediction(predicted_part, "predicted_part", STEP_PARTS)
    low_name = next(p for p in measured if p != "fp32")
    fp32, low = measured["fp32"], measured[low_name]
    rows = [{"part": k, "fp32 bytes": f"{fp32.get(k, 0):,}", f"{low_name} bytes": f"{low.get(k, 0):,}",
             "change": f"{low.get(k, 0) - fp32.get(k, 0):+,}"} for k in dict.fromkeys([*fp32, *low])]
    total32, total_low = sum(fp32.values()), sum(low.values())
    rows.append({"part": "total", "fp32 bytes": f"{total32:,}", f"{low_name} bytes": f"{total_low:,}",
                 "change": f"{total_low - total32:+,}"})
    part, fall = _most_saved(fp32, low)
    measured_part = f"'{part}' shrank the most ({fall:,} bytes)" if part else "no part shrank"
    return Table(rows, caption=(
        f"One training step (AdamW) on the CPU, bytes counted from the live tensors. You "
        f"predicted {low_name}/fp32 = {ratio:.2f} and that '{predicted_part}' would shrink the "
        f"most; measured: {total_low / total32:.2f}, and {measured_part}."))


def reference_memory_explanation(fp32: dict, low: dict) -> dict:
    """The reference answer of 6.4 (the checker's rule too): each part of either breakdown, and
    the total, is "smaller", "same" or "larger" in the 16-bit step (a missing part is 0 bytes)."""
    verdict = lambda a, b: "smaller" if b < a else "larger" if b > a else "same"  # noqa: E731
    out = {k: verdict(fp32.get(k, 0), low.get(k, 0)) for k in dict.fromkeys([*fp32, *low])}
    out["total"] = verdict(sum(fp32.values()), sum(low.values()))
    return out


def _mlp(d: int):
    torch = _torch()
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))


def _norms(d: int):
    torch = _torch()
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.LayerNorm(d), torch.nn.GELU(), torch.nn.LayerNorm(d))


#: (what, model, tokens, d, 16-bit precision) of the steps the checker measures: an MLP on
#: both sides of the token count where what its 16-bit activations save (576 bytes a token)
#: overtakes autocast's weight copies (8,192 bytes), its total 128 bytes above fp32's at 14
#: tokens and 448 below at 15 (0.1 % and 0.3 %), a larger FP16 step, and a model of
#: LayerNorms, which autocast runs in FP32: nothing changes at all.
MEMORY_STEPS = (("an MLP step of 14 tokens (d = 32)", _mlp, 14, 32, "bf16"),
                ("an MLP step of 15 tokens (d = 32)", _mlp, 15, 32, "bf16"),
                ("an MLP step of 256 tokens (d = 32), fp16", _mlp, 256, 32, "fp16"),
                ("a step of LayerNorms (256 tokens, d = 32)", _norms, 256, 32, "bf16"))


def _recipe(params: int, activations: int, dtype: str, optimizer: str,
            master_weights=None) -> dict:
    """A breakdown of ``models.training_memory`` under the names a learner sees there; the
    FP32 master copy appears only where the recipe keeps one."""
    m = models.training_memory(params, activations, dtype, optimizer, master_weights)
    parts = {"weights": m.weights, "gradients": m.gradients}
    if m.master_copy:
        parts["fp32 master weights"] = m.master_copy
    parts.update({"optimizer state": m.optimizer_state, "activations": m.activations})
    return parts


@functools.lru_cache(maxsize=1)
def memory_cases() -> tuple:
    """(what, fp32 breakdown, 16-bit breakdown) of each data set of the check: steps measured
    here, and the chapter's recipe (``models.training_memory``: 16-bit weights with an FP32
    master copy; pure 16 bits without one; an optimizer without state and no activations)."""
    cases = []
    for what, make, tokens, d, low in MEMORY_STEPS:
        m = measure_step_memory(make, tokens, d, ("fp32", low))
        cases.append((f"{what}, measured here", m["fp32"], m[low]))
    recipes = (("the recipe with FP32 master weights (7B parameters, Adam)",
                (7_000_000_000, 30_000_000_000, "adam", None)),
               ("the recipe in pure bf16, no master copy (350M parameters, momentum)",
                (350_000_000, 4_096_000_000, "momentum", False)),
               ("the recipe for 1 parameter, SGD, no activations", (1, 0, "sgd", False)))
    for what, (p, a, opt, master) in recipes:
        cases.append((what, _recipe(p, a, "fp32", opt), _recipe(p, a, "bf16", opt, master)))
    return tuple(cases)


def check_step_memory(explain, predicted_ratio=_UNSET, predicted_part=_UNSET,
                      number: str = "6.4",
                      title: str = "what 16 bits change in a training step's memory") -> None:
    """``explain(fp32, low) -> {part: "smaller" | "same" | "larger", ..., "total": ...}`` on
    measured steps and on the chapter's recipe; the predictions need only be there and typed."""
    with Exercise(number, title):
        if predicted_ratio is not _UNSET:
            prediction(predicted_ratio, "predicted_ratio", example=0.5)
        if predicted_part is not _UNSET:
            prediction(predicted_part, "predicted_part", STEP_PARTS)
        callable_answer(explain, "explain is", "def explain(fp32, low): ...")
        for what, fp32, low in memory_cases():
            got = explain(dict(fp32), dict(low))
            if not isinstance(got, dict):
                raise answer_error("explain(fp32, low) returned", got,
                                   "return a dict from each part (and 'total') to 'smaller', "
                                   "'same' or 'larger'")
            want = reference_memory_explanation(fp32, low)
            missing = [k for k in want if k not in got]
            if missing:
                k = missing[0]
                only = (" (only the 16-bit step has it: count it as 0 bytes in fp32)"
                        if k != "total" and k not in fp32 else "")
                raise AssertionError(
                    f"{what}: your answer has no entry for {k!r}{only}. Give every part of "
                    "either breakdown, and 'total'.")
            for k in want:
                choice_answer(got[k], f"explain(fp32, low)[{k!r}] is", VERDICTS)
            wrong = [k for k in want if got[k] != want[k]]
            if wrong:
                k = wrong[0]
                a, b = (sum(fp32.values()), sum(low.values())) if k == "total" else \
                    (fp32.get(k, 0), low.get(k, 0))
                n = len(wrong)
                raise AssertionError(
                    f"{what}: {n} of the {len(want)} entries differ{'s' * (n == 1)} from "
                    f"the data. {k!r} is {got[k]!r} in your answer, "
                    f"but {a:,} bytes in fp32 against {b:,} in 16 bits is {want[k]!r}. "
                    + _memory_hint(k, got, want, a, b))


def _memory_hint(k: str, got: dict, want: dict, a: int, b: int) -> str:
    """Why a learner said ``got[k]`` where the data say ``want[k]``."""
    flip = {"smaller": "larger", "larger": "smaller", "same": "same"}
    changed = [p for p in want if want[p] != "same"]
    if changed and all(got.get(p) == flip[want[p]] for p in changed):
        return ("You compared the wrong way round: 'smaller' means the 16-bit step keeps fewer "
                "bytes than the fp32 one.")
    if got[k] == "same" and abs(b - a) <= 0.05 * max(a, b):
        return (f"They differ by {abs(b - a):,} bytes ({abs(b - a) / max(a, b):.1%}): these are "
                "exact counts, not timings, so any difference counts.")
    if k == "total":
        if want[k] == "larger":
            return ("Add up every part of each step: here the 16-bit weight copies (or the FP32 "
                    "master weights) outweigh what the 16-bit activations save.")
        return "Add up every part of each breakdown and compare the two totals."
    if want[k] == "same" and a:
        if k in ("weights", "gradients"):
            return ("torch.autocast keeps the parameters, and so their gradients, in FP32 and "
                    "casts a 16-bit copy of each weight for the matrix products: read the "
                    "counts, not the recipe.")
        if k == "optimizer state":
            return "AdamW's two moments sit beside the FP32 parameters and stay FP32."
        return "The two counts are equal."
    if want[k] == "same":
        return "The part is 0 bytes in both steps."
    if want[k] == "smaller" and got[k] == "same":
        if 2 * b > a:
            return ("It shrank by less than half (under autocast some saved tensors stay FP32, "
                    "such as the loss's inputs and LayerNorm's), and a fall by any amount is "
                    "'smaller'.")
        return "The count fell."
    if want[k] == "larger" and a == 0:
        return ("Only the 16-bit step has this part (0 bytes in fp32): it grew from nothing.")
    return "Compare the two byte counts of this part."


# --------------------------------------------------------------------------- INT8 products on this device

def _int_mm_sentence(dev: str = "cpu") -> str | None:
    """One sentence for a learner when this device's ``torch._int_mm`` is wrong, else None."""
    probe = precision.int8_gemm_probe(dev)
    if probe.status != "wrong":
        return None
    return (f"torch._int_mm is wrong on this {dev.upper()} ({probe.wrong} of {probe.total} sums "
            "of a test product differ from the exact ones: on CPUs without VNNI its kernel can "
            "saturate 16-bit intermediate sums), so multiply with "
            "qa.to(torch.int32) @ qb.to(torch.int32), which is exact on every CPU.")


# --------------------------------------------------------------------------- 6.5 INT8 GEMM

GEMM_SHAPES = ((17, 8, 8), (33, 64, 24), (64, 4099, 40), (129, 1024, 96))
GEMM_SEED = 100
#: Where x / scale lies this close to a half, FP32 arithmetic (x / scale, x * (127 / max|x|))
#: may round it either way: each rounding moves it by at most 127 * 2^-24 = 7.6e-6.
TIE = 2.0 ** -12


def _gemm_inputs(i: int, m: int, k: int, n: int, seed: int | None = None):
    torch = _torch()
    g = torch.Generator().manual_seed((GEMM_SEED if seed is None else seed) + i)
    a = torch.randn(m, k, generator=g) * torch.exp(torch.randn(m, 1, generator=g))
    b = torch.randn(k, n, generator=g) * torch.exp(torch.randn(1, n, generator=g))
    if k > 1000:  # same-sign inputs: a product of many 127s overflows 16-bit sums
        a, b = a.abs(), b.abs()
    return a, b


def _ref_quantize(x, axis: int):
    """Symmetric INT8 of ``x`` (FP64) along ``axis``: (q as int64, scale, mask of values that lie
    within TIE of a half step, which FP32 arithmetic may round either way)."""
    s = np.abs(x).max(axis=axis, keepdims=True) / 127
    s[s == 0] = 1
    y = x / s
    near_half = np.abs(y - np.floor(y) - 0.5) < TIE
    return np.clip(np.round(y), -127, 127).astype(np.int64), s, near_half


def _ref_int8_matmul(a, b):
    """a (m, k) per row, b (k, n) per column, INT32 accumulation, FP32 rescale: the reference
    and, per entry, how far an answer with exact integer sums and FP32 scales may lie from it."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    qa, sa, ta = _ref_quantize(a, 1)
    qb, sb, tb = _ref_quantize(b, 0)
    want = (qa @ qb).astype(np.float64) * sa * sb  # NumPy's integer matmul: exact
    # A value next to a half may round one step the other way: entry (i, j) then moves by
    # |qb[k, j]| (or |qa[i, k]|), plus one where both moved.
    ta, tb = ta.astype(np.float64), tb.astype(np.float64)
    qa_abs, qb_abs = np.abs(qa).astype(np.float64), np.abs(qb).astype(np.float64)
    ties = ta @ (qb_abs + tb) + qa_abs @ tb
    # Sums that are not exact (FP32 accumulation): k * 2^-24 * sum of |products|, the bound of
    # a sequential FP32 sum (any order or core count is within it). They are allowed here and
    # rejected by _check_exact_int32_sums, whose message names the sums.
    k = a.shape[1]
    sums = k * 2.0 ** -24 * (qa_abs @ qb_abs)
    # Rescaling: FP32 scales (2^-24 each, 2^-23 for 127 / max|x|) and three FP32 roundings of
    # the product: under 1e-6 of the entry.
    bound = (ties + sums) * sa * sb + 2.0 ** -20 * np.abs(want)
    return want, bound


def _ref_quantized_torch(a, b):
    """The reference quantization in FP32 torch: (qa, sa, qb, sb), qa and qb INT8."""
    torch = _torch()
    sa = a.abs().amax(dim=1, keepdim=True) / 127
    sb = b.abs().amax(dim=0, keepdim=True) / 127
    sa = torch.where(sa > 0, sa, torch.ones_like(sa))
    sb = torch.where(sb > 0, sb, torch.ones_like(sb))
    qa = torch.round(a / sa).clamp(-127, 127).to(torch.int8)
    qb = torch.round(b / sb).clamp(-127, 127).to(torch.int8)
    return qa, sa, qb, sb


def _cpu_explains(got, a, b) -> str | None:
    """Where ``torch._int_mm`` is wrong on this CPU: the sentence to give a learner whose result
    differs from the reference (all of it when their result is what a correct answer that
    calls ``torch._int_mm`` gets here), else None."""
    cpu = _int_mm_sentence("cpu")
    if cpu is None:
        return None
    torch = _torch()
    qa, sa, qb, sb = _ref_quantized_torch(a, b)
    with_int_mm = to_host(torch._int_mm(qa, qb).double() * sa * sb)
    if got.shape == with_int_mm.shape and np.allclose(got, with_int_mm, rtol=1e-5, atol=0):
        return "your scales and quantization are right, but " + cpu
    return "Also: " + cpu


def _learner_result(fn, a, b, m: int, n: int) -> np.ndarray:
    got = _numbers(fn(a.clone(), b.clone()), "int8_matmul(a, b) returned",
                   "a tensor of shape (m, n)").astype(np.float64)
    assert got.shape == (m, n), f"result has shape {got.shape}, expected {(m, n)}."
    return got


def _compare_to_reference(got, a, b, where: str, advice: str) -> None:
    """Reject ``got`` when some entry lies further from the INT8 reference than rounding allows."""
    want, bound = _ref_int8_matmul(a.numpy(), b.numpy())
    if (np.abs(got - want) <= bound).all():
        return
    err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-300)
    cpu = _cpu_explains(got, a, b)
    if cpu and cpu.startswith("your scales"):
        raise AssertionError(f"{where}: {cpu}")
    raise AssertionError(f"{where}: differs from the INT8 reference by up to {err:.2g} (relative "
                         f"to its largest entry), more than rounding explains. {advice}"
                         + (f" {cpu}" if cpu else ""))


def check_int8_matmul(fn, number: str = "6.5", title: str = "an INT8 matrix multiply") -> None:
    """``fn(a, b) -> c``: FP32 a (m, k) and b (k, n) quantized per row of a and per column of b,
    multiplied in integers with INT32 accumulation, rescaled to FP32."""
    with Exercise(number, title):
        callable_answer(fn, "int8_matmul is", "def int8_matmul(a, b): ...")
        for i, (m, k, n) in enumerate(GEMM_SHAPES):
            a, b = _gemm_inputs(i, m, k, n)
            got = _learner_result(fn, a, b, m, n)
            assert np.isfinite(got).all(), (
                f"shape {(m, k, n)}: the result has inf or NaN. Accumulate in INT32 "
                "(.to(torch.int32) before the matmul): FP16 and INT16 sums of "
                f"{k} products up to 127*127 overflow.")
            exact = a.double().numpy() @ b.double().numpy()
            err_x = np.linalg.norm(got - exact) / np.linalg.norm(exact)
            _compare_to_reference(
                got, a, b, f"shape {(m, k, n)}",
                f"Error vs FP32 is {err_x:.2g}. Quantize a per ROW and b per COLUMN (symmetric, "
                "max|x|/127, round), multiply the integers, accumulate in INT32, then multiply "
                "by both scales.")
            # Once the INT8 reference matches, this is the quantization error of these inputs
            # (FP64 sums, no rounding to speak of): at most 1.1 % here (rounding errors of
            # s / sqrt(12) per value, s = max|x| / 127), whatever the device.
            assert err_x < 0.02, f"shape {(m, k, n)}: error vs FP32 {err_x:.2g} is over 2 %."
        _check_zero_rows(fn)
        _check_exact_int32_sums(fn)


def _check_zero_rows(fn) -> None:
    """An all-zero row of a (a padding token, a row after ReLU) and an all-zero column of b:
    their max|x| is 0, so an unguarded scale of 0 turns the row and column into 0/0 = NaN."""
    torch = _torch()
    g = torch.Generator().manual_seed(98)
    a, b = torch.randn(20, 33, generator=g), torch.randn(33, 12, generator=g)
    a[3], b[:, 5] = 0.0, 0.0
    with _NaNCasts() as casts:
        got = _learner_result(fn, a, b, 20, 12)
    if casts.count:
        raise AssertionError(
            f"with an all-zero row of a and an all-zero column of b, {casts.count} NaN or inf "
            f"value{'s' * (casts.count != 1)} became integers in your function: their max|x| "
            "is 0, so a scale of 0 gives 0/0 = NaN, which the cast to int8 hides (0 on this "
            "CPU, anything on a GPU). Give such a row or column scale 1 (as in 6.1) before "
            "dividing.")
    if not np.isfinite(got).all():
        raise AssertionError(
            "with an all-zero row of a and an all-zero column of b the result has NaN or inf: "
            "their max|x| is 0, so a scale of 0 gives 0/0 = NaN. Give such a row or column "
            "scale 1 (as in 6.1); its products are then exactly 0.")
    _compare_to_reference(got, a, b, "with an all-zero row of a and an all-zero column of b",
                          "That row and column must come out 0, the rest as usual.")


def _check_exact_int32_sums(fn) -> None:
    """Integer inputs with a 127 in every row of a and column of b: both scales are exactly 1,
    so INT32 sums give the exact product, rounded once to FP32 (or kept in FP64). Same-sign sums
    of 4099 products pass 2**24, where FP32 sums round at every step and miss in some entries."""
    torch = _torch()
    m, k, n = 64, 4099, 48
    g = torch.Generator().manual_seed(99)
    a = torch.randint(1, 128, (m, k), generator=g).float()
    b = torch.randint(1, 128, (k, n), generator=g).float()
    a[:, 0], b[0, :] = 127, 127
    exact = a.double().numpy() @ b.double().numpy()
    got = _learner_result(fn, a, b, m, n)
    bad = (got != exact.astype(np.float32)) & (got != exact)
    if bad.any():
        cpu = _cpu_explains(got, a, b)
        if cpu and cpu.startswith("your scales"):
            raise AssertionError(f"integer inputs whose scales are exactly 1: {cpu}")
        i, j = np.argwhere(bad)[0]
        raise AssertionError(
            f"integer inputs whose scales are exactly 1, shape {(m, k, n)}: {int(bad.sum())} of "
            f"{m * n} entries differ from the exact integer product, e.g. ({i}, {j}): got "
            f"{got[i, j]:.0f}, exact {exact[i, j]:.0f}. INT32 sums are exact; FP32 sums of "
            "products up to 127*127 round once they pass 2**24. Accumulate in INT32 "
            "(.to(torch.int32) before the matmul)." + (f" {cpu}" if cpu else ""))


def reference_int8_matmul(a, b):
    """The reference answer of 6.5 (used by the tests): INT32 sums by ``precision.int8_mm``,
    exact on every device."""
    qa, sa, qb, sb = _ref_quantized_torch(a, b)
    return precision.int8_mm(qa, qb).float() * sa * sb

