"""Running a kernel the way a lab checker needs: race checking and a separate process."""
from __future__ import annotations

import faulthandler
import multiprocessing
import signal
import sys
import threading
import warnings

import numpy as np

from ..errors import CompileError, CourseError, DeviceError, LaunchError
from .build import KernelError

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_RTOL = 1e-4


def _difference(first: np.ndarray, other: np.ndarray, rtol: float) -> str:
    """'' when the two results agree, else how they differ (floats within ``rtol``)."""
    a, b = first.reshape(-1), other.reshape(-1)
    if a.dtype.kind in "fc":
        finite = np.abs(a[np.isfinite(a)])
        # Float atomics add in thread order, so sums may differ in their last bits.
        scale = float(finite.max()) if finite.size else 0.0
        same = np.isclose(a, b, rtol=rtol, atol=rtol * scale, equal_nan=True)
    else:
        same = a == b
    bad = np.flatnonzero(~same)
    if not bad.size:
        return ""
    k = int(bad[0])
    return (f"{bad.size} of {a.size} elements differ, the first at flat index {k}: "
            f"{a[k]!r} in forward order against {b[k]!r}")


def run_launch(lib, name, grid, block, host_args, shared_mem=0, *, race_check=False,
               seed=0, rtol=DEFAULT_RTOL, echo=True, detector=None) -> str:
    """One launch on the emulator, or three (forward, reverse, shuffled) with ``race_check``.

    With ``race_check`` the arrays end up holding the forward-order result, and a
    KernelError says "this kernel has a race" when another order gives another result,
    or when ``detector`` (a ``racecheck.Detector`` of the same source) finds a hazard in
    one more launch from the same inputs.
    """
    if not race_check:
        return lib.launch(name, grid, block, host_args, shared_mem, echo=echo)
    params = lib.kernels[name].params
    arrays = [i for i, p in enumerate(params) if p.pointer]
    before = {i: host_args[i].copy() for i in arrays}
    results, output = {}, ""
    for order in ("forward", "reverse", "shuffle"):
        for i in arrays:  # every order starts from the same inputs (outputs may accumulate)
            np.copyto(host_args[i], before[i])
        text = lib.launch(name, grid, block, host_args, shared_mem, order=order, seed=seed,
                          echo=echo and order == "forward")
        output = output or text
        results[order] = {i: host_args[i].copy() for i in arrays}
    for i in arrays:
        np.copyto(host_args[i], results["forward"][i])
    # The detector runs from the same inputs; where the orders disagree too, it says why.
    hazard = None if detector is None else detector.run(
        name, grid, block, [before.get(i, a) for i, a in enumerate(host_args)], shared_mem)
    if hazard and not hazard.detail:  # memory the launch does not have: that comes first
        raise KernelError(hazard.message)
    for order in ("reverse", "shuffle"):
        for i in arrays:
            diff = _difference(results["forward"][i], results[order][i], rtol)
            if diff:
                why = (hazard.detail if hazard and hazard.detail else
                       "a thread reads memory that another thread writes without a "
                       "__syncthreads() (or __syncwarp()) between them")
                raise KernelError(
                    f"kernel {name} has a race: argument `{params[i].name}` comes out different "
                    f"when the threads run in {order} order ({diff}); {why}.")
    if hazard:
        raise KernelError(hazard.message)
    return output


def _validate(kernel, grid, block, args, shared_mem):
    from ..kernels import check_launch

    kernel._validate(grid, block, args, shared_mem)  # the kernel's own backend's limits first
    # A GPU allows more shared memory than the emulator's 48 KB (static and dynamic together).
    return check_launch(kernel.name, grid, block, shared_mem,
                        kernel.module.emulator_limits(kernel.name))


def _host_args(kernel, args) -> list:
    from ..device import to_host

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


