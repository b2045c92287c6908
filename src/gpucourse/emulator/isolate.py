"""Running a kernel in a child process: nothing it does (an ``abort()``, a write through a wild
pointer, an endless loop) reaches the caller, and ``race_check`` compares its thread orders
and runs the hazard detector there. Errors come back as the caller's KernelError,
OutOfBounds (with its source line where the detector can name it) or LaunchError.
"""
from __future__ import annotations

import faulthandler
import math
import multiprocessing
import signal
import sys
import threading
import warnings

import numpy as np

from ..device import to_host
from ..errors import CompileError, CourseError, DeviceError, KernelError, LaunchError
from . import build, checks, racecheck
from .checks import OutOfBounds
from .launch import check_launch

#: What a parent waits for a child beyond the time limit of the launch it runs: starting,
#: copying arrays and sending results.
_MARGIN_S = 3.0


def _validate(kernel, grid, block, args, shared_mem):
    kernel._validate(grid, block, args, shared_mem)  # the kernel's own backend's limits first
    # A GPU allows more shared memory than the emulator's 48 KB (static and dynamic together).
    return check_launch(kernel.name, grid, block, shared_mem,
                        kernel.module.emulator_limits(kernel.name))


def _host_args(kernel, args) -> list:
    out = []
    for p, a in zip(kernel.signature.params, args):
        out.append((a if isinstance(a, np.ndarray) else np.ascontiguousarray(to_host(a)))
                   if p.pointer else a)
    return out


def _write_back(kernel, args, results: dict) -> None:
    for i, value in results.items():
        target = args[i]
        if target is value:
            continue
        if isinstance(target, np.ndarray):
            np.copyto(target, value)
        else:  # a CuPy array: copy the emulator's result to the GPU
            target.set(np.ascontiguousarray(value, dtype=target.dtype))


def race_check(kernel, grid, block, args, shared_mem=0, *, seed=0, rtol=None,
               timeout=checks.DEFAULT_TIMEOUT_S) -> None:
    """Run ``kernel`` on the emulator with forward, reverse and shuffled thread orders, then
    once more under the hazard detector (``racecheck``), all in a child process.

    Raises KernelError ("... has a race ...") when the results differ or two threads'
    accesses conflict with nothing ordering them; otherwise the arrays in ``args`` hold the
    result, as after a normal launch. Float results may differ by what reordering float
    additions can make (:func:`order_tolerance`), or by ``rtol`` times an array's largest
    |value| where ``rtol`` is given. Works for a kernel of either backend (GPU arrays are
    copied to the host and back). ``timeout`` limits each of the three launches.
    """
    run_isolated(kernel, grid, block, args, shared_mem, timeout=timeout, race_check=True,
                 seed=seed, rtol=rtol)


# --------------------------------------------------------------------------- a child process

_ERRORS = {c.__name__: c for c in (KernelError, LaunchError, CompileError, DeviceError)}


def _launch_task(lib, name, grid, block, host, shared, race, seed, rtol, detector, timeout):
    output = checks.run_launch(lib, name, grid, block, host, shared, race_check=race, seed=seed,
                        rtol=rtol, echo=False, detector=detector, timeout=timeout)
    params = lib.kernels[name].params
    return {i: host[i] for i, p in enumerate(params) if p.pointer and not p.const}, output


def _bounds_task(detector, name, grid, block, host, shared, order, seed, timeout):
    hazard = detector.run(name, grid, block, host, shared, order=order, seed=seed,
                          bounds_only=True, timeout=timeout * checks.DETECTOR_SLOWDOWN)
    return (hazard.message if hazard is not None and not hazard.detail else None), ""


def _child(conn, task, *args) -> None:
    faulthandler.disable()  # a crash is reported by the parent, without a Python trace
    build._lock = threading.RLock()  # another thread may have held it when the parent forked
    checks._announce = lambda seconds: conn.send(("launch", seconds))  # noqa: E731
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                value, output = task(*args)
                reply = ("ok", value, output)
            except BaseException as exc:  # report everything: the parent raises it
                name = args[1]
                if isinstance(exc, OutOfBounds):
                    kind = exc
                elif type(exc).__name__ in _ERRORS:
                    kind = type(exc).__name__
                else:
                    kind = "KernelError"
                text = (str(exc) if isinstance(exc, CourseError)
                        else f"kernel {name}: {type(exc).__name__}: {exc}")
                reply = ("error", kind, text, getattr(exc, "output", ""))
        conn.send((reply, [(w.category.__name__, str(w.message)) for w in caught]))
    finally:
        conn.close()


