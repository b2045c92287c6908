"""Which test files are the emulator's own (marker ``emulator_only``, set in conftest.py)."""
import fnmatch
import functools
import pathlib

#: Test files of the CUDA C emulator, the course's kernels on it, its profiler and its drawings.
#: They run code the host's C++ compiler built, one emulated thread at a time, with no PyTorch
#: and so no oneDNN: neither an ISA cap nor the number of cores changes what they compute.
#: `make test-matrix` runs them once (all cores, no cap) and every other test in every cell. A
#: file named here that uses PyTorch is not marked; tests/test_matrix_split.py checks that
#: the modules these files test never import PyTorch.
EMULATOR_ONLY = ("test_emulator*.py", "test_kernels*.py", "test_profiler.py", "test_draw.py",
                 "test_puzzle*.py")


@functools.lru_cache(maxsize=None)
def emulator_only(path: pathlib.Path) -> bool:
    """Whether the test file at ``path`` is one of :data:`EMULATOR_ONLY` without PyTorch."""
    return (any(fnmatch.fnmatch(path.name, pattern) for pattern in EMULATOR_ONLY)
            and "torch" not in path.read_text(encoding="utf-8"))
