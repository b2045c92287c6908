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
