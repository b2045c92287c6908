"""Inside a worker process: the group's errors, joining a process group the way ``torchrun``
does (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR=127.0.0.1``, ``MASTER_PORT``)
through a rendezvous store on the loopback address only, the ``WorkerContext`` a task gets as
its first argument, timestamps comparable across ranks (``Stamper``), how a task travels to a
spawned worker (by reference, or as source), and the worker's loop. ``pool`` is the parent's
side.
"""
from __future__ import annotations

import datetime
import functools
import importlib
import inspect
import math
import os
import socket
import textwrap
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

from ... import bench
from ... import device as _device
from ...errors import CourseError

MASTER_ADDR = "127.0.0.1"
# A collective that waits longer than this fails inside the worker (init_process_group's timeout).
COLLECTIVE_TIMEOUT_S = 60.0


# =========================================================================== errors

class DistributedError(CourseError, RuntimeError):
    """A problem with the chapter's worker processes; the group has been stopped."""


class WorkerDiedError(DistributedError):
    """A worker process exited or was killed while the group was in use."""

    def __init__(self, message: str, ranks: Sequence[int] = ()):
        super().__init__(message)
        self.ranks = tuple(ranks)


class WorkerError(DistributedError):
    """A task raised an exception inside a worker; ``worker_traceback`` holds its trace."""

    def __init__(self, message: str, rank: int, worker_traceback: str = "",
                 exc_type: str = ""):
        super().__init__(message)
        self.rank, self.worker_traceback, self.exc_type = rank, worker_traceback, exc_type


class CollectiveTimeoutError(WorkerError):
    """Ranks waited in a collective that other ranks never joined; ``ranks`` are the ones that
    did not join (``waiting`` the ones that gave up waiting)."""

    def __init__(self, message: str, rank: int, worker_traceback: str = "",
                 exc_type: str = "", ranks: Sequence[int] = (), waiting: Sequence[int] = ()):
        super().__init__(message, rank, worker_traceback, exc_type)
        self.ranks, self.waiting = tuple(ranks), tuple(waiting)


class WorkerTimeoutError(DistributedError):
    """Ranks did not answer within the timeout."""

    def __init__(self, message: str, ranks: Sequence[int] = ()):
        super().__init__(message)
        self.ranks = tuple(ranks)


# =========================================================================== inside a worker

def loopback_interface() -> str | None:
    """The loopback interface's name ("lo" on Linux, "lo0" on macOS), for gloo."""
    try:
        names = [name for _, name in socket.if_nameindex()]
    except (OSError, AttributeError):
        return None
    for name in ("lo", "lo0"):
        if name in names:
            return name
    return next((n for n in names if n.startswith("lo")), None)


@dataclass
class WorkerContext:
    """What a task knows about the worker it runs in (its first argument)."""

    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: str
    threads: int
    pid: int = 0

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def torch_device(self) -> torch.device:
        return torch.device(self.device)

    @property
    def device_name(self) -> str:
        """What the worker computes on, for titles and tables."""
        if self.is_cuda:
            return torch.cuda.get_device_name(self.torch_device)
        info = _device.describe()
        return (f"CPU: {info.cpu_model or 'unknown'} ({info.cpu_cores} cores), {self.threads} "
                f"thread{'s' if self.threads > 1 else ''} per worker")

    def sync(self) -> None:
        if self.is_cuda:
            torch.cuda.synchronize(self.torch_device)

    def barrier(self) -> None:
        if self.backend == "nccl":
            dist.barrier(device_ids=[self.torch_device.index])
        else:
            dist.barrier()

    def benchmark(self, fn: Callable, label: str, samples: int = 5, calls: int = 1,
                  **kwargs) -> bench.Timing:
        """``gc.bench.benchmark`` with a FIXED number of calls (2 warm-up + samples x calls).

        Every rank must make the same number of collective calls, so the harness's usual
        warm-up and sampling by time (which differ from rank to rank) are switched off.
        """
        t = bench.benchmark(fn, label=label, backend="cuda" if self.is_cuda else "cpu",
                            warmup_s=0.0, min_time_s=0.0, min_samples=samples,
                            max_samples=samples, batch=calls, **kwargs)
        t.meta.update(rank=self.rank, world_size=self.world_size, backend=self.backend)
        return t

    def info(self) -> dict:
        return {"rank": self.rank, "device": self.device, "device_name": self.device_name,
                "threads": self.threads, "pid": self.pid, "backend": self.backend}


