"""Where the package keeps its files: the kernel sources and the data tables."""
from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
#: The course's CUDA C sources, one ``<op>.cu`` per operation.
KERNEL_DIR = PACKAGE_DIR / "kernels"
#: The GPU spec table, occupancy limits and reference measurements.
DATA_DIR = PACKAGE_DIR / "data"
#: Reference measurements from real GPUs, one ``<gpu>.json`` each.
REFERENCE_DIR = DATA_DIR / "reference"
