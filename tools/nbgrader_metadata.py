#!/usr/bin/env python3
"""Write nbgrader's cell metadata into solutions/*.ipynb, from the course's own markers.

Each cell with a ``### BEGIN SOLUTION`` block becomes an nbgrader solution cell
(``ex0_1``; ``ex1_2_b`` for an exercise's second answer cell), the cell that printed
``Exercise N.M passed`` an autograder test worth one point (``ex0_1_check``), and every other
code cell a read-only cell (``course_<cell id>``): nbgrader's autograder then restores the
course's setup and check cells before it runs a submission. Markdown cells carry none.
``tools/make_labs.py`` copies the metadata into the labs. Run it after adding or merging a
solution, then regenerate the labs:

    python tools/nbgrader_metadata.py            # write
    python tools/nbgrader_metadata.py --check    # exit 1 if a solution's metadata is stale
"""
from __future__ import annotations

import argparse
import pathlib
import string
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from nbtools import ROOT, dumps, notebooks, read  # noqa: E402

sys.path.insert(0, str(ROOT / "src"))
from gpucourse.grade.submissions import LabError, read_lab  # noqa: E402  (standard library only)

SCHEMA = 3


def exercise_of(grade_id: str) -> str | None:
    """The exercise number in a grade_id written here: ``ex1_2_b`` → ``1.2``."""
    parts = grade_id.split("_")
    if len(parts) >= 2 and parts[0].startswith("ex") and parts[0][2:].isdigit() and \
            parts[1].isdigit():
        return f"{parts[0][2:]}.{parts[1]}"
    return None


def _id(exercise: str) -> str:
    return "ex" + exercise.replace(".", "_")


def nbgrader_cells(path: pathlib.Path) -> list[dict | None]:
    """The nbgrader metadata of each cell of a solution (None: none)."""
    lab = read_lab(path)
    slots = {s.cell: s for s in lab.slots}
    checks = {i: e for e, i in lab.checks.items()}
    out = []
    for k, cell in enumerate(lab.cells):
        meta = None
        if k in slots:
            s = slots[k]
            suffix = "" if s.ordinal == 0 else "_" + string.ascii_lowercase[s.ordinal]
            meta = {"grade": False, "grade_id": _id(s.exercise) + suffix, "locked": False,
                    "solution": True}
        elif k in checks:
            meta = {"grade": True, "grade_id": _id(checks[k]) + "_check", "locked": True,
                    "points": 1, "solution": False}
        elif cell.get("cell_type") == "code":
            meta = {"grade": False, "grade_id": f"course_{cell.get('id') or k}", "locked": True,
                    "solution": False}
        if meta is not None:
            meta.update(schema_version=SCHEMA, task=False)
        out.append(meta)
    return out


def with_metadata(path: pathlib.Path) -> dict:
    """The solution notebook at ``path`` with its nbgrader metadata up to date."""
    nb = read(path)
    for cell, meta in zip(nb["cells"], nbgrader_cells(path)):
        cell.setdefault("metadata", {}).pop("nbgrader", None)
        if meta is not None:
            cell["metadata"]["nbgrader"] = meta
    return nb


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="fail if a solution's metadata is stale")
    p.add_argument("--solutions", default=str(ROOT / "solutions"))
    args = p.parse_args(argv)
    stale, failed = [], []
    for path in notebooks(args.solutions):
        try:
            text = dumps(with_metadata(path))
        except (LabError, ValueError) as exc:
            failed.append(f"{path.name}: {exc}")
            continue
        if path.read_text(encoding="utf-8") == text:
            continue
        if args.check:
            stale.append(path.name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote nbgrader metadata into {path}")
    for line in failed:
        print(f"no nbgrader metadata for {line}", file=sys.stderr)
    if stale:
        print("nbgrader metadata out of date in solutions/: " + ", ".join(stale)
              + "\nrun `python tools/nbgrader_metadata.py`, then `python tools/make_labs.py`, "
                "and commit both.", file=sys.stderr)
    return 1 if stale or failed else 0


if __name__ == "__main__":
    sys.exit(main())