class Stamper:
    """Timestamps comparable across ranks: perf_counter on the CPU, CUDA events on a GPU.

    On a GPU an event is recorded on the current stream, so it marks when the device got
    there, not when Python queued the work; ``resolve`` turns it into seconds after a
    synchronize.
    """

    def __init__(self, ctx: WorkerContext):
        self.cuda = ctx.is_cuda
        self.ctx = ctx
        self.start()

    def start(self) -> None:
        if self.cuda:
            self.ctx.sync()
            self._e0 = torch.cuda.Event(enable_timing=True)
            self._e0.record()
        self._t0 = time.perf_counter()

    def stamp(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def resolve(self, s) -> float:
        if self.cuda:
            return self._t0 + self._e0.elapsed_time(s) * 1e-3
        return float(s)


def _parent_watch(parent_pid: int) -> None:
    """Exit when the parent disappears (a killed notebook kernel), even inside a task."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent_pid:
            os._exit(3)


def _describe_exception(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()


def _is_collective_timeout(exc: BaseException) -> bool:
    """Whether a task failed because a collective (or a send/recv) waited longer than the
    group's timeout: gloo and NCCL raise a RuntimeError that says so."""
    if not isinstance(exc, RuntimeError):
        return False
    text = str(exc).lower()
    if "timed out" not in text and "timeout" not in text:
        return False
    # DDP's all-reduces fail inside autograd, outside torch.distributed's frames: the
    # backend's name in the text tells those apart from a task's own timeouts.
    in_dist = any(f"{os.sep}distributed{os.sep}" in frame.filename
                  for frame in traceback.extract_tb(exc.__traceback__))
    return (in_dist or "gloo" in text or "nccl" in text
            or isinstance(exc, getattr(dist, "DistError", ())))


def _error_message(rank: int, exc: BaseException) -> tuple:
    """What a worker sends when its task raised: the error, its trace and its kind."""
    kind = "timeout" if _is_collective_timeout(exc) else "error"
    return ("error", rank, _describe_exception(exc), traceback.format_exc(), kind)


def _loopback_store(rank: int, world_size: int, port: int, listener: socket.socket | None,
                    timeout_s: float) -> dist.TCPStore:
    """The rendezvous store on 127.0.0.1 only: rank 0 serves it on the socket the parent bound
    (``listener``), the other ranks connect to it."""
    timeout = datetime.timedelta(seconds=timeout_s)
    if rank == 0:
        # The store owns the descriptor from now on and closes it itself: detach, so that
        # Python does not close it a second time.
        return dist.TCPStore(MASTER_ADDR, port, world_size, is_master=True, timeout=timeout,
                             master_listen_fd=listener.detach())
    return dist.TCPStore(MASTER_ADDR, port, world_size, is_master=False, timeout=timeout)


def _init_worker(rank: int, world_size: int, port: int, backend: str, threads: int,
                 timeout_s: float, local_rank: int | None = None,
                 listener: socket.socket | None = None) -> WorkerContext:
    """Join the process group with torchrun's environment (RANK, MASTER_PORT, ...), through a
    rendezvous store that listens on the loopback address only."""
    local_rank = rank if local_rank is None else local_rank
    os.environ.update(MASTER_ADDR=MASTER_ADDR, MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world_size), LOCAL_RANK=str(local_rank),
                      LOCAL_WORLD_SIZE=str(world_size))
    if backend == "gloo" and "GLOO_SOCKET_IFNAME" not in os.environ:
        lo = loopback_interface()
        if lo:
            os.environ["GLOO_SOCKET_IFNAME"] = lo
    torch.set_num_threads(threads)
    store = _loopback_store(rank, world_size, port, listener, timeout_s)
    device = _join_group(backend, local_rank, timeout_s, store=store, rank=rank,
                         world_size=world_size)
    return WorkerContext(rank=rank, world_size=world_size, local_rank=local_rank,
                         backend=backend, device=device, threads=threads, pid=os.getpid())


