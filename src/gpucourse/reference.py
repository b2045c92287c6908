"""Reference measurements taken on real GPUs, with their provenance.

``make gpu-check`` (or ``python -m gpucourse run`` on a GPU) writes
``src/gpucourse/data/reference/<gpu>.json``. Notebooks overlay these on CPU runs and on other
GPUs, always labelled with the GPU's name, the date and the command. A file that is
malformed or not one of ours is rejected with a clear message and never plotted.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import math
import pathlib
import re
import stat
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import CourseError
from .paths import KERNEL_DIR, REFERENCE_DIR

FORMAT = "gpucourse-reference"
VERSION = 1
REQUIRED = {"format": str, "version": int, "gpu": str, "date": str, "command": str,
            "results": dict}
PROVENANCE = "_provenance"


class ReferenceError(CourseError, ValueError):
    """A reference file that is malformed or not written by this course. ``field`` is the path
    of the value that does not fit (("results", "ch1", "gbps", 2)), when one value is to blame."""

    field: tuple | None = None


def jsonable(obj):
    """``obj`` as plain JSON values: dataclasses and ``to_dict()`` records become dicts, NumPy
    scalars and arrays Python numbers and lists, NaN and infinities null (JSON has neither),
    anything else its text. Used for reference files, reports and ``make gpu-check`` results."""
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
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:12]
            for p in sorted(KERNEL_DIR.glob("*.cu"))}


def slug(gpu_name: str) -> str:
    """File-name form of a GPU name: 'NVIDIA H200' → 'nvidia_h200'."""
    return re.sub(r"[^a-z0-9]+", "_", gpu_name.lower()).strip("_")


# --------------------------------------------------------------------------- validation

MAX_BYTES = 4 * 2**20  # the largest reference file this course writes is some 30 kB
MAX_DEPTH = 16         # objects and lists inside one another (the course's files nest 7 deep)
MAX_NUMBER = 1e18      # above every byte count, FLOP/s or time a GPU measurement gives
MAX_TEXT = 2000        # characters of one string (GPU names, commands, labels)
#: Fields that may hold a negative number (elsewhere every number is at least 0).
SIGNED = frozenset({"accuracy_drop"})


class _Bad(Exception):
    """One value that does not fit the schema: where it is and what it should be."""

    def __init__(self, path: tuple, expected: str, value: Any = None, why: str = ""):
        super().__init__(path, expected)
        self.path, self.expected, self.value, self.why = path, expected, value, why


def _show(value: Any) -> str:
    """A short, one-line description of a JSON value for a message."""
    if isinstance(value, bool):
        return f"{str(value).lower()} (true/false)"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return f"an object of {len(value)} field{'s' * (len(value) != 1)}"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class _Spec:
    """What one field of a reference file must hold."""

    expected = "a value"

    def check(self, value: Any, path: tuple) -> None:
        raise NotImplementedError


class _Num(_Spec):
    """A finite number, at least 0 (above 0 with ``positive``), at most MAX_NUMBER."""

    def __init__(self, positive: bool = False, whole: bool = False, signed: bool = False,
                 maximum: float = MAX_NUMBER):
        self.positive, self.whole, self.signed, self.maximum = positive, whole, signed, maximum
        kind = "a whole number" if whole else "a number"
        self.expected = kind + ("" if signed else " above 0" if positive else " of at least 0") \
            + (f" and at most {maximum:g}" if maximum < MAX_NUMBER else "")

    def check(self, value, path):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _Bad(path, self.expected, value)
        if not -MAX_NUMBER <= value <= self.maximum:  # also NaN, which no comparison passes
            raise _Bad(path, self.expected, value, f"it is {_show(value)}, beyond {self.maximum:g}")
        if self.whole and value != int(value):
            raise _Bad(path, self.expected, value)
        if not self.signed and (value <= 0 if self.positive else value < 0):
            raise _Bad(path, self.expected, value)


class _Text(_Spec):
    """A string of one line, at most MAX_TEXT characters (``date``: starting YYYY-MM-DD)."""

    def __init__(self, date: bool = False, name: bool = False):
        self.date, self.name = date, name
        self.limit = 100 if name else MAX_TEXT
        self.expected = ("a date YYYY-MM-DD" if date else
                         "a name of 1 to 100 characters" if name else "a line of text")

    def check(self, value, path):
        if not isinstance(value, str) or len(value) > self.limit or (self.name and not value.strip()):
            raise _Bad(path, self.expected, value)
        if any(ord(c) < 32 or ord(c) == 127 for c in value):  # newlines, escapes: not in a title
            raise _Bad(path, self.expected, value, "it holds control characters")
        if self.date:
            try:
                _dt.date.fromisoformat(value[:10])
            except ValueError:
                raise _Bad(path, self.expected, value) from None


class _Flag(_Spec):
    expected = "true or false"

    def check(self, value, path):
        if not isinstance(value, bool):
            raise _Bad(path, self.expected, value)


class _Any(_Spec):
    """Any JSON value (fields no figure reads); the parser already refused NaN and infinities."""

    def check(self, value, path):
        pass


class _Maybe(_Spec):
    """``spec`` or null (a figure that reads it skips null)."""

    def __init__(self, spec: _Spec):
        self.spec, self.expected = spec, f"{spec.expected} or null"

    def check(self, value, path):
        if value is not None:
            try:
                self.spec.check(value, path)
            except _Bad as bad:
                raise _Bad(bad.path, bad.expected + (" or null" if bad.path == path else ""),
                           bad.value, bad.why) from None


class _Either(_Spec):
    def __init__(self, *specs: _Spec):
        self.specs = specs
        self.expected = " or ".join(s.expected for s in specs)

    def check(self, value, path):
        for spec in self.specs:
            try:
                spec.check(value, path)
                return
            except _Bad:
                continue
        raise _Bad(path, self.expected, value)


class _List(_Spec):
    def __init__(self, item: _Spec):
        self.item, self.expected = item, f"a list of {_plural(item.expected)}"

    def check(self, value, path):
        if not isinstance(value, list):
            raise _Bad(path, self.expected, value)
        for i, v in enumerate(value):
            self.item.check(v, path + (i,))


class _Table(_Spec):
    """An object with keys of the caller's choosing (``keys``: a pattern each key matches)."""

    def __init__(self, value: _Spec, keys: str | None = None):
        self.value, self.keys = value, keys
        self.expected = f"an object of {_plural(value.expected)}"

    def check(self, value, path):
        if not isinstance(value, dict):
            raise _Bad(path, self.expected, value)
        for k, v in value.items():
            if self.keys and not re.fullmatch(self.keys, k):
                raise _Bad(path + (k,), f"a key like {self.keys!r}", k, "a key of the wrong form")
            self.value.check(v, path + (k,))


