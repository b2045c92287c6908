"""Memory access models of one warp: 32-byte sectors of global memory, shared-memory banks."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .base import WARP_SIZE, ModelInputError, _int, _ModelResult

SECTOR_BYTES = 32
LINE_BYTES = 128
SHARED_BANKS = 32
BANK_WORD_BYTES = 4


# --------------------------------------------------------------------------- global memory sectors

def strided_addresses(stride: int, elem_bytes: int = 4, base: int = 0, lanes: int = WARP_SIZE) -> list[int]:
    """Byte addresses a warp reads when lane i reads element ``i * stride`` of an array at ``base``."""
    return [base + i * stride * elem_bytes for i in range(lanes)]


@dataclass(frozen=True)
class Sectors(_ModelResult):
    """Memory traffic of one warp-wide load or store."""

    lanes: int
    elem_bytes: int
    requested_bytes: int
    sectors: int
    lines: int
    transferred_bytes: int
    efficiency: float

    def _headline(self) -> str:
        return (f"{self.lanes} lanes x {self.elem_bytes} B touch {self.sectors} sectors of 32 B "
                f"in {self.lines} lines of 128 B; efficiency {self.efficiency:.0%}")

    def _rows(self):
        return [("bytes requested", str(self.requested_bytes)),
                ("bytes moved (sectors x 32 B)", str(self.transferred_bytes))]


def sectors(addresses: Iterable[int], elem_bytes: int = 4) -> Sectors:
    """32-byte sectors and 128-byte lines one warp access touches; efficiency = distinct bytes requested / sector bytes moved.

    ``addresses`` holds the BYTE address each active lane reads or writes (at most 32; leave
    out inactive lanes), each access ``elem_bytes`` long. Ignores caches: every touched
    sector counts as moved once.
    """
    elem = _int(elem_bytes, "elem_bytes", 1)
    if elem not in (1, 2, 4, 8, 16):
        raise ModelInputError(f"elem_bytes must be 1, 2, 4, 8 or 16 (a load a thread can issue), got {elem}.")
    addrs = [_int(a, "a byte address") for a in addresses]
    if not addrs:
        raise ModelInputError("Give at least one lane's byte address.")
    if len(addrs) > WARP_SIZE:
        raise ModelInputError(f"A warp has {WARP_SIZE} lanes; got {len(addrs)} addresses.")
    touched_bytes: set[int] = set()
    secs: set[int] = set()
    lines: set[int] = set()
    for a in addrs:
        touched_bytes.update(range(a, a + elem))
        # A misaligned access may straddle two sectors (or lines); count both.
        for b in (a, a + elem - 1):
            secs.add(b // SECTOR_BYTES)
            lines.add(b // LINE_BYTES)
    moved = len(secs) * SECTOR_BYTES
    return Sectors(lanes=len(addrs), elem_bytes=elem, requested_bytes=len(touched_bytes),
                   sectors=len(secs), lines=len(lines), transferred_bytes=moved,
                   efficiency=len(touched_bytes) / moved)


# --------------------------------------------------------------------------- shared-memory banks

@dataclass(frozen=True)
class BankConflicts(_ModelResult):
    """Bank conflicts of one warp-wide shared-memory access."""

    ways: int
    wavefronts: int
    phases: int
    words_per_bank: tuple[int, ...]

    @property
    def slowdown(self) -> float:
        """Wavefronts relative to a conflict-free access of the same width."""
        return self.wavefronts / self.phases

    def _headline(self) -> str:
        kind = "no bank conflict" if self.ways == 1 else f"{self.ways}-way bank conflict"
        return f"{kind}: {self.wavefronts} wavefront(s) where {self.phases} would do"

    def _rows(self):
        busiest = max(range(SHARED_BANKS), key=lambda b: self.words_per_bank[b])
        return [("distinct words in the busiest bank", f"{self.words_per_bank[busiest]} (bank {busiest})"),
                ("slowdown", f"{self.slowdown:g}x")]


def bank_of(byte_address: int) -> int:
    """The shared-memory bank that serves a byte address (32 banks of 4-byte words)."""
    return (_int(byte_address, "a byte address") // BANK_WORD_BYTES) % SHARED_BANKS


def bank_conflicts(addresses: Iterable[int], word_bytes: int = 4) -> BankConflicts:
    """n-way conflict = most DISTINCT 4-byte words any of the 32 banks must serve (same word = broadcast); accesses wider than 4 B are split into 128-byte phases of 16 (8 B) or 8 (16 B) lanes.

    ``addresses`` holds the BYTE address in shared memory each active lane accesses.
    """
    width = _int(word_bytes, "word_bytes", 1)
    if width not in (1, 2, 4, 8, 16):
        raise ModelInputError(f"word_bytes must be 1, 2, 4, 8 or 16, got {width}.")
    addrs = [_int(a, "a byte address") for a in addresses]
    if not addrs:
        raise ModelInputError("Give at least one lane's byte address.")
    if len(addrs) > WARP_SIZE:
        raise ModelInputError(f"A warp has {WARP_SIZE} lanes; got {len(addrs)} addresses.")
    lanes_per_phase = min(WARP_SIZE, SHARED_BANKS * BANK_WORD_BYTES // max(width, BANK_WORD_BYTES))
    wavefronts, ways, phases = 0, 0, 0
    worst = (0,) * SHARED_BANKS
    for start in range(0, len(addrs), lanes_per_phase):
        words: list[set[int]] = [set() for _ in range(SHARED_BANKS)]
        for a in addrs[start:start + lanes_per_phase]:
            for w in range(a // BANK_WORD_BYTES, (a + width - 1) // BANK_WORD_BYTES + 1):
                words[w % SHARED_BANKS].add(w)
        counts = tuple(len(s) for s in words)
        phases += 1
        wavefronts += max(counts)
        if max(counts) > ways:
            ways, worst = max(counts), counts
    return BankConflicts(ways=ways, wavefronts=wavefronts, phases=phases, words_per_bank=worst)
