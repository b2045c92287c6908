"""Reading submissions: answers matched by exercise, everything else the learner changed
ignored and reported, malformed notebooks named in one sentence. No kernel runs here."""
import json

import pytest

import grade_class as G
import make_labs
from gpucourse.grade import gradebook
from gpucourse.grade.submissions import find_labs, graded_notebook, learner_name, \
    read_submission


@pytest.fixture(scope="module")
def labs():
    return find_labs(G.ROOT / "solutions")


def _write(tmp_path, nb, name="alice.ipynb"):
    return G.write(tmp_path, name, nb)


def _source(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def test_the_graders_lab_is_the_lab_make_labs_writes(root, labs):
    """The grader's view of each lab (its cells with the stubs) is the generated lab."""
    for name, text in make_labs.expected_labs(root / "solutions").items():
        lab = labs[name]
        handout = json.loads(text)["cells"]
        slots = {s.cell: s for s in lab.slots}
        assert len(handout) == len(lab.cells)
        for k, (ours, theirs) in enumerate(zip(lab.cells, handout)):
            want = slots[k].template() if k in slots else _source(ours)
            assert want == _source(theirs), f"{name} cell {k}"


def test_every_lab_has_a_check_for_each_exercise(labs):
    assert set(labs) >= {"00_start_here_lab.ipynb", "01_architecture_and_bottlenecks_lab.ipynb"}
    for lab in labs.values():
        assert lab.exercises and set(lab.checks) == set(lab.exercises)
        assert len(lab.exercises) >= 2


def test_a_right_submission_gives_the_solutions_code(tmp_path, labs):
    sub = read_submission(_write(tmp_path, G.right()), labs)
    assert sub.lab.name == G.LAB0 and not sub.problem and not sub.notes
    ok = G.right_answers()
    for a in sub.answers:
        assert a.state == "answered" and not a.note
        body = "\n".join(line[4:] if line.startswith("    ") else line for line in a.lines)
        assert body == ok[a.slot.exercise][a.slot.ordinal]


def test_unanswered_and_partly_answered(tmp_path, labs):
    sub = read_submission(_write(tmp_path, G.learner({"0.2": G.right_answers()["0.2"]})), labs)
    assert [(a.slot.exercise, a.state) for a in sub.answers] == [("0.1", "not answered"),
                                                                ("0.2", "answered")]


def test_edits_around_the_answer_are_undone_and_reported(tmp_path, labs):
    """A learner who makes the reference rms_loop call their own rms_fast gains nothing."""
    nb = G.learner({"0.1": G.RMS_NO_MEAN, "0.2": G.right_answers()["0.2"]})
    cell = next(c for c in nb["cells"] if "def rms_loop" in _source(c))
    cell["source"] = _source(cell).replace("return (total / len(x)) ** 0.5",
                                           "return rms_fast(x)")
    sub = read_submission(_write(tmp_path, nb), labs)
    [a, _] = sub.answers
    assert a.state == "answered" and "undone" in a.note
    graded, roles = graded_notebook(sub)
    [answer_cell] = [c for c, (role, e) in zip(graded["cells"], roles)
                     if role == "answer" and e == "0.1"]
    text = _source(answer_cell)
    assert "return (total / len(x)) ** 0.5" in text and "return rms_fast(x)" not in text
    assert "np.dot(x, x)))" in text  # the learner's (wrong) answer is still theirs


def test_an_edited_check_cell_is_replaced_and_reported(tmp_path, labs):
    nb = G.edit_cell(G.right(), 'with Exercise("0.1"', G.FAKE_PASS)
    sub = read_submission(_write(tmp_path, nb), labs)
    assert sub.exercise_notes == {"0.1": ["the check cell of Exercise 0.1 was edited; the "
                                          "course's check ran instead"]}
    graded, roles = graded_notebook(sub)
    [check] = [c for c, (role, e) in zip(graded["cells"], roles) if role == "check" and e == "0.1"]
    assert _source(check).startswith('with Exercise("0.1"')


def test_cells_of_the_learners_own_are_not_run_and_reported(tmp_path, labs):
    nb = G.right()
    nb["cells"].append({"cell_type": "code", "id": "mine1", "metadata": {}, "outputs": [],
                        "execution_count": None, "source": "print('scratch')"})
    sub = read_submission(_write(tmp_path, nb), labs)
    assert sub.notes == ["1 code cell not in the lab (cell 11) did not run: only answer cells "
                         "are graded"]
    graded, _ = graded_notebook(sub)
    assert "scratch" not in json.dumps(graded)


def test_a_deleted_answer_cell_is_missing(tmp_path, labs):
    nb = G.right()
    nb["cells"] = [c for c in nb["cells"] if "def measure" not in _source(c)]
    sub = read_submission(_write(tmp_path, nb), labs)
    assert [a.state for a in sub.answers] == ["answered", "missing"]
    assert "no answer cell for Exercise 0.2" in sub.answers[1].note


def test_two_answer_cells_for_one_exercise_are_a_duplicate(tmp_path, labs):
    nb = G.right()
    k = next(i for i, c in enumerate(nb["cells"]) if "def measure" in _source(c))
    copy = dict(nb["cells"][k], id="copy1")
    nb["cells"].insert(k + 1, copy)
    sub = read_submission(_write(tmp_path, nb), labs)
    assert [a.state for a in sub.answers] == ["answered", "duplicate"]
    assert sub.answers[1].note.startswith("2 cells answer Exercise 0.2 (cells 7, 8)")


def test_an_answer_cell_that_lost_its_comment_is_found_by_its_cell_id(tmp_path, labs):
    nb = G.right()
    cell = next(c for c in nb["cells"] if "def measure" in _source(c))
    cell["source"] = _source(cell).replace("    # Exercise 0.2\n", "")
    sub = read_submission(_write(tmp_path, nb), labs)
    assert [a.state for a in sub.answers] == ["answered", "answered"]


@pytest.mark.parametrize("content, reason", [
    (b"\xff\xfe not text", "not a notebook: the file is not UTF-8 text"),
    (b'{"cells": [', "not a notebook: its JSON is broken"),
    (b'{"cells": "none"}', "not a notebook: it needs a list of cells"),
    (b"[1, 2, 3]", "not a notebook: it needs a list of cells"),
    (b'{"cells": [{"cell_type": "code", "source": 3}]}', "not a notebook: it needs a list"),
])
def test_malformed_files_are_not_graded_with_a_reason(tmp_path, labs, content, reason):
    path = tmp_path / "bob.ipynb"
    path.write_bytes(content)
    sub = read_submission(path, labs, "00_start_here_lab.ipynb")
    assert sub.problem.startswith(reason) and sub.problem.endswith(".")
    assert sub.lab.name == G.LAB0  # its rows go into lab 0's gradebook
    rows = gradebook.exercise_rows(sub, None, None, None)
    assert [(r.exercise, r.status, r.passed) for r in rows] == [("0.1", "not graded", False),
                                                               ("0.2", "not graded", False)]


def test_a_huge_file_is_not_read(tmp_path, labs, monkeypatch):
    from gpucourse.grade import submissions

    monkeypatch.setattr(submissions, "MAX_BYTES", 100)
    sub = read_submission(_write(tmp_path, G.right()), labs)
    assert "far more than a lab notebook" in sub.problem


def test_the_wrong_lab_and_a_notebook_without_exercises(tmp_path, labs):
    sub = read_submission(_write(tmp_path, G.right(G.LAB1)), labs, G.LAB0)
    assert sub.problem == ("wrong lab: it holds the exercises of lab 1 (1.1, 1.2, 1.3, 1.4, "
                           "1.5), not those of lab 0.")
    empty = {"cells": [{"cell_type": "markdown", "source": "# notes", "metadata": {}}],
             "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    sub = read_submission(_write(tmp_path, empty, "x.ipynb"), labs, G.LAB0)
    assert sub.problem == ("none of lab 0's exercises (0.1, 0.2) is in it: hand in the lab "
                           "notebook itself.")
    sub = read_submission(_write(tmp_path, empty, "y.ipynb"), labs)
    assert sub.problem.startswith("none of the labs' exercises is in it") and sub.lab is None


def test_the_lab_is_found_from_the_exercises_without_lab(tmp_path, labs):
    assert read_submission(_write(tmp_path, G.right(G.LAB1)), labs).lab.name == G.LAB1


def test_learner_names(tmp_path, labs):
    assert learner_name(tmp_path / "alice.ipynb", labs) == "alice"
    assert learner_name(tmp_path / "class" / "bob" / G.LAB0, labs) == "bob"
    assert learner_name(tmp_path / "submitted" / "carol" / "lab0" / G.LAB0, labs) == "carol"


def test_first_line_skips_the_harness_header():
    text = "Exercise 0.1 (vectorized root mean square) not yet right:\nrms at n=7: off\nmore"
    assert gradebook.first_line("AssertionError", text) == "rms at n=7: off"
    assert gradebook.first_line("NameError", "name 'rms_fast' is not defined") == \
        "NameError: name 'rms_fast' is not defined"
    assert gradebook.first_line("AssertionError", "") == "the check failed without a message"


def test_an_answer_pasted_from_the_solutions_is_flagged(tmp_path, labs):
    sub = read_submission(G.ROOT / "solutions" / G.LAB0, labs)
    assert all("was it copied from solutions/?" in a.note for a in sub.answers)


def test_a_broken_solution_leaves_out_its_lab_only(tmp_path):
    import shutil

    for name in (G.LAB0, G.LAB1):
        shutil.copy(G.ROOT / "solutions" / name, tmp_path / name)
    nb = json.loads((tmp_path / G.LAB1).read_text())
    for cell in nb["cells"]:
        cell["outputs"] = []  # never executed: no check cell can be found
    (tmp_path / G.LAB1).write_text(json.dumps(nb))
    problems = []
    assert list(find_labs(tmp_path, problems)) == [G.LAB0]
    [line] = problems
    assert line.startswith(f"{G.LAB1}: no cell printed 'Exercise 1.1 passed'")


def test_the_summary_page_escapes_what_learners_wrote(tmp_path, labs):
    from gpucourse.grade import Limits

    row = gradebook.Row("<b>eve</b>", G.LAB0, "0.1", False, "failed",
                        "<script>alert(1)</script>", 0.1, "<i>note</i>", "eve.ipynb")
    sub = {"learner": row.learner, "lab": G.LAB0, "file": "<eve>.ipynb", "graded": True,
           "problem": "", "notes": ["<u>x</u>"], "stopped": "", "seconds": 1.0, "notebook": "",
           "supervisor": {}, "exercises": [vars(row)]}
    book = {"generated": "2026-01-01T10:00:00+00:00", "limits_text": gradebook.limits_text(
        Limits()), "enforcement": ["<em>all</em>"], "submissions": [sub],
            "summary": gradebook.summary([row], labs)}
    gradebook.write_html(book, labs, tmp_path / "index.html")
    page = (tmp_path / "index.html").read_text()
    for raw in ("<script>", "<b>eve", "<i>note", "<u>x", "<em>all"):
        assert raw not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_copied_cell_makes_only_its_own_answer_a_duplicate(tmp_path, labs):
    nb = G.right(G.LAB1)
    k = next(i for i, c in enumerate(nb["cells"]) if "def limited_by" in _source(c))
    nb["cells"].insert(k + 1, dict(nb["cells"][k], id="copy1"))
    sub = read_submission(_write(tmp_path, nb), labs)
    assert [(a.slot.exercise, a.slot.ordinal, a.state) for a in sub.answers
            if a.slot.exercise == "1.2"] == [("1.2", 0, "answered"), ("1.2", 1, "duplicate")]
