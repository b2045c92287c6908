"""The chapters' predict → measure → explain loop, and text fixes found in review.

Every **Predict** in a chapter is followed by a guess cell (``my_... = ...  # edit me``) whose
guess a later cell prints beside what was measured or modelled; the answer is not given before
the question; and statements review found wrong stay fixed.
"""
import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "notebooks").glob("0*.ipynb"))
GUESS = re.compile(r"^(my_\w+)\s*=.*#\s*edit me", re.M)


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _cells(name: str) -> list[dict]:
    path = next(p for p in CHAPTERS if p.name.startswith(name))
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _text_before(cells: list[dict], marker: str) -> str:
    """The markdown of a notebook up to (and including) the cell holding ``marker``, with ``marker`` cut off."""
    out = []
    for c in cells:
        src = _source(c)
        if marker in src:
            out.append(src.split(marker)[0])
            return "\n".join(out)
        if c["cell_type"] == "markdown":
            out.append(src)
    raise AssertionError(f"{marker!r} not found")


def test_there_are_chapters():
    assert len(CHAPTERS) >= 8


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_predict_has_a_guess_that_a_later_cell_prints(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "markdown" or "**Predict" not in _source(cell):
            continue
        j = next((k for k in range(i + 1, len(cells)) if cells[k]["cell_type"] == "code"), None)
        names = GUESS.findall(_source(cells[j])) if j is not None else []
        assert names, (f"{path.name} cell {i}: its Predict is not followed by a guess cell "
                       "(`my_guess_... = ...  # edit me`)")
        later = [_source(c) for c in cells[j + 1:] if c["cell_type"] == "code"]
        for name in names:
            assert any("print" in s and re.search(rf"\b{name}\b", s) for s in later), (
                f"{path.name}: no cell after cell {j} prints the guess {name} beside the result")


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_a_cell_that_prints_a_measurement_beside_a_guess_is_not_compared_by_nbval(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    guesses = {n for c in cells if c["cell_type"] == "code" for n in GUESS.findall(_source(c))}
    for i, c in enumerate(cells):
        src = _source(c)
        if c["cell_type"] == "code" and "print" in src and "measured" in src \
                and any(re.search(rf"\b{g}\b", src) for g in guesses):
            assert src.startswith("# NBVAL_IGNORE_OUTPUT"), f"{path.name} cell {i}"


@pytest.mark.parametrize("chapter, question, answer", [
    ("01", "**Predict.** How many times slower is the stride-32 copy", "8x"),
    ("01", "**Predict.** How many times slower is the stride-32 copy", "16x"),
    ("02", "**Predict.** A warp reads one column of `float tile[32][32]`", "32-way"),
    ("04", "**Predict.** Each branch is a loop of `k` fused multiply-adds", "runs **both** sides"),
])
def test_the_question_comes_before_its_answer(chapter, question, answer):
    assert answer not in _text_before(_cells(chapter), question)


def test_a_pageable_copy_is_described_as_cuda_documents_it():
    text = "\n".join(_source(c) for c in _cells("02"))
    assert "blocks your program until it is done" not in text
    assert "returns once your whole buffer has been\ncopied into staging memory" in text


def test_the_h200_l2_gives_the_published_and_the_reported_figure():
    text = "\n".join(_source(c) for c in _cells("02"))
    assert "60 MB on an H200" not in text
    assert "50 MB" in text and "60 MiB" in text


def test_chapter_5_quotes_no_numbers_from_an_unrecorded_run():
    text = "\n".join(_source(c) for c in _cells("05"))
    assert "not recorded" not in text
    for number in ("40.5 TFLOP/s", "776", "744", "405"):
        assert number not in text


@pytest.mark.parametrize("chapter", ["00", "01"])
def test_chapters_0_and_1_point_to_the_cuda_primer(chapter):
    text = "\n".join(_source(c) for c in _cells(chapter) if c["cell_type"] == "markdown")
    assert "[the CUDA C primer](00b_cuda_primer.ipynb)" in text


def test_chapter_4_explains_the_reference_results_that_contradict_its_story():
    text = "\n".join(_source(c) for c in _cells("04") if c["cell_type"] == "markdown")
    assert "Why the H200 sweep is fastest at 192" in text
    assert "Why v2 and v3 run at the same speed" in text
