"""Which test files ``make test-matrix`` leaves to ``make test``: the emulator's own tests
(marker ``emulator_only``), the tests of the course's tools (marker ``tooling``) and the smoke
tests of code that runs on a GPU (marker ``gpu_path``). The markers are set by file in
conftest.py.

The matrix changes two things: the ISA cap of oneDNN and PyTorch's CPU kernels, and the number
of cores. Neither reaches these files' results, so running them four times would spend most of
the matrix's time on answers that cannot differ; ``make test`` (which CI runs every time) runs
them once. tests/test_matrix_split.py checks the first claim for the emulator's files.
"""
import fnmatch
import functools
import pathlib

#: Test files of the CUDA C emulator, the course's kernels on it, its profiler and its drawings:
#: code the host's C++ compiler built, run one emulated thread at a time, with no PyTorch and
#: so no oneDNN. A file named here that uses PyTorch is not marked.
EMULATOR_ONLY = ("test_emulator*.py", "test_kernels*.py", "test_profiler.py", "test_draw.py",
                 "test_puzzle*.py")

#: Test files of the course's tools: grading, lab generation, notebook format and predictions,
#: the browser test's steps, the GPU scripts' plumbing, the layer and marker rules, the CLI and
#: the report's figures drawn from stored results. What numbers they meet come from notebooks
#: and labs, which every cell of the matrix runs itself.
TOOLING = ("test_grade_*.py", "test_browser_*.py", "test_doctor_and_cli.py", "test_gpu_session.py",
           "test_gpu_check_tool.py", "test_layers.py", "test_markers.py", "test_matrix_split.py",
           "test_dependencies.py", "test_launch_badges.py", "test_make_lab_settings.py",
           "test_notebook_format.py", "test_notebook_predictions.py", "test_labs.py",
           "test_check_times_tool.py", "test_wrong_answer_tables.py", "test_report_figure_text.py",
           "test_runner_report_page.py", "test_reference_figures_draw.py")

#: Smoke tests of the GPU-only code paths, on the fake CUDA device (tests/fakecuda) or with a
#: GPU check's steps run on the CPU at small sizes: they assert shapes, calls and keys, never a
#: number of this CPU. On a learner's machine that code runs on the GPU, where neither the ISA
#: cap nor the core count of the CPU reaches; the chapters' CPU paths stay in the matrix.
GPU_PATH = ("test_*fake_gpu.py", "test_ch*_gpu_check_on_cpu.py")


def _named(path: pathlib.Path, patterns) -> bool:
    return any(fnmatch.fnmatch(path.name, pattern) for pattern in patterns)


@functools.lru_cache(maxsize=None)
def emulator_only(path: pathlib.Path) -> bool:
    """Whether the test file at ``path`` is one of :data:`EMULATOR_ONLY` without PyTorch."""
    return _named(path, EMULATOR_ONLY) and "torch" not in path.read_text(encoding="utf-8")


def tooling(path: pathlib.Path) -> bool:
    """Whether the test file at ``path`` is one of :data:`TOOLING`."""
    return _named(path, TOOLING)


def gpu_path(path: pathlib.Path) -> bool:
    """Whether the test file at ``path`` is one of :data:`GPU_PATH` (and not emulator-only)."""
    return _named(path, GPU_PATH) and not emulator_only(path)
