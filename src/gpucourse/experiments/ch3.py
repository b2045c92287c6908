"""Chapter 3 (parallelism): data, model and pipeline parallelism on torch.distributed.

Workers are real processes, started the way ``torchrun`` starts them: environment variables
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR=127.0.0.1`` and a free ``MASTER_PORT``,
the spawn start method, one process group per launch (NCCL when every worker has a GPU of
its own, gloo on the CPU otherwise). The rendezvous store listens on the loopback address
only, and so does gloo (unless ``GLOO_SOCKET_IFNAME`` names another interface). The group
stays up, so one launch serves several measurements: ``Workers.run(task, ...)`` sends
``task(ctx, ...)`` to every rank and returns the per-rank results.

Nothing hangs: each worker's process group has a timeout, and a watchdog in the parent
stops the whole group and raises ``WorkerDiedError`` naming the rank when a worker dies,
``WorkerError`` when a task raises, ``CollectiveTimeoutError`` (naming the ranks that never
joined) when a collective times out, and ``WorkerTimeoutError`` when ranks do not answer.

Under ``torchrun`` the same tasks run with ``python -m gpucourse.experiments.ch3 ddp``
(see ``main``), on one node or on several with ``--nnodes``.
"""
from __future__ import annotations

import ast
import atexit
import copy
import datetime
import functools
import html
import inspect
import math
import os
import signal
import socket
import sys
import textwrap
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import wait as _wait_for
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

from ..bench import format_bytes as _fmt_bytes, format_time as _fmt_s
from .. import bench, check, models
from .. import device as _device
from ..errors import CourseError, whole_number

MASTER_ADDR = "127.0.0.1"
# A collective that waits longer than this fails inside the worker (init_process_group's timeout).
COLLECTIVE_TIMEOUT_S = 60.0
# The parent gives up on a task after this, stops the group and raises.
TASK_TIMEOUT_S = 180.0
# Importing torch in a fresh process takes seconds on a busy small machine.
STARTUP_TIMEOUT_S = 120.0
# After one rank reports an error, wait this long for a dead peer (the usual root cause).
_GRACE_S = 0.5


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


# =========================================================================== launching

def _cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def gpu_count() -> int:
    """GPUs PyTorch can use here (0 in CPU mode, whatever the hardware)."""
    if not _device.is_cuda() or not _device.torch_cuda_works():
        return 0
    return torch.cuda.device_count()


def choose_backend(workers: int) -> str:
    """``"nccl"`` when every worker gets a GPU of its own, else ``"gloo"`` (CPU tensors)."""
    if 1 <= workers <= gpu_count() and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def max_workers() -> int:
    """The most workers worth starting: one per GPU, or one per CPU core without GPUs."""
    return gpu_count() or _cpu_count()


def max_gloo_workers() -> int:
    """The most CPU (gloo) workers the course starts: twice the cores, at least 4. More only
    queue for the cores, and every worker process holds its own copy of PyTorch in memory."""
    return max(4, 2 * _cpu_count())


def default_workers() -> int:
    """All GPUs when there are at least two; otherwise two CPU workers (one core each)."""
    gpus = gpu_count()
    return gpus if gpus >= 2 else 2


