"""What every model shares: a record that prints and renders as a model, the argument checks
(one sentence each, a ModelInputError), and units in words."""
from __future__ import annotations

import html

from ..emulator.launch import ceil_div
from ..errors import ModelInputError
from ..errors import integer_argument as _int
from ..errors import nonnegative_argument as _nonneg
from ..errors import positive_argument as _positive

WARP_SIZE = 32

__all__ = ["WARP_SIZE", "_ModelResult", "_int", "_nonneg",
           "_positive", "_round_up", "_bytes", "_seconds"]


class _ModelResult:
    """Shared display: a one-line headline and a table, both labelled as a model."""

    def _headline(self) -> str:
        raise NotImplementedError

    def _rows(self) -> list[tuple[str, str]]:
        return []

    def __str__(self) -> str:
        rows = self._rows()
        lines = [f"model: {self._headline()}"]
        if rows:
            width = max(len(k) for k, _ in rows)
            lines += [f"  {k:<{width}}  {v}" for k, v in rows]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                       f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
                       for k, v in self._rows())
        return (f"<div><span style='background:#eee;border-radius:3px;padding:0 4px;"
                f"font-size:85%'>model</span> {html.escape(self._headline())}"
                f"<table>{body}</table></div>")


def _round_up(x: int, unit: int) -> int:
    return ceil_div(x, unit) * unit


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def _seconds(t: float) -> str:
    for unit, size in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if t >= size:
            return f"{t / size:.3g} {unit}"
    return f"{t * 1e9:.3g} ns"
