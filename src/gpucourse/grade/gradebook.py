"""The gradebook: one row per learner and exercise, as CSV, JSON and an HTML class summary."""
from __future__ import annotations

import collections
import csv
import dataclasses
import html
import json
import re

from .submissions import PASSED

COLUMNS = ("learner", "lab", "exercise", "passed", "status", "message", "seconds", "notes",
           "submission")
HEADER = re.compile(r"^Exercise \S+ \(.*\) not yet right:$")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclasses.dataclass
class Row:
    learner: str
    lab: str
    exercise: str
    passed: bool
    status: str  # passed, failed, not answered, missing, duplicate, timed out, not run, not graded
    message: str
    seconds: float
    notes: str
    submission: str


def first_line(ename: str, evalue: str) -> str:
    """The checker's verdict in one line: the first line under the harness's "not yet right:"
    header, with the exception's name when it is not the checker's AssertionError."""
    lines = [line.strip() for line in ANSI.sub("", evalue or "").splitlines() if line.strip()]
    if lines and HEADER.match(lines[0]):
        lines = lines[1:]
    text = lines[0] if lines else ""
    if ename and ename not in ("AssertionError", "CheckFailed"):
        return f"{ename}: {text}" if text else ename
    return text or "the check failed without a message"


def exercise_rows(sub, run, roles, limits) -> list[Row]:
    """The rows of one submission (``run`` None when it was not run)."""
    lab = sub.lab
    label = lab.name if lab else ""
    if sub.problem:
        return [Row(sub.learner, label, e, False, "not graded", sub.problem, 0.0, "", sub.path)
                for e in (lab.exercises if lab else [""])]
    rows = []
    for exercise in lab.exercises:
        answers = [a for a in sub.answers if a.slot.exercise == exercise]
        cells = [(run.cells[i], role) for i, (role, e) in enumerate(roles)
                 if e == exercise and run.cells[i] is not None]
        seconds = round(sum(c.seconds for c, _ in cells), 2)
        check = next((c for c, role in cells if role == "check"), None)
        answer_runs = [c for c, role in cells if role == "answer"]
        notes = "; ".join([a.note for a in answers if a.note and a.state in ("answered",
                                                                             "not answered")]
                          + sub.exercise_notes.get(exercise, []))
        states = {a.state for a in answers}
        status, message = _verdict(exercise, states, answers, answer_runs, check, run, limits)
        rows.append(Row(sub.learner, label, exercise, status == "passed", status, message,
                        seconds, notes, sub.path))
    return rows


def _verdict(exercise, states, answers, answer_runs, check, run, limits) -> tuple[str, str]:
    for state in ("duplicate", "missing"):
        if state in states:
            return state, next(a.note for a in answers if a.state == state)
    stuck = next((c for c in answer_runs + [check] if c and c.status in ("timeout", "died")),
                 None)
    if stuck is not None:
        if stuck.status == "timeout":
            return "timed out", stuck.evalue
        return "failed", run.stopped or "the kernel stopped"
    if check is None or check.status == "not run":
        return "not run", f"not run: {run.stopped or 'the kernel stopped'}"
    if check.status == "ok":
        if any(m == exercise for m in PASSED.findall(check.stdout)):
            line = next(x for x in check.stdout.splitlines() if x.startswith(
                f"Exercise {exercise} passed"))
            return "passed", line.strip()
        return "failed", f"the check printed no 'Exercise {exercise} passed' line"
    if states == {"not answered"}:
        return "not answered", ("not answered: the lab's `raise NotImplementedError` line is "
                                "still there")
    failed = next((c for c in answer_runs if c.status == "error"), None)
    if failed is not None and check.ename in ("NameError", "NotImplementedError", ""):
        return "failed", f"the answer cell raised {first_line(failed.ename, failed.evalue)}"
    if check.ename == "MemoryError":
        return "failed", (f"MemoryError: the code needed more than the "
                          f"{_size(limits.memory_bytes)} of memory a process may use")
    return "failed", first_line(check.ename, check.evalue)


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):g} {unit}"
    return f"{n} bytes"


def limits_text(limits) -> str:
    return (f"{limits.cell_seconds:g} s a cell, {limits.notebook_seconds:g} s a notebook, "
            f"{limits.cpu_seconds} s of CPU and {_size(limits.memory_bytes)} of memory a process, "
            f"{limits.processes} processes")


# --------------------------------------------------------------------------- files

