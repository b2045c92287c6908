"""Correctness before timing: comparisons, awkward inputs, and lab checkers.

Chapter lab checkers live in ``gpucourse.check.chN``; they may use ``kernels`` and
``models`` but never ``experiments`` (dependencies point one way).
"""
from __future__ import annotations

import contextlib
from typing import Callable, Iterable

import numpy as np

from ..device import to_host

# (rtol, atol) by dtype for a result a few roundings away from its reference, such as one
# elementwise operation: float32's rtol is 168 roundings of 2^-24, float16's 10 of 2^-11. Not
# for sums: a float32 sum of n terms may be off by gamma_n * sum|x| in some order (6e-5 of
# sum|x| at n = 1000, and relative to |sum x| without limit when terms cancel), so a check of a
# sum, dot product, matmul or recurrence passes its own bound (models.sum_error_bound,
# models.matmul_error_bound, models.affine_steps_error_bound).
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


def _as_numpy(x) -> np.ndarray:
    arr = to_host(x)
    if arr.dtype.kind == "V" or str(arr.dtype) == "bfloat16":
        arr = arr.astype(np.float32)
    return np.asarray(arr)


def _dtype_name(x) -> str:
    dtype = getattr(x, "dtype", None)  # not a getattr default: np.asarray fails on bf16 tensors
    return str(np.asarray(x).dtype if dtype is None else dtype).replace("torch.", "")


def compare_report(actual, expected, rtol: float, atol: float, name: str) -> str | None:
    """None when close, else a few lines saying where and how much they differ."""
    a, e = _as_numpy(actual), _as_numpy(expected)
    if a.shape != e.shape:
        return f"{name}: shape {a.shape} but expected {e.shape}."
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    nan_a, nan_e = np.isnan(a64), np.isnan(e64)
    allowed = np.broadcast_to(atol + rtol * np.abs(e64), e64.shape)  # atol may be elementwise
    bad = (nan_a != nan_e) | (np.abs(a64 - e64) > allowed)
    bad &= ~(nan_a & nan_e)
    if not bad.any():
        return None
    idx = np.argwhere(bad)
    atol_text = f"{atol:g}" if np.ndim(atol) == 0 else \
        f"an elementwise bound up to {float(np.max(atol, initial=0.0)):.3g}"
    lines = [f"{name}: {len(idx)} of {a.size} elements differ (rtol={rtol:g}, atol={atol_text})."]
    if nan_a.any() and not nan_e.any():
        lines.append(f"  {int(nan_a.sum())} elements are NaN: were they ever written?")
    for i in idx[:5]:
        i = tuple(int(v) for v in i)
        lines.append(f"  at index {i}: got {a64[i]!r}, expected {e64[i]!r}"
                     + ("" if np.ndim(atol) == 0 else f" (allowed {allowed[i]:.3g})"))
    if len(idx) > 5:
        lines.append(f"  ... first bad index {tuple(idx[0])}, last {tuple(idx[-1])}")
    with np.errstate(invalid="ignore", divide="ignore"):
        finite = np.isfinite(a64) & np.isfinite(e64)
        denom = np.linalg.norm(e64[finite]) or 1.0
        lines.append(f"  relative error norm |a-e|/|e| = "
                     f"{np.linalg.norm((a64 - e64)[finite]) / denom:.3g}")
    return "\n".join(lines)


def assert_close(actual, expected, rtol: float | None = None, atol: float | None = None,
                 name: str = "result") -> None:
    """Raise AssertionError with a readable diff unless ``actual`` matches ``expected``.

    Tolerances default to those of the less precise of the two dtypes (``TOLERANCES``: a few
    roundings, not a sum). ``atol`` may be an array of elementwise bounds. NaN never passes
    unless the reference is NaN at the same place.
    """
    if rtol is None or atol is None:
        tols = [tolerance(_dtype_name(actual)), tolerance(_dtype_name(expected))]
        d_rtol, d_atol = max(tols)
        rtol = d_rtol if rtol is None else rtol
        atol = d_atol if atol is None else atol
    report = compare_report(actual, expected, rtol, atol, name)
    if report:
        raise AssertionError(report)


# --------------------------------------------------------------------------- inputs

def rng(seed: int = 0) -> np.random.Generator:
    """The course's seeded generator: every random input starts here."""
    return np.random.default_rng(seed)


