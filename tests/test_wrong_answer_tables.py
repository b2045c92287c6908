"""Every exercise of every lab has its own wrong-answer table: at least five plausible wrong
answers, each with the words its rejection must say, and the reference answer, in
tests/test_wrong_answers_ch<N>.py (``CHECKS``, ``REFERENCES``, ``WRONG_ANSWERS``). A new
exercise without one fails here."""
import importlib.util
import json
import pathlib

import pytest

from nbtools import EXERCISE_RE

ROOT = pathlib.Path(__file__).resolve().parent.parent
MINIMUM = 5


def exercises() -> list[str]:
    """The exercise numbers of the solutions, from their ``# Exercise N.M`` comments."""
    found = set()
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                found.update(EXERCISE_RE.findall("".join(cell["source"])))
    return sorted(found, key=lambda n: tuple(map(int, n.split("."))))


def table(chapter: str):
    path = ROOT / "tests" / f"test_wrong_answers_ch{chapter}.py"
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location(f"wrong_answers_ch{chapter}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_solutions_have_exercises():
    assert len(exercises()) >= 30


@pytest.mark.parametrize("number", exercises())
def test_each_exercise_has_its_wrong_answer_table(number):
    module = table(number.split(".")[0])
    assert module is not None, f"Exercise {number}: no tests/test_wrong_answers_ch{number.split('.')[0]}.py"
    rows = module.WRONG_ANSWERS.get(number, [])
    assert len(rows) >= MINIMUM, (f"Exercise {number} has {len(rows)} wrong answers in its table; "
                                  f"write at least {MINIMUM}")
    assert number in module.CHECKS and number in module.REFERENCES
    for what, _, words in rows:
        assert what and words, f"Exercise {number}: each row names the mistake and the words"
