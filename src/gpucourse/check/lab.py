"""The lab harness: ``Exercise`` (one success line, or the one-block failure), the answer-type
helpers (a wrong-typed answer is one sentence), a learner's CUDA C on the emulator, and the
helpers the checkers' tests use."""
from __future__ import annotations

import contextlib
import functools
import numbers
import os
import re
import sys
import traceback
import types
from typing import Callable, Iterable

import numpy as np

from .. import kernels
from ..emulator import racecheck
from ..emulator.build import build_together, runtime_object
from ..errors import CourseError, DeviceError, InputError
from ..profiler import build as profiler_build
from .compare import assert_close


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class CheckFailed(AssertionError):
    """A lab check that failed: an AssertionError whose display in IPython (JupyterLab, nbclient,
    the terminal) is one short block, the message and the learner's own line where there is
    one, without the course's frames."""

    def _render_traceback_(self) -> list[str]:
        first, *rest = str(self).split("\n")
        where = _learner_line(self)
        return [f"\x1b[0;31m{first}\x1b[0m", *rest] + ([f"(in your code: {where})"] if where else [])


def _own_frames(tb) -> list:
    """The frames of ``tb`` in the learner's code: neither the course's nor an installed
    package's (IPython's own frames around a cell included)."""
    return [f for f in traceback.extract_tb(tb)
            if not os.path.abspath(f.filename).startswith(_PACKAGE)
            and "site-packages" not in f.filename and "/lib/python" not in f.filename]


def _learner_line(exc: BaseException) -> str | None:
    """The innermost line of the learner's own code in the traceback of what ``exc`` was raised
    from, which starts in the checker ("a cell, line N: code"), or None."""
    for e in (exc.__cause__, exc.__context__):  # their tracebacks start in the checker
        if e is None or e.__traceback__ is None:
            continue
        own = _own_frames(e.__traceback__)
        if own:
            f = own[-1]
            name = "a cell" if f.filename.startswith("<") or "ipykernel" in f.filename \
                else os.path.basename(f.filename)
            return f"{name}, line {f.lineno}" + (f": {f.line.strip()}" if f.line else "")
    return None