def random_array(shape, dtype=np.float32, seed: int = 0, kind: str = "normal") -> np.ndarray:
    """Random, non-uniform data (never zeros, never all equal).

    ``kind``: ``normal`` (mean 0.5, mixed magnitudes), ``uniform`` in [-1, 1),
    ``positive`` in [0.5, 2), ``skewed`` (integers mostly in a few small values), ``int``
    (integers in [-100, 100]) or ``signs`` (+1 and -1 at random: every partial sum is an
    integer below 2^24 in magnitude, so a float32 sum of fewer than 2^24 of them is exact in
    any order; pair it with non-uniform data, which a kernel that handles only +-1 fails).
    """
    g = rng(seed)
    shape = (shape,) if np.isscalar(shape) else tuple(shape)
    if kind == "normal":
        # Mixed magnitudes catch relative-error bugs that unit-scale data hides.
        x = 0.5 + g.standard_normal(shape) * np.exp(g.uniform(-2, 2, shape))
    elif kind == "uniform":
        x = g.uniform(-1, 1, shape)
    elif kind == "positive":
        x = g.uniform(0.5, 2.0, shape)
    elif kind == "skewed":
        x = np.minimum(g.geometric(0.5, shape) - 1, 255)
    elif kind == "int":
        x = g.integers(-100, 101, shape)
    elif kind == "signs":
        x = 2 * g.integers(0, 2, shape) - 1
    else:
        raise ValueError(f"unknown kind {kind!r}: use normal, uniform, positive, skewed, int or "
                         "signs.")
    return np.ascontiguousarray(x.astype(dtype))


def awkward_sizes(block: int = 256, large: int = 1 << 20) -> list[int]:
    """Sizes that break kernels with sloppy bounds checks: 1, primes, block±1, large."""
    sizes = {1, 2, 7, 31, 33, 97, block - 1, block, block + 1, 3 * block + 5, 4099, large + 3}
    return sorted(s for s in sizes if s >= 1)


def awkward_shapes(tile: int = 32) -> list[tuple[int, int]]:
    """2-D shapes that are not multiples of ``tile``, including a single row and column."""
    return [(1, 1), (1, tile + 3), (tile + 3, 1), (tile - 1, tile + 1), (2 * tile + 5, 3 * tile - 7),
            (tile, tile), (97, 61)]


# --------------------------------------------------------------------------- lab checkers

class Exercise:
    """Context manager for one lab check: prints one success line, never hides a failure.

    >>> with Exercise("1.2", "coalesced copy"):
    ...     assert_close(out, ref)
    """

    def __init__(self, number: str, title: str = ""):
        self.number, self.title = number, title

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            print(success_line(self.number, self.title))
            return False
        if exc_type is NotImplementedError:
            raise AssertionError(
                f"Exercise {self.number} is not done yet: replace the "
                f"`raise NotImplementedError` line with your code.") from exc
        if isinstance(exc, AssertionError):
            raise AssertionError(f"Exercise {self.number} ({self.title}) not yet right:\n{exc}") \
                from exc.__cause__
        if _answer_sentence(exc):  # e.g. a wrong-typed answer: the course's one sentence
            raise AssertionError(f"Exercise {self.number} ({self.title}) not yet right:\n{exc}") \
                from None
        hint = _type_error_hint(exc) if isinstance(exc, TypeError) else None
        if hint:
            raise AssertionError(f"Exercise {self.number} ({self.title}) not yet right:\n"
                                 f"{hint} ({exc})") from exc
        return False


def _answer_sentence(exc: BaseException) -> bool:
    """Whether ``exc`` is the course's own sentence about the answer (a wrong-typed answer, a
    kernel that does not build): shown as the check's one block. A missing GPU or library is
    about the machine, not the answer, and keeps its own type."""
    from ..errors import CourseError, DeviceError

    return isinstance(exc, CourseError) and not isinstance(exc, DeviceError)


# --------------------------------------------------------------------------- answer types

def _describe(value) -> str:
    """A wrong answer as a learner would recognise it, for a sentence: "None", "a list [1, 2]"."""
    import numbers

    if value is None or isinstance(value, (bool, np.bool_)):
        return repr(value if value is None else bool(value))
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"the text {text!r}"
    if isinstance(value, type):
        return f"the class {value.__name__}"
    name = getattr(value, "__name__", None) if callable(value) else None
    if isinstance(name, str):  # a function or method (a callable object is named by its type)
        return "a lambda function" if name == "<lambda>" else f"the function {name}"
    shape = getattr(value, "shape", None)
    if shape is not None and not isinstance(shape, property) and len(tuple(shape)) > 0:
        return f"an array of shape {tuple(shape)}"
    if isinstance(value, numbers.Number) or np.ndim(value) == 0 and hasattr(value, "item"):
        return repr(value.item() if hasattr(value, "item") else value)
    text = repr(value)
    kind = type(value).__name__
    article = "an" if kind[:1].lower() in "aeiou" else "a"
    if len(text) <= 40 and " at 0x" not in text:  # no memory addresses
        return f"{article} {kind} {text}"
    if isinstance(value, (list, tuple, dict, set)):
        return f"{article} {kind} of {len(value)} item{'s' * (len(value) != 1)}"
    return f"{article} {kind}"


