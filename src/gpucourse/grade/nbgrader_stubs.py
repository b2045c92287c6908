"""nbgrader support: its student version written with the course's own exercise stubs.

nbgrader replaces a ``### BEGIN SOLUTION`` block with one fixed stub; the course's labs say
which exercise is missing (``raise NotImplementedError("Exercise 0.1")``). ``configure``
puts ``ExerciseStubs`` in place of nbgrader's ClearSolutions, so that
``nbgrader generate_assignment`` on the solutions writes the labs that ``tools/make_labs.py``
writes. Needs nbgrader (``pip install "gpucourse[grading]"``); the course itself never
imports this module.

In ``nbgrader_config.py``::

    from gpucourse.grade.nbgrader_stubs import configure
    configure(get_config())
"""
from __future__ import annotations

import re

from nbgrader.converters import GenerateAssignment
from nbgrader.preprocessors import ClearSolutions

GRADE_ID = re.compile(r"^ex(\d+)_(\d+)(?:_[a-z])?$")


def exercise(cell) -> str:
    """The exercise of a solution cell, from the grade_id ``tools/nbgrader_metadata.py`` gave
    it (``ex1_2_b`` → ``1.2``)."""
    grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
    m = GRADE_ID.match(grade_id)
    if not m:
        raise ValueError(f"solution cell {grade_id!r} has no exercise number: run "
                         "`python tools/nbgrader_metadata.py` on the solutions.")
    return f"{m.group(1)}.{m.group(2)}"


class ExerciseStubs(ClearSolutions):
    """ClearSolutions whose stub names the cell's exercise, as the course's labs do."""

    def _replace_solution_region(self, cell, language: str) -> bool:
        if cell.cell_type != "code" or "BEGIN SOLUTION" not in cell.source:
            return super()._replace_solution_region(cell, language)
        saved = self.code_stub
        self.code_stub = dict(saved, python=f'raise NotImplementedError("Exercise '
                                            f'{exercise(cell)}")')
        try:
            return super()._replace_solution_region(cell, language)
        finally:
            self.code_stub = saved


def configure(c) -> None:
    """Make nbgrader's generate_assignment use ExerciseStubs (``c``: nbgrader's config)."""
    default = GenerateAssignment.class_traits()["preprocessors"].default()
    c.GenerateAssignment.preprocessors = [ExerciseStubs if p is ClearSolutions else p
                                          for p in default]
