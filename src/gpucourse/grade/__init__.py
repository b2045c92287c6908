"""``python -m gpucourse grade``: grade a class's lab notebooks and write a gradebook.

Each submission's answers go into a fresh copy of the course's lab (its own setup and check
cells), which runs in a kernel of its own under limits (``sandbox``); the results are written
as ``gradebook.csv``, ``gradebook.json``, a class summary ``index.html`` and each graded
notebook with its outputs under ``notebooks/``.
"""
from __future__ import annotations

import concurrent.futures
import datetime as _dt
import getpass
import json
import os
import pathlib
import re
import sys
import threading

from ..errors import CourseError
from . import execute, gradebook
from .sandbox import Cgroup, Limits, max_tasks, remove_stale
from .submissions import LabError, find_labs, graded_notebook, read_submission

__all__ = ["GradeError", "Limits", "grade", "add_arguments", "main"]


class GradeError(CourseError):
    """A grading run that cannot start (no submissions, no solutions, a bad option)."""


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def find_notebooks(paths) -> list[pathlib.Path]:
    """The notebooks named, and those inside the folders named (checkpoints left out)."""
    found = []
    for p in map(pathlib.Path, paths):
        if p.is_dir():
            found += sorted(q for q in p.rglob("*.ipynb") if ".ipynb_checkpoints" not in q.parts
                            and not q.name.endswith(".new.ipynb"))
        elif p.exists():
            found.append(p)
        else:
            raise GradeError(f"{p} does not exist: name the submitted notebooks or the folder "
                             "that holds them.")
    if not found:
        raise GradeError("no .ipynb files among " + ", ".join(map(str, paths))
                         + ": name the submitted notebooks or the folder that holds them.")
    return found


def resolve_lab(name: str, labs) -> str:
    """A lab's file name from what an instructor types: 0, 00, lab0, 00_start_here_lab(.ipynb)."""
    key = name.strip()
    m = re.fullmatch(r"(?:lab\s*)?0*(\d+)", key, re.IGNORECASE)
    for file in labs:
        if key in (file, file[: -len(".ipynb")]) or m and \
                file.split("_", 1)[0].lstrip("0") == m.group(1).lstrip("0"):
            return file
    raise GradeError(f"--lab {name}: no such lab; choose one of "
                     + ", ".join(f[: -len('.ipynb')] for f in labs) + ".")


def enforcement(limits: Limits, threads: int = 1) -> list[str]:
    """What the sandbox enforces on this machine, and what it does not, one sentence each."""
    user = getpass.getuser()
    lines = ["Each submission ran in its own kernel, in a temporary folder (HOME and TMPDIR "
             "too) deleted afterwards, with the grader's environment variables reduced to an "
             "allow-list without secrets.",
             f"Wall time: {limits.cell_seconds:g} s a cell (then interrupted) and "
             f"{limits.notebook_seconds:g} s a notebook (then stopped).",
             f"CPU time: {limits.cpu_seconds} s per process (RLIMIT_CPU).",
             f"Memory: {gradebook._size(limits.memory_bytes)} of writable memory per process (RLIMIT_DATA)"
             f"; files up to {gradebook._size(limits.file_bytes)} each (RLIMIT_FSIZE)."]
    cgroup, why = (Cgroup.create(f"gpucourse-grade-{os.getpid()}-probe", 1)
                   if limits.use_cgroup else (None, "turned off"))
    if cgroup:
        cgroup.remove()
        lines.append(f"Processes: more than {limits.processes} stopped the submission (checked "
                     f"every 0.2 s), and a pids cgroup capped its tasks, threads included, at "
                     f"{max_tasks(limits, threads)}.")
    else:
        lines.append(f"Processes: more than {limits.processes} stopped the submission, checked "
                     f"every 0.2 s; no hard cap, since no pids cgroup could be made ({why}), so "
                     "a fork bomb can start many processes within those 0.2 s.")
    lines.append(f"Not contained: the code ran as {user}, so it could read and change what "
                 f"{user} can (files, the Python environment, the grader itself) and use the "
                 "network; grade an exam as a dedicated user or in a container.")
    return lines


