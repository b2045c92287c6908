"""The course's .cu kernels: correct on the emulator, headers that list them, nvcc accepts them."""
from __future__ import annotations

import functools
import re
import shutil
import subprocess

import numpy as np
import pytest

import gpucourse.kernels as gk
from gpucourse.emulator import KernelError, find_kernels
from gpucourse.errors import CompileError, CourseError
from gpucourse.paths import KERNEL_DIR

from kernel_cases import CASES, DEFINE_SETS, FILES, Backend

CU_FILES = sorted(KERNEL_DIR.glob("*.cu"))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_kernel_matches_numpy_on_the_emulator(case):
    case.run(Backend("cpu"))


def test_every_kernel_case_passes_the_race_and_bounds_check(monkeypatch):
    """The hazard detector must not flag the course's own kernels: no race, no index out of
    bounds, at every case above (the detector's copy adds room around each array)."""
    call = gk.Kernel.__call__
    monkeypatch.setattr(gk.Kernel, "__call__", lambda self, grid, block, args, shared_mem=0, **kw:
                        call(self, grid, block, args, shared_mem, **{**kw, "race_check": True}))
    for case in CASES:
        case.run(Backend("cpu"))


@pytest.mark.parametrize("file", FILES)
def test_every_kernel_of_the_file_has_a_case(file):
    names = {k.name for k in find_kernels((KERNEL_DIR / f"{file}.cu").read_text())}
    tested = {c.kernel for c in CASES if c.file == file}
    assert names == tested, f"{file}.cu kernels without a test case: {sorted(names - tested)}"


#: .cu files that are not one operation's versions but an answer key, one kernel per exercise,
#: each named as its exercise asks the learner to name theirs (so not <op>_v<N>_<idea>).
ANSWER_KEYS = {"puzzles.cu"}


def header_versions(text: str, answer_key: bool = False) -> list[str]:
    """Kernel names listed in the file's leading comment block, one per line."""
    names = []
    name = r"[A-Za-z]\w*" if answer_key else r"[A-Za-z]\w*_v\d+_\w+"
    for line in text.splitlines():
        if not line.startswith("//"):
            break
        # "//   name  what it does": the name, then two spaces or the end of the line.
        m = re.match(rf"//\s+({name})(?:\s{{2,}}|$)", line.rstrip())
        if m:
            names.append(m.group(1))
    return names


@pytest.mark.parametrize("path", CU_FILES, ids=[p.name for p in CU_FILES])
def test_header_lists_exactly_the_kernels(path):
    text = path.read_text()
    answer_key = path.name in ANSWER_KEYS
    listed = header_versions(text, answer_key)
    defined = [k.name for k in find_kernels(text, path.name)]
    assert listed, f"{path.name}: the header comment lists no versions"
    assert sorted(listed) == sorted(defined), (
        f"{path.name}: header lists {listed}, the file defines {defined}")
    if answer_key:
        return
    stem = path.stem
    bad = [n for n in defined if not re.fullmatch(rf"{stem}_v\d+_[a-z0-9_]+", n)]
    assert not bad, f"{path.name}: names not of the form {stem}_v<N>_<idea>: {bad}"


def test_header_check_catches_a_missing_line():
    text = (KERNEL_DIR / "copy.cu").read_text()
    broken = "\n".join(l for l in text.splitlines() if "copy_v2_strided    neighbouring" not in l)
    assert sorted(header_versions(broken)) != sorted(k.name for k in find_kernels(broken))


def test_available_lists_the_kernel_files():
    assert set(FILES) <= set(gk.available())
    assert gk.available() == sorted(p.stem for p in CU_FILES)


