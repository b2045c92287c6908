"""Exceptions that tell a learner, in one sentence, what went wrong and how to fix it."""


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
