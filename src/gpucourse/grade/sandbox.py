"""Limits around one learner's kernel: time, CPU, memory, processes, environment, folder.

Standard library only: the grader runs this file as a script (``python -I sandbox.py``) to
start each submission's kernel under a small supervisor, which

- moves itself into a pids cgroup when the grader could make one (a hard cap on tasks);
- becomes a child subreaper, so that every process the learner's code starts, even one that
  leaves its session, stays its descendant and is killed with the rest;
- starts the kernel with RLIMIT_CPU (CPU seconds of each process), RLIMIT_DATA (memory of
  each process: RLIMIT_AS would count the emulator's inaccessible guard regions, RLIMIT_DATA
  counts only writable private memory), RLIMIT_FSIZE and no core files;
- polls the kernel's descendants every 0.2 s and kills them all when there are more than the
  limit, when the notebook's time is up, or when the grader ends the kernel;
- writes what happened (``event``) as JSON for the grader.

Linux only (``/proc``, ``prctl``); elsewhere grading refuses to start.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import json
import os
import re
import resource
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
POLL_SECONDS = 0.2
# Time the supervisor gives the grader beyond the notebook's own limit before it stops the
# kernel itself (the grader stops it first; this catches a grader that has gone away).
GRACE_SECONDS = 15.0
# Threads a pids cgroup allows each permitted process beyond its BLAS/OpenMP pool: ipykernel,
# ZeroMQ and PyTorch's helpers (a lab's kernel peaks at 14-26 tasks with a pool of one).
EXTRA_THREADS = 8


def max_tasks(limits: "Limits", threads: int) -> int:
    """The pids cgroup's cap on a submission's tasks (processes and threads)."""
    return limits.processes * (threads + EXTRA_THREADS)


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one submission may use. Times in seconds, sizes in bytes."""

    cell_seconds: float = 60.0
    notebook_seconds: float = 300.0
    cpu_seconds: int = 600
    memory_bytes: int = 4 << 30
    processes: int = 64
    file_bytes: int = 1 << 30
    use_cgroup: bool = True


# --------------------------------------------------------------------------- environment

# Variables a kernel needs or that select what the course measures; everything else of the
# grader's environment stays out of the learners' reach.
PASSED_ON = {
    "PATH", "LANG", "LANGUAGE", "TZ", "CXX", "CC", "LD_LIBRARY_PATH",
    "GPUCOURSE_DEVICE", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY",
}
PASSED_ON_PREFIXES = ("LC_",)
# Never passed on, even when a name above would let it through.
SECRET = re.compile(r"TOKEN|KEY|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|^AWS_|^GITHUB_|"
                    r"^GH_|^GITLAB_|^AZURE_|^GOOGLE_|^GCP_|^HF_|^HUGGING|^OPENAI|^ANTHROPIC",
                    re.IGNORECASE)


def scrubbed_env(home: str, environ=None, threads: int | None = None,
                 python_path: str | None = None) -> dict[str, str]:
    """The kernel's environment: an allow-list of ``environ`` without secrets, HOME and
    TMPDIR in the submission's folder, the grader's virtual environment first on PATH."""
    environ = os.environ if environ is None else environ
    env = {k: v for k, v in environ.items()
           if (k in PASSED_ON or k.startswith(PASSED_ON_PREFIXES)) and not SECRET.search(k)}
    venv_bin = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join([venv_bin] + [p for p in env.get("PATH", os.defpath)
                                                .split(os.pathsep) if p and p != venv_bin])
    if sys.prefix != sys.base_prefix:
        env["VIRTUAL_ENV"] = sys.prefix
    env["HOME"] = home
    env["TMPDIR"] = os.path.join(home, "tmp")
    env["PYTHONNOUSERSITE"] = "1"
    env.setdefault("LANG", "C.UTF-8")
    if python_path:
        env["PYTHONPATH"] = python_path
    if threads:  # several kernels share the cores: one BLAS/OpenMP pool each, sized to its share
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env.setdefault(name, str(threads))
    return env


# --------------------------------------------------------------------------- processes

