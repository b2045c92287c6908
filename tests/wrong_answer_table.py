"""The two tests every lab's wrong-answer table runs (tests/test_wrong_answers_chN.py): the
reference answer of each exercise passes its check, and each wrong answer is rejected with
the words of its mistake. A table module binds them to its own dicts:

    test_the_reference_passes, test_a_wrong_answer_is_rejected_and_named = \\
        table_tests(CHECKS, REFERENCES, WRONG_ANSWERS)
"""
from __future__ import annotations

import pytest

from gpucourse.check import expect_failure


def table_tests(checks: dict, references: dict, wrong_answers: dict, exercises=None):
    """(reference test, wrong-answer test) over ``exercises`` (default: every reference)."""
    exercises = sorted(references) if exercises is None else list(exercises)
    rows = [(e, w, a, m) for e in exercises for w, a, m in wrong_answers.get(e, [])]

    @pytest.mark.parametrize("exercise", exercises)
    def test_the_reference_passes(exercise, capsys):
        checks[exercise](references[exercise])
        assert capsys.readouterr().out.startswith(f"Exercise {exercise} passed")

    @pytest.mark.parametrize("exercise, what, wrong, words", rows,
                             ids=[f"{e}-{w}" for e, w, _, _ in rows])
    def test_a_wrong_answer_is_rejected_and_named(exercise, what, wrong, words):
        with expect_failure(words):
            checks[exercise](wrong)

    return test_the_reference_passes, test_a_wrong_answer_is_rejected_and_named
