"""Exceptions that tell a learner, in one sentence, what went wrong and how to fix it, and the
argument checks that raise them."""
import math
import numbers


class CourseError(Exception):
    """Base class of every error the course raises on purpose."""


class LaunchError(CourseError, ValueError):
    """A kernel launch with a bad configuration or bad arguments."""


class CompileError(CourseError):
    """CUDA C source that does not compile (on the GPU or on the emulator)."""


class DeviceError(CourseError, RuntimeError):
    """The requested device or backend is not usable here."""


class MissingDependency(DeviceError):
    """A GPU is here, but a library a step needs (CuPy, a CUDA build of PyTorch) is not:
    ``make gpu-check`` skips that step with this sentence instead of failing."""


class SpecError(CourseError, ValueError):
    """An unknown GPU, compute capability or precision, or a value outside a hardware limit."""


class PrecisionError(CourseError, ValueError):
    """A precision the device or the operation does not support."""


class KernelError(CourseError, RuntimeError):
    """A kernel that failed while it ran: stuck at a barrier, crashed, timed out or raced."""


class InputError(CourseError, ValueError):
    """An argument outside what it can mean: a size below 1, a density above 1, ..."""


def whole_number(value, what: str, example, minimum: int = 1) -> int:
    """``value`` as an int when it is a whole number of at least ``minimum``; otherwise an
    InputError naming the argument and a value that works (``example``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InputError(f"{what}={value!r}: use a whole number of at least {minimum} "
                         f"(e.g. {example}).")
    return int(value)


def positive_number(value, what: str, example) -> float:
    """``value`` as a float when it is a finite number above 0; otherwise an InputError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 < value < math.inf:
        raise InputError(f"{what}={value!r}: use a number above 0 (e.g. {example}).")
    return float(value)


def fraction(value, what: str, example) -> float:
    """``value`` when it is a fraction above 0 and at most 1; otherwise an InputError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 < value <= 1.0:
        raise InputError(f"{what}={value!r}: use a fraction above 0 and at most 1 (e.g. {example}).")
    return float(value)


class ModelInputError(InputError):
    """An argument a model or an error bound cannot use (a negative size, an empty address
    list, ...)."""


def integer_argument(value, what: str, minimum: int | None = 0) -> int:
    """An integer argument of a model or bound, at least ``minimum`` (None: any); otherwise a
    ModelInputError naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not float(value).is_integer():
        raise ModelInputError(f"{what} must be a whole number, got {value!r}.")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ModelInputError(f"{what} must be at least {minimum}, got {value}.")
    return value


def nonnegative_argument(value, what: str) -> float:
    """A finite number >= 0, or a ModelInputError naming the argument."""
    value = float(value)
    if not value >= 0 or math.isinf(value):
        raise ModelInputError(f"{what} must be a finite number >= 0, got {value!r}.")
    return value


def positive_argument(value, what: str) -> float:
    """A finite number > 0, or a ModelInputError naming the argument."""
    value = float(value)
    if not value > 0 or math.isinf(value):
        raise ModelInputError(f"{what} must be a finite number > 0, got {value!r}.")
    return value
