"""The launch shape a kernel home gives for one version at one problem size, and the check
that a version belongs to its file."""
from __future__ import annotations

from typing import NamedTuple

from ..errors import LaunchError


class Launch(NamedTuple):
    """One 1-D launch: blocks in the grid, threads per block, dynamic shared memory (bytes)."""

    grid: int
    block: int
    shared_mem: int = 0

    def run(self, kernel, args):
        """Launch ``kernel`` (a course kernel or a CuPy RawKernel) with this shape on ``args``."""
        return kernel((self.grid,), (self.block,), args, shared_mem=self.shared_mem)


def known_version(version: str, versions: tuple[str, ...], file: str) -> str:
    """``version`` when ``file``.cu has it; otherwise a LaunchError listing the versions it has."""
    if version not in versions:
        raise LaunchError(f"{file}.cu has no version {version!r}; use one of {', '.join(versions)}.")
    return version
