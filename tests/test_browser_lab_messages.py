"""The browser test's walk through every lab: its steps name cells each lab has and, run in a
kernel as the page runs them, show what they expect; a dropdown option that is not available is
skipped also when ipywidgets writes its spaces as nbsp."""
import re
import types

import pytest

import browser_test

LABS = sorted(browser_test.LABS)


def test_every_lab_is_walked():
    assert LABS == sorted(f"labs/{p.name}" for p in (browser_test.ROOT / "labs").glob("*.ipynb"))


@pytest.mark.parametrize("lab", LABS)
def test_the_walk_leaves_an_exercise_unanswered_then_answers_it_wrongly_and_rightly(lab):
    steps = browser_test.LABS[lab]
    answers = [answer for _, _, answer, _ in steps]
    assert None in answers and len(steps) >= 3, lab
    done = [w for *_, wanted in steps for w in wanted]
    assert any(re.match(r"Exercise \d+\.\d+ is not done yet", w) for w in done), lab
    assert any(re.match(r"Exercise \d+\.\d+ \(.+\) not yet right:", w) for w in done), lab
    assert re.match(r"Exercise \d+\.\d+ passed", steps[-1][3][0]), lab


@pytest.mark.parametrize("lab", LABS)
def test_the_lab_walk_names_cells_the_lab_has(lab):
    code = browser_test._code_cells(browser_test.ROOT / lab)
    for (exercise, check, _, _), (i, j, _, _) in zip(browser_test.LABS[lab], browser_test.lab_walk(lab)):
        assert code[i].lstrip().startswith(exercise), exercise
        assert check in code[j], check


def test_a_solution_answer_drops_the_markers_and_makes_its_edits():
    cell = "def f(x):\n    # Exercise 9.9\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION"
    assert browser_test.Solution().text(cell) == "def f(x):\n    # Exercise 9.9\n    return x + 1\n"
    assert "return x - 1" in browser_test.Solution(("x + 1", "x - 1")).text(cell)
    with pytest.raises(ValueError, match="no 'x \\* 2'"):
        browser_test.Solution(("x * 2", "x")).text(cell)


def _output_text(cell) -> str:
    """A cell's outputs as the page shows them: printed text and error blocks, no colours."""
    parts = []
    for out in cell.outputs:
        if out["output_type"] == "stream":
            parts.append(out["text"])
        elif out["output_type"] == "error":
            parts.append("\n".join(out["traceback"]))
    return re.sub(r"\x1b\[[0-9;]*m", "", "".join(parts))


def _step_problem(shown: str, wanted: list[str]) -> str | None:
    """Why ``shown`` is not the step's one short block with ``wanted`` in it, or None."""
    if not all(w in shown for w in wanted):
        return f"lacks {wanted}"
    if "Traceback" in shown or "gpucourse/" in shown:
        return "shows a traceback"
    if len(shown.splitlines()) > 6:
        return "is longer than 6 lines"
    return None


@pytest.mark.parametrize("lab", LABS)
def test_the_lab_walk_shows_what_each_step_expects(lab):
    """The walk's cells, in its order, in a kernel (nbclient) instead of the page: each step's
    answer typed into its exercise cell, then the cell after it; the page's own criteria."""
    import nbformat
    from nbclient import NotebookClient

    code = browser_test._code_cells(browser_test.ROOT / lab)
    run, checked = [code[0]], []
    for i, j, answer, wanted in browser_test.lab_walk(lab):
        run.append(code[i] if answer is None else answer)
        run.append(code[j])
        checked.append((len(run) - 1, wanted))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(t) for t in run])
    NotebookClient(nb, timeout=120, allow_errors=True, kernel_name="python3",
                   resources={"metadata": {"path": str(browser_test.ROOT)}}).execute()
    for k, (index, wanted) in enumerate(checked):
        shown = _output_text(nb.cells[index])
        problem = _step_problem(shown, wanted)
        assert problem is None, (k, problem, shown)


def test_a_dropdown_move_skips_options_that_are_not_available():
    labels = ["fp32", "tf32\xa0(not\xa0available\xa0here)", "fp16"]
    chosen = []

    def option(i):
        return types.SimpleNamespace(get_attribute=lambda name: labels[i],
                                     inner_text=lambda: labels[i])

    options = types.SimpleNamespace(count=lambda: len(labels), nth=option)
    select = types.SimpleNamespace(locator=lambda css: options, input_value=lambda: "fp32",
                                   select_option=lambda value: chosen.append(value))
    box = types.SimpleNamespace(locator=lambda css: types.SimpleNamespace(first=select))
    original = browser_test._widget_box
    browser_test._widget_box = lambda page, description: box
    try:
        browser_test._move(None, "precision", "dropdown")
    finally:
        browser_test._widget_box = original
    assert chosen == ["fp16"]
