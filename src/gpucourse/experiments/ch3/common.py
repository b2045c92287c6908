"""What the experiments of several sections share: an HTML table, the problem size for the
backend, and the slowest rank's timing."""
from __future__ import annotations

import html
from typing import Sequence

from ... import bench
from .pool import Workers


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], note: str = "") -> str:
    h = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>"
                   for r in rows)
    foot = f"<div style='color:#666;font-size:90%'>{html.escape(note)}</div>" if note else ""
    return f"<table><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>{foot}"


def _size(pool: Workers, cpu: int, gpu: int, given: int | None) -> int:
    """The problem size: ``given``, else one that suits the CPU or fills a GPU better."""
    if given is not None:
        return int(given)
    return gpu if pool.backend == "nccl" else cpu


def _slowest(timings) -> bench.Timing:
    """The slowest rank's timing: a collective step ends when its last rank is done."""
    return max(timings, key=lambda t: t.median_s)
