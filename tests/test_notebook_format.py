import json

import pytest

import check_notebooks
from nbtools import build


def test_repository_notebooks_are_well_formed(root):
    found = check_notebooks.all_problems(root)
    assert not found, "\n".join(found)


# Notebooks whose lab has a name of its own.
LAB_OF = {"00b_cuda_primer": "00b_kernel_puzzles"}


def test_every_chapter_has_a_solution_and_a_lab(root):
    chapters = sorted(p.stem for p in (root / "notebooks").glob("*.ipynb"))
    assert chapters, "no chapter notebooks"
    for stem in chapters:
        lab = LAB_OF.get(stem, stem)
        assert (root / "solutions" / f"{lab}_lab.ipynb").exists(), f"no solution for {stem}"
        assert (root / "labs" / f"{lab}_lab.ipynb").exists(), f"no lab for {stem}"


def _problems(tmp_path, folder, nb):
    (tmp_path / folder).mkdir(parents=True, exist_ok=True)
    path = tmp_path / folder / "x.ipynb"
    path.write_text(json.dumps(nb))
    return check_notebooks.all_problems(tmp_path)


@pytest.mark.filterwarnings("ignore::nbformat.warnings.MissingIDFieldWarning")  # a missing id is the point
def test_detects_each_kind_of_problem(tmp_path):
    nb = build([("code", "1 + 1")])
    assert _problems(tmp_path / "a", "notebooks", nb) == []
    with_out = json.loads(json.dumps(nb))
    with_out["cells"][0]["outputs"] = [{"output_type": "execute_result", "data": {"text/plain": "2"},
                                        "metadata": {}, "execution_count": 1}]
    with_out["cells"][0]["execution_count"] = 1
    assert any("committed with outputs" in p for p in _problems(tmp_path / "b", "notebooks", with_out))
    assert any("committed with outputs" in p for p in _problems(tmp_path / "c", "solutions", nb))
    assert _problems(tmp_path / "d", "solutions", with_out) == []
    bad_kernel = json.loads(json.dumps(nb))
    bad_kernel["metadata"]["kernelspec"]["name"] = "julia"
    assert any("kernelspec" in p for p in _problems(tmp_path / "e", "labs", bad_kernel))
    no_id = json.loads(json.dumps(nb))
    del no_id["cells"][0]["id"]
    assert any("id" in p for p in _problems(tmp_path / "f", "labs", no_id))
    err = json.loads(json.dumps(with_out))
    err["cells"][0]["outputs"] = [{"output_type": "error", "ename": "ValueError", "evalue": "x",
                                   "traceback": []}]
    assert any("error output" in p for p in _problems(tmp_path / "g", "solutions", err))
    (tmp_path / "h" / "labs").mkdir(parents=True)
    (tmp_path / "h" / "labs" / "x.ipynb").write_text("{not json")
    assert any("not valid JSON" in p for p in check_notebooks.all_problems(tmp_path / "h"))