def grade(paths, out, lab: str | None = None, solutions="solutions",
          limits: Limits = Limits(), jobs: int | None = None, progress=print) -> dict:
    """Grade the notebooks in ``paths`` against the labs of ``solutions``; write the gradebook
    into ``out`` and return it (the JSON's content)."""
    try:
        import nbclient  # noqa: F401
    except ImportError:
        raise GradeError("grading runs each notebook with nbclient, which is not installed: "
                         "pip install \"gpucourse[grading]\" (or nbclient).") from None
    if not sys.platform.startswith("linux"):
        raise GradeError("grading needs Linux (it contains learners' code with /proc, prctl "
                         "and rlimits); run it on a Linux machine or in a Linux container.")
    problems: list[str] = []
    try:
        labs = find_labs(solutions, problems)
    except LabError as exc:
        raise GradeError(str(exc)) from None
    for line in problems:  # the other labs can still be graded
        progress(f"left out: {line}")
    lab_name = resolve_lab(lab, labs) if lab else None
    files = find_notebooks(paths)
    out = _output_folder(out)
    import tempfile

    remove_stale(tempfile.gettempdir())
    subs = [read_submission(p, labs, lab_name) for p in files]
    seen = {}
    for s in subs:
        key = (s.learner, s.lab.name if s.lab else "")
        if not s.problem and key in seen:
            s.problem = (f"a second submission of {s.lab.label} by {s.learner} (the first: "
                         f"{seen[key]}); hand in one.")
        seen.setdefault(key, s.path)
    jobs = max(1, jobs or _cores())
    threads = max(1, _cores() // jobs)
    import nbformat  # noqa: F401 - slow to import (jsonschema): once, before the threads

    lock = threading.Lock()
    results: dict[int, tuple] = {}

    def one(k: int):
        s = subs[k]
        run = roles = None
        if not s.problem:
            nb, roles = graded_notebook(s)
            run = execute.run_notebook(nb, limits, threads=threads)
        rows = gradebook.exercise_rows(s, run, roles, limits)
        with lock:
            results[k] = (run, rows)
            passed = sum(r.passed for r in rows)
            what = (f"not graded: {s.problem}" if s.problem else
                    f"{passed} of {len(rows)} passed in {run.seconds:.1f} s"
                    + (f" ({run.stopped})" if run.stopped else ""))
            progress(f"{s.learner} ({s.lab.label if s.lab else 'no lab'}): {what}")

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = [pool.submit(one, k) for k in range(len(subs))]
        try:
            # Waits of a fraction of a second: Linux may deliver Ctrl-C's signal to a worker
            # thread, and Python raises KeyboardInterrupt only when the main thread next runs
            # Python code, which an untimed wait would not do until every notebook had ended.
            while concurrent.futures.wait(futures, timeout=0.2).not_done:
                pass
            for f in futures:
                f.result()
        except KeyboardInterrupt:  # Ctrl-C: stop every kernel now, not after its time limit
            for f in futures:
                f.cancel()
            execute.stop_all()
            raise
    rows, entries = [], []
    for k, s in enumerate(subs):
        run, srows = results[k]
        rows += srows
        saved = ""
        if run is not None:
            saved = f"notebooks/{_safe(s.learner)}-{_safe(s.lab.name)}"
            (out / saved).write_text(json.dumps(run.notebook, indent=1, ensure_ascii=False),
                                     encoding="utf-8")
        entries.append({
            "learner": s.learner, "lab": s.lab.name if s.lab else "", "file": s.path,
            "graded": not s.problem, "problem": s.problem, "notes": s.notes,
            "stopped": run.stopped if run else "", "seconds": round(run.seconds, 2) if run else 0,
            "notebook": saved, "supervisor": run.report if run else {},
            "exercises": [{k2: v for k2, v in vars(r).items() if k2 not in (
                "learner", "lab", "submission")} for r in srows]})
    book = {"generated": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
            "limits": vars(limits), "limits_text": gradebook.limits_text(limits),
            "enforcement": enforcement(limits, threads), "submissions": entries,
            "summary": gradebook.summary(rows, labs)}
    gradebook.write_csv(rows, out / "gradebook.csv")
    gradebook.write_json(book, out / "gradebook.json")
    gradebook.write_html(book, labs, out / "index.html")
    return book


def _output_folder(out) -> pathlib.Path:
    """``out`` made and writable, checked before any notebook runs."""
    import tempfile

    out = pathlib.Path(out)
    if out.exists() and not out.is_dir():
        raise GradeError(f"cannot write the gradebook into {out}: it is a file, not a folder; "
                         "choose another with --out.")
    try:
        (out / "notebooks").mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".gpucourse-write-test-"):
            pass
    except OSError as exc:
        raise GradeError(f"cannot write the gradebook into {out} ({exc.strerror or exc}); "
                         "choose a folder you can write to with --out.") from None
    return out