def _in_child(name: str, timeout: float, task, *args):
    """``task(*args)`` in a child process: its reply, or KernelError when the child crashed or
    a launch in it gave no sign within the time it was allowed (reported as ``timeout``)."""
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, daemon=True, args=(sender, task, *args))
    with warnings.catch_warnings():  # forking a process that has threads is fine here
        warnings.simplefilter("ignore", DeprecationWarning)
        proc.start()
    sender.close()
    reply, limit = None, timeout
    try:
        while reply is None:
            # Each launch stops itself at its limit; the margin covers the work around it.
            if not receiver.poll(limit + _MARGIN_S):
                raise KernelError(
                    f"kernel {name} did not finish within {timeout:g} s (an endless loop, e.g. a "
                    f"loop whose index never advances, or a launch too large for the emulator: "
                    f"then pass a larger timeout=).")
            try:
                message = receiver.recv()
            except EOFError:
                break
            if message[0] == "launch":
                limit = message[1]
            else:
                reply = message
    finally:
        if proc.is_alive() and reply is None:
            proc.kill()
        proc.join(5)
        receiver.close()
    if reply is None:
        code = proc.exitcode
        how = (signal.Signals(-code).name if code is not None and code < 0 and
               -code in signal.Signals._value2member_map_ else f"exit code {code}")
        raise KernelError(f"kernel {name} crashed the process that ran it ({how}); an "
                          f"index out of bounds or a runaway recursion can do this.")
    reply, caught = reply
    _warn_again(caught)
    return reply


def _warn_again(caught) -> None:
    """Issue in this process the warnings a child issued."""
    for category, text in caught:
        cls = {"RuntimeWarning": RuntimeWarning, "DeprecationWarning": DeprecationWarning
               }.get(category, UserWarning)
        if text.startswith(racecheck.WARNING_START):
            racecheck.warn_again(text)
        else:
            warnings.warn(text, cls, stacklevel=4)


def run_isolated(kernel, grid, block, args, shared_mem=0, *, timeout=checks.DEFAULT_TIMEOUT_S,
                 race_check=False, seed=0, rtol=None) -> None:
    """Run ``kernel`` on the emulator in a child process, each launch stopped after
    ``timeout`` s.

    A crash, an index out of bounds, a stack overflow or an endless loop becomes a
    KernelError in the caller instead of killing or hanging it. On success the kernel's
    output arrays in ``args`` hold the result. ``race_check`` as in :func:`race_check`.
    """
    timeout = safe_timeout(timeout, checks.DEFAULT_TIMEOUT_S)
    grid3, block3, shared = _validate(kernel, grid, block, args, shared_mem)
    lib = kernel._emulator_library()  # compile here: compile errors are the caller's to see
    detector = None
    if race_check:
        detector = racecheck.detector(kernel)
    host = _host_args(kernel, args)
    reply = _in_child(kernel.name, timeout, _launch_task, lib, kernel.name, grid3, block3,
                      host, shared, race_check, seed, rtol, detector, timeout)
    if reply[0] == "error":
        _, kind, text, output = reply
        if output:
            sys.stdout.write(output)
        if isinstance(kind, OutOfBounds):
            raise _line_of(kernel, kind, grid3, block3, host, shared, timeout)
        raise _ERRORS[kind](text)
    _, results, output = reply
    if output:
        sys.stdout.write(output)
        sys.stdout.flush()
    _write_back(kernel, args, results)


def _line_of(kernel, err: OutOfBounds, grid, block, host, shared, timeout) -> OutOfBounds:
    """``err`` with its source line named: the race detector runs the launch again, in
    another child process (built here, where a compile is not timed)."""
    if err.named:
        return err
    detector = racecheck.detector(kernel, warn=False)
    if detector is None:
        return err
    try:
        reply = _in_child(kernel.name, timeout, _bounds_task, detector, kernel.name, grid, block,
                          host, shared, err.order, err.seed, timeout)
    except KernelError:
        return err
    if reply[0] == "ok" and reply[1]:
        return OutOfBounds(reply[1], named=True, order=err.order, seed=err.seed)
    return err


def safe_timeout(value, default=None):
    """``value`` as seconds for a launch's time limit: ``default`` for None, else a number
    above 0 and finite; anything else is a LaunchError in one sentence."""
    if value is None:
        return default
    ok = (isinstance(value, (int, float, np.integer, np.floating))
          and not isinstance(value, (bool, np.bool_)) and math.isfinite(value) and value > 0)
    if not ok:
        raise LaunchError(f"timeout={value!r} is not a time limit: give the seconds a launch may "
                          f"take as a number above 0 (e.g. timeout={checks.DEFAULT_TIMEOUT_S:g}).")
    return float(value)