class _Record(_Spec):
    """An object with named fields, each optional; ``other`` checks the fields not named;
    ``same_length`` names groups of list fields drawn against one another."""

    expected = "an object"

    def __init__(self, fields: dict, other: _Spec | None = None, same_length=(), required=()):
        self.fields, self.other, self.same_length, self.required = \
            fields, other or _Any(), same_length, required

    def check(self, value, path):
        if not isinstance(value, dict):
            raise _Bad(path, self.expected, value)
        for key in self.required:
            if key not in value:
                raise _Bad(path + (key,), self.fields[key].expected, None, "it is missing")
        for k, v in value.items():
            self.fields.get(k, self.other).check(v, path + (k,))
        for group in self.same_length:
            lengths = {k: len(value[k]) for k in group if isinstance(value.get(k), list)}
            if len(set(lengths.values())) > 1:
                raise _Bad(path, "lists of one length", None,
                           "the lists " + ", ".join(f"{k} ({n})" for k, n in lengths.items())
                           + " differ in length")


def _plural(expected: str) -> str:
    return re.sub(r"^an? ", "", expected).replace("number", "numbers", 1) \
        .replace("line of text", "lines of text").replace("date ", "dates ") \
        .replace("object", "objects", 1)


NUM, POS, WHOLE, COUNT = _Num(), _Num(positive=True), _Num(whole=True), _Num(positive=True, whole=True)
TEXT, FLAG, ANY = _Text(), _Flag(), _Any()


def _rows(fields: dict, **kw) -> _List:
    return _List(_Record(fields, **kw))


