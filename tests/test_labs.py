"""Labs are generated from solutions; the committed copies must match."""
import subprocess
import sys

import pytest

import make_labs
from nbtools import build, dumps, notebooks, read, write


def test_committed_labs_match_solutions(root):
    wanted = make_labs.expected_labs(root / "solutions")
    assert wanted, "no solution notebooks found"
    for name, text in wanted.items():
        path = root / "labs" / name
        assert path.exists(), f"labs/{name} is missing: run python tools/make_labs.py"
        assert path.read_text(encoding="utf-8") == text, (
            f"labs/{name} differs from what solutions/{name} generates: "
            "run python tools/make_labs.py and commit labs/")
    extra = {p.name for p in notebooks(root / "labs")} - set(wanted)
    assert not extra, f"labs without a solution: {sorted(extra)}"


def test_every_lab_exercise_is_stripped(root):
    for path in (root / "labs").glob("*.ipynb"):
        text = path.read_text()
        assert make_labs.BEGIN not in text and make_labs.END not in text
        sol = read(root / "solutions" / path.name)
        n_blocks = sum(c["cell_type"] == "code" and make_labs.BEGIN in "".join(c["source"])
                       for c in sol["cells"])
        assert text.count("raise NotImplementedError(\\\"Exercise ") == n_blocks


def test_strip_solutions_names_the_exercise():
    code = "def f(x):\n    # Exercise 2.3\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\n"
    out = make_labs.strip_solutions(code, None, "cell")
    assert 'raise NotImplementedError("Exercise 2.3")' in out
    assert "return x + 1" not in out
    assert out.startswith("def f(x):\n    # Exercise 2.3\n    raise")