def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _prctl(option: int, value: int) -> bool:
    try:
        return _libc().prctl(option, ctypes.c_ulong(value), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def process_table() -> dict[int, tuple[int, str]]:
    """pid → (parent pid, state letter) of every process this user can see."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) >= 2:
            table[int(name)] = (int(fields[1]), fields[0])
    return table


def descendants(root: int, table=None) -> list[int]:
    """Pids below ``root`` (not ``root`` itself), parents before children."""
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def kill_descendants(root: int, keep: int | None = None, rounds: int = 200) -> None:
    """SIGKILL every descendant of ``root`` until none is left; reap the ones that are
    ``root``'s own children (``keep``: a child whose exit status the caller still wants)."""
    me = os.getpid()
    for _ in range(rounds):
        table = process_table()
        pids = [p for p in descendants(root, table) if table[p][1] != "Z"]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if root == me:  # orphans come back to us (subreaper): reap all but ``keep``
            for pid in descendants(root, process_table()):
                if pid != keep:
                    _reap(pid)
        if not pids:
            return
        time.sleep(0.01)


# --------------------------------------------------------------------------- cgroups

class Cgroup:
    """A pids cgroup made for one submission: a hard cap on its tasks (threads included)."""

    def __init__(self, path: str):
        self.path = path

    @classmethod
    def create(cls, name: str, max_tasks: int) -> tuple["Cgroup | None", str]:
        """(the cgroup, "") when one could be made and capped; else (None, why not)."""
        why = "no cgroup hierarchy with the pids controller is mounted"
        for base in _pids_bases():
            path = os.path.join(base, name)
            try:
                os.mkdir(path)
            except OSError as exc:
                why = f"{base} is not writable here ({exc.strerror})"
                continue
            try:
                with open(os.path.join(path, "pids.max"), "w") as f:
                    f.write(str(max_tasks))
                return cls(path), ""
            except OSError as exc:
                why = f"{path} takes no pids limit ({exc.strerror})"
                _rmdir(path)
        return None, why

    def add(self, pid: int) -> None:
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(pid))

    def pids(self) -> list[int]:
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as f:
                return [int(line) for line in f if line.strip()]
        except OSError:
            return []

    def tasks(self) -> int:
        """Tasks (processes and threads) in it now."""
        try:
            with open(os.path.join(self.path, "pids.current")) as f:
                return int(f.read())
        except (OSError, ValueError):
            return 0

    def refused_forks(self) -> int:
        """How often a fork or thread was refused at the cap (``max`` in pids.events)."""
        try:
            with open(os.path.join(self.path, "pids.events")) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "max":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        """Kill whatever is left in it, then delete it."""
        for _ in range(200):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)
        for _ in range(100):
            if _rmdir(self.path):
                return
            time.sleep(0.02)


STALE = re.compile(r"^gpucourse-grade-(\d+)-")


