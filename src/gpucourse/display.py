"""Results that show as HTML or markdown in a notebook and as plain text elsewhere."""
from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence


def format_value(v) -> str:
    """A table cell: floats to 4 significant digits (scientific outside 1e-3..1e5), None blank."""
    if isinstance(v, float):
        if v == 0 or not math.isfinite(v):
            return str(v)
        return f"{v:.4g}" if 1e-3 <= abs(v) < 1e5 else f"{v:.3e}"
    return "" if v is None else str(v)


class Table(list):
    """A list of row dicts with a caption; a notebook shows it as an HTML table.

    Columns are the first row's keys. ``Table.pairs`` makes a two-column table of
    (label, text) without a header; ``Table.from_lists`` takes a header and rows of values.
    """

    def __init__(self, rows: Iterable[dict] = (), caption: str = "", header: bool = True):
        super().__init__(rows)
        self.caption = caption
        self.show_header = header

    @classmethod
    def pairs(cls, rows: Iterable[tuple], caption: str = "") -> "Table":
        return cls(({"": k, "value": v} for k, v in rows), caption, header=False)

    @classmethod
    def from_lists(cls, header: Sequence[str], rows: Iterable[Sequence], caption: str = "") -> "Table":
        header = [str(h) for h in header]
        return cls((dict(zip(header, r)) for r in rows), caption)

    @property
    def rows(self) -> list[dict]:
        return list(self)

    @property
    def columns(self) -> list[str]:
        return list(self[0]) if self else []

    def cells(self) -> list[list[str]]:
        """Every row as formatted text, in column order."""
        return [[format_value(r.get(c)) for c in self.columns] for r in self]

    def __str__(self) -> str:
        lines = [self.caption] if self.caption else []
        if self:
            grid = ([self.columns] if self.show_header else []) + self.cells()
            widths = [max(len(r[i]) for r in grid) for i in range(len(self.columns))]
            lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in grid]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        cap = (f"<caption style='text-align:left'>{html.escape(self.caption)}</caption>"
               if self.caption else "")
        if not self:
            return f"<p>{html.escape(self.caption or 'no rows')}</p>"
        head = ("<thead><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
                + "</tr></thead>") if self.show_header else ""

        def cell(i: int, v: str) -> str:
            if i == 0 and not self.show_header:  # a label column: the row's own header
                return f"<th style='text-align:left'>{html.escape(v)}</th>"
            return f"<td>{html.escape(v)}</td>"

        body = "".join("<tr>" + "".join(cell(i, v) for i, v in enumerate(r)) + "</tr>"
                       for r in self.cells())
        return f"<table>{cap}{head}<tbody>{body}</tbody></table>"


class Note(str):
    """A sentence shown in place of a result when there is nothing honest to show."""

    def _repr_markdown_(self) -> str:
        return f"*{self}*"
