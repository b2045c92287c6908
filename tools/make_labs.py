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
    except (OSError, ValueError):
        return True
    recorded = nb.get("metadata", {}).get(HASH_KEY)
    nb["metadata"] = {k: v for k, v in nb.get("metadata", {}).items() if k != HASH_KEY}
    return recorded != hashlib.sha256(dumps(nb).encode()).hexdigest()


def expected_labs(solutions: pathlib.Path) -> dict[str, str]:
    """Lab file name → its generated text, for every solution notebook."""
    out = {}
    for sol in sorted(solutions.glob("*.ipynb")):
        out[sol.name] = dumps(lab_from_solution(read(sol), sol.name))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="fail if committed labs differ")
    p.add_argument("--solutions", default=str(ROOT / "solutions"))
    p.add_argument("--labs", default=str(ROOT / "labs"))
    p.add_argument("--force", action="store_true", help="overwrite labs even if edited")
    args = p.parse_args(argv)
    sol_dir, lab_dir = pathlib.Path(args.solutions), pathlib.Path(args.labs)
    lab_dir.mkdir(exist_ok=True)
    wanted = expected_labs(sol_dir)
    stale = []
    for name, text in wanted.items():
        path = lab_dir / name
        current = path.read_text(encoding="utf-8") if path.exists() else None
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
    if args.check and stale:
        print("labs out of date with solutions/: " + ", ".join(stale)
              + "\nrun `python tools/make_labs.py` and commit labs/.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