def remove_stale(tempdir: str) -> None:
    """Delete the cgroups and temporary folders that a grader which no longer runs (killed
    before it could clean up) left behind; a name carries the grader's pid."""
    def gone(name: str) -> bool:
        m = STALE.match(name)
        if not m:
            return False
        try:
            os.kill(int(m.group(1)), 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        return False

    for base in _pids_bases():
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            if gone(name):
                Cgroup(os.path.join(base, name)).remove()
    try:
        names = os.listdir(tempdir)
    except OSError:
        names = []
    for name in names:
        path = os.path.join(tempdir, name)
        try:
            mine = os.stat(path).st_uid == os.getuid()
        except OSError:
            continue
        if mine and gone(name):
            import shutil

            shutil.rmtree(path, ignore_errors=True)


def _rmdir(path: str) -> bool:
    try:
        os.rmdir(path)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _pids_bases() -> list[str]:
    """Folders where a child pids cgroup of this process's own cgroup could be made."""
    try:
        with open("/proc/self/mounts") as f:
            mounts = [line.split() for line in f]
        with open("/proc/self/cgroup") as f:
            own = [line.rstrip("\n").split(":", 2) for line in f]
    except OSError:
        return []
    bases = []
    for _, controllers, path in own:
        if "pids" in controllers.split(","):  # cgroup v1
            for m in mounts:
                if len(m) > 3 and m[2] == "cgroup" and "pids" in m[3].split(","):
                    bases.append(os.path.join(m[1], path.lstrip("/")))
    for _, controllers, path in own:
        if controllers == "":  # cgroup v2: a child works only where pids is delegated
            for m in mounts:
                if len(m) > 2 and m[2] == "cgroup2":
                    base = os.path.join(m[1], path.lstrip("/"))
                    try:
                        with open(os.path.join(base, "cgroup.subtree_control")) as f:
                            if "pids" in f.read().split():
                                bases.append(base)
                    except OSError:
                        pass
    return bases


# --------------------------------------------------------------------------- supervisor

def _set_limits(limits: dict) -> None:
    cpu = int(limits["cpu_seconds"])
    # The soft limit sends SIGXCPU; the hard one, 5 s later, SIGKILL for a kernel that ignores it.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_DATA, (int(limits["memory_bytes"]),) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(limits["file_bytes"]),) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _describe_exit(status: int, usage, limits: dict) -> dict:
    cpu = usage.ru_utime + usage.ru_stime if usage is not None else 0.0
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        event = "cpu" if sig == signal.SIGXCPU or (
            sig == signal.SIGKILL and cpu >= limits["cpu_seconds"]) else "signal"
        if sig == signal.SIGXFSZ:
            event = "file"
        return {"event": event, "signal": sig, "cpu_seconds": round(cpu, 2)}
    return {"event": "exited", "code": os.WEXITSTATUS(status), "cpu_seconds": round(cpu, 2)}


def supervise(limits: dict, status_path: str, cgroup: str | None, argv: list[str]) -> int:
    """Run ``argv`` (the kernel) under ``limits``; return the exit code for this process."""
    report: dict = {"cgroup": False}
    parent = os.getppid()
    group = None
    if cgroup:
        try:
            Cgroup(cgroup).add(os.getpid())
            group = Cgroup(cgroup)
            report["cgroup"] = True
        except OSError as exc:
            report["cgroup_error"] = exc.strerror
    report["subreaper"] = _prctl(PR_SET_CHILD_SUBREAPER, 1)
    stop: list[str] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append("terminated"))
    # A grader that dies (Ctrl-C, a crash) takes its kernels with it.
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it died before the line above
        stop.append("terminated")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # interrupts reach the kernel by its group
    signal.signal(signal.SIGHUP, lambda *_: stop.append("terminated"))
    kernel = os.fork()
    if kernel == 0:
        try:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            # Below the supervisor and the grader in priority, so that they still get the CPU
            # to stop a fork bomb or a busy loop.
            os.nice(10)
            _set_limits(limits)
            os.execv(argv[0], argv)
        except BaseException as exc:  # noqa: BLE001 - the child must never return
            os.write(2, f"the kernel could not start: {exc}\n".encode())
        os._exit(127)
    me = os.getpid()
    deadline = time.monotonic() + float(limits["notebook_seconds"]) + float(
        limits.get("grace_seconds", GRACE_SECONDS))
    status = usage = None
    while True:
        try:
            pid, st, ru = os.wait4(kernel, os.WNOHANG)
        except ChildProcessError:
            pid, st, ru = kernel, 0, None
        if pid:
            status, usage = st, ru
            report.update(_describe_exit(st, ru, limits))
            break
        if stop:
            report["event"] = "terminated"
            break
        if time.monotonic() > deadline:
            report["event"] = "time"
            break
        if group is not None:
            report["most_tasks"] = max(report.get("most_tasks", 0), group.tasks())
            if group.refused_forks():  # at the cap: a fork bomb, or far too many threads
                report["event"] = "tasks"
                break
        table = process_table()
        below = descendants(me, table)
        # The kernel itself is not one of the processes the learner's code started.
        live = sum(1 for p in below if table[p][1] != "Z") - 1
        report["most_processes"] = max(report.get("most_processes", 0), live)
        if live > int(limits["processes"]):
            report["event"] = "processes"
            break
        for pid in below:  # orphans reparented to us, once they have exited
            if pid != kernel and table[pid] == (me, "Z"):
                _reap(pid)
        time.sleep(POLL_SECONDS)
    if group is not None:  # what left the tree but not the cgroup
        for pid in group.pids():
            if pid != me:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    kill_descendants(me, keep=kernel)
    if status is None:
        try:
            _, status, usage = os.wait4(kernel, 0)
            if report.get("event") == "terminated":
                report["cpu_seconds"] = round(usage.ru_utime + usage.ru_stime, 2)
        except ChildProcessError:
            pass
    kill_descendants(me)
    _write_json(status_path, report)
    return 0 if report.get("event") in ("exited", "terminated") and report.get("code", 0) == 0 \
        else 1


def _write_json(path: str, data: dict) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def read_report(path: str) -> dict:
    """The supervisor's JSON report; {} when it wrote none (it was killed)."""
    try:
        with open(path) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def supervisor_argv(limits: Limits, status_path: str, cgroup: str | None) -> list[str]:
    """The command that starts the kernel under the supervisor, as a kernelspec's argv."""
    spec = json.dumps({"cpu_seconds": limits.cpu_seconds, "memory_bytes": limits.memory_bytes,
                       "file_bytes": limits.file_bytes, "processes": limits.processes,
                       "notebook_seconds": limits.notebook_seconds})
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), spec, status_path,
            cgroup or "", "--", sys.executable, "-m", "ipykernel_launcher", "-f",
            "{connection_file}"]


def main(argv: list[str]) -> int:
    spec, status_path, cgroup, sep, *kernel = argv
    if sep != "--" or not kernel:
        print("usage: sandbox.py LIMITS_JSON STATUS_FILE CGROUP -- KERNEL_ARGV...",
              file=sys.stderr)
        return 2
    return supervise(json.loads(spec), status_path, cgroup or None, kernel)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
