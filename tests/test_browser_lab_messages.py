"""The browser test's walk through a lab: its steps name cells the lab has, and a dropdown
option that is not available is skipped also when ipywidgets writes its spaces as nbsp."""
import json
import types

import browser_test


def test_the_lab_walk_names_cells_the_lab_has():
    cells = json.loads((browser_test.ROOT / browser_test.LAB).read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    for exercise, check, _, _ in browser_test.LAB_STEPS:
        assert any(t.lstrip().startswith(exercise) for t in code), exercise
        assert any(check in t for t in code), check


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