def race_check(kernel, grid, block, args, shared_mem=0, *, seed=0, rtol=DEFAULT_RTOL) -> None:
    """Run ``kernel`` on the emulator with forward, reverse and shuffled thread orders, then
    once more under the hazard detector (``racecheck``).

    Raises KernelError ("... has a race ...") when the results differ or two threads'
    accesses conflict with nothing ordering them; otherwise the arrays in ``args`` hold the
    result, as after a normal launch. Works for a kernel of either backend (GPU arrays are
    copied to the host and back).
    """
    from . import racecheck

    grid3, block3, shared = _validate(kernel, grid, block, args, shared_mem)
    lib = kernel._emulator_library()
    detector = racecheck.detector(kernel)
    host = _host_args(kernel, args)
    run_launch(lib, kernel.name, grid3, block3, host, shared, race_check=True, seed=seed, rtol=rtol,
               detector=detector)
    _write_back(kernel, args, {i: host[i] for i, p in enumerate(kernel.signature.params)
                               if p.pointer and not p.const})


_ERRORS = {c.__name__: c for c in (KernelError, LaunchError, CompileError, DeviceError)}


def _child(conn, lib, name, grid, block, host, shared, race, seed, rtol, detector) -> None:
    faulthandler.disable()  # a crash is reported by the parent, without a Python trace
    from . import build

    build._lock = threading.RLock()  # another thread may have held it when the parent forked
    output = ""
    try:
        try:
            output = run_launch(lib, name, grid, block, host, shared, race_check=race,
                                seed=seed, rtol=rtol, echo=False, detector=detector)
        except BaseException as exc:  # report everything: the parent raises it
            kind = type(exc).__name__ if type(exc).__name__ in _ERRORS else "KernelError"
            text = str(exc) if isinstance(exc, CourseError) else f"kernel {name}: {type(exc).__name__}: {exc}"
            conn.send(("error", kind, text, getattr(exc, "output", "")))
            return
        params = lib.kernels[name].params
        conn.send(("ok", {i: host[i] for i, p in enumerate(params) if p.pointer and not p.const},
                   output))
    finally:
        conn.close()


def run_isolated(kernel, grid, block, args, shared_mem=0, *, timeout=DEFAULT_TIMEOUT_S,
                 race_check=False, seed=0, rtol=DEFAULT_RTOL) -> None:
    """Run ``kernel`` on the emulator in a child process that is stopped after ``timeout`` s.

    A crash (an index far out of bounds), a stack overflow or an endless loop becomes a
    KernelError in the caller instead of killing or hanging it. On success the kernel's
    output arrays in ``args`` hold the result. ``race_check`` as in :func:`race_check`.
    """
    grid3, block3, shared = _validate(kernel, grid, block, args, shared_mem)
    lib = kernel._emulator_library()  # compile here: compile errors are the caller's to see
    detector = None
    if race_check:
        from . import racecheck

        detector = racecheck.detector(kernel)
    host = _host_args(kernel, args)
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, daemon=True,
                       args=(sender, lib, kernel.name, grid3, block3, host, shared,
                             race_check, seed, rtol, detector))
    with warnings.catch_warnings():  # forking a process that has threads is fine here
        warnings.simplefilter("ignore", DeprecationWarning)
        proc.start()
    sender.close()
    reply = None
    try:
        if not receiver.poll(timeout):
            raise KernelError(
                f"kernel {kernel.name} did not finish within {timeout:g} s (an endless loop, e.g. a "
                f"loop whose index never advances, or a launch too large for the emulator).")
        try:
            reply = receiver.recv()
        except EOFError:
            reply = None
    finally:
        if proc.is_alive() and reply is None:
            proc.kill()
        proc.join(5)
        receiver.close()
    if reply is None:
        code = proc.exitcode
        how = (signal.Signals(-code).name if code is not None and code < 0 and
               -code in signal.Signals._value2member_map_ else f"exit code {code}")
        raise KernelError(f"kernel {kernel.name} crashed the process that ran it ({how}); an "
                          f"index out of bounds or a runaway recursion can do this.")
    if reply[0] == "error":
        _, kind, text, output = reply
        if output:
            sys.stdout.write(output)
        raise _ERRORS[kind](text)
    _, results, output = reply
    if output:
        sys.stdout.write(output)
        sys.stdout.flush()
    _write_back(kernel, args, results)
