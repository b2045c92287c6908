"""Run one graded notebook in a kernel of its own, cell by cell, under the sandbox's limits."""
from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import shutil
import signal
import stat
import tempfile
import threading
import time
import uuid

from .sandbox import Cgroup, Limits, max_tasks, read_report, scrubbed_env, supervisor_argv

PROBE_SECONDS = 5  # how long an interrupted kernel gets to answer again
# The reply nbclient records for a cell it interrupted at its time limit.
TIMEOUT_NAME = "GradingTimeLimit"
TIMEOUT_REPLY = {"ename": TIMEOUT_NAME, "evalue": "the cell ran past its time limit",
                 "traceback": []}


def _timed_out(cell) -> bool:
    return any(o.get("output_type") == "error" and o.get("ename") == TIMEOUT_NAME
               for o in cell.get("outputs", []))


def _mark_timeouts(cell, cell_index, execute_reply) -> None:
    """nbclient's on_cell_error hook: the reply it makes up for a cell it interrupted at its
    time limit becomes an error output of that cell, as a learner would see it."""
    content = (execute_reply or {}).get("content", {})
    if content.get("ename") == TIMEOUT_NAME:
        cell.outputs.append({"output_type": "error", "ename": TIMEOUT_NAME,
                             "evalue": content.get("evalue", ""), "traceback": []})


@dataclasses.dataclass
class CellRun:
    """How one code cell ran: "ok", "error", "timeout", "died" or "not run"."""

    status: str
    seconds: float = 0.0
    ename: str = ""
    evalue: str = ""
    stdout: str = ""


@dataclasses.dataclass
class Run:
    """A notebook's run: one CellRun per cell (None for markdown), why it stopped early."""

    cells: list
    notebook: dict
    stopped: str = ""
    seconds: float = 0.0
    report: dict = dataclasses.field(default_factory=dict)
    cgroup: str = ""  # "" when a pids cgroup capped the run; else why none did


def _package_parent() -> str:
    """The folder the kernel imports ``gpucourse`` from: the grader's own copy."""
    return str(pathlib.Path(__file__).resolve().parents[2])


# A Unix socket's path holds at most 107 bytes (108 on Linux with the NUL); the kernel's five
# sockets are named <folder>/kernel-<port>, with ports up to 5 digits.
SOCKET_PATH_MAX = 107


def _socket_folder(root: str) -> str:
    """Where the kernel's sockets go: ``root`` when their paths fit, else a private folder
    with a short name (a long TMPDIR, as on macOS or under pytest, would make ``bind`` fail
    with "File name too long")."""
    if len(os.path.join(root, "kernel-99999").encode()) <= SOCKET_PATH_MAX:
        return root
    short = "/tmp" if os.path.isdir("/tmp") and os.access("/tmp", os.W_OK) else None
    return tempfile.mkdtemp(prefix=f"gpucourse-grade-{os.getpid()}-", dir=short)


def _remove_tree(path: str) -> None:
    def retry(func, p, _exc):  # a folder the learner's code made read-only
        try:
            os.chmod(os.path.dirname(p), stat.S_IRWXU)
            os.chmod(p, stat.S_IRWXU)
            func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=retry)


def _outputs(cell) -> tuple[str, str, str]:
    stdout, ename, evalue = [], "", ""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream" and out.get("name") == "stdout":
            stdout.append(out.get("text", ""))
        elif out.get("output_type") == "error" and not ename:
            ename, evalue = out.get("ename", ""), out.get("evalue", "")
    return "".join(stdout), ename, evalue


_ACTIVE: set = set()  # the kernel managers of the notebooks running now
_ACTIVE_LOCK = threading.Lock()


def stop_all() -> None:
    """End every running kernel (the grader was interrupted)."""
    with _ACTIVE_LOCK:
        kms = list(_ACTIVE)
    for km in kms:
        _stop(km, wait=5.0)


