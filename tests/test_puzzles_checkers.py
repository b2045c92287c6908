"""Kernel puzzles (lab 0b): the references pass, and every puzzle's table of wrong answers
(puzzle_answers.py) is rejected with a message that names the mistake."""
import numpy as np
import pytest

from gpucourse.check import expect_failure, puzzles as cp
from gpucourse.kernels import puzzles as P
from gpucourse.paths import KERNEL_DIR
from puzzle_answers import TABLES, reference

ROWS = [(number, what, wrong, words) for number, rows in TABLES.items() for what, wrong, words in rows]


@pytest.mark.parametrize("number", [p.number for p in P.PUZZLES])
def test_reference_passes(number, capsys):
    cp.check_puzzle(number, reference(P.puzzle(number).kernel))
    assert capsys.readouterr().out.startswith(f"Exercise {cp.exercise_number(number)} passed")


@pytest.mark.parametrize("exercise,what,wrong,words", ROWS, ids=[f"{r[0]}-{r[1]}" for r in ROWS])
def test_wrong_answer_is_named(exercise, what, wrong, words):
    number = next(p.number for p in P.PUZZLES if cp.exercise_number(p.number) == exercise)
    with expect_failure(words):
        cp.check_puzzle(number, wrong)


def test_every_puzzle_has_five_wrong_answers():
    counts = {cp.exercise_number(p.number): len(TABLES[cp.exercise_number(p.number)]) for p in P.PUZZLES}
    assert min(counts.values()) >= 5, counts


def test_a_wrong_result_names_the_mistake_its_values_show():
    """The values behind a few wrong results say which mistake made them (no kernel runs)."""
    p, n = P.puzzle(12), 7
    x = cp._inputs(p, n)
    a, b = (x[k].astype(np.float64) for k in ("A", "B"))
    assert "C equals B A" in cp.likely_mistake(p, (b @ a).astype(np.float32), x, n)
    assert "C equals A B^T" in cp.likely_mistake(p, (a @ b.T).astype(np.float32), x, n)
    assert "transpose of A B" in cp.likely_mistake(p, (a @ b).T.astype(np.float32), x, n)
    zeros = np.zeros((n, n), np.float32)
    assert "lacks the products of the last, partial tile" in cp.likely_mistake(p, zeros, x, n)
    assert cp.likely_mistake(p, (a @ b + 1).astype(np.float32), x, n) is None
    scan, n = P.puzzle(11), 65
    x = cp._inputs(scan, n)
    exclusive = P.reference(scan, x, n) - x["a"]
    assert "as an exclusive scan does" in cp.likely_mistake(scan, exclusive.astype(np.float32), x, n)
    warp = P.puzzle(9)
    out = np.full(2, np.nan, np.float32)
    assert cp.likely_mistake(warp, out, cp._inputs(warp, 33), 33) is None   # never written
    out.view(np.uint32)[1] = cp.SHUFFLE_POISON
    assert "out[1] is NaN because a warp shuffle" in cp.likely_mistake(warp, out, cp._inputs(warp, 33), 33)


@pytest.mark.parametrize("answer", [None, 42, ["__global__ void k() {}"], len,
                                    b"__global__ void k() {}", False])
def test_a_wrong_typed_answer_is_one_sentence(answer):
    with expect_failure("Exercise 0.3 (map) not yet right:\ngive the CUDA C source as a string"):
        cp.check_puzzle(1, answer)


def test_a_missing_kernel_is_one_sentence():
    with expect_failure("must define `extern \"C\" __global__ void map_add10(...)`"):
        cp.check_puzzle(1, reference("zip_add"))


def _imports(path) -> set[str]:
    import ast

    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
            found.update("." * node.level + a.name for a in node.names if not node.module)
    return found


def test_the_puzzle_modules_keep_to_their_layers():
    """kernels sits below models and check; check sits below draw and plot."""
    src = KERNEL_DIR.parent
    assert not {m for m in _imports(src / "kernels" / "puzzles.py") if m.startswith("..")}
    assert not {m for m in _imports(src / "check" / "puzzles.py")
                if m.lstrip(".").split(".")[0] in ("draw", "plot", "experiments", "widgets")}
