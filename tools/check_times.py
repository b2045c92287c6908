"""How long each lab check took when its solution was last executed (tools/run_notebook.py
records each cell's start and end in the cell's metadata), slowest first.

    python tools/check_times.py [solutions/*.ipynb] [--over 2]

A check cell is one whose nbgrader id ends in ``_check``. The times are those of the machine
and the load the solutions last ran under: re-execute them on a quiet machine before reading
anything into them. With ``--over S`` the exit status is 1 when a check took more than S s.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _seconds(execution: dict) -> float | None:
    start = execution.get("iopub.execute_input") or execution.get("iopub.status.busy")
    end = execution.get("shell.execute_reply") or execution.get("iopub.status.idle")
    if not (start and end):
        return None
    parse = dt.datetime.fromisoformat
    return (parse(end.replace("Z", "+00:00")) - parse(start.replace("Z", "+00:00"))).total_seconds()


def check_times(path: pathlib.Path) -> list[tuple[str, float]]:
    """(nbgrader id, seconds) of each check cell of the notebook at ``path`` that has timings."""
    out = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        if cell["cell_type"] == "code" and grade_id.endswith("_check"):
            seconds = _seconds(cell.get("metadata", {}).get("execution", {}))
            if seconds is not None:
                out.append((grade_id, seconds))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("notebooks", nargs="*", type=pathlib.Path)
    p.add_argument("--over", type=float, default=None, help="fail when a check took longer (s)")
    args = p.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "solutions").glob("*.ipynb"))
    rows = [(s, gid, path.name) for path in paths for gid, s in check_times(path)]
    if not rows:
        print("no check cell with timings: run tools/run_notebook.py on the solutions first")
        return 1
    for seconds, gid, name in sorted(rows, reverse=True):
        print(f"{seconds:7.2f} s  {gid:16s} {name}")
    slow = [r for r in rows if args.over is not None and r[0] > args.over]
    if slow:
        print(f"{len(slow)} check(s) took more than {args.over:g} s", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
