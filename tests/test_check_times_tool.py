"""tools/check_times.py reads each lab check's time from the cell timings run_notebook.py
records, and fails with --over when one is slower."""
import json

import check_times


def _notebook(tmp_path, cells):
    path = tmp_path / "lab.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                "nbformat_minor": 5}))
    return path


def _cell(grade_id, start, end):
    return {"cell_type": "code", "source": "", "outputs": [], "metadata": {
        "nbgrader": {"grade_id": grade_id},
        "execution": {"iopub.execute_input": start, "shell.execute_reply": end}}}


def test_check_cells_and_their_times(tmp_path, capsys):
    path = _notebook(tmp_path, [
        _cell("ex9_1", "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:05.000Z"),  # not a check
        _cell("ex9_1_check", "2026-01-01T00:00:05.000Z", "2026-01-01T00:00:06.250Z"),
        _cell("ex9_2_check", "2026-01-01T00:00:59.500Z", "2026-01-01T00:01:02.000Z"),
        {"cell_type": "markdown", "source": "", "metadata": {}},
    ])
    assert check_times.check_times(path) == [("ex9_1_check", 1.25), ("ex9_2_check", 2.5)]
    assert check_times.main([str(path)]) == 0
    assert check_times.main([str(path), "--over", "2"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["2.50", "s", "ex9_2_check"]  # slowest first
