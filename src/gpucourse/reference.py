"""Reference measurements taken on real GPUs, with their provenance.

``make gpu-check`` (or ``python -m gpucourse run`` on a GPU) writes
``src/gpucourse/data/reference/<gpu>.json``. Notebooks overlay these on CPU runs and on other
GPUs, always labelled with the GPU's name, the date and the command. A file that is
malformed or not one of ours is rejected with a clear message and never plotted.
"""
from __future__ import annotations

import datetime as _dt
import json
import pathlib
import re
from dataclasses import dataclass
from typing import Any

from .errors import CourseError

FORMAT = "gpucourse-reference"
VERSION = 1
REQUIRED = {"format": str, "version": int, "gpu": str, "date": str, "command": str,
            "results": dict}
FOLDER = pathlib.Path(__file__).resolve().parent / "data" / "reference"


class ReferenceError(CourseError, ValueError):
    """A reference file that is malformed or not written by this course."""


def jsonable(obj):
    """``obj`` as plain JSON values: dataclasses and ``to_dict()`` records become dicts, NumPy
    scalars and arrays Python numbers and lists, NaN and infinities null (JSON has neither),
    anything else its text. Used for reference files, reports and ``make gpu-check`` results."""
    import dataclasses
    import math

    import numpy as np

    if hasattr(obj, "to_dict") and not isinstance(obj, type):
        return jsonable(obj.to_dict())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return jsonable(dataclasses.asdict(obj))
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (np.ndarray, np.generic)):
        return jsonable(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


@dataclass(frozen=True)
class Reference:
    """One GPU's reference results: ``results`` keyed by section ("kernels", "ch1", …)."""

    gpu: str
    date: str
    command: str
    results: dict
    driver: str = ""
    path: str = ""
    kernels: tuple = ()  # (file, fingerprint) of the course's .cu files when it was measured

    @property
    def label(self) -> str:
        """How a plot names this data: GPU and date (``provenance`` adds the command)."""
        return f"reference: {self.gpu}, {self.date}"

    @property
    def provenance(self) -> str:
        """GPU, date and the command that measured it, for text next to a figure."""
        return f"{self.gpu}, measured {self.date} with `{self.command}`"

    def changed_kernels(self, *files: str) -> list[str]:
        """Which of ``files`` (e.g. "copy.cu") differ now from the versions this data was
        measured with; empty when they match or when the data did not record them."""
        then, now = dict(self.kernels), kernel_fingerprints()
        return [f for f in files if f in then and then[f] != now.get(f)]

    def kernel_caveat(self, *files: str) -> str:
        """A parenthesis for text beside these figures when ``files`` may have changed since
        they were measured (they did, or the data predates recorded fingerprints); else ''."""
        if not self.kernels:
            return (f" (taken before the course recorded its kernel versions, so "
                    f"{', '.join(files)} may have changed since)")
        changed = self.changed_kernels(*files)
        return f" (with earlier versions of {', '.join(changed)} than this course has now)" \
            if changed else ""

    def get(self, section: str, *keys: str, default: Any = None) -> Any:
        """A value by section and nested keys, or ``default``."""
        node: Any = self.results.get(section)
        for k in keys:
            if not isinstance(node, dict) or k not in node:
                return default
            node = node[k]
        return default if node is None else node


def kernel_fingerprints() -> dict[str, str]:
    """{file: short SHA-256} of every course kernel source, recorded with each measurement so
    that data taken with an earlier version of a kernel can say so."""
    import hashlib

    from .kernels import KERNEL_DIR

    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:12]
            for p in sorted(KERNEL_DIR.glob("*.cu"))}


def slug(gpu_name: str) -> str:
    """File-name form of a GPU name: 'NVIDIA H200' → 'nvidia_h200'."""
    return re.sub(r"[^a-z0-9]+", "_", gpu_name.lower()).strip("_")


