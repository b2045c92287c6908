"""Warp divergence: lanes of a warp whose branches run one after another."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .base import WARP_SIZE, ModelInputError, _int, _ModelResult


# --------------------------------------------------------------------------- warp divergence

@dataclass(frozen=True)
class WarpEfficiency(_ModelResult):
    """Lane utilization of a warp whose branches run one after another."""

    active_lanes: tuple[int, ...]
    passes: int
    efficiency: float

    def _headline(self) -> str:
        return (f"{self.passes} branch pass(es) with {list(self.active_lanes)} active lanes: "
                f"{self.efficiency:.0%} of the warp's lanes do useful work")


def warp_efficiency(active_lanes: Iterable[int]) -> WarpEfficiency:
    """Divergence model: each branch with active lanes costs one full warp pass; efficiency = sum(active) / (32 x passes)."""
    if not isinstance(active_lanes, Iterable):
        raise ModelInputError(f"active_lanes={active_lanes!r}: give one count per branch, e.g. "
                              "[16, 16] for an if/else that splits a warp in half.")
    lanes = tuple(_int(n, "active lanes of a branch") for n in active_lanes)
    if any(n > WARP_SIZE for n in lanes):
        raise ModelInputError(f"A branch can have at most {WARP_SIZE} active lanes; got {list(lanes)}.")
    taken = tuple(n for n in lanes if n > 0)  # a branch no lane takes is skipped
    if not taken:
        raise ModelInputError("Give the active-lane count of at least one branch that some lane takes.")
    return WarpEfficiency(active_lanes=taken, passes=len(taken),
                          efficiency=sum(taken) / (WARP_SIZE * len(taken)))