def _stop(km, wait: float = 10.0) -> None:
    """End the kernel through its supervisor (which kills everything below it first)."""
    proc = getattr(getattr(km, "provisioner", None), "process", None)
    if proc is None or proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(wait)
    except Exception:  # noqa: BLE001 - a supervisor that does not go is killed with its group
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            proc.wait(wait)
        except Exception:  # noqa: BLE001
            pass


def stop_reason(report: dict, limits: Limits, threads: int = 1) -> str:
    """One sentence for why the supervisor ended the kernel."""
    event = report.get("event")
    if event == "cpu":
        return f"the kernel used more than {limits.cpu_seconds} s of CPU time and was stopped"
    if event == "processes":
        return f"the code started more than {limits.processes} processes and was stopped"
    if event == "tasks":
        return (f"the code started more than the {max_tasks(limits, threads)} processes and "
                "threads allowed and was stopped")
    if event == "time":
        return f"the notebook ran past its {limits.notebook_seconds:g} s limit and was stopped"
    if event == "file":
        return (f"the code wrote a file over {limits.file_bytes >> 20} MB and was stopped")
    if event == "signal":
        name = signal.Signals(report["signal"]).name if report.get("signal") in \
            signal.valid_signals() else str(report.get("signal"))
        extra = " (perhaps out of memory)" if report.get("signal") == signal.SIGKILL else ""
        return f"the kernel crashed ({name}){extra}"
    if event == "exited":
        return f"the kernel exited (code {report.get('code')}) before the notebook ended"
    return "the kernel stopped"


def run_notebook(nb: dict, limits: Limits, threads: int | None = None) -> Run:
    """Execute ``nb`` in a fresh kernel under ``limits``, in a temporary folder removed
    afterwards; errors in cells are recorded, never raised."""
    import nbformat
    from jupyter_client import AsyncKernelManager
    from jupyter_core.utils import run_sync
    from jupyter_client.kernelspec import KernelSpecManager
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    root = tempfile.mkdtemp(prefix=f"gpucourse-grade-{os.getpid()}-")
    sockets = _socket_folder(root)
    cgroup, why = (Cgroup.create(f"gpucourse-grade-{os.getpid()}-{uuid.uuid4().hex[:8]}",
                                 max_tasks(limits, threads or 1))
                   if limits.use_cgroup else (None, "turned off"))
    node = nbformat.reads(json.dumps(nb), as_version=4)
    run = Run([], node, cgroup=why)
    km = None
    try:
        work = os.path.join(root, "work")
        os.makedirs(os.path.join(work, "tmp"))
        kernels = os.path.join(root, "kernels")
        os.makedirs(os.path.join(kernels, "graded"))
        status = os.path.join(root, "supervisor.json")
        with open(os.path.join(kernels, "graded", "kernel.json"), "w") as f:
            json.dump({"argv": supervisor_argv(limits, status, cgroup.path if cgroup else None),
                       "display_name": "graded", "language": "python",
                       "interrupt_mode": "signal"}, f)
        km = AsyncKernelManager(kernel_name="graded",
                                kernel_spec_manager=KernelSpecManager(kernel_dirs=[kernels]))
        km.connection_file = os.path.join(root, "connection.json")
        # Unix sockets in the submission's private folder, not TCP ports any local user can reach.
        km.transport, km.ip = "ipc", os.path.join(sockets, "kernel")
        client = NotebookClient(node, km=km, kernel_name="graded", allow_errors=True,
                                interrupt_on_timeout=True, error_on_timeout=TIMEOUT_REPLY,
                                startup_timeout=120, on_cell_error=_mark_timeouts,
                                timeout=math.ceil(limits.cell_seconds))
        env = scrubbed_env(work, threads=threads, python_path=_package_parent())
        with _ACTIVE_LOCK:
            _ACTIVE.add(km)
        start = time.monotonic()
        with open(os.path.join(root, "kernel.log"), "wb") as log:
            try:
                with client.setup_kernel(env=env, cwd=work, stdout=log, stderr=log):
                    _run_cells(client, km, node, run, limits, start, DeadKernelError)
                    _stop(km)
            except Exception as exc:  # noqa: BLE001 - a kernel that never started
                _stop(km)
                log.flush()
                said = [line for line in pathlib.Path(log.name).read_text(
                    errors="replace").splitlines() if line.strip() and "WARNING" not in line]
                why_not = said[-1].strip() if said else str(exc) or type(exc).__name__
                if run.cells:
                    run.stopped = f"grading stopped at cell {len(run.cells)} ({exc})"
                elif limits.memory_bytes < 512 << 20:
                    run.stopped = (f"the kernel did not start ({why_not}); a kernel needs about "
                                   f"250 MB, more than the {limits.memory_bytes >> 20} MB "
                                   "--memory allows")
                else:
                    run.stopped = f"the kernel did not start ({why_not})"
            finally:
                if client.kc is not None:
                    client.kc.stop_channels()
        run.seconds = time.monotonic() - start
        run_sync(km.cleanup_resources)()
        run.report = read_report(status)
        if not run.stopped and run.report.get("event") not in (None, "terminated", "exited"):
            run.stopped = stop_reason(run.report, limits, threads or 1)
        elif run.stopped == "died":
            run.stopped = stop_reason(run.report, limits, threads or 1)
        if cgroup and cgroup.refused_forks():
            run.report["refused_forks"] = cgroup.refused_forks()
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE.discard(km)
        if cgroup:
            cgroup.remove()
        _remove_tree(root)
        if sockets != root:
            _remove_tree(sockets)
    for cell in node.cells[len(run.cells):]:  # cells after a kernel that never started
        run.cells.append(None if cell.cell_type != "code" else CellRun("not run"))
    run.notebook = nbformat.from_dict(node)
    return run