def write_csv(rows: list[Row], path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow([getattr(r, c) if c != "passed" else str(r.passed).lower()
                        for c in COLUMNS])


def summary(rows: list[Row], labs) -> dict:
    """Per lab and exercise: passed, graded, counts by status, commonest failure messages."""
    out = {}
    for name, lab in labs.items():
        mine = [r for r in rows if r.lab == name and r.exercise]
        if not mine:
            continue
        exercises = {}
        for e in lab.exercises:
            er = [r for r in mine if r.exercise == e]
            graded = [r for r in er if r.status != "not graded"]
            failures = collections.Counter()
            example = {}
            for r in graded:
                if r.status == "failed":
                    key = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", r.message)
                    failures[key] += 1
                    example.setdefault(key, collections.Counter())[r.message] += 1
            exercises[e] = {
                "passed": sum(r.passed for r in graded), "graded": len(graded),
                "statuses": dict(collections.Counter(r.status for r in er)),
                "failures": [[example[k].most_common(1)[0][0], n]
                             for k, n in failures.most_common(3)]}
        out[name] = {"title": lab.title, "exercises": exercises}
    return out


def write_json(book: dict, path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(book, f, indent=1, ensure_ascii=False)
        f.write("\n")


CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.6em 0; }
th, td { border-bottom: 1px solid #ddd; padding: 0.35em 0.7em; text-align: left;
         vertical-align: top; }
th { background: #f3f3f3; }
.bar { display: inline-block; height: 0.8em; background: #2a7; vertical-align: middle; }
.bar.rest { background: #e55; }
.ok { color: #176; font-weight: bold; } .no { color: #b22; font-weight: bold; }
.muted { color: #777; } .small { font-size: 0.9em; } .nowrap { white-space: nowrap; }
ol { margin: 0; padding-left: 1.2em; }
"""
MARK = {"passed": ("ok", "✓"), "failed": ("no", "✗"), "timed out": ("no", "T"),
        "not answered": ("muted", "–"), "missing": ("no", "?"), "duplicate": ("no", "2×"),
        "not run": ("muted", "·"), "not graded": ("muted", "·")}


def write_html(book: dict, labs, path) -> None:
    """The class summary page."""
    e = html.escape
    subs = book["submissions"]
    graded = [s for s in subs if s["graded"]]
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             f"<title>Class summary</title><style>{CSS}</style></head><body>",
             "<h1>Class summary</h1>",
             f"<p>{len(subs)} submission{'s' * (len(subs) != 1)}: {len(graded)} graded, "
             f"{len(subs) - len(graded)} could not be graded. Graded on "
             f"{e(book['generated'][:16].replace('T', ' at '))} "
             f"under these limits: {e(book['limits_text'])}.</p>"]
    for name, lab in book["summary"].items():
        parts.append(f"<h2>{e(lab['title'])} <span class='muted small'>({e(name)})</span></h2>")
        parts.append("<table><tr><th>Exercise</th><th>Passed</th><th>Pass rate</th>"
                     "<th>Other outcomes</th><th>Most common failures</th></tr>")
        for ex, s in lab["exercises"].items():
            rate = s["passed"] / s["graded"] if s["graded"] else 0.0
            others = ", ".join(f"{e(k)}: {n}" for k, n in s["statuses"].items()
                               if k not in ("passed", "failed", "not graded"))
            fails = "".join(f"<li>{e(msg)} <span class='muted'>× {n}</span></li>"
                            for msg, n in s["failures"])
            parts.append(
                f"<tr><td>{e(ex)}</td><td>{s['passed']} of {s['graded']}</td>"
                f"<td class='nowrap'><span class='bar' style='width:{rate * 8:.2f}em'></span>"
                f"<span class='bar rest' style='width:{(1 - rate) * 8:.2f}em'></span> "
                f"{rate:.0%}</td><td class='small'>{others or '—'}</td>"
                f"<td class='small'>{'<ol>' + fails + '</ol>' if fails else '—'}</td></tr>")
        parts.append("</table>")
        exercises = list(lab["exercises"])
        parts.append("<table><tr><th>Learner</th>" + "".join(f"<th>{e(x)}</th>" for x in exercises)
                     + "<th>Passed</th><th>Notes</th></tr>")
        for s in subs:
            if s["lab"] != name or not s["graded"]:
                continue
            by = {r["exercise"]: r for r in s["exercises"]}
            cells = []
            for x in exercises:
                r = by.get(x, {})
                cls, mark = MARK.get(r.get("status"), ("muted", "·"))
                cells.append(f"<td class='{cls}' title='{e(r.get('status', ''))}: "
                             f"{e(r.get('message', ''))}'>{mark}</td>")
            notes = [n for r in s["exercises"] if r["notes"] for n in [f"{r['exercise']}: "
                                                                        f"{r['notes']}"]]
            notes += s["notes"] + ([s["stopped"]] if s["stopped"] else [])
            parts.append(f"<tr><td>{e(s['learner'])}</td>{''.join(cells)}"
                         f"<td>{sum(r['passed'] for r in s['exercises'])} of {len(exercises)}"
                         f"</td><td class='small'>{'<br>'.join(e(n) for n in notes) or '—'}"
                         "</td></tr>")
        parts.append("</table><p class='small muted'>✓ passed, ✗ failed, T timed out, "
                     "– not answered, ? answer cell missing, 2× two answer cells, "
                     "· not run</p>")
    bad = [s for s in subs if not s["graded"]]
    parts.append("<h2>Could not be graded</h2>")
    if bad:
        parts.append("<table><tr><th>Learner</th><th>File</th><th>Why</th></tr>" + "".join(
            f"<tr><td>{e(s['learner'])}</td><td class='small'>{e(s['file'])}</td>"
            f"<td>{e(s['problem'])}</td></tr>" for s in bad) + "</table>")
    else:
        parts.append("<p>Every submission was graded.</p>")
    parts.append("<h2>How learners' code ran</h2><ul class='small'>" + "".join(
        f"<li>{e(line)}</li>" for line in book["enforcement"]) + "</ul></body></html>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts) + "\n")
