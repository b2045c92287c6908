"""Helpers shared by the benchmark scripts (not part of the package)."""
import os


def pin_to_one_core() -> str:
    """Run this process on one CPU core, so that a benchmark measures one core's speed."""
    try:
        core = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {core})
        return f"pinned to CPU core {core}"
    except (AttributeError, OSError):
        return "not pinned (no sched_setaffinity here)"