def answer_error(what: str, value, wanted: str):
    """The one-sentence InputError for an answer of the wrong type: ``what`` (the answer's
    name and verb: "vector_add_ai(4) returned") ``value``: ``wanted`` (how to fix it)."""
    from ..errors import InputError

    if value is None and "returned" in what:  # by far the commonest: no `return` at all
        return InputError(f"{what} None: {wanted}; does your function end with `return ...`?")
    return InputError(f"{what} {_describe(value)}: {wanted}.")


def number_answer(value, what: str, unit: str = "") -> float:
    """``value`` as a float when it is one finite real number (a 0-d array too); otherwise an
    InputError naming ``what`` and what it gave. ``unit`` says what the number means."""
    import numbers

    unit = f" ({unit})" if unit else ""
    if isinstance(value, (bool, np.bool_)):
        raise answer_error(what, value, f"return a number{unit}, not True or False")
    if isinstance(value, str):
        raise answer_error(what, value, f"return the number{unit} itself, not text")
    if callable(value):
        raise answer_error(what, value, f"return the number{unit} it computes, not the function")
    if isinstance(value, numbers.Real):
        number = float(value)
    elif getattr(value, "dtype", None) is not None and np.ndim(value) == 0 and \
            np.asarray(value).dtype.kind in "iuf":  # a 0-d NumPy array or tensor
        number = float(np.asarray(value))
    elif value is None:
        raise answer_error(what, value, f"return a number{unit}")
    else:
        raise answer_error(what, value, f"return one number{unit}")
    if not np.isfinite(number):
        raise answer_error(what, value, f"return a finite number{unit}")
    return number


def whole_answer(value, what: str, unit: str = "", strict: bool = False) -> int:
    """``value`` as an int when it is a whole number: an int, or (unless ``strict``) a float
    with nothing after the point (12.0); never a bool."""
    import numbers

    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    number = number_answer(value, what, unit)  # names a wrong type first
    if not strict and number == int(number):
        return int(number)
    raise answer_error(what, value, f"return an int, a whole number{f' ({unit})' if unit else ''}")


def text_answer(value, what: str, wanted: str) -> str:
    """``value`` when it is a string; otherwise an InputError (``wanted``: e.g. "pass the
    CUDA C source as a string")."""
    if not isinstance(value, str):
        raise answer_error(what, value, wanted)
    return value


def choice_answer(value, what: str, choices) -> str:
    """``value`` when it is one of the strings ``choices``."""
    options = " or ".join(repr(c) for c in choices)
    if not isinstance(value, str) or value not in choices:
        raise answer_error(what, value, f"return {options}")
    return value


def callable_answer(value, what: str, example: str):
    """``value`` when the checker can call it; ``example`` shows the function to pass
    ("def vector_add_ai(elem_bytes): ...")."""
    if not callable(value):
        raise answer_error(what, value, f"pass the function itself, `{example}`, without "
                                        "calling it")
    return value


def tuple_answer(value, what: str, length: int, wanted: str) -> tuple:
    """``value`` when it is a tuple (or list) of ``length`` items; ``wanted`` shows one."""
    if not isinstance(value, (tuple, list)) or len(value) != length:
        raise answer_error(what, value, f"return {wanted}")
    return tuple(value)


def _type_error_hint(exc: TypeError) -> str | None:
    """What a learner most likely did when a checker meets a TypeError, or None."""
    text = str(exc)
    if "NoneType" in text:  # by far the commonest: a function without `return`
        return ("your answer gave None where the checker needs a value: does your function end "
                "with `return ...`?")
    if "'function' object" in text or "'method' object" in text:
        return "you passed a function where the checker needs its result: call it first"
    if "object is not callable" in text:
        return ("the checker calls what you pass: give the function (or class) itself, not its "
                "result or an instance")
    return None