CHECK = _Record({"value": _Maybe(NUM), "threshold": _Maybe(NUM), "passed": FLAG, "pass": FLAG,
                 "what": TEXT, "rule": _Maybe(TEXT)})
CHECKS = _Table(CHECK)
PROVENANCE_SPEC = _Record({"date": _Text(date=True), "command": TEXT, "kernels": _Table(TEXT)})
TIMES = _Table(NUM)  # {label: time or rate}

#: What each section of ``results`` holds where a figure or a sentence reads it. Fields not
#: named here may hold anything (no figure reads them); every number named is finite and at
#: least 0 (above 0 where a figure divides by it or draws it on a log axis).
SECTIONS: dict[str, _Spec] = {
    "kernels": _Record({
        "sizes": _Table(NUM),
        "rows": _rows({"bytes": NUM, "correct": FLAG, "file": TEXT, "gbps": NUM, "kernel": TEXT,
                       "median_s": NUM, "p20_s": NUM, "p80_s": NUM, "samples": WHOLE,
                       "size": _Either(NUM, TEXT)})}),
    "ch1": _Record({
        "device": TEXT, "backend": TEXT, "target_gpu": TEXT, "pass": FLAG, "passed": FLAG,
        "checks": CHECKS,
        "timing": _Record({"backend": TEXT, "device": TEXT, "rows": _rows(
            {"group": TEXT, "kind": TEXT, "method": TEXT, "seconds": POS, "p20": NUM, "p80": NUM},
            required=("group", "method", "seconds"))}),
        "stride_sweep": _Record({
            "block": COUNT, "ceiling_gbps": POS, "coalesced_gbps": NUM, "coalesced_kernel": TEXT,
            "coalesced_versions": TIMES, "device": TEXT, "gbps": _List(NUM), "l2_bytes": NUM,
            "model_gbps": _List(NUM), "nbytes": NUM, "peak_gbps": NUM, "peak_source": TEXT,
            "seconds": _List(NUM), "strides": _List(COUNT)},
            same_length=[("strides", "gbps", "seconds")]),
        "roofline": _Record({
            "ceilings": _Record({"bandwidth_Bps": POS, "copy_gbps": NUM, "peak_flops": POS,
                                 "peak_source": TEXT}),
            "device": TEXT, "kind": TEXT,
            "points": _rows({"bytes": NUM, "flops": NUM, "intensity": POS, "name": TEXT,
                             "rate": NUM, "seconds": NUM, "size": NUM},
                            required=("intensity", "name", "rate"))}),
        "transfer": _Record({
            "device": TEXT, "gpu": TEXT, "gpu_name": TEXT, "link": TEXT,
            "rows": _rows({"cpu_s": NUM, "flops": NUM, "gpu": TEXT, "measured": _Maybe(TIMES),
                           "model": TIMES, "nbytes": NUM, "op": TEXT, "size": NUM})}),
    }),
    "ch2": _Record({
        "device": TEXT, "passed": FLAG, "seconds": NUM, "notes": _List(TEXT),
        "thresholds": _Table(FLAG), "checks": CHECKS,
        "allocation": _Record({"median_ms": TIMES, "n": WHOLE}),
        "loops": _Record({"config": _Table(WHOLE)},
                         other=_Record({"epoch_ms": NUM, "per_step_ms": NUM})),
        "pool": _Record({"mib": NUM, "stages": _rows({
            "library": TEXT, "stage": TEXT, "held by the pool (MiB)": NUM, "in use (MiB)": NUM})}),
        "transfers": _Record({"gpu": TEXT, "link_peak_gbps": NUM, "model": _Table(_List(NUM)),
                              "pinned_over_pageable": TIMES, "series": _Table(_List(NUM)),
                              "sizes": _List(COUNT)}),
        "transpose": _Record({
            "ceiling": TEXT, "gbps": _Table(POS), "padded_over_naive": NUM,
            "padded_pct_of_copy": NUM, "padded_pct_of_each_copy": TIMES, "shared_over_naive": NUM,
            "side": WHOLE, "spec_gbps": NUM, "tile": COUNT,
            "conflicts": _Table(_Record({"accesses_per_thread": WHOLE, "mean_ways": NUM,
                                         "worst_ways": WHOLE}))}),
    }),
    "ch3": _Record({
        "gpus": WHOLE, "device": TEXT, "backend": TEXT, "sum_of_ranks_ok": FLAG, "ddp_check": TEXT,
        "ddp_step_s": NUM, "single_step_s": NUM, "scaling_efficiency": NUM, "multi_gpu": TEXT,
        "seconds": NUM, "checks": CHECKS, "passed": FLAG,
        "allreduce": _Record({"sizes": _List(COUNT), "busbw_GBps": _List(NUM),
                              "algbw_GBps": _List(NUM), "median_s": _List(NUM)},
                             same_length=[("sizes", "busbw_GBps", "algbw_GBps", "median_s")]),
        "pipeline": _Record({"stages": WHOLE, "bubble_measured": _List(NUM),
                             "bubble_model": _List(NUM), "speedup": NUM}),
    }),
    "ch4": _Record({
        "device": TEXT, "passed": FLAG, "checks": CHECKS,
        "block_sweep": _Record({"block_sizes": _List(COUNT), "gbps": _List(NUM),
                                "median_s": _List(NUM), "n": COUNT, "recommended": COUNT,
                                # what a thread may have on every GPU since cc 3.5 (block
                                # sizes that cannot launch at it are skipped in the sweep)
                                "regs_per_thread": _Num(whole=True, maximum=255),
                                "regs_source": TEXT},
                               same_length=[("block_sizes", "gbps", "median_s")]),
        "divergence": _Record({"versions": _List(TEXT), "median_s": _List(POS), "n": COUNT,
                               "k": WHOLE}, same_length=[("versions", "median_s")]),
        "histogram": _Record({"skews": _List(NUM), "v1_s": _List(POS), "v2_s": _List(POS),
                              "speedup": _List(NUM), "n": COUNT},
                             same_length=[("skews", "v1_s", "v2_s", "speedup")]),
        "reduction": _Record({"labels": _List(TEXT), "gbps": _List(NUM), "median_s": _List(NUM),
                              "copy_gbps": POS, "copy_label": TEXT, "source": TEXT, "n": COUNT},
                             same_length=[("labels", "gbps", "median_s")]),
    }),
    "ch5": _Record({
        "checks": CHECKS, "passed": FLAG, "notes": _List(TEXT), "seconds": NUM,
        "sgemm": _Record({"n": COUNT, "labels": _List(TEXT), "gflops": _List(POS),
                          "median_s": _List(NUM), "cublas_gflops": POS,
                          "peak_gflops": _Maybe(NUM), "best": TEXT, "best_pct_of_cublas": NUM},
                         same_length=[("labels", "gflops", "median_s")],
                         required=("n", "labels", "gflops", "cublas_gflops")),
        "precision_tflops": TIMES, "precision_peak_tflops": _Table(_Maybe(NUM)),
        "precision_n": COUNT,
    }),
    "ch6": _Record({
        "checks": CHECKS, "passed": FLAG, "compute_capability": TEXT,
        "alignment_tflops": _Table(NUM, keys=r"[0-9]{1,9}"),
        "amp": _Record({"blocks": WHOLE, "d": WHOLE, "tokens": WHOLE, "speedup_vs_fp32": TIMES,
                        "rows": _rows({"precision": TEXT, "memory_how": TEXT, "TFLOP/s": NUM,
                                       "activations_MB": NUM, "loss_rel_diff": NUM,
                                       "median_ms": NUM, "memory_MB": NUM, "model_MB": NUM,
                                       "skipped": TEXT})}),
        "bf16_vs_fp16_matmul": TIMES,
        "int8": _Record({"accuracy_drop": _Num(signed=True), "batch": WHOLE, "hidden": WHOLE,
                         "int8_speedup": NUM, "size_ratio": NUM,
                         "rows": _rows({"version": TEXT, "accuracy": NUM, "median_ms": NUM,
                                        "output rel. error": NUM, "speed-up vs fp32": NUM,
                                        "weights_MB": NUM})}),
        "int8_gemm": _Record({"shape": _List(WHOLE), "bf16_tops": NUM, "fp32_tops": NUM,
                              "int8_rel_error": NUM, "int8_tops": NUM}),
        "loss_scaling": _Record({"max_rel_gap": TIMES, "max_zeroed_unscaled": NUM,
                                 "step_time_s": TIMES}),
    }),
}
def _where(path: tuple) -> str:
    return "/".join(str(p) for p in path)


