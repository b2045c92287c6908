"""``python -m gpucourse run``: every chapter's experiments without Jupyter.

Writes ``report.json`` (device, versions, date, results), one PNG per figure and a one-page
``index.html`` into the output folder. A workshop host runs it on the room's machines
before a session to see what the learners' GPUs (or CPUs) will show.
"""
from __future__ import annotations

import datetime as _dt
import errno
import html
import importlib
import json
import pathlib
import sys
import tempfile
import time
import traceback

from . import device, reference
from .errors import CourseError
from .experiments import CHAPTERS


class OutputFolderError(CourseError):
    """The report's folder cannot be created or written to."""


def _cannot_write(out: pathlib.Path, exc: OSError) -> OutputFolderError:
    """One sentence: which folder, why (a file in the way, no permission, ...), what to do."""
    blocker = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        why = ("it is a file, not a folder" if blocker == out else
               f"{blocker} is a file, so no folder can be made inside it")
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        why = "no permission to write there"
    else:
        why = (exc.strerror or str(exc)).lower()
    return OutputFolderError(f"cannot write the report into {out}: {why}; choose a folder you can "
                             "write to with --out (e.g. --out results).")


def prepare_output(out) -> pathlib.Path:
    """``out`` as a folder that exists and takes new files, made if needed; checked before any
    chapter runs, so that a bad ``--out`` fails at once and not after minutes of measuring."""
    out = pathlib.Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".gpucourse-write-test-"):
            pass
    except OSError as exc:
        raise _cannot_write(out, exc) from None
    return out


def _chapter_modules(n: int):
    """(experiments.chN, plot.chN) or None when the chapter has no runnable experiments."""
    try:
        exp = importlib.import_module(f"gpucourse.experiments.ch{n}")
    except ModuleNotFoundError:
        return None
    if not hasattr(exp, "run_all"):
        return None
    try:
        fig = importlib.import_module(f"gpucourse.plot.ch{n}")
    except ModuleNotFoundError:
        fig = None
    return exp, fig


def available_chapters() -> list[int]:
    return [n for n in CHAPTERS if _chapter_modules(n)]


def run(chapters=None, out="results", quick: bool = True, stream=sys.stderr) -> dict:
    """Run the chapters, write the report into ``out``, return the report dict."""
    out = prepare_output(out)
    from tqdm.auto import tqdm  # lazy: only a run shows progress bars

    todo = chapters or available_chapters()
    info = device.describe()
    report = {"format": "gpucourse-report", "date": _dt.datetime.now().isoformat(timespec="seconds"),
              "command": "python -m gpucourse run " + " ".join(sys.argv[2:]).strip(),
              "device": info.to_dict(), "chapters": {}}
    bar = tqdm(total=len(todo), desc="chapters", unit="ch", file=stream)
    for n in todo:
        mods = _chapter_modules(n)
        entry: dict = {"name": CHAPTERS.get(n, "?")}
        report["chapters"][str(n)] = entry
        if mods is None:
            entry["error"] = f"chapter {n} has no experiments module with run_all()"
            bar.update(1)
            continue
        exp, figmod = mods
        bar.set_postfix_str(f"chapter {n}")
        t0 = time.perf_counter()
        try:
            results = reference.jsonable(exp.run_all(quick=quick))
            entry["results"] = results
            entry["figures"] = []
            if figmod is not None:
                for name, fig in figmod.figures(results).items():
                    path = out / f"ch{n}_{name}.png"
                    fig.savefig(path)
                    entry["figures"].append(path.name)
        except Exception as exc:  # one broken chapter must not hide the others
            entry["error"] = f"{type(exc).__name__}: {exc}"
            entry["traceback"] = traceback.format_exc(limit=5)
        entry["seconds"] = round(time.perf_counter() - t0, 2)
        bar.update(1)
    bar.close()
    try:  # the folder took a file before the chapters ran, but a disk can fill up meanwhile
        (out / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
        (out / "index.html").write_text(summary_html(report, out), encoding="utf-8")
    except OSError as exc:
        raise _cannot_write(out, exc) from None
    return report


#: The page's width in CSS pixels: a figure saved at least this wide spans it (and is scaled
#: down to it, which plot.page_scale takes into account when it sizes the text).
PAGE_PX = 1200


def _png_width(path: pathlib.Path) -> int | None:
    """The width in pixels of a PNG file (its IHDR header), or None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            head = f.read(24)
    except OSError:
        return None
    return int.from_bytes(head[16:20], "big") if head[:8] == b"\x89PNG\r\n\x1a\n" else None


def summary_html(report: dict, folder=None) -> str:
    """A one-page HTML summary: device, per-chapter status and figures. Each figure links to
    its full-size PNG and is shown at its own width (a three-panel figure spans the page, two
    narrow ones share a row), wrapped without gaps."""
    dev = device.DeviceInfo(**{k: (tuple(v) if k == "compute_capability" and v else v)
                               for k, v in report["device"].items()})
    parts = [f"<h1>GPU course: headless run</h1><p>{html.escape(report['date'])} · "
             f"<code>{html.escape(report['command'])}</code></p>", dev._repr_html_()]
    for n, entry in report["chapters"].items():
        status = "failed" if "error" in entry else f"ok in {entry.get('seconds', 0)} s"
        parts.append(f"<h2>Chapter {n}: {html.escape(entry['name'].replace('_', ' '))} "
                     f"({html.escape(status)})</h2>")
        if "error" in entry:
            parts.append(f"<pre>{html.escape(entry['error'])}</pre>")
        figures = []
        for fig in entry.get("figures", []):
            width = _png_width(pathlib.Path(folder) / fig) if folder is not None else None
            share = min(100.0, 100.0 * width / PAGE_PX) if width else 49.0
            name = html.escape(fig)
            figures.append(f"<a href='{name}' title='full size'><img src='{name}' alt='{name}' "
                           f"style='width:calc({share:.1f}% - 4px)'></a>")
        if figures:
            parts.append("<div class='figures'>" + "".join(figures) + "</div>")
    return ("<!doctype html><html><head><meta charset='utf-8'><title>GPU course report</title>"
            "<style>.figures{display:flex;flex-wrap:wrap;align-items:flex-start;gap:4px}"
            ".figures a{display:contents}.figures img{height:auto;max-width:100%}</style>"
            f"</head><body style='font-family:sans-serif;max-width:{PAGE_PX}px;margin:auto'>"
            + "".join(parts) + "</body></html>\n")


def main(chapters=None, out="results") -> int:
    report = run(chapters=chapters, out=out)
    failed = [n for n, e in report["chapters"].items() if "error" in e]
    for n, e in report["chapters"].items():
        print(f"chapter {n}: " + (f"FAILED: {e['error']}" if "error" in e else
                                  f"{len(e.get('figures', []))} figures in {e['seconds']} s"))
    print(f"report: {pathlib.Path(out) / 'index.html'}")
    return 1 if failed else 0