def threads_per_worker(workers: int, backend: str) -> int:
    """Intra-op threads for each worker: one on the CPU (a worker stands for one device, one
    core), a few for the host side of a GPU worker.

    Several threads per CPU worker would also be slower where the cores are shared: a
    thread team that loses a core to another process waits at every barrier.
    """
    if backend == "nccl":
        return max(1, min(4, _cpu_count() // max(1, workers)))
    return 1


def rendezvous_socket() -> socket.socket:
    """A listening TCP socket on the loopback address only, at a port the system picks.

    Rank 0 serves the rendezvous store on this very socket (``TCPStore(master_listen_fd=)``):
    the store would otherwise bind every interface, and a port picked here but bound later
    could be taken by another program in between.
    """
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((MASTER_ADDR, 0))
        s.listen(socket.SOMAXCONN)
    except OSError:
        s.close()
        raise
    return s


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
            import cupy

            cupy.cuda.Device(local_rank).use()
        except Exception:  # no CuPy: the harness falls back to torch's events
            pass
    dist.init_process_group(**kwargs)
    return device


def _resolve_function(payload):
    """A function from ("ref", module, qualname) or ("source", name, source)."""
    kind, a, b = payload
    if kind == "ref":
        import importlib

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


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "its connection to the notebook closed"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class Workers:
    """``n`` worker processes in one process group that stays up across measurements.

    >>> pool = Workers(2)                       # gloo on the CPU, NCCL with 2+ GPUs
    >>> pool.run(task, 1024)                    # task(ctx, 1024) on every rank → list
    >>> pool.close()
    """

    def __init__(self, n: int | None = None, backend: str | None = None,
                 collective_timeout_s: float = COLLECTIVE_TIMEOUT_S,
                 startup_timeout_s: float = STARTUP_TIMEOUT_S):
        n = default_workers() if n is None else n
        if isinstance(n, bool) or int(n) != n or n < 1:
            raise DistributedError(f"the number of workers must be a whole number >= 1, got {n!r}.")
        n = int(n)
        self.n = n
        self.backend = backend or choose_backend(n)
        if self.backend not in ("gloo", "nccl"):
            raise DistributedError(f"backend {self.backend!r} is not one of 'gloo' or 'nccl'.")
        if self.backend == "nccl" and n > max(gpu_count(), 0):
            raise DistributedError(
                f"NCCL needs one GPU per worker: {n} workers asked for, {gpu_count()} GPU(s) "
                "here; use fewer workers or backend='gloo'.")
        if self.backend == "gloo" and n > max_gloo_workers():
            raise DistributedError(
                f"{n} CPU workers on {_cpu_count()} core(s) would take turns on the cores and each "
                f"load its own PyTorch (a few hundred MB): use at most {max_gloo_workers()} "
                f"(ch3.max_workers() gives one per core).")
        self.threads = threads_per_worker(n, self.backend)
        self.collective_timeout_s = float(collective_timeout_s)
        self.closed = False
        self.infos: list[dict] = []
        ctx = torch.multiprocessing.get_context("spawn")
        listener = rendezvous_socket()
        self.port = listener.getsockname()[1]  # MASTER_PORT, on 127.0.0.1 only
        self._procs, self._conns = [], []
        try:
            for rank in range(n):
                parent_end, child_end = ctx.Pipe()
                p = ctx.Process(target=_worker_main, name=f"gpucourse-rank{rank}", daemon=True,
                                args=(rank, n, self.port, self.backend, self.threads,
                                      self.collective_timeout_s, child_end, os.getpid(),
                                      listener if rank == 0 else None))
                p.start()  # spawn hands rank 0 a duplicate of the listening socket
                child_end.close()
                self._procs.append(p)
                self._conns.append(parent_end)
        finally:
            listener.close()  # rank 0's copy keeps the port
        atexit.register(self.close)
        self.infos = self._gather("start-up", startup_timeout_s, expect="ready")

    # ------------------------------------------------------------------ state

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    @property
    def device_name(self) -> str:
        return self.infos[0]["device_name"] if self.infos else "?"

    def describe(self) -> str:
        """One deterministic line: how many workers, which backend, on what."""
        if self.backend == "nccl":
            where = f"one GPU each ({self.device_name})"
        else:
            where = (f"the CPU, {self.threads} core{'s' if self.threads > 1 else ''} each"
                     if gpu_count() == 0 else
                     f"the CPU, {self.threads} core{'s' if self.threads > 1 else ''} each "
                     f"(only {gpu_count()} GPU(s) for {self.n} workers, so no NCCL)")
        state = "stopped" if self.closed else "ready"
        return (f"{self.n} worker process{'es' if self.n > 1 else ''} in one "
                f"{self.backend} process group on {where}: {state}.")

    def __repr__(self) -> str:
        return self.describe()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ------------------------------------------------------------------ running

    def run(self, task: Callable, *args, timeout_s: float = TASK_TIMEOUT_S, **kwargs) -> list:
        """Run ``task(ctx, *args, **kwargs)`` on every rank; the per-rank results in rank order."""
        if self.closed:
            raise DistributedError(
                f"these workers were stopped; start new ones with ch3.workers({self.n}).")
        payload = function_payload(task)
        what = f"task {getattr(task, '__name__', task)!r}"
        for rank, conn in enumerate(self._conns):
            try:
                conn.send(("task", payload, args, kwargs))
            except (BrokenPipeError, OSError):
                self._died([rank], what)
        try:
            return self._gather(what, timeout_s, expect="ok")
        except KeyboardInterrupt:
            # The ranks are still inside the task: their late answers would be taken for the
            # next task's, so the group cannot be reused.
            self.abort()
            raise

    def _gather(self, what: str, timeout_s: float, expect: str) -> list:
        results: dict[int, Any] = {}
        errors: dict[int, tuple[str, str, str]] = {}  # rank: (error, traceback, kind)
        dead: list[int] = []
        deadline = time.monotonic() + timeout_s
        grace_until = None
        by_sentinel = {p.sentinel: r for r, p in enumerate(self._procs)}
        while True:
            pending = [r for r in range(self.n) if r not in results and r not in errors
                       and r not in dead]
            if dead:
                self._died(dead, what)
            now = time.monotonic()
            if not pending or (errors and now >= min(grace_until, deadline)):
                break
            remaining = deadline - now
            if remaining <= 0:
                self.abort()
                raise WorkerTimeoutError(
                    f"worker rank{'s' if len(pending) > 1 else ''} "
                    f"{', '.join(map(str, pending))} did not finish {what} within "
                    f"{timeout_s:.0f} s, so the group was stopped; start new workers with "
                    f"ch3.workers({self.n}) (and a smaller problem if it is just slow).",
                    ranks=pending)
            wait_s = min(remaining, 0.5 if grace_until is None else
                         max(0.0, grace_until - time.monotonic()))
            objects = [self._conns[r] for r in pending] + [self._procs[r].sentinel for r in pending]
            for obj in _wait_for(objects, timeout=wait_s):
                if isinstance(obj, int):
                    rank = by_sentinel[obj]
                    if rank not in results and rank not in errors and not self._conns[rank].poll():
                        dead.append(rank)
                    continue
                rank = self._conns.index(obj)
                try:
                    msg = obj.recv()
                except (EOFError, OSError):
                    self._procs[rank].join(1.0)
                    dead.append(rank)
                    continue
                if msg[0] == "error":
                    kind = msg[4] if expect == "ok" else "error"  # start-up has no collectives
                    errors[rank] = (msg[2], msg[3], kind)
                    # The other ranks inside the same collective time out too, up to one
                    # collective timeout later (they may have entered it later): wait for
                    # them, so that the ranks still missing are those that never joined it.
                    # An error of another kind is the cause: a short grace for a dead peer.
                    wait = _GRACE_S + (self.collective_timeout_s if kind == "timeout" else 0.0)
                    grace_until = min(grace_until or math.inf, time.monotonic() + wait)
                elif msg[0] == expect:
                    results[rank] = msg[2]
        if errors and all(kind == "timeout" for _, _, kind in errors.values()):
            self.abort()
            raise self._timeout_error(what, errors, sorted(results), pending)
        if errors:
            # A task's own error comes first: the timeouts of the others follow from it.
            rank = min((r for r, (_, _, kind) in errors.items() if kind != "timeout"))
            text, tb, _ = errors[rank]
            self.abort()
            first = rank if len(errors) == 1 else f"{rank} (and {len(errors) - 1} more)"
            raise WorkerError(
                f"worker rank {first} failed in {what} with {text}; the group was stopped "
                f"(start new workers with ch3.workers({self.n})).",
                rank=rank, worker_traceback=tb, exc_type=text.split(":")[0])
        return [results[r] for r in range(self.n)]

    def _timeout_error(self, what: str, errors: dict, finished: list[int],
                       busy: list[int]) -> CollectiveTimeoutError:
        """The error for ranks that timed out in a collective, naming the ranks that never
        joined it: those that finished the task, and those still busy in it."""
        waiting = sorted(errors)
        text, tb, _ = errors[waiting[0]]

        def ranks(rs):
            return f"rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))}"

        def who(rs):  # the ranks' numbers once: "it"/"they" when they are named already
            return ranks(rs) if finished and busy else ("it" if len(rs) == 1 else "they")

        missing = []
        if finished:
            missing.append(f"{who(finished)} finished the task without calling it")
        if busy:
            missing.append(f"{who(busy)} {'was' if len(busy) == 1 else 'were'} still busy "
                           "elsewhere in the task")
        if missing:
            absent = ranks(sorted(finished + busy))
            what_happened = (f"waited {self.collective_timeout_s:g} s in a collective of {what} "
                             f"that {absent} never joined ({' and '.join(missing)})")
        else:
            what_happened = (f"waited {self.collective_timeout_s:g} s in collectives of {what} "
                             "and every rank timed out, so they called different collectives "
                             "or the same ones in a different order")
        slow = (f", or give a slow rank more time with ch3.Workers({self.n}, "
                "collective_timeout_s=...)" if busy else "")
        message = (f"worker {ranks(waiting)} {what_happened}; make every rank call the same "
                   "collectives in the same order (look for one inside an `if` on the rank)"
                   f"{slow}, then start new workers with ch3.workers({self.n}).")
        return CollectiveTimeoutError(message, rank=waiting[0], worker_traceback=tb,
                                      exc_type=text.split(":")[0],
                                      ranks=sorted(finished + busy), waiting=waiting)

    def _died(self, ranks: list[int], what: str):
        ranks = sorted(set(ranks))
        for r in ranks:  # the pipe closes a moment before the process is reaped: wait for its code
            self._procs[r].join(timeout=2.0)
        reasons = ", ".join(f"rank {r} ({_exit_reason(self._procs[r].exitcode)})" for r in ranks)
        self.abort()
        raise WorkerDiedError(
            f"worker {reasons} died during {what}; the other workers were stopped so nothing "
            f"hangs. Start new workers with ch3.workers({self.n}).", ranks=ranks)

    # ------------------------------------------------------------------ stopping

    def abort(self) -> None:
        """Kill every worker at once (used when one failed: the group cannot be trusted)."""
        for p in self._procs:
            if p.is_alive():
                p.kill()
        for p in self._procs:
            p.join(5.0)
        self._close_conns()

    def close(self, timeout_s: float = 10.0) -> None:
        """Ask the workers to leave the group and exit; kill any that do not."""
        if self.closed:
            return
        self.closed = True
        for conn in self._conns:
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        deadline = time.monotonic() + timeout_s
        for p in self._procs:
            p.join(max(0.0, deadline - time.monotonic()))
        self.abort()
        try:
            atexit.unregister(self.close)
        except Exception:
            pass

    def _close_conns(self) -> None:
        self.closed = True
        for conn in self._conns:
            try:
                conn.close()
            except OSError:
                pass


_SHARED: Workers | None = None


def workers(n: int | None = None, backend: str | None = None) -> Workers:
    """The notebook's shared group of ``n`` workers: reused while it is alive, else started.

    Asking for another size stops the current group first, so at most one is running.
    """
    global _SHARED
    n = default_workers() if n is None else n
    want = backend or choose_backend(int(n))
    s = _SHARED
    if s is not None and not s.closed and s.n == n and s.backend == want and \
            all(p.is_alive() for p in s._procs):
        return s
    if s is not None:
        s.close()
    _SHARED = Workers(n, backend=want)
    return _SHARED


def close_workers() -> None:
    """Stop the shared workers (the last cell of the notebook)."""
    global _SHARED
    if _SHARED is not None:
        _SHARED.close()
        _SHARED = None


def _pool(pool: Workers | int | None) -> Workers:
    """A live group: ``pool`` itself, or the shared group (restarted if ``pool`` was stopped)."""
    if isinstance(pool, Workers):
        if not pool.closed:
            return pool
        return workers(pool.n, pool.backend)
    return workers(pool)


def hello(pool: Workers | int | None = None) -> list[dict]:
    """Every rank reports its pid and device, and all-reduces its rank number (0+1+...)."""
    return _pool(pool).run(_task_hello)


# =========================================================================== models and data

# The data-parallel model: 16 square layers of 512 (4.2 M parameters, 16.8 MB of fp32
# gradients in 1 MiB weight tensors, so the bucket size decides how many all-reduces run).
DDP_WIDTH, DDP_DEPTH = 512, 16
# The model split across devices: 8 layers of 768 (4.7 M parameters), batches of 250 rows.
PIPE_WIDTH, PIPE_DEPTH, PIPE_ROWS = 768, 8, 250
# The small model of the exact-gradient checks.
CHECK_WIDTH, CHECK_DEPTH = 96, 3


def mlp_blocks(width: int, depth: int, seed: int = 0) -> list[nn.Module]:
    """``depth`` blocks of Linear(width, width) (+ ReLU except the last), same weights for a seed."""
    torch.manual_seed(seed)
    blocks: list[nn.Module] = []
    for i in range(depth):
        lin = nn.Linear(width, width)
        blocks.append(lin if i == depth - 1 else nn.Sequential(lin, nn.ReLU()))
    return blocks


def mlp(width: int, depth: int, seed: int = 0) -> nn.Sequential:
    """The chapter's model: a square MLP, identical on every rank for the same seed."""
    return nn.Sequential(*mlp_blocks(width, depth, seed))


def batch(rows: int, width: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random non-uniform inputs (mixed magnitudes) and targets, seeded."""
    x = torch.from_numpy(check.random_array((rows, width), np.float32, seed=seed))
    y = torch.from_numpy(check.random_array((rows, width), np.float32, seed=seed + 7919,
                                            kind="uniform"))
    return x, y


def loss_sum(out: torch.Tensor, target: torch.Tensor, total: int) -> torch.Tensor:
    """Squared error summed over ``out`` and divided by ``total`` elements of the whole batch.

    Summing per micro-batch and dividing by the FULL batch's size makes micro-batch losses
    add up to the full batch's mean, whatever the micro-batch sizes.
    """
    return ((out - target) ** 2).sum() / total


def split_stages(depth: int, stages: int) -> list[range]:
    """Contiguous block ranges, one per stage, as equal as possible."""
    if stages > depth:
        raise DistributedError(f"cannot split {depth} layers into {stages} stages: use at most "
                               f"{depth} workers for the pipeline.")
    bounds = np.linspace(0, depth, stages + 1).round().astype(int)
    return [range(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def tensor_bytes(tensors) -> int:
    return int(sum(t.numel() * t.element_size() for t in tensors if t is not None))


def grads_numpy(module: nn.Module) -> list[np.ndarray]:
    return [p.grad.detach().cpu().double().numpy().copy() for p in module.parameters()]


def transformer_grad_shapes(d_model: int = 128, layers: int = 8) -> list[tuple[int, ...]]:
    """Gradient shapes of a small transformer: 12 tensors per block, half of them tiny."""
    d = d_model
    block = [(3 * d, d), (3 * d,), (d, d), (d,), (d,), (d,),
             (4 * d, d), (4 * d,), (d, 4 * d), (d,), (d,), (d,)]
    return [s for _ in range(layers) for s in block]


# =========================================================================== rounding-error bounds
#
# Every float check of this chapter compares with a bound from error analysis (Higham,
# "Accuracy and Stability of Numerical Algorithms", 2002, ch. 2-3) that holds for any
# summation order, blocking, core count or split of the rows over ranks and micro-batches:
# with unit roundoff u (models.U32 = 2^-24, models.U64 = 2^-53), k roundings in a row err by
# at most gamma_k = k*u / (1 - k*u) relative (models.gamma), and a sum of n terms computed in
# any order by at most gamma_(n-1) * sum|terms| (an FMA only rounds less).

U32, U64 = models.U32, models.U64


def _check_all_reduce(got: np.ndarray, terms: Sequence[np.ndarray], what: str) -> float:
    """A float32 all-reduce (sum) of the ranks' data against the float64 sum of the data each
    rank's float32 values were rounded from; the largest error as a fraction of its bound.

    Bound, element by element: rounding the inputs to float32 moves the sum by at most
    u*sum|x|, summing p float32 terms in any order (ring, tree, buckets) by gamma_(p-1)*sum|x|,
    and the float64 reference is 2^29 times closer still: (p + 1)*u*sum|x| covers all three.
    """
    terms = np.asarray(terms, dtype=np.float64)
    want, size = terms.sum(axis=0), np.abs(terms).sum(axis=0)
    bound = (len(terms) + 1) * U32 * size
    err = np.abs(np.asarray(got, dtype=np.float64) - want)
    bad = ~(err <= bound)  # NaN fails too
    if bad.any():
        i = np.unravel_index(int(np.argmax(np.where(bad, err - bound, -np.inf))), err.shape)
        raise AssertionError(
            f"{what}: element {tuple(map(int, i))} is {float(np.asarray(got)[i]):.9g} where the "
            f"ranks' data sum to {want[i]:.9g}, more than float32 rounding of "
            f"{len(terms)} terms allows ({bound[i]:.3g}); the all-reduce did not sum every rank.")
    return float(np.max(err / np.where(bound > 0, bound, np.inf), initial=0.0))


def _linear(block: nn.Module) -> nn.Linear:
    return block if isinstance(block, nn.Linear) else block[0]


def mlp_grad_bound(blocks: Sequence[nn.Module], x: torch.Tensor, y: torch.Tensor,
                   loss_scale: float, unit: float = U64, roundings: int = 8) -> list[torch.Tensor]:
    """Element-wise bounds on the rounding error of every gradient (``parameters()`` order) of
    ``loss_scale * sum((mlp(x) - y)**2)`` over the blocks of ``mlp_blocks``, computed in
    arithmetic with unit roundoff ``unit`` in any order, on any split of the rows into shards
    or micro-batches whose gradients are then added (all one sum over rows in another order).

    Each quantity q gets E (a bound on |computed - exact|) and M = |q| + 2E (a bound on both;
    q is this float64 pass). Forward: a layer with k inputs errs by gamma_(k+1)(M_a |W|^T + |b|)
    + E_a |W|^T, and ReLU passes errors on unchanged. Backward: a sum over k outputs or n rows
    errs by gamma times the sum of magnitudes, plus the propagated E's; where a pre-activation
    lies within 2E of 0 the two masks may differ, and the whole incoming gradient is error.
    ``roundings`` covers scalar steps (the loss's 2 * scale, DDP's division by the ranks).
    A worst case: useful in float64 for small models, far too wide in float32.
    """
    def mag(q, e):
        return q.abs() + 2 * e

    a, ea = x.double(), torch.zeros_like(x, dtype=torch.float64)
    saved = []
    for block in blocks:
        lin = _linear(block)
        w, b = lin.weight.detach().double(), lin.bias.detach().double()
        z = a @ w.T + b
        ez = (models.gamma(w.shape[1] + 1, unit) * (mag(a, ea) @ w.abs().T + b.abs())
              + ea @ w.abs().T)
        saved.append((a, ea, z, ez, w))
        a, ea = (z if isinstance(block, nn.Linear) else torch.relu(z)), ez
    diff = a - y.double()
    ediff = ea + unit * mag(diff, ea)
    d = 2 * loss_scale * diff
    ed = 2 * loss_scale * (ediff + models.gamma(roundings, unit) * mag(diff, ediff))
    rows = x.shape[0]
    out: list[torch.Tensor] = []
    for i in reversed(range(len(blocks))):
        a, ea, _, _, w = saved[i]
        g_rows = models.gamma(rows + roundings, unit)  # the sum over rows, in any grouping
        md = mag(d, ed)
        ew = g_rows * md.T @ mag(a, ea) + ed.T @ mag(a, ea) + (d.abs() + ed).T @ ea
        eb = g_rows * md.sum(0) + ed.sum(0)
        out[:0] = [ew, eb]
        if i:
            da = d @ w
            eda = models.gamma(w.shape[0], unit) * md @ w.abs() + ed @ w.abs()
            z, ez = saved[i - 1][2], saved[i - 1][3]
            mask = (z > 0).double()
            unsure = z.abs() <= 2 * ez
            d = da * mask
            ed = torch.where(unsure, mag(da, eda), eda * mask)
    return out


def _check_grads(got: Sequence[np.ndarray], want: Sequence[np.ndarray],
                 bound: Sequence[np.ndarray], names: Sequence[str], what: str,
                 why: str) -> float:
    """Gradients of a float64 run against a float64 reference of the same gradients: each
    element within twice ``bound`` (from ``mlp_grad_bound``: both runs are within it of the
    exact gradient), widened by 2^-20 for the rounding in the bound itself; the largest
    error as a fraction of the largest reference value. ``why``: what a failure means."""
    worst = 0.0
    for g, w, b, name in zip(got, want, bound, names):
        g, w = np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64)
        tol = 2 * np.asarray(b) * (1 + 2.0**-20)
        err = np.abs(g - w)
        bad = ~(err <= tol)  # NaN fails too
        if bad.any():
            i = np.unravel_index(int(np.argmax(np.where(bad, err - tol, -np.inf))), err.shape)
            raise AssertionError(
                f"{what}: {name} differs from the full-batch gradient at {tuple(map(int, i))} "
                f"({float(g[i]):.9g} against {float(w[i]):.9g}), more than float64 rounding "
                f"allows ({float(tol[i]):.3g}); {why}.")
        worst = max(worst, float(err.max(initial=0.0) / (np.abs(w).max(initial=0.0) or 1.0)))
    return worst


# =========================================================================== tasks (run in workers)

def _task_hello(ctx: WorkerContext) -> dict:
    """Each rank's view of the group, and an all-reduce of the ranks (sum 0..n-1)."""
    t = torch.tensor([float(ctx.rank)], device=ctx.torch_device)
    dist.all_reduce(t)
    return {**ctx.info(), "sum_of_ranks": float(t.item())}


def _task_sleep_collectives(ctx: WorkerContext, seconds: float) -> int:
    """All-reduces in a loop for ``seconds`` (used to test that a killed peer does not hang)."""
    t_end = time.monotonic() + seconds
    x = torch.ones(1024, device=ctx.torch_device)
    n = 0
    while time.monotonic() < t_end:
        dist.all_reduce(x)
        x.fill_(1.0)
        n += 1
    return n


def _task_skip_collective(ctx: WorkerContext, rank: int) -> int:
    """Every rank but ``rank`` enters an all-reduce: they must time out, not hang."""
    if ctx.rank != rank:
        t = torch.ones(1, device=ctx.torch_device)
        dist.all_reduce(t)
    return ctx.rank


def _task_ddp_grads(ctx: WorkerContext, width: int, depth: int, per_worker: int,
                    seed: int) -> dict:
    """DDP gradients of each rank's shard, and (rank 0) the single-process full-batch ones
    with their rounding-error bound; all in float64 (see ``ddp_check``)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    dev = ctx.torch_device
    model = mlp(width, depth, seed).to(device=dev, dtype=torch.float64)
    ref = copy.deepcopy(model)
    rows = per_worker * ctx.world_size
    x, y = (t.to(device=dev, dtype=torch.float64) for t in batch(rows, width, seed))
    ddp = DDP(model, device_ids=[dev.index] if ctx.is_cuda else None)
    shard = slice(ctx.rank * per_worker, (ctx.rank + 1) * per_worker)
    # Each rank's loss is the mean over its shard; DDP averages the ranks' gradients.
    loss = nn.functional.mse_loss(ddp(x[shard]), y[shard])
    loss.backward()
    out = {"rank": ctx.rank, "ddp": grads_numpy(model),
           "names": [n for n, _ in model.named_parameters()]}
    if ctx.rank == 0:
        nn.functional.mse_loss(ref(x), y).backward()
        out["reference"] = grads_numpy(ref)
        # The mean over the whole batch's elements: DDP's mean of the shards' means.
        bound = mlp_grad_bound(list(ref), x, y, 1.0 / y.numel(), U64)
        out["bound"] = [b.cpu().numpy() for b in bound]
    return out


def _task_manual_average(ctx: WorkerContext, payload, width: int, depth: int,
                         per_worker: int, seed: int) -> dict:
    """A learner's ``average_gradients(model, world_size)`` after a plain backward on each shard."""
    fn = _resolve_function(payload)
    dev = ctx.torch_device
    model = mlp(width, depth, seed).to(dev)
    ref = copy.deepcopy(model).double()
    x, y = batch(per_worker * ctx.world_size, width, seed)
    shard = slice(ctx.rank * per_worker, (ctx.rank + 1) * per_worker)
    nn.functional.mse_loss(model(x[shard].to(dev)), y[shard].to(dev)).backward()
    local = grads_numpy(model)
    fn(model, ctx.world_size)
    out = {"rank": ctx.rank, "manual": grads_numpy(model), "local": local,
           "names": [n for n, _ in model.named_parameters()], "world_size": ctx.world_size}
    nn.functional.mse_loss(ref(x.double()), y.double()).backward()
    out["reference"] = grads_numpy(ref)
    return out


def _task_ddp_throughput(ctx: WorkerContext, width: int, depth: int, per_worker: int,
                         samples: int, seed: int) -> dict:
    """Training steps per second: rank 0 alone (the 1-worker baseline), then DDP on all ranks."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    dev = ctx.torch_device
    x, y = batch(per_worker, width, seed + ctx.rank)  # each worker its own shard of data
    x, y = x.to(dev), y.to(dev)

    def stepper(model):
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)

        def step():
            opt.zero_grad(set_to_none=True)
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        return step

    single = None
    ctx.barrier()
    if ctx.rank == 0:  # the others wait at the barrier below: one worker, one device
        single = ctx.benchmark(stepper(mlp(width, depth, seed).to(dev)), label="1 worker",
                               samples=samples, size=per_worker)
    ctx.barrier()
    ddp = DDP(mlp(width, depth, seed).to(dev), device_ids=[dev.index] if ctx.is_cuda else None)
    multi = ctx.benchmark(stepper(ddp), label=f"{ctx.world_size} workers (DDP)",
                          samples=samples, size=per_worker * ctx.world_size)
    params = sum(p.numel() for p in ddp.parameters())
    return {"single": single, "ddp": multi, "params": params}


def _ring_check(ctx: WorkerContext, sizes=(1, 7, 4099)) -> float:
    """All-reduce of per-rank random data equals the sum computed locally, within float32's
    rounding bound (``_check_all_reduce``); the worst error as a fraction of that bound."""
    worst = 0.0
    for n in sizes:
        mine = check.random_array(n, np.float32, seed=1000 * n + ctx.rank)
        t = torch.from_numpy(mine).to(ctx.torch_device)
        dist.all_reduce(t)
        terms = [check.random_array(n, np.float64, seed=1000 * n + r)
                 for r in range(ctx.world_size)]
        worst = max(worst, _check_all_reduce(t.cpu().double().numpy(), terms,
                                             f"all_reduce of {n} floats"))
    return worst


def _calls_for(nbytes: int, target_bytes: float) -> int:
    return int(max(1, min(8, target_bytes // max(nbytes, 1))))


def _task_allreduce_sweep(ctx: WorkerContext, sizes: list[int], samples: int,
                          target_bytes: float) -> dict:
    """Point-to-point ping-pong (ranks 0, 1) and all-reduce time for each message size."""
    dev = ctx.torch_device
    worst = _ring_check(ctx)
    pingpong, allreduce = [], []
    for nbytes in sizes:
        n = max(1, nbytes // 4)
        calls = _calls_for(nbytes, target_bytes)
        buf = torch.from_numpy(check.random_array(n, np.float32, seed=ctx.rank)).to(dev)
        if ctx.world_size >= 2 and ctx.rank in (0, 1):
            peer = 1 - ctx.rank

            def ping():  # rank 0 sends then receives, rank 1 the reverse: one round trip
                if ctx.rank == 0:
                    dist.send(buf, peer)
                    dist.recv(buf, peer)
                else:
                    dist.recv(buf, peer)
                    dist.send(buf, peer)
            pingpong.append(ctx.benchmark(ping, label=f"ping-pong {nbytes} B", samples=samples,
                                          calls=calls, size=nbytes, bytes=2 * 4 * n))
        ctx.barrier()
        # Repeated sums grow the values; that changes nothing the network moves.
        allreduce.append(ctx.benchmark(lambda: dist.all_reduce(buf), label=f"all-reduce {nbytes} B",
                                       samples=samples, calls=calls, size=nbytes, bytes=4 * n))
    return {"pingpong": pingpong, "allreduce": allreduce, "check_error": worst,
            "device_name": ctx.device_name}


def bucket_indices(nbytes: Sequence[int], cap_bytes: float) -> list[list[int]]:
    """Greedy buckets of tensor indices in REVERSE order (the order backward produces them).

    A bucket closes when adding the next tensor would pass ``cap_bytes``; a tensor larger
    than the cap gets a bucket of its own. ``cap_bytes=0`` gives one tensor per bucket.
    """
    buckets: list[list[int]] = []
    cur: list[int] = []
    size = 0
    for i in reversed(range(len(nbytes))):
        if cur and size + nbytes[i] > cap_bytes:
            buckets.append(cur)
            cur, size = [], 0
        cur.append(i)
        size += nbytes[i]
    if cur:
        buckets.append(cur)
    return buckets


def _allreduce_buckets(grads: list[torch.Tensor], buckets: list[list[int]]) -> None:
    for idx in buckets:
        if len(idx) == 1:
            dist.all_reduce(grads[idx[0]])
            continue
        flat = torch.cat([grads[i].reshape(-1) for i in idx])
        dist.all_reduce(flat)
        for i, part in zip(idx, torch.split(flat, [grads[i].numel() for i in idx])):
            grads[i].copy_(part.view_as(grads[i]))


def _task_bucketing(ctx: WorkerContext, shapes: list[tuple], caps: list[float], samples: int,
                    seed: int) -> dict:
    """One all-reduce per gradient tensor against buckets of several sizes: checked, then timed."""
    dev = ctx.torch_device
    mine = [check.random_array(s, np.float32, seed=seed + 7 * i + 100_003 * ctx.rank)
            for i, s in enumerate(shapes)]
    terms = [[check.random_array(s, np.float64, seed=seed + 7 * i + 100_003 * r)
              for r in range(ctx.world_size)] for i, s in enumerate(shapes)]
    nbytes = [m.nbytes for m in mine]
    out = {"timings": [], "buckets": [], "caps": list(caps), "tensors": len(shapes),
           "total_bytes": int(sum(nbytes)), "bucket_bytes": []}
    for cap in caps:
        buckets = bucket_indices(nbytes, cap)
        grads = [torch.from_numpy(m.copy()).to(dev) for m in mine]
        _allreduce_buckets(grads, buckets)  # check before timing
        for i, (g, t) in enumerate(zip(grads, terms)):  # float32 sums of the ranks' tensors
            _check_all_reduce(g.cpu().double().numpy(), t,
                              f"gradient {i} after bucketed all-reduce (cap {cap:g} B)")
        label = ("one all-reduce per tensor" if cap == 0 else
                 f"buckets of {_fmt_bytes(cap)}")
        out["timings"].append(ctx.benchmark(lambda: _allreduce_buckets(grads, buckets),
                                            label=label, samples=samples,
                                            size=len(buckets), bytes=sum(nbytes)))
        out["buckets"].append(len(buckets))
        out["bucket_bytes"].append([int(sum(nbytes[i] for i in b)) for b in buckets])
    return out


def _task_ddp_timeline(ctx: WorkerContext, width: int, depth: int, per_worker: int,
                       bucket_cap_mb: float, samples: int, seed: int) -> dict:
    """One instrumented DDP step: forward, backward, and each bucket's all-reduce on the clock."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    dev = ctx.torch_device
    x, y = batch(per_worker, width, seed + ctx.rank)
    x, y = x.to(dev), y.to(dev)
    ddp = DDP(mlp(width, depth, seed).to(dev), bucket_cap_mb=bucket_cap_mb,
              device_ids=[dev.index] if ctx.is_cuda else None)
    st = Stamper(ctx)
    records: list = []
    recording = [False]
    world = ctx.world_size

    def hook(state, bucket):  # the default hook's work (divide, then sum), with timestamps
        ready = st.stamp()
        buf = bucket.buffer()
        buf.div_(world)
        fut = dist.all_reduce(buf, async_op=True).get_future()
        nbytes = buf.numel() * buf.element_size()

        def done(f):
            if recording[0]:
                records.append((bucket.index(), ready, st.stamp(), nbytes))
            return f.value()[0]
        return fut.then(done)

    ddp.register_comm_hook(None, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()

    timing = ctx.benchmark(step, label=f"DDP step, {world} workers, buckets {bucket_cap_mb:g} MiB",
                           samples=samples, size=per_worker * world)
    ctx.barrier()
    st.start()
    recording[0] = True
    opt.zero_grad(set_to_none=True)
    f0 = st.stamp()
    loss = nn.functional.mse_loss(ddp(x), y)
    f1 = st.stamp()
    loss.backward()  # returns once every bucket's all-reduce has finished
    b1 = st.stamp()
    opt.step()
    s1 = st.stamp()
    recording[0] = False
    ctx.sync()
    r = st.resolve
    buckets = sorted(((i, r(a), r(b), n) for i, a, b, n in records), key=lambda t: t[1])
    last_ready = max((a for _, a, _, _ in buckets), default=r(b1))
    events = [("forward", r(f0), r(f1)), ("backward", r(f1), last_ready)]
    events += [(f"all-reduce bucket {i}", a, b) for i, a, b, _ in buckets]
    events += [("wait + optimizer", last_ready, r(s1))] if r(s1) > last_ready else []
    return {"rank": ctx.rank, "events": events, "timing": timing,
            "bucket_bytes": [n for *_, n in buckets], "step_s": r(s1) - r(f0),
            "grad_bytes": tensor_bytes(ddp.parameters())}


def _pipeline_step(ctx: WorkerContext, stage: nn.Module, x, y, m: int, width: int,
                   st: Stamper | None = None) -> list:
    """One GPipe step of this rank's stage: all micro-batch forwards, then all backwards.

    Activations go to the next rank and their gradients come back with point-to-point
    send/recv; sends are asynchronous so a stage can start the next micro-batch at once.
    """
    s, p, dev = ctx.rank, ctx.world_size, ctx.torch_device
    rows = [len(c) for c in torch.tensor_split(torch.empty(len(x)), m)]
    xs, ys = torch.tensor_split(x, m), torch.tensor_split(y, m)
    total = x.numel()
    events, sends, saved = [], [], []
    for j in range(m):
        if s == 0:
            inp = xs[j]
        else:
            inp = torch.empty(rows[j], width, device=dev, dtype=x.dtype)
            dist.recv(inp, s - 1)
            inp.requires_grad_()
        t0 = st.stamp() if st else None
        out = stage(inp)
        if s == p - 1:
            out = loss_sum(out, ys[j], total)
        if st:
            events.append((j, "forward", t0, st.stamp()))
        if s < p - 1:
            sends.append(dist.isend(out.detach(), s + 1))
        saved.append((inp, out))
    for j in reversed(range(m)):
        inp, out = saved[j]
        if s == p - 1:
            t0 = st.stamp() if st else None
            out.backward()
        else:
            grad = torch.empty_like(out)
            dist.recv(grad, s + 1)
            t0 = st.stamp() if st else None
            out.backward(grad)
        if st:
            events.append((j, "backward", t0, st.stamp()))
        if s > 0:
            sends.append(dist.isend(inp.grad, s - 1))
    for w in sends:
        w.wait()
    return events


def _whole_batch_grads(blocks, x, y, dtype, layers) -> list[np.ndarray]:
    """The gradients of ``layers`` when a copy of the whole model, in ``dtype``, runs one
    backward pass on the whole batch."""
    whole = nn.Sequential(*copy.deepcopy(blocks)).to(device=x.device, dtype=dtype)
    loss_sum(whole(x.to(dtype)), y.to(dtype), x.numel()).backward()
    return [g for i in layers for g in grads_numpy(whole[i])]


def _check_pipeline(ctx: WorkerContext, depth: int, rows: int, m: int, seed: int) -> None:
    """The pipeline step on a float64 copy of the split, with the chapter's rows and ``m``
    micro-batches but narrow layers (CHECK_WIDTH), against the whole model on the whole batch.

    The bound is ``mlp_grad_bound``'s: micro-batches only regroup the sum over rows. Why not
    the timed model in float32: a worst-case float32 bound through 8 layers of 768 is wider
    than the gradients themselves, while a lost micro-batch or a wrong loss scale moves them
    by 1/m or more, far outside float64's bound on this model.
    """
    dev, width = ctx.torch_device, CHECK_WIDTH
    blocks = [b.to(device=dev, dtype=torch.float64) for b in mlp_blocks(width, depth, seed)]
    mine = split_stages(depth, ctx.world_size)[ctx.rank]
    x, y = (t.to(device=dev, dtype=torch.float64) for t in batch(rows, width, seed))
    ref = _whole_batch_grads(blocks, x, y, torch.float64, mine)
    bound = mlp_grad_bound(blocks, x, y, 1.0 / x.numel(), U64)
    bound = [bound[2 * i + k].cpu().numpy() for i in mine for k in (0, 1)]
    stage = nn.Sequential(*[copy.deepcopy(blocks[i]) for i in mine])
    _pipeline_step(ctx, stage, x, y, m, width)
    names = [f"layer {i} {'weight' if k == 0 else 'bias'}" for i in mine for k in (0, 1)]
    _check_grads(grads_numpy(stage), ref, bound, names,
                 f"stage {ctx.rank} with {m} micro-batch{'es' if m > 1 else ''}",
                 "the micro-batches do not add up to the whole batch")


def _task_pipeline(ctx: WorkerContext, width: int, depth: int, rows: int,
                   microbatches: list[int], samples: int, seed: int) -> dict:
    """The model split over the ranks (one stage each), run with 1 and m micro-batches.

    Checks the split first (``_check_pipeline``: every stage's gradients against the whole
    model on the whole batch), then times a step and records one step's timeline for each
    micro-batch count.
    """
    dev = ctx.torch_device
    blocks = mlp_blocks(width, depth, seed)
    mine = split_stages(depth, ctx.world_size)[ctx.rank]
    stage = nn.Sequential(*[blocks[i] for i in mine]).to(dev)
    x, y = batch(rows, width, seed)
    x, y = x.to(dev), y.to(dev)
    whole_bytes = sum(tensor_bytes(b.parameters()) for b in blocks)  # float32
    out = {"rank": ctx.rank, "layers": [mine.start, mine.stop], "runs": [],
           "stage_param_bytes": tensor_bytes(stage.parameters()),
           "whole_param_bytes": whole_bytes,
           "device_name": ctx.device_name}
    for m in microbatches:
        _check_pipeline(ctx, depth, rows, m, seed)
        stage.zero_grad(set_to_none=True)
        peak = None
        if ctx.is_cuda:
            torch.cuda.reset_peak_memory_stats(dev)
        timing = ctx.benchmark(lambda: (stage.zero_grad(set_to_none=True),
                                        _pipeline_step(ctx, stage, x, y, m, width)),
                               label=f"{m} micro-batch{'es' if m > 1 else ''}",
                               samples=samples, size=m)
        if ctx.is_cuda:
            peak = int(torch.cuda.max_memory_allocated(dev))
        ctx.barrier()
        st = Stamper(ctx)
        stage.zero_grad(set_to_none=True)
        ev = _pipeline_step(ctx, stage, x, y, m, width, st)
        ctx.sync()
        out["runs"].append({"microbatches": m, "timing": timing, "peak_bytes": peak,
                            "events": [(j, ph, st.resolve(a), st.resolve(b)) for j, ph, a, b in ev],
                            "grad_bytes": tensor_bytes(g for g in (p.grad for p in stage.parameters()))})
    return out


# =========================================================================== results





def _table(head: Sequence[str], rows: Sequence[Sequence[str]], note: str = "") -> str:
    h = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>"
                   for r in rows)
    foot = f"<div style='color:#666;font-size:90%'>{html.escape(note)}</div>" if note else ""
    return f"<table><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>{foot}"


@dataclass
class GradientCheck:
    """Gradients of a parallel run against the single-process full-batch gradients."""

    what: str
    workers: int
    tensors: int
    max_rel_error: float

    def __str__(self) -> str:
        return (f"{self.what} on {self.workers} workers match the single-process full-batch "
                f"gradients ({self.tensors} tensors in float64, every element within its "
                "rounding-error bound).")

    __repr__ = __str__


def ddp_check(pool: Workers | int | None = None, per_worker: int = 37, seed: int = 0) -> GradientCheck:
    """DDP's averaged gradients equal the single-process gradients of the full batch.

    Each of the ``n`` workers takes an equal shard of ``per_worker`` rows (an awkward size)
    of one seeded batch; rank 0 also runs the whole batch without DDP. Both run in float64:
    sharding only regroups the sum over rows, so each element may differ by float64's
    rounding (``mlp_grad_bound``, a worst case for any order and core count), while a rank
    that skips the averaging or sees one shard only is off by far more. Float32's worst-case
    bound on the same model would be wider than some gradients.
    """
    pool = _pool(pool)
    res = pool.run(_task_ddp_grads, CHECK_WIDTH, CHECK_DEPTH, per_worker, seed)
    ref, bound, names = res[0]["reference"], res[0]["bound"], res[0]["names"]
    worst = 0.0
    for r in res:
        worst = max(worst, _check_grads(r["ddp"], ref, bound, names,
                                        f"DDP gradient on rank {r['rank']}",
                                        "DDP did not average the shards' gradients"))
    return GradientCheck("DDP gradients", pool.n, len(names), worst)


@dataclass
class Scaling:
    """Throughput of 1 worker against n DDP workers (weak scaling: same batch per worker)."""

    single: bench.Timing
    multi: bench.Timing
    workers: int
    per_worker: int
    params: int
    backend: str
    device: str

    @property
    def single_throughput(self) -> float:
        """Samples per second of one worker."""
        return self.per_worker / self.single.median_s

    @property
    def multi_throughput(self) -> float:
        return self.per_worker * self.workers / self.multi.median_s

    @property
    def speedup(self) -> float:
        return self.multi_throughput / self.single_throughput

    @property
    def efficiency(self) -> float:
        """Speed-up divided by the number of workers (1.0 is perfect scaling)."""
        return self.speedup / self.workers

    def to_dict(self) -> dict:
        return {"single": self.single.to_dict(), "multi": self.multi.to_dict(),
                "workers": self.workers, "per_worker": self.per_worker, "params": self.params,
                "backend": self.backend, "device": self.device,
                "single_throughput": self.single_throughput,
                "multi_throughput": self.multi_throughput, "efficiency": self.efficiency}

    @classmethod
    def from_dict(cls, d: dict) -> "Scaling":
        return cls(bench.Timing.from_dict(d["single"]), bench.Timing.from_dict(d["multi"]),
                   d["workers"], d["per_worker"], d["params"], d["backend"], d["device"])

    def __str__(self) -> str:
        return (f"1 worker: {self.single_throughput:.0f} samples/s; {self.workers} workers "
                f"(DDP, {self.backend}): {self.multi_throughput:.0f} samples/s; speed-up "
                f"{self.speedup:.2f}x, scaling efficiency {self.efficiency:.0%}")

    __repr__ = __str__

    def _repr_html_(self) -> str:
        rows = [(t.label, _fmt_s(t.median_s), f"{_fmt_s(t.p20_s)} – {_fmt_s(t.p80_s)}",
                 f"{tp:.0f}", f"{tp / self.single_throughput:.2f}×")
                for t, tp in ((self.single, self.single_throughput),
                              (self.multi, self.multi_throughput))]
        return _table(("", "median step", "p20 – p80", "samples/s", "speed-up"), rows,
                      f"{self.per_worker} samples per worker per step, {self.params:,} parameters, "
                      f"{self.backend} on {self.device}; scaling efficiency {self.efficiency:.0%}")


def _size(pool: Workers, cpu: int, gpu: int, given: int | None) -> int:
    """The problem size: ``given``, else one that suits the CPU or fills a GPU better."""
    if given is not None:
        return int(given)
    return gpu if pool.backend == "nccl" else cpu


def _slowest(timings) -> bench.Timing:
    """The slowest rank's timing: a collective step ends when its last rank is done."""
    return max(timings, key=lambda t: t.median_s)


def ddp_scaling(pool: Workers | int | None = None, per_worker: int | None = None,
                samples: int = 5, seed: int = 0, verify: bool = True) -> Scaling:
    """Check DDP (unless the caller just did: ``verify=False``), then time a training step of
    1 worker and of n DDP workers.

    ``per_worker`` samples per worker and step: 256 on the CPU, 8192 on GPUs by default.
    """
    whole_number(samples, "samples", 5)
    pool = _pool(pool)
    per_worker = _size(pool, 256, 8192, per_worker)
    if verify:
        ddp_check(pool, seed=seed)
    res = pool.run(_task_ddp_throughput, DDP_WIDTH, DDP_DEPTH, per_worker, samples, seed)
    # The step ends when the slowest rank is done: report the slowest rank's DDP timing.
    multi = _slowest(r["ddp"] for r in res)
    return Scaling(res[0]["single"], multi, pool.n, per_worker, res[0]["params"], pool.backend,
                   pool.device_name)


@dataclass
class AllReduceSweep:
    """All-reduce time against message size, with the ring model fed by a ping-pong fit."""

    sizes: list[int]
    allreduce: list[bench.Timing]
    pingpong: list[bench.Timing]
    workers: int
    backend: str
    device: str
    latency_s: float | None
    bandwidth_Bps: float | None

    def model(self) -> list[models.AllReduce] | None:
        if not self.bandwidth_Bps:
            return None
        return [models.ring_allreduce_time(n, self.workers, self.bandwidth_Bps,
                                           self.latency_s or 0.0) for n in self.sizes]

    @property
    def algbw_GBps(self) -> list[float]:
        """Message bytes / time: what an all-reduce benchmark reports."""
        return [n / t.median_s / 1e9 for n, t in zip(self.sizes, self.allreduce)]

    @property
    def busbw_GBps(self) -> list[float]:
        """Algorithm bandwidth x 2(p-1)/p: comparable with a link's bandwidth."""
        p = self.workers
        return [b * 2 * (p - 1) / p for b in self.algbw_GBps]

    def to_dict(self) -> dict:
        return {"sizes": self.sizes, "allreduce": [t.to_dict() for t in self.allreduce],
                "pingpong": [t.to_dict() for t in self.pingpong], "workers": self.workers,
                "backend": self.backend, "device": self.device, "latency_s": self.latency_s,
                "bandwidth_Bps": self.bandwidth_Bps, "algbw_GBps": self.algbw_GBps,
                "busbw_GBps": self.busbw_GBps}

    @classmethod
    def from_dict(cls, d: dict) -> "AllReduceSweep":
        return cls(d["sizes"], [bench.Timing.from_dict(t) for t in d["allreduce"]],
                   [bench.Timing.from_dict(t) for t in d["pingpong"]], d["workers"],
                   d["backend"], d["device"], d["latency_s"], d["bandwidth_Bps"])

    def __repr__(self) -> str:
        fit = (f"; ping-pong fit: latency {_fmt_s(self.latency_s)}, bandwidth "
               f"{self.bandwidth_Bps / 1e9:.3g} GB/s" if self.bandwidth_Bps else "")
        return (f"all-reduce over {self.workers} workers ({self.backend}): "
                f"{_fmt_s(self.allreduce[0].median_s)} for {_fmt_bytes(self.sizes[0])} to "
                f"{_fmt_s(self.allreduce[-1].median_s)} for {_fmt_bytes(self.sizes[-1])}{fit}")

    def _repr_html_(self) -> str:
        mod = self.model() or [None] * len(self.sizes)
        rows = [(_fmt_bytes(n), _fmt_s(t.median_s), f"{bw:.3g}",
                 _fmt_s(m.time) if m else "–") for n, t, bw, m in
                zip(self.sizes, self.allreduce, self.algbw_GBps, mod)]
        note = (f"{self.workers} workers, {self.backend} on {self.device}. Ring model with "
                f"latency {_fmt_s(self.latency_s)} and bandwidth {self.bandwidth_Bps / 1e9:.3g} GB/s "
                "fitted from the ping-pong" if self.bandwidth_Bps else "one worker: nothing to exchange")
        return _table(("message", "all-reduce (median)", "algorithm GB/s", "ring model"), rows, note)


def fit_latency_bandwidth(sizes: Sequence[float], seconds: Sequence[float]) -> tuple[float, float]:
    """Fit t = latency + bytes / bandwidth to one-way times, weighting relative errors.

    Each size counts equally (rows divided by t), so the small messages fix the latency and
    the large ones the bandwidth; both come out positive.
    """
    n = np.asarray(sizes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    a = np.stack([1 / t, n / t], axis=1)
    (lat, inv_bw), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    if inv_bw <= 0:  # noise swamped the slope: take the largest message's rate
        inv_bw = max((t[-1] - max(lat, 0.0)) / n[-1], 1e-15)
    if lat < 0:
        lat = float(max(0.0, np.min(t - n * inv_bw)))
    return float(lat), float(1 / inv_bw)


def _fit_pingpong(sizes: list[int], pingpong: list[bench.Timing]) -> tuple[float, float] | tuple[None, None]:
    """(latency s, bandwidth B/s) of one direction, fitted to all the ping-pong round trips."""
    if not pingpong:
        return None, None
    return fit_latency_bandwidth(sizes, [t.median_s / 2 for t in pingpong])


def allreduce_sweep(pool: Workers | int | None = None, sizes: Sequence[int] | None = None,
                    samples: int = 5) -> AllReduceSweep:
    """All-reduce (checked on random data first) and ping-pong time for each message size."""
    whole_number(samples, "samples", 5)
    pool = _pool(pool)
    if sizes is None:
        top = 30 if pool.backend == "nccl" else 24
        sizes = [2**k for k in range(10, top + 1, 2)]
    sizes = [int(s) for s in sizes]
    target = 256 * 2**20 if pool.backend == "nccl" else 2 * 2**20
    res = pool.run(_task_allreduce_sweep, sizes, samples, target)
    # The collective ends when the slowest rank is done.
    allreduce = [_slowest(r["allreduce"][i] for r in res)
                 for i in range(len(sizes))]
    pingpong = res[0]["pingpong"]
    lat, bw = _fit_pingpong(sizes, pingpong)
    return AllReduceSweep(sizes, allreduce, pingpong, pool.n, pool.backend, pool.device_name,
                          lat, bw)


@dataclass
class Bucketing:
    """Time to all-reduce a model's gradients: one call per tensor against buckets."""

    timings: bench.Timings
    buckets: list[int]
    caps: list[float]
    tensors: int
    total_bytes: int
    workers: int
    backend: str
    device: str
    bucket_bytes: list[list[int]] = field(default_factory=list)

    @property
    def speedup(self) -> float:
        """Per-tensor time over the best bucketed time."""
        return self.timings[0].median_s / min(t.median_s for t in self.timings[1:])

    def model(self, latency_s: float, bandwidth_Bps: float) -> list[float]:
        """Ring model of each version: one latency-bound call per bucket plus the bytes."""
        return [sum(models.ring_allreduce_time(b, self.workers, bandwidth_Bps, latency_s).time
                    for b in bb) for bb in self.bucket_bytes]

    def to_dict(self) -> dict:
        return {"timings": [t.to_dict() for t in self.timings], "buckets": self.buckets,
                "caps": self.caps, "tensors": self.tensors, "total_bytes": self.total_bytes,
                "workers": self.workers, "backend": self.backend, "device": self.device,
                "bucket_bytes": self.bucket_bytes}

    @classmethod
    def from_dict(cls, d: dict) -> "Bucketing":
        return cls(bench.Timings(bench.Timing.from_dict(t) for t in d["timings"]), d["buckets"],
                   d["caps"], d["tensors"], d["total_bytes"], d["workers"], d["backend"],
                   d["device"], d.get("bucket_bytes", []))

    def __repr__(self) -> str:
        return "; ".join(f"{t.label}: {_fmt_s(t.median_s)} ({b} call{'s' if b > 1 else ''})"
                         for t, b in zip(self.timings, self.buckets))

    def _repr_html_(self) -> str:
        base = self.timings[0]
        rows = [(t.label, str(b), _fmt_s(t.median_s), f"{_fmt_s(t.p20_s)} – {_fmt_s(t.p80_s)}",
                 f"{t.speedup_over(base):.2f}×") for t, b in zip(self.timings, self.buckets)]
        return _table(("version", "all-reduce calls", "median", "p20 – p80", "speed-up"), rows,
                      f"{self.tensors} gradient tensors, {_fmt_bytes(self.total_bytes)} in all, "
                      f"{self.workers} workers, {self.backend} on {self.device}")


def bucketing(pool: Workers | int | None = None, d_model: int = 128, layers: int = 8,
              caps: Sequence[float] = (0, 256 * 2**10, 25 * 2**20), samples: int = 5,
              seed: int = 0) -> Bucketing:
    """All-reduce a small transformer's gradients per tensor, then in buckets (checked first)."""
    whole_number(samples, "samples", 5)
    pool = _pool(pool)
    caps = [float(c) for c in caps]
    if caps[0] != 0:
        caps = [0.0] + caps
    shapes = transformer_grad_shapes(d_model, layers)
    res = pool.run(_task_bucketing, shapes, caps, samples, seed)
    timings = bench.Timings(_slowest(r["timings"][i] for r in res)
                            for i in range(len(caps)))
    r0 = res[0]
    return Bucketing(timings, r0["buckets"], caps, r0["tensors"], r0["total_bytes"], pool.n,
                     pool.backend, pool.device_name, r0["bucket_bytes"])


@dataclass
class DDPTimeline:
    """One DDP step per rank: forward, backward and each gradient bucket's all-reduce."""

    events: list[list[tuple[str, float, float]]]  # per rank, seconds from the step's start
    bucket_cap_mb: float
    bucket_bytes: list[int]
    timing: bench.Timing
    workers: int
    backend: str
    device: str
    grad_bytes: int

    @property
    def buckets(self) -> int:
        return len(self.bucket_bytes)

    @property
    def overlap_fraction(self) -> float:
        """Share of all-reduce time (rank 0) that ran while backward was still computing."""
        ev = self.events[0]
        bwd = next(((a, b) for n, a, b in ev if n == "backward"), None)
        comm = [(a, b) for n, a, b in ev if n.startswith("all-reduce")]
        total = sum(b - a for a, b in comm)
        if not bwd or total <= 0:
            return 0.0
        inside = sum(max(0.0, min(b, bwd[1]) - max(a, bwd[0])) for a, b in comm)
        return inside / total

    def __repr__(self) -> str:
        return (f"DDP step over {self.workers} workers with {self.bucket_cap_mb:g} MiB buckets: "
                f"{self.buckets} bucket(s), median {_fmt_s(self.timing.median_s)}, "
                f"{self.overlap_fraction:.0%} of all-reduce time overlapped with backward")

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k != "timing"}
        d["timing"] = self.timing.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "DDPTimeline":
        d = dict(d)
        d["timing"] = bench.Timing.from_dict(d["timing"])
        d["events"] = [[tuple(e) for e in ev] for ev in d["events"]]
        return cls(**d)


def ddp_timeline(pool: Workers | int | None = None, bucket_cap_mb: float = 25.0,
                 per_worker: int | None = None, samples: int = 3, seed: int = 0) -> DDPTimeline:
    """Time DDP steps with a bucket cap, and record one step's timeline on every rank.

    ``per_worker`` rows per worker: 64 on the CPU, 4096 on GPUs by default.
    """
    whole_number(samples, "samples", 5)
    pool = _pool(pool)
    per_worker = _size(pool, 64, 4096, per_worker)
    if not bucket_cap_mb > 0:
        raise DistributedError(f"bucket_cap_mb must be > 0 (MiB), got {bucket_cap_mb!r}.")
    res = pool.run(_task_ddp_timeline, DDP_WIDTH, DDP_DEPTH, per_worker, float(bucket_cap_mb),
                   samples, seed)
    t0 = min(a for r in res for _, a, _ in r["events"])
    events = [[(n, a - t0, b - t0) for n, a, b in r["events"]] for r in res]
    timing = _slowest(r["timing"] for r in res)
    out = DDPTimeline(events, float(bucket_cap_mb), res[0]["bucket_bytes"], timing, pool.n,
                      pool.backend, pool.device_name, res[0]["grad_bytes"])
    return out


@dataclass
class PipelineRun:
    """One micro-batch count: step time, one step's timeline per stage, measured bubble."""

    microbatches: int
    timing: bench.Timing
    events: list[list[tuple[int, str, float, float]]]  # per stage: (micro-batch, phase, start, end)

    def __repr__(self) -> str:
        return (f"{self.microbatches} micro-batch(es): median step {_fmt_s(self.timing.median_s)}, "
                f"idle {self.bubble:.0%}")

    @property
    def span(self) -> float:
        starts = [a for ev in self.events for _, _, a, _ in ev]
        ends = [b for ev in self.events for _, _, _, b in ev]
        return max(ends) - min(starts)

    def busy(self, stage: int) -> float:
        return sum(b - a for _, _, a, b in self.events[stage])

    @property
    def bubble(self) -> float:
        """Measured idle share of the step, averaged over stages: 1 - busy / span."""
        span = self.span
        return float(np.mean([1 - self.busy(s) / span for s in range(len(self.events))]))

    def idle(self) -> list[float]:
        """Idle share of each stage in this step."""
        span = self.span
        return [1 - self.busy(s) / span for s in range(len(self.events))]

    @property
    def backward_ratio(self) -> float:
        f = [b - a for ev in self.events for _, ph, a, b in ev if ph == "forward"]
        bw = [b - a for ev in self.events for _, ph, a, b in ev if ph == "backward"]
        return float(np.median(bw) / np.median(f)) if f and bw and np.median(f) > 0 else 2.0


@dataclass
class Pipeline:
    """The model split over ``stages`` workers, run with several micro-batch counts."""

    stages: int
    rows: int
    runs: list[PipelineRun]
    stage_param_bytes: list[int]
    whole_param_bytes: int
    layers: list[list[int]]
    peak_bytes: list[int | None]
    backend: str
    device: str

    def check_line(self) -> str:
        """The deterministic line that says the split was checked before it was timed."""
        ms = " and ".join(str(r.microbatches) for r in self.runs)
        return (f"Every stage's gradients match the whole model's full-batch gradients "
                f"({self.stages} stage(s), {ms} micro-batch(es)): checked on a float64 copy of "
                f"the split with layers of {CHECK_WIDTH}, within float64's rounding-error bound.")

    def run_for(self, m: int) -> PipelineRun:
        return next(r for r in self.runs if r.microbatches == m)

    def model(self, m: int) -> models.PipelineBubble:
        r = self.run_for(m)
        return models.pipeline_bubble(self.stages, m, backward_ratio=max(r.backward_ratio, 1e-3))

    @property
    def speedup(self) -> float:
        """Step time with 1 micro-batch over the step time with the most micro-batches."""
        return self.runs[0].timing.median_s / self.runs[-1].timing.median_s

    def memory_rows(self) -> list[tuple[str, int]]:
        rows = [("one device holds the whole model", self.whole_param_bytes)]
        rows += [(f"stage {s} (layers {a}–{b - 1})", n)
                 for s, ((a, b), n) in enumerate(zip(self.layers, self.stage_param_bytes))]
        return rows

    def to_dict(self) -> dict:
        return {"stages": self.stages, "rows": self.rows,
                "runs": [{"microbatches": r.microbatches, "timing": r.timing.to_dict(),
                          "events": r.events, "bubble": r.bubble} for r in self.runs],
                "stage_param_bytes": self.stage_param_bytes,
                "whole_param_bytes": self.whole_param_bytes, "layers": self.layers,
                "peak_bytes": self.peak_bytes, "backend": self.backend, "device": self.device}

    @classmethod
    def from_dict(cls, d: dict) -> "Pipeline":
        runs = [PipelineRun(r["microbatches"], bench.Timing.from_dict(r["timing"]),
                            [[tuple(e) for e in ev] for ev in r["events"]]) for r in d["runs"]]
        return cls(d["stages"], d["rows"], runs, d["stage_param_bytes"], d["whole_param_bytes"],
                   d["layers"], d["peak_bytes"], d["backend"], d["device"])

    def __repr__(self) -> str:
        return (f"pipeline over {self.stages} stage(s) ({self.backend}): "
                + "; ".join(repr(r) for r in self.runs))

    def _repr_html_(self) -> str:
        base = self.runs[0].timing
        rows = [(r.timing.label, _fmt_s(r.timing.median_s),
                 f"{_fmt_s(r.timing.p20_s)} – {_fmt_s(r.timing.p80_s)}",
                 f"{r.timing.speedup_over(base):.2f}×", f"{r.bubble:.0%}",
                 f"{self.model(r.microbatches).bubble_fraction:.0%}") for r in self.runs]
        return _table(("micro-batches", "median step", "p20 – p80", "speed-up",
                       "bubble (measured)", "bubble (model)"), rows,
                      f"{self.stages} stages, batch of {self.rows} rows, {self.backend} on "
                      f"{self.device}")


def pipeline(pool: Workers | int | None = None, microbatches: Sequence[int] = (1, 4),
             rows: int | None = None, samples: int = 3, seed: int = 0) -> Pipeline:
    """Split the MLP over the workers; check, time and trace 1 and m micro-batches.

    With 1 micro-batch this is plain model parallelism: each stage waits for the others.
    ``rows`` in the batch: 250 on the CPU, 8192 on GPUs by default.
    """
    whole_number(samples, "samples", 5)
    pool = _pool(pool)
    rows = _size(pool, PIPE_ROWS, 8192, rows)
    ms = [int(m) for m in ((microbatches,) if isinstance(microbatches, int) else microbatches)]
    if any(m < 1 or m > rows for m in ms):
        raise DistributedError(f"micro-batch counts must be between 1 and the batch's {rows} rows, "
                               f"got {ms}.")
    split_stages(PIPE_DEPTH, pool.n)  # a clear error before any process works
    res = pool.run(_task_pipeline, PIPE_WIDTH, PIPE_DEPTH, rows, ms, samples, seed)
    t0s = [min(e[2] for r in res for e in r["runs"][i]["events"]) for i in range(len(ms))]
    runs = []
    for i, m in enumerate(ms):
        timing = _slowest(r["runs"][i]["timing"] for r in res)
        events = [[(j, ph, a - t0s[i], b - t0s[i]) for j, ph, a, b in r["runs"][i]["events"]]
                  for r in res]
        runs.append(PipelineRun(m, timing, events))
    out = Pipeline(pool.n, rows, runs, [r["stage_param_bytes"] for r in res],
                   res[0]["whole_param_bytes"], [r["layers"] for r in res],
                   [r["runs"][-1]["peak_bytes"] for r in res], pool.backend,
                   res[0]["device_name"])
    return out


# =========================================================================== lab support

def try_average_gradients(fn: Callable, pool: Workers | int | None = None, per_worker: int = 23,
                          seed: int = 1) -> dict:
    """Run a learner's ``average_gradients(model, world_size)`` in every worker.

    Each rank computes the gradients of its own shard, calls ``fn`` (which must leave the
    average over all ranks in every ``p.grad``), and returns them with the local gradients
    and the single-process full-batch reference, for ``check.ch3.check_average_gradients``.
    """
    pool = _pool(pool)
    payload = function_payload(fn)
    res = pool.run(_task_manual_average, payload, CHECK_WIDTH, CHECK_DEPTH, per_worker, seed)
    return {"world_size": pool.n, "names": res[0]["names"],
            "manual": [r["manual"] for r in res], "local": [r["local"] for r in res],
            "reference": res[0]["reference"],
            "reads_world_size": _reads_world_size(payload[2]) if payload[0] == "source" else None}


def _reads_world_size(source: str) -> bool:
    """Whether a function's body uses its ``world_size``, ``dist.get_world_size()`` or an
    averaging all-reduce (``ReduceOp.AVG``): one that divides by a fixed 2 is right on two
    workers only."""
    body = ast.parse(source).body[0].body
    names = {"world_size", "get_world_size", "AVG"}
    return any((isinstance(n, ast.Name) and n.id in names) or
               (isinstance(n, ast.Attribute) and n.attr in names)
               for stmt in body for n in ast.walk(stmt))


# =========================================================================== widgets

def explore(workers: int = 2, bucket_kib: int = 1024, microbatches: int = 4) -> dict:
    """Widget back end: a DDP step with ``bucket_kib`` buckets and a pipeline over the workers."""
    pool = _pool(int(workers))
    ms = (1, int(microbatches)) if int(microbatches) != 1 else (1,)
    tl = ddp_timeline(pool, bucket_cap_mb=bucket_kib / 1024, samples=2)
    pipe = pipeline(pool, microbatches=ms, samples=2) if pool.n <= PIPE_DEPTH else None
    return {"ddp": tl, "pipeline": pipe, "microbatches": int(microbatches)}


# =========================================================================== headless

def run_all(quick: bool = True, progress=None) -> dict:
    """Every experiment of the chapter on one group of workers, as JSON-ready results."""
    samples = 3 if quick else 7
    steps = 6
    done = [0]

    def tick():
        done[0] += 1
        if progress:
            progress(done[0] / steps)

    with Workers() as pool:
        tick()
        check_line = str(ddp_check(pool))
        scaling = ddp_scaling(pool, samples=samples, verify=False)  # checked just above
        tick()
        sweep = allreduce_sweep(pool, samples=samples)
        tick()
        buck = bucketing(pool, samples=samples)
        tick()
        timelines = [ddp_timeline(pool, cap, samples=2) for cap in (1.0, 25.0)]
        tick()
        pipe = pipeline(pool, microbatches=(1, 4, 8), samples=samples)
        tick()
    return {"workers": pool.n, "backend": pool.backend, "device": pool.device_name,
            "ddp_check": check_line, "scaling": scaling.to_dict(), "allreduce": sweep.to_dict(),
            "bucketing": buck.to_dict(), "ddp_timelines": [t.to_dict() for t in timelines],
            "pipeline": pipe.to_dict()}


def gpu_check(backend: str = "nccl") -> dict:
    """On a GPU machine: NCCL is chosen, DDP is exact on GPUs, and the multi-GPU figures.

    With one GPU only single-GPU DDP over NCCL can be measured; the multi-GPU figures
    (all-reduce bus bandwidth, scaling efficiency, pipeline bubble) need two or more GPUs
    and are reported as not measured. ``backend="gloo"`` takes the same steps on two CPU
    workers, for the tests of this function on machines without a GPU; its figures and
    verdicts mean nothing there.
    """
    if backend == "nccl":
        _device.require_cuda("chapter 3's GPU check", needs="torch")  # NCCL on the GPUs
        gpus, name = gpu_count(), torch.cuda.get_device_name(0)
    else:
        gpus, name = 2, _device.describe("cpu").short_name
    out: dict[str, Any] = {"gpus": gpus, "device": name}
    t_start = time.perf_counter()
    with Workers(gpus, backend=backend) as pool:
        out["backend"] = pool.backend
        hello = pool.run(_task_hello)
        # Whole numbers below 2^24 add exactly in float32, in any order: equality is the bound.
        out["sum_of_ranks_ok"] = all(h["sum_of_ranks"] == gpus * (gpus - 1) / 2 for h in hello)
        out["ddp_check"] = str(ddp_check(pool))
        scaling = ddp_scaling(pool, per_worker=1024, samples=7, verify=False)  # checked above
        out["ddp_step_s"] = scaling.multi.median_s
        out["single_step_s"] = scaling.single.median_s
        # ddp_check above raises unless DDP's gradients equal the full-batch float64 ones
        checks = {"nccl_selected": check.threshold(None, None, pool.backend == "nccl",
                                                   "torch.distributed chose NCCL on the GPUs"),
                  "ddp_exact": check.threshold(None, None, True, "DDP gradients equal full-batch "
                                                                "float64 gradients (ddp_check)"),
                  "all_reduce_correct": check.threshold(None, None, out["sum_of_ranks_ok"],
                                                        "all-reduce of the ranks gives their sum")}
        if gpus >= 2:
            out["scaling_efficiency"] = scaling.efficiency
            sweep = allreduce_sweep(pool, samples=5)
            out["allreduce"] = {"sizes": sweep.sizes, "busbw_GBps": sweep.busbw_GBps,
                                "algbw_GBps": sweep.algbw_GBps,
                                "median_s": [t.median_s for t in sweep.allreduce]}
            pipe = pipeline(pool, microbatches=(1, 8), rows=4096, samples=5)
            out["pipeline"] = {"stages": pipe.stages,
                               "bubble_measured": [r.bubble for r in pipe.runs],
                               "bubble_model": [pipe.model(r.microbatches).bubble_fraction
                                                for r in pipe.runs],
                               "speedup": pipe.speedup}
            checks["scaling_efficiency"] = check.at_least(
                scaling.efficiency, 0.8, "DDP throughput on all GPUs / (GPUs x one GPU's throughput)")
            checks["pipeline_speedup"] = check.more_than(
                pipe.speedup, 1.0, "pipeline step time, 1 micro-batch / 8 micro-batches")
        else:
            out["multi_gpu"] = ("not measured: this machine has 1 GPU; all-reduce bandwidth, "
                                "scaling efficiency and the pipeline bubble need 2 or more")
    out["seconds"] = time.perf_counter() - t_start
    out["checks"] = checks
    out["passed"] = all(c["passed"] for c in checks.values())
    return out


# =========================================================================== torchrun entry

TORCHRUN_TASKS = ("hello", "ddp", "allreduce")


def _torchrun_context(timeout_s: float = COLLECTIVE_TIMEOUT_S) -> WorkerContext:
    """Join the group torchrun set up (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT)."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    backend = "nccl" if (gpu_count() >= local_world and dist.is_nccl_available()) else "gloo"
    threads = threads_per_worker(local_world, backend)
    torch.set_num_threads(threads)
    device = _join_group(backend, local, timeout_s)
    return WorkerContext(rank, world, local, backend, device, threads, os.getpid())


def main(argv=None) -> int:
    """``torchrun [--nnodes N --node-rank R --rdzv-endpoint HOST:PORT] --nproc-per-node K
    -m gpucourse.experiments.ch3 {hello,ddp,allreduce}``; without torchrun it starts
    ``--workers`` processes itself."""
    import argparse
    import json

    p = argparse.ArgumentParser(prog="python -m gpucourse.experiments.ch3",
                                description=main.__doc__.splitlines()[0])
    p.add_argument("task", choices=TORCHRUN_TASKS)
    p.add_argument("--workers", type=int, default=None,
                   help="processes to start when not run under torchrun")
    args = p.parse_args(argv)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        ctx = _torchrun_context()
        try:
            if args.task == "hello":
                result = _task_hello(ctx)
            elif args.task == "ddp":
                result = _task_ddp_throughput(ctx, DDP_WIDTH, DDP_DEPTH, 64, 5, 0)
                result = {"rank": ctx.rank, "world_size": ctx.world_size,
                          "ddp_step_s": result["ddp"].median_s,
                          "samples_per_s": 64 * ctx.world_size / result["ddp"].median_s}
            else:
                r = _task_allreduce_sweep(ctx, [2**k for k in range(10, 25, 2)], 5, 2 * 2**20)
                result = {"rank": ctx.rank, "sizes": [2**k for k in range(10, 25, 2)],
                          "allreduce_s": [t.median_s for t in r["allreduce"]]}
            if ctx.rank == 0:
                print(json.dumps(result, default=str))
        finally:
            dist.destroy_process_group()
        return 0
    with Workers(args.workers) as pool:
        if args.task == "hello":
            print(json.dumps(pool.run(_task_hello), default=str))
        elif args.task == "ddp":
            print(ddp_scaling(pool))
        else:
            sweep = allreduce_sweep(pool)
            print(json.dumps({"sizes": sweep.sizes, "algbw_GBps": sweep.algbw_GBps}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
