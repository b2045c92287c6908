"""Shared helpers of the notebook maintenance scripts (no third-party imports)."""
from __future__ import annotations

import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
EXERCISE_RE = re.compile(r"#\s*Exercise\s+(\d+\.\d+)")


def read(path) -> dict:
    return json.loads(pathlib.Path(path).read_text(encoding="utf-8"))


def dumps(nb: dict) -> str:
    """Serialise as Jupyter does (indent 1, sorted keys, trailing newline)."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def lines(text: str) -> list[str]:
    """A cell's ``source`` list for ``text``: one string per line, as Jupyter saves it."""
    parts = text.split("\n")
    return [line + "\n" for line in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def notebooks(folder) -> list[pathlib.Path]:
    """The notebooks of a folder, sorted, without the ``*.new.ipynb`` copies make_labs writes."""
    return [p for p in sorted(pathlib.Path(folder).glob("*.ipynb"))
            if not p.name.endswith(".new.ipynb")]


def build(cells: list[tuple[str, str]]) -> dict:
    """A new nbformat 4.5 notebook (python3 kernel, cell ids) from (kind, text) pairs.

    ``kind`` is "md" or "code". Used by authors to write notebooks from a script.
    """
    import nbformat
    from nbformat import v4

    nb = v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python",
                                 "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    for kind, text in cells:
        text = text.strip("\n")
        nb.cells.append(v4.new_markdown_cell(text) if kind == "md" else v4.new_code_cell(text))
    nbformat.validate(nb)
    return json.loads(nbformat.writes(nb))


def write(nb: dict, path) -> None:
    pathlib.Path(path).write_text(dumps(nb), encoding="utf-8")