def test_exercise_number_from_markdown():
    nb = build([("md", "## Exercise 4.2 · something"),
                ("code", "def g():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION")])
    nb["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "x"}]
    lab = make_labs.lab_from_solution(nb, "t")
    code = "".join(lab["cells"][1]["source"])
    assert 'raise NotImplementedError("Exercise 4.2")' in code
    assert lab["cells"][1]["outputs"] == []


@pytest.mark.parametrize("code, err", [
    ("### BEGIN SOLUTION\nx = 1\n", "without"),
    ("x = 1\n### END SOLUTION\n", "without"),
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n", "nested"),
])
def test_malformed_blocks_are_rejected(code, err):
    with pytest.raises(make_labs.LabError, match=err):
        make_labs.strip_solutions("# Exercise 1.1\n" + code, None, "cell")


def test_learner_edits_are_never_overwritten(tmp_path):
    sol, labs = tmp_path / "solutions", tmp_path / "labs"
    sol.mkdir()
    nb = build([("md", "## Exercise 1.1"),
                ("code", "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION")])
    write(nb, sol / "x_lab.ipynb")
    args = ["--solutions", str(sol), "--labs", str(labs)]
    assert make_labs.main(args) == 0
    lab = labs / "x_lab.ipynb"
    assert make_labs.main(args + ["--check"]) == 0
    # The learner answers the exercise and saves.
    data = read(lab)
    data["cells"][1]["source"] = ["def f():\n", "    return 1  # my answer\n"]
    lab.write_text(dumps(data))
    # The solution changes; regeneration must keep the learner's file.
    nb["cells"][0]["source"] = "## Exercise 1.1 (clarified)"
    write(nb, sol / "x_lab.ipynb")
    assert make_labs.main(args) == 0
    assert "my answer" in lab.read_text()
    new = labs / "x_lab.new.ipynb"
    assert new.exists() and "clarified" in new.read_text()
    assert make_labs.main(args + ["--check"]) == 1


def test_unedited_labs_are_updated(tmp_path):
    sol, labs = tmp_path / "solutions", tmp_path / "labs"
    sol.mkdir()
    nb = build([("md", "v1 Exercise 1.1"), ("code", "x = 1")])
    write(nb, sol / "y_lab.ipynb")
    args = ["--solutions", str(sol), "--labs", str(labs)]
    make_labs.main(args)
    nb["cells"][0]["source"] = "v2 Exercise 1.1"
    write(nb, sol / "y_lab.ipynb")
    make_labs.main(args)
    assert "v2" in (labs / "y_lab.ipynb").read_text()
    assert not (labs / "y_lab.new.ipynb").exists()


def test_check_mode_cli_fails_on_stale_lab(tmp_path, root):
    sol, labs = tmp_path / "solutions", tmp_path / "labs"
    sol.mkdir()
    labs.mkdir()
    write(build([("code", "x = 1")]), sol / "z_lab.ipynb")
    r = subprocess.run([sys.executable, str(root / "tools" / "make_labs.py"), "--check",
                        "--solutions", str(sol), "--labs", str(labs)], capture_output=True, text=True)
    assert r.returncode == 1 and "z_lab.ipynb" in r.stderr


def _mixed_solutions(folder):
    """Two good solutions around bad ones: {bad file: what is wrong}."""
    folder.mkdir()
    good = build([("md", "## Exercise 1.1"),
                  ("code", "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION")])
    write(good, folder / "a_good_lab.ipynb")
    write(good, folder / "z_good_lab.ipynb")
    text = dumps(good)
    bad = {"latin1_lab.ipynb": text.replace("Exercise 1.1", "Exercise 1.1 \u00e9t\u00e9").encode("latin-1"),
           "truncated_lab.ipynb": text[: len(text) // 2].encode(),
           "list_lab.ipynb": b"[1, 2]",
           "cells_lab.ipynb": b'{"cells": [{"source": 3}]}',
           "empty_lab.ipynb": b"",
           "nested_lab.ipynb": dumps(build([("code", "# Exercise 1.2\n### BEGIN SOLUTION\n"
                                                      "### BEGIN SOLUTION\n### END SOLUTION")])).encode()}
    for name, data in bad.items():
        (folder / name).write_bytes(data)
    (folder / "folder_lab.ipynb").mkdir()
    return set(bad) | {"folder_lab.ipynb"}


def test_a_bad_solution_is_one_line_and_the_others_are_still_generated(tmp_path, capsys):
    sol, labs = tmp_path / "solutions", tmp_path / "labs"
    bad = _mixed_solutions(sol)
    args = ["--solutions", str(sol), "--labs", str(labs)]
    assert make_labs.main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert sorted(p.name for p in labs.iterdir()) == ["a_good_lab.ipynb", "z_good_lab.ipynb"]
    assert len(err) == len(bad), err
    assert {line.split("/")[-1].split(":")[0].split(" cell")[0] for line in err} == bad
    assert all(line.startswith("no lab from ") and "Traceback" not in line for line in err)
    assert any("not UTF-8" in line for line in err) and any("JSON is broken" in line for line in err)
    # --check says the same and fails, whatever the good labs
    assert make_labs.main(args + ["--check"]) == 1
    assert len(capsys.readouterr().err.strip().splitlines()) == len(bad)


def test_the_command_line_exits_non_zero_after_writing_the_good_labs(tmp_path, root):
    sol, labs = tmp_path / "solutions", tmp_path / "labs"
    bad = _mixed_solutions(sol)
    r = subprocess.run([sys.executable, str(root / "tools" / "make_labs.py"), "--solutions",
                        str(sol), "--labs", str(labs)], capture_output=True, text=True)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == len(bad)
    assert (labs / "z_good_lab.ipynb").exists()


def test_expected_labs_raises_the_line_when_nobody_collects_it(tmp_path):
    sol = tmp_path / "solutions"
    sol.mkdir()
    (sol / "x_lab.ipynb").write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(make_labs.LabError, match=r"^x_lab\.ipynb: not UTF-8 text"):
        make_labs.expected_labs(sol)


def test_a_lab_on_disk_that_is_not_text_is_kept(tmp_path):
    """A learner's lab that no longer decodes is never overwritten: the new one goes beside it."""
    sol, labs = tmp_path / "solutions", tmp_path / "labs"
    sol.mkdir()
    labs.mkdir()
    write(build([("md", "## Exercise 1.1"), ("code", "x = 1")]), sol / "y_lab.ipynb")
    for content in (b"\xff\xfe broken", b"[1, 2]", b'{"metadata": 3}'):
        (labs / "y_lab.ipynb").write_bytes(content)
        assert make_labs.main(["--solutions", str(sol), "--labs", str(labs)]) == 0
        assert (labs / "y_lab.ipynb").read_bytes() == content
        assert (labs / "y_lab.new.ipynb").exists()
