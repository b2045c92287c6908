"""The parent's side of the worker pool: how many workers and which backend, the rendezvous
socket, ``Workers`` (``n`` spawned processes in one process group that stays up across
measurements: ``run(task, ...)`` sends ``task(ctx, ...)`` to every rank and returns the
per-rank results), and the notebook's one shared group (``workers``, ``close_workers``).

Nothing hangs: each worker's process group has a timeout, and a watchdog here stops the whole
group and raises ``WorkerDiedError`` naming the rank when a worker dies, ``WorkerError`` when a
task raises, ``CollectiveTimeoutError`` (naming the ranks that never joined) when a collective
times out, and ``WorkerTimeoutError`` when ranks do not answer.
"""
from __future__ import annotations

import atexit
import math
import os
import signal
import socket
import time
from multiprocessing.connection import wait as _wait_for
from typing import Any, Callable

import torch
import torch.distributed as dist

from ... import device as _device
from .tasks import _task_hello
from .worker import (COLLECTIVE_TIMEOUT_S, MASTER_ADDR, CollectiveTimeoutError,
                     DistributedError, WorkerDiedError, WorkerError, WorkerTimeoutError,
                     _worker_main, function_payload)

# The parent gives up on a task after this, stops the group and raises.
TASK_TIMEOUT_S = 180.0
# Importing torch in a fresh process takes seconds on a busy small machine.
STARTUP_TIMEOUT_S = 120.0
# After one rank reports an error, wait this long for a dead peer (the usual root cause).
_GRACE_S = 0.5


# =========================================================================== how many, where

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


# =========================================================================== the group

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