def learner_module(source, file_name: str, kernel: str, defines=None):
    """The learner's CUDA C built for the emulator, with ``kernel`` in it.

    A source that is not a string or lacks the kernel is an AssertionError saying what to
    write; a compile error stays the emulator's CompileError (it names the line to fix).
    """
    from .. import kernels

    wanted = f"`extern \"C\" __global__ void {kernel}(...)`"
    if not isinstance(source, str) or "__global__" not in source:
        raise AssertionError(f"give the CUDA C source as a string with an {wanted} kernel in it.")
    module = kernels.from_source(source, defines, name=file_name, backend="cpu")
    if kernel not in module.names:
        raise AssertionError(f"the source must define {wanted}; "
                             f"it defines {', '.join(module.names) or 'no kernel'}.")
    return module


def learner_kernel(source, file_name: str, kernel: str, defines=None):
    """:func:`learner_module`'s ``kernel``."""
    return getattr(learner_module(source, file_name, kernel, defines), kernel)


def run_learner_kernel(kernel, grid, block, args, what: str, *, race_check: bool = False,
                       isolate: bool = True, timeout_s: float = 20.0) -> None:
    """Launch a learner kernel on the emulator, by default in a child process (a crash or an
    endless loop fails the check instead of killing the notebook); a crash, hang or race
    becomes an AssertionError that starts with ``what``."""
    from ..errors import CourseError

    try:
        kernel(grid, block, args, race_check=race_check, isolate=isolate, timeout=timeout_s)
    except CourseError as exc:
        raise AssertionError(f"{what}: {exc}") from None


def success_line(number: str, title: str = "") -> str:
    return f"Exercise {number} passed" + (f": {title}." if title else ".")


def passed(number: str, title: str = "") -> None:
    """Print the one success line of a lab check."""
    print(success_line(number, title))


def check_function(fn: Callable, reference: Callable, cases: Iterable[tuple], number: str,
                   title: str = "", rtol: float | None = None, atol: float | None = None) -> None:
    """Compare ``fn(*case)`` with ``reference(*case)`` for every case; one line when all pass."""
    with Exercise(number, title):
        for case in cases:
            got, want = fn(*case), reference(*case)
            shapes = ", ".join(str(getattr(c, "shape", c)) for c in case)
            try:
                assert_close(got, want, rtol=rtol, atol=atol, name=f"for inputs ({shapes})")
            except AssertionError as e:
                raise AssertionError(str(e)) from None


@contextlib.contextmanager
def expect_failure(match: str = ""):
    """For tests of checkers: the block must raise AssertionError containing ``match``."""
    try:
        yield
    except AssertionError as e:
        if match and match not in str(e):
            raise AssertionError(f"failed, but the message lacks {match!r}: {e}") from e
        return
    raise AssertionError("expected the check to fail, but it passed")


def threshold(value, limit, ok: bool, what: str, rule: str | None = None) -> dict:
    """One acceptance figure of a chapter's GPU check: the value, its limit and whether it holds.

    Every chapter's ``gpu_check()`` reports its figures in this shape, so that
    ``make gpu-check`` can print them side by side. ``rule`` names the comparison (one of
    ``THRESHOLD_RULES``) when ``ok`` is just that comparison; ``at_least``, ``more_than`` and
    ``at_most`` build such records. Judge ``ok`` yourself only for a check with a condition
    of its own.
    """
    if rule is not None and rule not in THRESHOLD_RULES:
        raise ValueError(f"rule {rule!r} is not one of {', '.join(THRESHOLD_RULES)}.")
    return {"value": None if value is None else float(value),
            "threshold": None if limit is None else float(limit),
            "passed": bool(ok), "what": what, "rule": rule}


#: The comparisons a threshold record may name, in words for its printout.
THRESHOLD_RULES = ("at least", "more than", "at most")


def at_least(value, limit, what: str) -> dict:
    """A threshold record that passes when ``value >= limit``."""
    return threshold(value, limit, value >= limit, what, rule="at least")


def more_than(value, limit, what: str) -> dict:
    """A threshold record that passes when ``value > limit``."""
    return threshold(value, limit, value > limit, what, rule="more than")


def at_most(value, limit, what: str) -> dict:
    """A threshold record that passes when ``value <= limit``."""
    return threshold(value, limit, value <= limit, what, rule="at most")


def limit_text(record: dict) -> str:
    """A threshold record's limit in words ("at least 80"); "-" when it has none. Records
    saved before rules were recorded give the bare number."""
    limit = record.get("threshold")
    if limit is None:
        return "-"
    rule = record.get("rule")
    return f"{rule} {limit:.3g}" if rule else f"{limit:.3g}"