def _check_results(results: dict) -> None:
    for name, node in results.items():
        if isinstance(node, dict) and PROVENANCE in node:  # every section may carry its own
            PROVENANCE_SPEC.check(node[PROVENANCE], ("results", name, PROVENANCE))
        if name in SECTIONS:
            SECTIONS[name].check(node, ("results", name))


def validate(data: Any, source: str = "reference data") -> Reference:
    """Return a Reference, or raise ReferenceError saying in one line what is wrong with ``data``."""
    if not isinstance(data, dict):
        raise ReferenceError(f"{source} is not a JSON object; it is not a gpucourse reference file.")
    if data.get("format") != FORMAT:
        raise ReferenceError(f"{source} has format {_show(data.get('format'))}, not {FORMAT!r}: "
                             "it was not written by `make gpu-check` and is ignored.")
    for key, typ in REQUIRED.items():
        if not isinstance(data.get(key), typ) or isinstance(data.get(key), bool):
            raise ReferenceError(f"{source} lacks a {typ.__name__} field {key!r}; regenerate it "
                                 "with `make gpu-check`.")
    if data["version"] > VERSION:
        raise ReferenceError(f"{source} is format version {data['version']}, newer than this "
                             f"course reads ({VERSION}); update the course.")
    if data["version"] < 1:
        raise ReferenceError(f"{source} has version {data['version']}; versions start at 1.")
    try:
        _depth_at_most(data, MAX_DEPTH)
        _Text(name=True).check(data["gpu"], ("gpu",))
        for key in ("date", "command", "driver"):
            if key in data:
                _Text(date=key == "date").check(data[key], (key,))
        _check_results(data["results"])
    except _Bad as bad:
        if bad.expected == "a date YYYY-MM-DD" and bad.path == ("date",):
            raise ReferenceError(f"{source} has date {_show(data['date'])}, not YYYY-MM-DD.") from None
        error = ReferenceError(f"{source} is ignored: {_field_problem(bad)}; regenerate it with "
                               "`make gpu-check`.")
        error.field = bad.path
        raise error from None
    return Reference(gpu=data["gpu"], date=data["date"][:10], command=data["command"],
                     results=data["results"], driver=str(data.get("driver", "")), path=source)


