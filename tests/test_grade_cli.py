"""`python -m gpucourse grade`: a problem with its arguments is one line, exit code 2,
before any learner's code runs."""
import pytest

import grade_class as G
from gpucourse.__main__ import main


@pytest.fixture
def one(tmp_path):
    return str(G.write(tmp_path / "in", "alice.ipynb", G.right()))


@pytest.mark.parametrize("args, message", [
    (["{tmp}/nowhere", "--out", "{tmp}/out"], "nowhere does not exist: name the submitted"),
    (["{tmp}/empty", "--out", "{tmp}/out"], "no .ipynb files among"),
    (["{one}", "--out", "{tmp}/out", "--lab", "9"], "--lab 9: no such lab; choose one of "
                                                    "00_start_here_lab"),
    (["{one}", "--out", "{tmp}/out", "--memory", "lots"], "--memory lots: give a size such as"),
    (["{one}", "--out", "{tmp}/out", "--cell-timeout", "0"], "--cell-timeout 0.0: give a number"),
    (["{one}", "--out", "{one}"], "cannot write the gradebook into"),
    (["{one}", "--out", "{tmp}/out", "--solutions", "{tmp}/empty"], "no usable solution notebooks in"),
])
def test_bad_arguments_are_one_line(tmp_path, one, capsys, args, message):
    (tmp_path / "empty").mkdir()
    code = main(["grade"] + [a.format(tmp=tmp_path, one=one) for a in args]
                + ([] if "--solutions" in args else ["--solutions", str(G.ROOT / "solutions")]))
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("python -m gpucourse grade: ") and message in err, err
    assert err.count("\n") == 1