def not_done(number: str) -> str:
    """The one sentence of an unanswered exercise."""
    return (f"Exercise {number} is not done yet: replace the `raise NotImplementedError` line "
            "with your code.")


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
            raise CheckFailed(not_done(self.number)) from exc
        if exc_type is NameError and tb is not None and tb.tb_next is None and \
                _own_frames(tb):  # raised by the check cell's own line, not in a function
            raise CheckFailed(
                f"Exercise {self.number} is not done yet: `{getattr(exc, 'name', None) or exc}` "
                "is not defined; write it in the exercise's cell above and run that cell.") \
                from None
        if isinstance(exc, AssertionError):
            raise CheckFailed(f"Exercise {self.number} ({self.title}) not yet right:\n{exc}") \
                from exc.__cause__
        if _answer_sentence(exc):  # e.g. a wrong-typed answer: the course's one sentence
            raise CheckFailed(f"Exercise {self.number} ({self.title}) not yet right:\n{exc}") \
                from None
        hint = _type_error_hint(exc) if isinstance(exc, TypeError) else None
        if hint:
            raise CheckFailed(f"Exercise {self.number} ({self.title}) not yet right:\n"
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


def learner_module(source, file_name: str, kernel: str, defines=None, *, builds=("race",)):
    """The learner's CUDA C built for the emulator, with ``kernel`` in it.

    ``builds``: the other builds the check will use, compiled at the same time
    (:func:`build_ahead`). A source that is not a string or lacks the kernel is an
    AssertionError saying what to write; a compile error stays the emulator's CompileError
    (it names the line to fix).
    """
    wanted = f"`extern \"C\" __global__ void {kernel}(...)`"
    if not isinstance(source, str) or "__global__" not in source:
        raise AssertionError(f"give the CUDA C source as a string with an {wanted} kernel in it.")
    module = build_ahead(source, file_name, defines, builds)
    if kernel not in module.names:
        raise AssertionError(f"the source must define {wanted}; "
                             f"it defines {', '.join(module.names) or 'no kernel'}.")
    return module


def learner_kernel(source, file_name: str, kernel: str, defines=None, *, builds=("race",)):
    """:func:`learner_module`'s ``kernel``."""
    return getattr(learner_module(source, file_name, kernel, defines, builds=builds), kernel)


def build_shared_parts() -> list[str]:
    """Compile what every learner build links, side by side: the emulator's runtime and the
    race detector's and profiler's hooks (once per machine, then cached; `make lab` runs this
    so that a lab's first kernel check is as quick as the others). The problems, one
    sentence each: empty when all three were built."""
    parts = {"the emulator's runtime": runtime_object}
    if not racecheck.toolchain_problem():  # else no instrumented build is ever made
        parts["the race detector's hooks"] = racecheck.hooks_object
        parts["the profiler's hooks"] = profiler_build.hooks_object
    results = build_together(*parts.values())
    return [f"{what} did not build: {str(r).splitlines()[0] if str(r) else type(r).__name__}"
            for what, r in zip(parts, results) if isinstance(r, Exception)]


def build_ahead(source: str, file_name: str, defines=None, builds=("race",)):
    """The emulator module of a learner's source (``kernels.from_source``), compiled side by
    side with the other ways the check will run it: ``builds`` holds "race" (the race
    detector's build), "profile" (the profiler's) or functions that build something else.
    Each compile is cached, so the check's steps find them done; on two cores a check that
    needs three builds waits for about two instead of three.

    The plain build's error is raised (a compile error names the learner's line); the other
    builds' errors are left to the steps that use them, which explain them in their own words.
    """
    name = file_name if file_name.endswith(".cu") else f"{file_name}.cu"
    # What the instrumented builds read of a module, before the module exists.
    spec = types.SimpleNamespace(source=source, filename=name, defines=dict(defines or {}))
    ways = {"race": racecheck.detector_library, "profile": profiler_build.profiling_library}
    # Both instrumented builds need what the race detector needs (Linux, addr2line); without
    # it the check's steps run uninstrumented, or say what is missing.
    instrumented = not racecheck.toolchain_problem()
    jobs = [functools.partial(kernels.from_source, source, defines, name=name, backend="cpu")]
    for b in builds:
        if callable(b):
            jobs.append(b)
        elif instrumented:
            jobs.append(functools.partial(ways[b], spec))
    module = build_together(*jobs)[0]
    if isinstance(module, Exception):
        raise module
    return module


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


# --------------------------------------------------------------------------- display in IPython

_STUB = re.compile(r"^Exercise (\d+\.\d+)$")
_CALL = re.compile(r"([A-Za-z_][\w.]*)\s*\(")


def _exercise_of_line(line: str, namespace: dict) -> str | None:
    """The exercise a check cell's line checks: the ``number`` default of a checker it calls
    (``check4.check_no_divergence(NO_DIVERGENCE)`` -> "4.2"), or None."""
    import inspect  # only when a NameError is shown

    for dotted in _CALL.findall(line or ""):
        head, *rest = dotted.split(".")
        obj = namespace.get(head)
        for part in rest:
            obj = getattr(obj, part, None)
        hook = getattr(obj, "exercise_of_call", None)
        if hook is not None:  # a checker of several exercises: the call's arguments say which
            try:
                number = hook(*_literal_arguments(line, dotted))
            except Exception:  # noqa: BLE001 (a learner's odd line: no sentence, the traceback)
                number = None
        else:
            try:
                number = inspect.signature(obj).parameters["number"].default
            except (TypeError, ValueError, KeyError):
                continue
        if isinstance(number, str) and re.fullmatch(r"\d+\.\d+", number):
            return number
    return None


def _literal_arguments(line: str, dotted: str) -> list:
    """The positional arguments of the call of ``dotted`` on ``line``: each literal's value,
    None for anything else (``check_puzzle(3, PUZZLE_3)`` -> [3, None])."""
    import ast  # only when a NameError is shown

    try:
        tree = ast.parse(line.strip())
    except SyntaxError:
        return []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == dotted:
            return [a.value if isinstance(a, ast.Constant) else None for a in node.args]
    return []


def unanswered_sentence(exc: BaseException, namespace: dict) -> str | None:
    """What an unanswered exercise shows instead of a traceback: a lab's top-level ``raise
    NotImplementedError("Exercise N.M")`` run as it is, or a check cell whose answer is not
    defined (the exercise's cell raised before defining it, or was never run); else None."""
    if type(exc) is NotImplementedError:
        m = _STUB.match(str(exc))
        return not_done(m.group(1)) if m else None
    if type(exc) is NameError and exc.__traceback__ is not None:
        frames = _own_frames(exc.__traceback__)  # one: raised by the cell's own line
        number = _exercise_of_line(frames[-1].line, namespace) if len(frames) == 1 else None
        name = getattr(exc, "name", None) or "the answer"
        if number:
            return (f"Exercise {number} is not done yet: `{name}` is not defined; write it in "
                    "the exercise's cell above, in place of its `raise NotImplementedError` "
                    "line, and run that cell.")
    return None


def _show_unanswered(shell, etype, value, tb, tb_offset=None):
    """IPython's handler for NotImplementedError and NameError: one line for an unanswered
    exercise, IPython's own traceback for everything else."""
    text = unanswered_sentence(value, shell.user_ns)
    if text is None:  # not an exercise: IPython's usual display
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    else:  # IPython ignores what a handler returns: it shows the block itself
        shell._showtraceback(etype, value, [f"\x1b[0;31m{text}\x1b[0m"])


def install_display() -> bool:
    """In IPython (JupyterLab, nbclient, the terminal), show an unanswered exercise as one line
    instead of a NotImplementedError or NameError traceback. A failed check needs nothing here:
    ``CheckFailed._render_traceback_`` is its one block. False outside IPython."""
    ipython = sys.modules.get("IPython")  # already loaded where a shell runs; never imported here
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return False
    shell.set_custom_exc((NotImplementedError, NameError), _show_unanswered)
    return True


install_display()
