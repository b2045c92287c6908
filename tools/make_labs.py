#!/usr/bin/env python3
"""Generate labs/*.ipynb from solutions/*.ipynb, the one source of each lab.

Each ``### BEGIN SOLUTION`` … ``### END SOLUTION`` block becomes
``raise NotImplementedError("Exercise N.M")`` (N.M from the nearest ``# Exercise N.M``
comment above it in the same cell, else from the notebook's markdown), outputs and
execution counts are dropped. A lab that a learner has edited since it was generated is
never overwritten: the new version is written beside it as ``<name>.new.ipynb``.

    python tools/make_labs.py            # regenerate
    python tools/make_labs.py --check    # exit 1 if a committed lab differs
"""
from __future__ import annotations

import argparse
import hashlib
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from nbtools import BEGIN, END, EXERCISE_RE, ROOT, dumps, lines, read, source  # noqa: E402

HASH_KEY = "gpucourse_generated_sha256"


class LabError(ValueError):
    pass


def strip_solutions(code: str, default_exercise: str | None, where: str) -> str:
    """Replace each solution block with a NotImplementedError naming its exercise."""
    out, inside, exercise, indent = [], False, default_exercise, ""
    for line in code.split("\n"):
        m = EXERCISE_RE.search(line)
        if m and not inside:
            exercise = m.group(1)
        stripped = line.strip()
        if stripped.startswith(BEGIN):
            if inside:
                raise LabError(f"{where}: nested {BEGIN}")
            inside, indent = True, line[: len(line) - len(line.lstrip())]
            if exercise is None:
                raise LabError(f"{where}: solution block with no '# Exercise N.M' before it")
            out.append(f'{indent}raise NotImplementedError("Exercise {exercise}")')
            continue
        if stripped.startswith(END):
            if not inside:
                raise LabError(f"{where}: {END} without {BEGIN}")
            inside = False
            continue
        if not inside:
            out.append(line)
    if inside:
        raise LabError(f"{where}: {BEGIN} without {END}")
    return "\n".join(out)


def lab_from_solution(nb: dict, name: str) -> dict:
    """The lab notebook for one solution notebook."""
    lab = {k: v for k, v in nb.items() if k != "cells"}
    lab["metadata"] = {k: v for k, v in nb.get("metadata", {}).items() if k != HASH_KEY}
    lab["cells"] = []
    exercise = None
    for i, cell in enumerate(nb["cells"]):
        cell = dict(cell)
        text = source(cell)
        if cell["cell_type"] == "markdown":
            m = re.search(r"Exercise\s+(\d+\.\d+)", text)
            if m:
                exercise = m.group(1)
        if cell["cell_type"] == "code":
            if BEGIN in text or END in text:
                text = strip_solutions(text, exercise, f"{name} cell {i}")
            cell["source"] = lines(text)
            cell["outputs"] = []
            cell["execution_count"] = None
            cell["metadata"] = {k: v for k, v in cell.get("metadata", {}).items()
                                if k not in ("execution",)}
        lab["cells"].append(cell)
    body = dumps(lab)
    lab["metadata"][HASH_KEY] = hashlib.sha256(body.encode()).hexdigest()
    return lab


def learner_edited(path: pathlib.Path) -> bool:
    """True when a lab on disk no longer matches the hash it was generated with."""
    try:
        nb = read(path)
    except (OSError, ValueError, RecursionError):
        return True
    if not isinstance(nb, dict) or not isinstance(nb.get("metadata", {}), dict):
        return True
    recorded = nb.get("metadata", {}).get(HASH_KEY)
    nb["metadata"] = {k: v for k, v in nb.get("metadata", {}).items() if k != HASH_KEY}
    return recorded != hashlib.sha256(dumps(nb).encode()).hexdigest()


def _solution(path: pathlib.Path) -> dict:
    """A solution notebook read from ``path``; LabError (one line naming it) when it is not one."""
    import json

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LabError(f"{path.name}: cannot be read ({exc.strerror or exc}).") from None
    try:
        nb = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise LabError(f"{path.name}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at position "
                       f"{exc.start}); save the notebook again from Jupyter.") from None
    except json.JSONDecodeError as exc:
        raise LabError(f"{path.name}: not a notebook, its JSON is broken ({exc.msg}, line "
                       f"{exc.lineno}); restore it from git or save it again from Jupyter.") \
            from None
    except RecursionError:
        raise LabError(f"{path.name}: not a notebook (its JSON nests too deeply).") from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list) or not isinstance(nb.get("metadata", {}), dict) or not all(
            isinstance(c, dict) and c.get("cell_type") in ("code", "markdown", "raw")
            and isinstance(c.get("metadata", {}), dict) and _is_source(c.get("source", ""))
            for c in cells):
        raise LabError(f"{path.name}: not a notebook (it needs a list of cells, each with a "
                       "cell_type and a source).")
    return nb


def _is_source(src) -> bool:
    return isinstance(src, str) or isinstance(src, list) and all(isinstance(s, str) for s in src)


def expected_labs(solutions: pathlib.Path, problems: list | None = None) -> dict[str, str]:
    """Lab file name → its generated text, for every solution notebook.

    A solution that cannot be read or turned into a lab raises LabError, or, when a
    ``problems`` list is given, is left out with one line appended to it.
    """
    out = {}
    for sol in sorted(solutions.glob("*.ipynb")):
        try:
            out[sol.name] = dumps(lab_from_solution(_solution(sol), sol.name))
        except LabError as exc:
            if problems is None:
                raise
            problems.append(str(exc))
    return out


def _current(path: pathlib.Path) -> str | None:
    """The lab on disk as text; None when there is none; "" when it cannot be read as text
    (it then differs from any generated lab and counts as edited, so it is kept)."""
    if not path.exists():
        return None
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="fail if committed labs differ")
    p.add_argument("--solutions", default=str(ROOT / "solutions"))
    p.add_argument("--labs", default=str(ROOT / "labs"))
    p.add_argument("--force", action="store_true", help="overwrite labs even if edited")
    args = p.parse_args(argv)
    sol_dir, lab_dir = pathlib.Path(args.solutions), pathlib.Path(args.labs)
    lab_dir.mkdir(exist_ok=True)
    problems: list[str] = []
    wanted = expected_labs(sol_dir, problems)
    stale = []
    for name, text in wanted.items():
        path = lab_dir / name
        current = _current(path)
        if current == text:
            continue
        if args.check:
            stale.append(name)
            continue
        if current is not None and learner_edited(path) and not args.force:
            new = path.with_suffix(".new.ipynb")
            new.write_text(text, encoding="utf-8")
            print(f"{path} has your edits, so it was kept; the regenerated lab is in {new}.")
            continue
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    for line in problems:  # after the labs that could be made: one line each, then fail
        print(f"no lab from {sol_dir / line}", file=sys.stderr)
    if args.check and stale:
        print("labs out of date with solutions/: " + ", ".join(stale)
              + "\nrun `python tools/make_labs.py` and commit labs/.", file=sys.stderr)
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
