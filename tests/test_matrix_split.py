"""``make test-matrix`` leaves the emulator's own tests to ``make test`` (tests/matrix_scope.py;
marker ``emulator_only``). That is sound only while what they test cannot reach oneDNN or
PyTorch's CPU kernels, whose code paths the matrix's ISA cap changes: these tests check it."""
import pathlib
import subprocess
import sys

from matrix_scope import emulator_only, gpu_path, tooling

TESTS = pathlib.Path(__file__).resolve().parent

#: The modules the emulator-only files exercise.
EMULATOR_MODULES = ("gpucourse.emulator", "gpucourse.kernels", "gpucourse.profiler",
                    "gpucourse.draw", "gpucourse.check", "gpucourse.check.puzzles",
                    "gpucourse.models")


def test_the_modules_emulator_tests_exercise_never_import_torch():
    code = ("import sys\n" + "".join(f"import {m}\n" for m in EMULATOR_MODULES) +
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", "an emulator module now imports torch: run its tests " \
        "in every cell of make test-matrix (remove its file from matrix_scope.EMULATOR_ONLY)"


def test_the_emulator_only_files_import_only_emulator_modules():
    marked = [p for p in sorted(TESTS.glob("test_*.py")) if emulator_only(p)]
    assert len(marked) >= 20, [p.name for p in marked]  # the split still spares most of the time
    for path in marked:
        text = path.read_text(encoding="utf-8")
        for word in ("gpucourse.experiments", "gpucourse import experiments", "torch"):
            assert word not in text, f"{path.name} uses {word}: not an emulator-only test"


def test_a_file_that_uses_torch_is_not_emulator_only(tmp_path):
    plain = tmp_path / "test_kernels_plain.py"
    plain.write_text("def test_a():\n    pass\n")
    with_torch = tmp_path / "test_kernels_torch.py"
    with_torch.write_text("import torch\n\n\ndef test_a():\n    pass\n")
    other = tmp_path / "test_ch4_checkers.py"
    other.write_text("def test_a():\n    pass\n")
    assert emulator_only(plain)
    assert not emulator_only(with_torch)
    assert not emulator_only(other)


def test_the_matrix_keeps_every_chapter_and_tolerance_test():
    for path in sorted(TESTS.glob("test_*.py")):
        if path.name.startswith(("test_ch0", "test_ch1", "test_ch2", "test_ch3", "test_ch4",
                                 "test_ch5", "test_ch6", "test_ch7", "test_wrong_answers_ch",
                                 "test_tolerances", "test_check_tolerances",
                                 "test_experiments_cpu")):
            assert not tooling(path), f"{path.name} is a chapter's test: the matrix must run it"
            if gpu_path(path):  # only the smoke tests of a chapter's GPU-only code leave it
                assert path.name.endswith(("_fake_gpu.py", "_gpu_check_on_cpu.py")), path.name


def test_the_gpu_path_files_test_gpu_only_code():
    """What leaves the matrix as ``gpu_path`` runs on the fake CUDA device or is a GPU check's
    steps run on the CPU: code a learner's machine runs on its GPU."""
    marked = [p for p in sorted(TESTS.glob("test_*.py")) if gpu_path(p)]
    assert len(marked) >= 8, [p.name for p in marked]
    for path in marked:
        text = path.read_text(encoding="utf-8")
        assert "fakecuda" in text or "gpu_check" in text, path.name
    for name in ("test_ch2_experiments.py", "test_ch6_checkers.py", "test_tolerances.py"):
        assert not gpu_path(TESTS / name)