def _field_problem(bad: _Bad) -> str:
    return (f"{_where(bad.path)} should be {bad.expected}, but "
            + (bad.why or f"it is {_show(bad.value)}"))


def _depth_at_most(node: Any, limit: int, path: tuple = ()) -> None:
    """Raise _Bad when lists and objects nest more than ``limit`` deep."""
    if isinstance(node, (dict, list)):
        if limit <= 0:
            raise _Bad(path, f"at most {MAX_DEPTH} levels of nesting", node,
                       f"lists and objects nest more than {MAX_DEPTH} levels deep there")
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in items:
            _depth_at_most(v, limit - 1, path + (k,))


def _refuse_constant(name: str):
    raise ValueError(f"{name} (JSON has no such number)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses to infinity
        raise ValueError(f"{text} (too large for a number)")
    return value


def _parse(path: pathlib.Path) -> Any:
    """The JSON value in a file, or ReferenceError (one line) when it cannot be had safely."""
    name = path.name
    try:
        info = path.stat()
    except OSError as exc:
        raise ReferenceError(f"{name} cannot be read ({exc.strerror or exc}).") from None
    if stat.S_ISDIR(info.st_mode):
        raise ReferenceError(f"{name} is a folder, not a reference file.")
    if not stat.S_ISREG(info.st_mode):
        raise ReferenceError(f"{name} is not a regular file (a device, pipe or socket).")
    if info.st_size > MAX_BYTES:
        raise ReferenceError(f"{name} is {info.st_size:,} bytes, more than the {MAX_BYTES:,} a "
                             "reference file may have.")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ReferenceError(f"{name} cannot be read ({exc.strerror or exc}).") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReferenceError(f"{name} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at "
                             f"position {exc.start}): it is not a reference file.") from None
    try:
        data = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise ReferenceError(f"{name} is not valid JSON ({exc.msg}, line {exc.lineno}).") \
            from None
    except RecursionError:
        raise ReferenceError(f"{name} nests lists and objects more than {MAX_DEPTH} levels "
                             "deep: it is not a reference file.") from None
    except ValueError as exc:  # NaN, Infinity, a number too large, an integer too long
        why = "an integer too long to read" if "digits" in str(exc) else str(exc).splitlines()[0]
        raise ReferenceError(f"{name} is not valid JSON: {why}.") from None
    return data


def load(path) -> Reference:
    """Read and validate one reference file; ReferenceError (one line) when it is not usable."""
    path = pathlib.Path(path)
    return validate(_parse(path), path.name)


def _files(folder) -> list[pathlib.Path]:
    try:
        return sorted(pathlib.Path(folder).glob("*.json"))
    except OSError:  # a folder that vanished or cannot be listed: no reference data
        return []


def available(folder=REFERENCE_DIR) -> list[Reference]:
    """Every valid reference file in ``folder`` (invalid ones are skipped; see ``problems``)."""
    out = []
    for p in _files(folder):
        try:
            out.append(load(p))
        except ReferenceError:
            continue
    return out


def problems(folder=REFERENCE_DIR) -> list[str]:
    """One line per reference file that is rejected, naming it and why."""
    out = []
    for p in _files(folder):
        try:
            load(p)
        except ReferenceError as exc:
            out.append(str(exc))
    return out


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


def find(name: str, *keys: str, folder=REFERENCE_DIR) -> list[tuple[Reference, Any]]:
    """(reference, value) for every GPU that has section ``name``/``keys``.

    The Reference returned carries that section's own date and command.
    """
    return [(section(r, name), v) for r in available(folder)
            if (v := r.get(name, *keys)) is not None]


def labelled(name: str, *keys: str) -> list[tuple[str, dict]]:
    """(label naming GPU and date, data) for every reference file whose ``name``/``keys`` is a
    dict of measurements: what a figure overlays."""
    return [(ref.label, v) for ref, v in find(name, *keys) if isinstance(v, dict)]


def _sections_to_keep(path: pathlib.Path) -> dict:
    """The sections of an existing reference file that are valid on their own: a run that
    updates some sections keeps these, even where another section of the file is rejected."""
    if not path.exists():
        return {}
    try:
        return dict(load(path).results)
    except ReferenceError:
        pass
    try:
        data = _parse(path)
    except ReferenceError:
        return {}
    results = data.get("results") if isinstance(data, dict) else None
    kept = {}
    for name, node in (results.items() if isinstance(results, dict) else ()):
        try:
            _depth_at_most(node, MAX_DEPTH - 2)
            _check_results({name: node})
        except _Bad:
            continue
        kept[name] = node
    return kept


def write(results: dict, gpu: str, command: str, driver: str = "", folder=REFERENCE_DIR,
          date: str | None = None, merge: bool = True) -> pathlib.Path:
    """Write (or update) the reference file for ``gpu`` and return its path.

    Each section records its own date and command, so a run that measures only some
    sections updates those and keeps the others (with their provenance).
    """
    results = jsonable(results)  # NumPy values, records, NaN: plain JSON, as every reader expects
    date = date or _dt.date.today().isoformat()
    folder = pathlib.Path(folder)
    path = folder / f"{slug(gpu)}.json"
    merged: dict = _sections_to_keep(path) if merge else {}
    kernels = kernel_fingerprints()
    for name, value in results.items():
        if isinstance(value, dict):
            value = {**value, PROVENANCE: {"date": date, "command": command, "kernels": kernels}}
        merged[name] = value
    data = {"format": FORMAT, "version": VERSION, "gpu": gpu, "date": date, "command": command,
            "driver": driver, "results": merged}
    try:
        _check_results(results)
    except _Bad as bad:  # a result no figure could draw: say which, before anything is written
        raise ReferenceError(f"the results of the {gpu} were not saved as reference data: "
                             f"{_field_problem(bad)}.") from None
    validate(data)
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path
