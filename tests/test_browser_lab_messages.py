"""The browser test's walk through a lab: its steps name cells the lab has and, run in a kernel
as the page runs them, show what they expect; a dropdown option that is not available is
skipped also when ipywidgets writes its spaces as nbsp."""
import json
import re
import types

import browser_test


def test_the_lab_walk_names_cells_the_lab_has():
    cells = json.loads((browser_test.ROOT / browser_test.LAB).read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    for exercise, check, _, _ in browser_test.LAB_STEPS:
        assert any(t.lstrip().startswith(exercise) for t in code), exercise
        assert any(check in t for t in code), check


def _output_text(cell) -> str:
    """A cell's outputs as the page shows them: printed text and error blocks, no colours."""
    parts = []
    for out in cell.outputs:
        if out["output_type"] == "stream":
            parts.append(out["text"])
        elif out["output_type"] == "error":
            parts.append("\n".join(out["traceback"]))
    return re.sub(r"\x1b\[[0-9;]*m", "", "".join(parts))


def test_the_lab_walk_shows_what_each_step_expects():
    """The walk's cells, in its order, in a kernel (nbclient) instead of the page: each step's
    answer typed into its exercise cell, then the cell after it; the page's own criteria."""
    import nbformat
    from nbclient import NotebookClient

    cells = json.loads((browser_test.ROOT / browser_test.LAB).read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    run, checked = [code[0]], []
    for exercise, check, answer, wanted in browser_test.LAB_STEPS:
        run.append(answer if answer is not None
                   else next(t for t in code if t.lstrip().startswith(exercise)))
        run.append(next(t for t in code if check in t))
        checked.append((len(run) - 1, wanted))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(t) for t in run])
    NotebookClient(nb, timeout=120, allow_errors=True, kernel_name="python3",
                   resources={"metadata": {"path": str(browser_test.ROOT)}}).execute()
    for k, (index, wanted) in enumerate(checked):
        shown = _output_text(nb.cells[index])
        assert all(w in shown for w in wanted), (k, shown, wanted)
        assert "Traceback" not in shown and "gpucourse/" not in shown, (k, shown)
        assert len(shown.splitlines()) <= 6, (k, shown)


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
