"""Command line: ``python -m gpucourse doctor``, ``prepare``, ``run`` and ``grade``."""
from __future__ import annotations

import argparse
import sys

from .errors import CourseError


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpucourse",
                                     description="Helpers of the GPU optimization course.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="check the environment and print a fix for each problem")
    sub.add_parser("prepare", help="compile the kernel emulator's runtime and instrumentation "
                                   "once for this machine (make lab runs it), so that a lab's "
                                   "first kernel check is as quick as the others")
    run = sub.add_parser("run", help="run the chapters' experiments headless and write a report")
    run.add_argument("--chapter", type=int, action="append",
                     help="chapter number (repeatable); default: all")
    run.add_argument("--out", default="results", help="output folder (default: results)")
    from . import grade  # here, not at the top: doctor must run where grade's imports fail

    grade.add_arguments(sub.add_parser(
        "grade", help="grade learners' lab notebooks, each in a contained kernel, into a "
                      "gradebook"))
    args = parser.parse_args(argv)
    if args.command == "doctor":
        from .doctor import main as doctor_main  # lazy: doctor must run where `run`'s imports fail

        return doctor_main()
    if args.command == "prepare":
        from .check.lab import build_shared_parts  # lazy: as doctor

        problems = build_shared_parts()
        for p in problems:
            print(f"python -m gpucourse prepare: {p}; `python -m gpucourse doctor` says how to "
                  "fix the compiler.", file=sys.stderr)
        return 1 if problems else 0
    if args.command == "grade":
        return grade.main(args)
    from .runner import main as run_main  # lazy: it loads every chapter

    try:
        return run_main(chapters=args.chapter, out=args.out)
    except CourseError as exc:  # a bad --out: one sentence, not a traceback
        print(f"python -m gpucourse run: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