def validate(data: Any, source: str = "reference data") -> Reference:
    """Return a Reference, or raise ReferenceError saying what is wrong with ``data``."""
    if not isinstance(data, dict):
        raise ReferenceError(f"{source} is not a JSON object; it is not a gpucourse reference file.")
    if data.get("format") != FORMAT:
        raise ReferenceError(f"{source} has format {data.get('format')!r}, not {FORMAT!r}: "
                             "it was not written by `make gpu-check` and is ignored.")
    for key, typ in REQUIRED.items():
        if not isinstance(data.get(key), typ):
            raise ReferenceError(f"{source} lacks a {typ.__name__} field {key!r}; regenerate it "
                                 "with `make gpu-check`.")
    if data["version"] > VERSION:
        raise ReferenceError(f"{source} is format version {data['version']}, newer than this "
                             f"course reads ({VERSION}); update the course.")
    try:
        _dt.date.fromisoformat(data["date"][:10])
    except ValueError:
        raise ReferenceError(f"{source} has date {data['date']!r}, not YYYY-MM-DD.") from None
    return Reference(gpu=data["gpu"], date=data["date"][:10], command=data["command"],
                     results=data["results"], driver=str(data.get("driver", "")), path=source)


def load(path) -> Reference:
    """Read and validate one reference file."""
    path = pathlib.Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ReferenceError(f"{path.name} is not valid JSON ({exc.msg} at line {exc.lineno}).") \
            from None
    return validate(data, path.name)


def available(folder=FOLDER) -> list[Reference]:
    """Every valid reference file in ``folder`` (invalid ones are skipped; see ``problems``)."""
    out = []
    for p in sorted(pathlib.Path(folder).glob("*.json")):
        try:
            out.append(load(p))
        except ReferenceError:
            continue
    return out


def problems(folder=FOLDER) -> list[str]:
    """One sentence per reference file that is rejected."""
    out = []
    for p in sorted(pathlib.Path(folder).glob("*.json")):
        try:
            load(p)
        except ReferenceError as exc:
            out.append(str(exc))
    return out


PROVENANCE = "_provenance"


def section(ref: Reference, name: str) -> Reference:
    """``ref`` with the date and command of one section (sections may come from separate runs)."""
    node = ref.results.get(name)
    prov = node.get(PROVENANCE) if isinstance(node, dict) else None
    if not isinstance(prov, dict):
        return ref
    kernels = prov.get("kernels")
    return Reference(gpu=ref.gpu, date=str(prov.get("date", ref.date))[:10],
                     command=str(prov.get("command", ref.command)), results=ref.results,
                     driver=ref.driver, path=ref.path,
                     kernels=tuple(sorted(kernels.items())) if isinstance(kernels, dict) else ())


def find(name: str, *keys: str, folder=FOLDER) -> list[tuple[Reference, Any]]:
    """(reference, value) for every GPU that has section ``name``/``keys``.

    The Reference returned carries that section's own date and command.
    """
    return [(section(r, name), v) for r in available(folder)
            if (v := r.get(name, *keys)) is not None]


def labelled(name: str, *keys: str) -> list[tuple[str, dict]]:
    """(label naming GPU and date, data) for every reference file whose ``name``/``keys`` is a
    dict of measurements: what a figure overlays."""
    return [(ref.label, v) for ref, v in find(name, *keys) if isinstance(v, dict)]


def write(results: dict, gpu: str, command: str, driver: str = "", folder=FOLDER,
          date: str | None = None, merge: bool = True) -> pathlib.Path:
    """Write (or update) the reference file for ``gpu`` and return its path.

    Each section records its own date and command, so a run that measures only some
    sections updates those and keeps the others (with their provenance).
    """
    results = jsonable(results)  # NumPy values, records, NaN: plain JSON, as every reader expects
    date = date or _dt.date.today().isoformat()
    folder = pathlib.Path(folder)
    path = folder / f"{slug(gpu)}.json"
    merged: dict = {}
    if merge and path.exists():
        try:
            merged = dict(load(path).results)
        except ReferenceError:
            merged = {}
    kernels = kernel_fingerprints()
    for name, value in results.items():
        if isinstance(value, dict):
            value = {**value, PROVENANCE: {"date": date, "command": command, "kernels": kernels}}
        merged[name] = value
    data = {"format": FORMAT, "version": VERSION, "gpu": gpu, "date": date, "command": command,
            "driver": driver, "results": merged}
    validate(data)
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path