def test_transpose_without_syncthreads_is_wrong_on_the_emulator():
    source = (KERNEL_DIR / "transpose.cu").read_text()
    start = source.index("void transpose_v2_shared")
    end = source.index("void transpose_v3_padded")
    body = source[start:end]
    assert body.count("__syncthreads();") == 1
    broken = source[:start] + body.replace("__syncthreads();", "") + source[end:]
    k = gk.from_source(broken, name="transpose_no_barrier", backend="cpu").transpose_v2_shared
    rows, cols = 64, 96
    x = np.random.default_rng(3).standard_normal((rows, cols), dtype=np.float32)
    out = np.full((cols, rows), np.nan, np.float32)
    k((cols // 32, rows // 32), (32, 8), (x, out, np.int32(rows), np.int32(cols)))
    assert not np.array_equal(out, x.T)
    assert np.isnan(out).any(), "reads of tile entries not yet written should see poison (NaN)"
    # ... and the race check names the bug even where a lucky order would pass.
    with pytest.raises(KernelError, match="has a race"):
        k((cols // 32, rows // 32), (32, 8), (x, out, np.int32(rows), np.int32(cols)),
          race_check=True)


def test_the_shared_tile_transpose_passes_the_race_check():
    k = gk.load("transpose", backend="cpu").transpose_v3_padded
    x = np.random.default_rng(4).standard_normal((40, 70), dtype=np.float32)
    out = np.full((70, 40), np.nan, np.float32)
    k((3, 2), (32, 8), (x, out, np.int32(40), np.int32(70)), race_check=True)
    np.testing.assert_array_equal(out, x.T)


def test_defines_select_a_build_and_builds_are_reused():
    a = gk.load("transpose", {"TILE": 16, "BLOCK_ROWS": 16}, backend="cpu")
    assert gk.load("transpose", {"BLOCK_ROWS": 16, "TILE": 16}, backend="cpu") is a
    assert gk.load("transpose", backend="cpu") is not a
    with pytest.raises(CompileError, match="BLOCK_ROWS must divide TILE"):
        gk.load("transpose", {"TILE": 32, "BLOCK_ROWS": 12}, backend="cpu")


def test_unknown_file_and_kernel_list_what_exists():
    with pytest.raises(gk.KernelFileNotFoundError, match="transpose"):
        gk.load("transpos")
    mod = gk.load("copy", backend="cpu")
    with pytest.raises(gk.UnknownKernelError, match="copy_v1_coalesced, copy_v2_strided"):
        mod.copy_v3
    assert isinstance(gk.UnknownKernelError("x"), (CourseError, AttributeError))
    assert not hasattr(mod, "copy_v3")
    assert "copy_v2_strided" in dir(mod)


# --------------------------------------------------------------------------- nvcc


@functools.lru_cache(maxsize=None)
def nvcc_archs() -> frozenset[str]:
    nvcc = shutil.which("nvcc")
    if not nvcc:
        return frozenset()
    out = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True).stdout
    return frozenset(re.findall(r"compute_(\d+)", out))


NVCC_JOBS = [(p, arch, d) for p in CU_FILES for arch in ("75", "80", "90")
             for d in ({},) + tuple(x for x in DEFINE_SETS.get(p.stem, ()) if x)]


@pytest.mark.parametrize("path,arch,defines", NVCC_JOBS,
                         ids=[f"{p.name}-sm_{a}" + "".join(f"-{k}{v}" for k, v in d.items())
                              for p, a, d in NVCC_JOBS])
def test_nvcc_compiles_every_kernel_file(path, arch, defines, tmp_path):
    if not shutil.which("nvcc"):
        pytest.skip("nvcc is not on PATH: the CUDA compile check needs the CUDA toolkit")
    if arch not in nvcc_archs():
        pytest.skip(f"this nvcc cannot build for sm_{arch} (nvcc --list-gpu-arch lacks it)")
    # Device code only, as NVRTC compiles it on a GPU: -cubin skips the host compiler.
    cmd = ["nvcc", "-std=c++17", "-cubin", f"-arch=sm_{arch}", "-o", str(tmp_path / "k.cubin"),
           *[f"-D{k}={v}" for k, v in defines.items()], str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"nvcc rejects {path.name} for sm_{arch}:\n{proc.stderr}"


def test_register_count_is_a_gpu_compiler_figure():
    """The emulator has no register file: num_regs is None there, never a made-up count."""
    assert gk.load("saxpy", backend="cpu").saxpy_v1_one_per_thread.num_regs is None


def test_launch_checks_and_paths_have_one_home():
    """kernels exports loading and the homes; the launch checks live in emulator.launch, the
    kernel folder in paths."""
    for name in ("check_launch", "check_args", "format_dims", "Limits", "EMULATOR_LIMITS",
                 "ceil_div", "KERNEL_DIR"):
        assert not hasattr(gk, name), name
    assert set(gk.__all__) <= set(dir(gk))
