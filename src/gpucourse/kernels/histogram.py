"""histogram.cu in Python: counts of int values in [0, NBINS), global atomics against
shared-memory privatization.

Its versions in order, how to launch each, the NumPy reference, the bytes it moves and the
tolerance of a check (none: counts are exact); chapter 4's experiments, the lab's checker,
tools and tests ask here.
"""
from __future__ import annotations

import numpy as np

from ..emulator.launch import ceil_div
from .shape import Launch, known_version

#: The versions of histogram.cu, in the order the course shows them.
VERSIONS = ("histogram_v1_global_atomics", "histogram_v2_shared_privatized")
#: Bins of the course's histograms (the .cu's default NBINS).
NBINS = 256
#: Threads per block of the chapter's runs.
BLOCK = 256
#: v2's static shared memory per block: one unsigned int per bin.
V2_STATIC_SHARED = 4 * NBINS
#: Counts are whole numbers: a correct kernel matches the reference exactly.
TOLERANCE = 0


def launch(version: str, n: int, block: int = BLOCK, blocks: int | None = None) -> Launch:
    """The launch of one version on ``n`` values.

    Both versions loop with a grid stride, so any grid covers any n: ``blocks`` blocks when
    given, else one thread per value (ceil(n / block) blocks). v2 is meant to run as few
    blocks as fit on the GPU at once, each counting many values in its own shared copy of
    the bins (``V2_STATIC_SHARED`` bytes of static shared memory, none dynamic).
    """
    known_version(version, VERSIONS, "histogram")
    return Launch(max(1, blocks if blocks is not None else ceil_div(n, block)), block)


def args(data, bins, n: int) -> tuple:
    """The kernel's arguments in the types its signature wants (int n)."""
    return (data, bins, np.int32(n))


def reference(data: np.ndarray) -> np.ndarray:
    """The counts of ``data`` in NBINS bins, as the kernels' unsigned int bins."""
    return np.bincount(np.asarray(data), minlength=NBINS).astype(np.uint32)


def bytes_moved(n: int) -> int:
    """Bytes one launch reads: every int32 value once (the bins' traffic is left out)."""
    return 4 * n
