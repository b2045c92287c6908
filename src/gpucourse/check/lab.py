"""The lab harness: ``Exercise`` (one success line, or the one-block failure), the answer-type
helpers (a wrong-typed answer is one sentence), a learner's CUDA C on the emulator, and the
helpers the checkers' tests use."""
from __future__ import annotations

import contextlib
import numbers
from typing import Callable, Iterable

import numpy as np

from .. import kernels
from ..errors import CourseError, DeviceError, InputError
from .compare import assert_close


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
    return isinstance(exc, CourseError) and not isinstance(exc, DeviceError)


# --------------------------------------------------------------------------- answer types

def _describe(value) -> str:
    """A wrong answer as a learner would recognise it, for a sentence: "None", "a list [1, 2]"."""
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
    if value is None and "returned" in what:  # by far the commonest: no `return` at all
        return InputError(f"{what} None: {wanted}; does your function end with `return ...`?")
    return InputError(f"{what} {_describe(value)}: {wanted}.")


def number_answer(value, what: str, unit: str = "") -> float:
    """``value`` as a float when it is one finite real number (a 0-d array too); otherwise an
    InputError naming ``what`` and what it gave. ``unit`` says what the number means."""
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
