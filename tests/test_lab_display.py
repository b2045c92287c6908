"""How a failed or unanswered exercise looks: one short block in IPython (JupyterLab, nbclient,
the terminal) with the message, the hint and the learner's own line, and none of the course's
frames; every unanswered exercise, CUDA strings included, says "Exercise N.M is not done yet"."""
import re

import nbformat
import pytest
from nbclient import NotebookClient

from gpucourse.check import ch3 as c3
from gpucourse.check import lab

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _text(lines):
    return "\n".join(ANSI.sub("", line) for line in lines)


def test_a_failed_check_renders_as_its_message_alone():
    with pytest.raises(lab.CheckFailed) as failure:
        c3.check_strategy(lambda p, a, m, n: ("data", 1))
    shown = _text(failure.value._render_traceback_())
    assert shown.startswith("Exercise 3.4 (a parallel strategy from the memory model) not yet right:")
    assert "16 bytes per parameter" in shown
    assert "Traceback" not in shown and "ch3.py" not in shown and "__exit__" not in shown
    assert len(shown.splitlines()) <= 4


def test_the_learners_own_line_is_named_where_their_code_failed():
    def choose_strategy(params, activations, device_bytes, devices):
        need = None
        return need + 1, 1  # the learner's slip

    with pytest.raises(lab.CheckFailed) as failure:
        c3.check_strategy(choose_strategy)
    shown = _text(failure.value._render_traceback_())
    assert "does your function end with `return ...`?" in shown
    assert "(in your code: test_lab_display.py, line" in shown and "return need + 1, 1" in shown


def test_an_unanswered_exercise_and_its_check_cell_say_not_done_yet():
    namespace = {"check3": c3}
    stub = NotImplementedError("Exercise 4.2")
    assert lab.unanswered_sentence(stub, namespace).startswith("Exercise 4.2 is not done yet")
    assert lab.unanswered_sentence(NotImplementedError("something else"), namespace) is None


CELLS = [
    "import gpucourse as gc\nfrom gpucourse.check import ch3 as check3, ch4 as check4\n"
    "from gpucourse.check import Exercise, puzzles",
    '# Exercise 4.2\nraise NotImplementedError("Exercise 4.2")',
    "check4.check_no_divergence(NO_DIVERGENCE)",
    "check3.check_strategy(lambda p, a, m, n: ('data', 1))",
    'with Exercise("0.1", "vectorized root mean square"):\n    rms_fast([1.0])',
    "undefined_name + 1",
    "def f(steps):\n    return steps + missing\n"
    "check3.check_choose_microbatches(lambda steps: f(steps), guess=4)",
    "puzzles.check_puzzle(3, PUZZLE_3)",  # one checker of many exercises: its k says which
]


def test_in_a_notebook_each_failure_is_one_short_block():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    NotebookClient(nb, timeout=120, allow_errors=True, kernel_name="python3").execute()
    shown = [_text(o["traceback"]) for c in nb.cells for o in c.outputs if o["output_type"] == "error"]
    assert shown[0] == ("Exercise 4.2 is not done yet: replace the `raise NotImplementedError` "
                        "line with your code.")
    assert shown[1].startswith("Exercise 4.2 is not done yet: `NO_DIVERGENCE` is not defined")
    assert shown[2].startswith("Exercise 3.4 (a parallel strategy from the memory model) not yet right:")
    assert shown[3].startswith("Exercise 0.1 is not done yet: `rms_fast` is not defined")
    for block in shown[:4]:
        assert "Traceback" not in block and "gpucourse" not in block and len(block.splitlines()) <= 4
    # anything else keeps IPython's own traceback: a NameError of the learner's own
    assert "NameError" in shown[4] and "undefined_name" in shown[4]
    assert "NameError" in shown[5] and "missing" in shown[5]
    assert shown[6].startswith("Exercise 0.5 is not done yet: `PUZZLE_3` is not defined")


def test_the_gradebook_reads_a_failed_check_as_the_checkers_verdict():
    from gpucourse.grade import gradebook

    text = "Exercise 3.4 (a parallel strategy) not yet right:\nround the number of stages up."
    assert gradebook.first_line("CheckFailed", text) == "round the number of stages up."


def test_plural_agreement_in_a_nan_count():
    import numpy as np

    from gpucourse.check import compare_report

    report = compare_report(np.array([np.nan, 1.0]), np.array([0.0, 1.0]), rtol=0, atol=0, name="y")
    assert "1 element is NaN: was it ever written?" in report