def _join_group(backend: str, local_rank: int, timeout_s: float, store=None, rank: int = -1,
                world_size: int = -1) -> str:
    """Bind this process to its GPU (NCCL: one per local rank) and join the process group
    (through ``store`` when given, else torchrun's env:// rendezvous); returns the torch
    device string. Shared by our workers and by torchrun's."""
    device = "cpu"
    kwargs = {"backend": backend, "timeout": datetime.timedelta(seconds=timeout_s)}
    if store is not None:
        kwargs.update(store=store, rank=rank, world_size=world_size)
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
        kwargs["device_id"] = torch.device(device)
        try:  # the timing harness may use CuPy's events: put CuPy on this worker's GPU too
            import cupy  # optional (the gpu extra), and only GPU workers need it

            cupy.cuda.Device(local_rank).use()
        except Exception:  # no CuPy: the harness falls back to torch's events
            pass
    dist.init_process_group(**kwargs)
    return device


def _resolve_function(payload):
    """A function from ("ref", module, qualname) or ("source", name, source)."""
    kind, a, b = payload
    if kind == "ref":
        obj = importlib.import_module(a)
        for part in b.split("."):
            obj = getattr(obj, part)
        return obj
    namespace = {"torch": torch, "dist": dist, "nn": nn, "np": np, "math": math, "time": time,
                 "__name__": "__worker__"}
    exec(compile(b, f"<your function {a}>", "exec"), namespace)
    fn = namespace[a]
    given = [k for k in namespace if k not in ("__name__", "__builtins__", a)]
    names = ", ".join(given[:-1]) + " and " + given[-1]

    @functools.wraps(fn)
    def in_worker(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except NameError as exc:  # a notebook name the worker process does not have
            raise NameError(f"{exc}: your function runs inside the worker processes, where only "
                            f"{names} are defined; import or pass anything else inside the "
                            "function") from None

    return in_worker


def function_payload(fn: Callable):
    """How to send ``fn`` to a spawned worker: by reference when importable, else its source.

    A function defined in a notebook cell cannot be imported by a spawned process, so its
    source travels and is re-created there with ``torch``, ``dist``, ``nn``, ``np``,
    ``math`` and ``time`` in scope. It must not use other names from the notebook.
    """
    if not callable(fn):
        raise DistributedError(f"expected a function, got {type(fn).__name__}.")
    module = getattr(fn, "__module__", "") or ""
    qualname = getattr(fn, "__qualname__", "")
    if module.startswith("gpucourse.") and "<locals>" not in qualname:
        return ("ref", module, qualname)
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        raise DistributedError(
            f"cannot read the source of {getattr(fn, '__name__', fn)!r} to send it to the "
            "workers: define it with `def` in a notebook cell or a file.") from None
    if fn.__name__ == "<lambda>":
        raise DistributedError("send a function defined with `def`, not a lambda, to the workers.")
    return ("source", fn.__name__, source)


def _worker_main(rank: int, world_size: int, port: int, backend: str, threads: int,
                 timeout_s: float, conn, parent_pid: int,
                 listener: socket.socket | None = None) -> None:
    """Entry point of a spawned worker: join the group, then run tasks until told to stop."""
    threading.Thread(target=_parent_watch, args=(parent_pid,), daemon=True).start()
    try:
        ctx = _init_worker(rank, world_size, port, backend, threads, timeout_s,
                           listener=listener)
    except BaseException as exc:
        conn.send(_error_message(rank, exc))
        return
    conn.send(("ready", rank, ctx.info()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):  # the parent went away
            break
        if msg is None:
            break
        _, payload, args, kwargs = msg
        try:
            fn = _resolve_function(payload)
            result = fn(ctx, *args, **kwargs)
            conn.send(("ok", rank, result))
        except BaseException as exc:
            try:
                conn.send(_error_message(rank, exc))
            except Exception:
                break
    try:
        dist.destroy_process_group()
    except Exception:
        pass
    # Skip the interpreter's slow teardown (torch, gloo threads): nothing is left to flush.
    conn.close()
    os._exit(0)
