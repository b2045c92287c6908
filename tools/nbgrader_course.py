#!/usr/bin/env python3
"""Make an nbgrader course folder from the course's solutions (one assignment per lab).

    python tools/nbgrader_course.py COURSE_DIR [--lab 0 --lab 1 ...]

writes ``COURSE_DIR/nbgrader_config.py`` (nbgrader then writes the course's own
``raise NotImplementedError("Exercise N.M")`` stubs) and ``COURSE_DIR/source/labN/`` with the
lab's solution notebook. Then, in COURSE_DIR: ``nbgrader generate_assignment lab0`` and,
once submissions are in ``submitted/<learner>/lab0/``, ``nbgrader autograde lab0``.
An existing nbgrader_config.py is kept.
"""
from __future__ import annotations

import argparse
import pathlib
import shutil
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from nbtools import ROOT, notebooks  # noqa: E402

CONFIG = '''\
"""nbgrader settings for the GPU course's labs (written by tools/nbgrader_course.py)."""
from gpucourse.grade.nbgrader_stubs import configure

c = get_config()  # noqa: F821 - nbgrader provides it
configure(c)
# A check answers in under 2 s; a whole lab runs in well under a minute.
c.Execute.timeout = 120
'''


def assignment(path: pathlib.Path) -> str:
    """``00_start_here_lab.ipynb`` → ``lab0``."""
    return "lab" + (path.name.split("_", 1)[0].lstrip("0") or "0")


def make_course(course, labs=None, solutions=ROOT / "solutions") -> list[str]:
    """Write the course folder; return the assignment names."""
    course = pathlib.Path(course)
    course.mkdir(parents=True, exist_ok=True)
    config = course / "nbgrader_config.py"
    if not config.exists():
        config.write_text(CONFIG, encoding="utf-8")
    names = []
    for path in notebooks(solutions):
        name = assignment(path)
        if labs and name not in labs:
            continue
        folder = course / "source" / name
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, folder / path.name)
        names.append(name)
    return names


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("course", help="the nbgrader course folder to write")
    p.add_argument("--lab", action="append", help="lab number (repeatable); default: all")
    p.add_argument("--solutions", default=str(ROOT / "solutions"))
    args = p.parse_args(argv)
    labs = [f"lab{int(x)}" for x in args.lab] if args.lab else None
    names = make_course(args.course, labs, pathlib.Path(args.solutions))
    if not names:
        print(f"no lab matched {args.lab}", file=sys.stderr)
        return 1
    print(f"{args.course}: assignments {', '.join(names)}; "
          f"next: cd {args.course} && nbgrader generate_assignment {names[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