def _safe(name: str) -> str:
    return re.sub(r"[^\w.-]+", "_", name)[:80] or "_"


# --------------------------------------------------------------------------- command line

def _size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(text)
    return int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2).lower() or " "))


def add_arguments(p) -> None:
    d = Limits()
    p.add_argument("submissions", nargs="+", help="submitted notebooks, or folders of them")
    p.add_argument("--out", required=True, help="folder for the gradebook")
    p.add_argument("--lab", help="the lab they answer (e.g. 0 or 00_start_here_lab); default: "
                                 "found from each notebook's exercises")
    p.add_argument("--solutions", default="solutions",
                   help="the course's solutions/ folder (default: solutions)")
    p.add_argument("--jobs", type=int, help="submissions run at once (default: one per core)")
    p.add_argument("--cell-timeout", type=float, default=d.cell_seconds,
                   help=f"seconds a cell may run (default {d.cell_seconds:g})")
    p.add_argument("--timeout", type=float, default=d.notebook_seconds,
                   help=f"seconds a notebook may run (default {d.notebook_seconds:g})")
    p.add_argument("--cpu", type=int, default=d.cpu_seconds,
                   help=f"CPU seconds per process (default {d.cpu_seconds})")
    p.add_argument("--memory", default="4G",
                   help="writable memory per process, e.g. 2G or 512M (default 4G)")
    p.add_argument("--processes", type=int, default=d.processes,
                   help=f"processes a submission may start (default {d.processes})")


def main(args) -> int:
    """Run ``grade`` from parsed arguments; a problem is one line on stderr and exit code 2."""
    try:
        try:
            memory = _size(args.memory)
        except ValueError:
            raise GradeError(f"--memory {args.memory}: give a size such as 2G or 512M.") from None
        for name, value in (("--cell-timeout", args.cell_timeout), ("--timeout", args.timeout),
                            ("--cpu", args.cpu), ("--processes", args.processes),
                            ("--jobs", args.jobs or 1)):
            if not value > 0:
                raise GradeError(f"{name} {value}: give a number above 0.")
        limits = Limits(cell_seconds=args.cell_timeout, notebook_seconds=args.timeout,
                        cpu_seconds=args.cpu, memory_bytes=memory, processes=args.processes)
        book = grade(args.submissions, args.out, lab=args.lab, solutions=args.solutions,
                     limits=limits, jobs=args.jobs)
    except CourseError as exc:
        print(f"python -m gpucourse grade: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("python -m gpucourse grade: stopped; every kernel was ended and no gradebook "
              "was written.", file=sys.stderr)
        return 130
    n = len(book["submissions"])
    print(f"graded {sum(s['graded'] for s in book['submissions'])} of {n} submissions: "
          f"{pathlib.Path(args.out) / 'index.html'}")
    return 0