def _run_cells(client, km, node, run, limits, start, DeadKernelError):
    import nbformat

    for index, cell in enumerate(node.cells):
        if cell.cell_type != "code":
            run.cells.append(None)
            continue
        if run.stopped:
            run.cells.append(CellRun("not run"))
            continue
        left = limits.notebook_seconds - (time.monotonic() - start)
        if left <= 0:
            run.stopped = stop_reason({"event": "time"}, limits)
            _stop(km)
            run.cells.append(CellRun("not run"))
            continue
        client.timeout = max(1, math.ceil(min(limits.cell_seconds, left)))
        t0 = time.monotonic()
        try:
            client.execute_cell(cell, index)
        except DeadKernelError:
            run.cells.append(CellRun("died", time.monotonic() - t0))
            _stop(km)
            run.stopped = "died"
            continue
        seconds = time.monotonic() - t0
        if _timed_out(cell):  # nbclient interrupted the kernel and waited for it a while
            if limits.notebook_seconds - (time.monotonic() - start) <= 1:
                run.stopped = stop_reason({"event": "time"}, limits)
                run.cells.append(CellRun("timeout", seconds, evalue=run.stopped))
                _stop(km)
                continue
            run.cells.append(CellRun("timeout", seconds, evalue=(
                f"did not finish within the {client.timeout} s a cell may take")))
            client.timeout = PROBE_SECONDS
            probe = nbformat.v4.new_code_cell("pass")
            try:
                client.execute_cell(probe, index)
            except DeadKernelError:
                probe = None
            node.cells[index] = cell  # nbclient put the probe in the cell's place
            if probe is None or _timed_out(probe):
                run.stopped = (f"the kernel did not stop when a cell ran past its "
                               f"{limits.cell_seconds:g} s limit, so the cells after it did "
                               "not run")
                _stop(km)
            continue
        stdout, ename, evalue = _outputs(cell)
        run.cells.append(CellRun("error" if ename else "ok", time.monotonic() - t0, ename,
                                 evalue, stdout))
