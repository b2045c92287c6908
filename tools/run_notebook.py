#!/usr/bin/env python3
"""Execute notebooks in place (for solutions/, which are committed with outputs).

    python tools/run_notebook.py solutions/00_start_here_lab.ipynb
"""
from __future__ import annotations

import pathlib
import sys
import time

import nbformat
from nbclient import NotebookClient


def run(path: str, timeout: int = 600) -> float:
    nb = nbformat.read(path, as_version=4)
    t0 = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(pathlib.Path(path).parent)}}).execute()
    nbformat.write(nb, path)
    return time.perf_counter() - t0


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(f"{p}: executed in {run(p):.1f} s")
