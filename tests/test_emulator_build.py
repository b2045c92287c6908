"""The emulator's build: a cache that trusts nothing, the compiler it runs, and its messages."""
from __future__ import annotations

import os
import pickle
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import warnings

import numpy as np
import pytest

import gpucourse.kernels as gk
from gpucourse.emulator import build
from gpucourse.errors import CompileError, DeviceError


def kernel(tag: str) -> str:
    """A small kernel whose source (and so cache entry) is this test's own."""
    return f'extern "C" __global__ void fill(int* x) {{ x[threadIdx.x] = 7; }}  // {tag}\n'


def run_fill(lib) -> np.ndarray:
    x = np.zeros(4, np.int32)
    lib.launch("fill", (1, 1, 1), (4, 1, 1), (x,))
    return x


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache folder for this test (the user's own cache is never touched)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("GPUCOURSE_CACHE", str(folder))
    return folder


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# --------------------------------------------------------------------------- the cache folder

def test_the_cache_folder_is_created_private(cache):
    old = os.umask(0o022)  # the usual umask, under which a plain mkdir gives 0755
    try:
        folder = build.cache_dir()
    finally:
        os.umask(old)
    assert folder == cache / "emulator"
    assert mode(cache) == 0o700 and mode(folder) == 0o700


@pytest.mark.parametrize("problem", ["writable", "owner"])
def test_a_cache_folder_others_could_write_is_refused(cache, monkeypatch, problem):
    (cache / "emulator").mkdir(parents=True)
    if problem == "writable":
        os.chmod(cache, 0o777)
        match = r"is writable by other users"
    else:  # as seen by a user other than the folder's owner
        uid = os.getuid()
        monkeypatch.setattr(os, "getuid", lambda: uid + 1)
        match = r"belongs to another user"
    with pytest.raises(DeviceError, match=rf"^The emulator's cache folder {cache} "
                                          rf"\(GPUCOURSE_CACHE\) {match}, so a library planted "
                                          rf"there could run as you: set GPUCOURSE_CACHE to a "
                                          rf"folder of your own"):
        build.cache_dir()


def test_a_cache_setting_that_cannot_be_a_folder_is_named(tmp_path, monkeypatch):
    taken = tmp_path / "a-file"
    taken.write_text("not a folder")
    monkeypatch.setenv("GPUCOURSE_CACHE", str(taken))
    with pytest.raises(DeviceError, match=rf"^The emulator cannot create its cache folder {taken} "
                                          rf"\(GPUCOURSE_CACHE: Not a directory\); set "
                                          rf"GPUCOURSE_CACHE to a folder you can write\.$"):
        build.cache_dir()


@pytest.fixture
def no_cache_setting(tmp_path, monkeypatch):
    """No GPUCOURSE_CACHE, a temporary folder of the test's own, no fallback made yet."""
    monkeypatch.delenv("GPUCOURSE_CACHE", raising=False)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setattr(build, "_fallback", [], raising=False)
    return temp


def test_a_read_only_home_falls_back_to_a_fresh_private_folder(tmp_path, monkeypatch,
                                                                no_cache_setting):
    blocked = tmp_path / "home-cache"
    blocked.write_text("a file where the cache folder would go: mkdir fails, as when read-only")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked / "sub"))
    # A folder another user left under the name the fallback once used, open to everyone.
    planted = no_cache_setting / f"gpucourse-{os.getuid()}" / "emulator"
    planted.mkdir(parents=True)
    os.chmod(planted, 0o777)
    os.chmod(planted.parent, 0o777)
    with pytest.warns(UserWarning, match=r"cannot create its cache folder .* builds kernels in "):
        folder = build.cache_dir()
    assert planted not in (folder, *folder.parents)
    assert folder.parent.parent == no_cache_setting and folder.name == "emulator"
    assert mode(folder) == 0o700 and mode(folder.parent) == 0o700
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert build.cache_dir() == folder  # one folder (and one note) per process


def test_a_default_cache_folder_others_could_write_is_not_used(tmp_path, monkeypatch,
                                                                no_cache_setting):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    shared = tmp_path / "xdg" / "gpucourse"
    shared.mkdir(parents=True)
    os.chmod(shared, 0o777)
    with pytest.warns(UserWarning, match=rf"cache folder {shared} is writable by other users, so "
                                         rf"it is not used; the emulator builds kernels in "):
        folder = build.cache_dir()
    assert shared not in folder.parents and mode(folder.parent) == 0o700


# --------------------------------------------------------------------------- cache entries

PLANT = r"""
#include <stdio.h>
__attribute__((constructor)) static void planted() {
  FILE* f = fopen(MARKER, "w");
  if (f) { fputs("planted code ran", f); fclose(f); }
}
"""


def test_a_library_planted_in_the_cache_is_rebuilt_not_loaded(cache, tmp_path):
    source = kernel("planted")
    lib = build.build_library(source, filename="planted.cu")
    marker = tmp_path / "marker"
    plant = tmp_path / "plant.c"
    plant.write_text(f'#define MARKER "{marker}"\n' + PLANT)
    planted = tmp_path / "planted.so"
    subprocess.run([*shlex.split(build.compiler()[0]), "-x", "c++", "-shared", "-fPIC", str(plant),
                    "-o", str(planted)], check=True)
    os.replace(planted, lib.path)  # a new file: this process's mapping of the old one stays
    # Another process loads the kernel (this one has the real library open already).
    child = textwrap.dedent(f"""
        import warnings
        warnings.simplefilter("always")
        import numpy as np
        from gpucourse.emulator import build
        lib = build.build_library({source!r}, filename="planted.cu")
        x = np.zeros(4, np.int32)
        lib.launch("fill", (1, 1, 1), (4, 1, 1), (x,))
        print(x.tolist())
    """)
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                          timeout=300)
    assert not marker.exists(), "the planted library ran"
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[7, 7, 7, 7]"
    assert "does not match the digest recorded when it was built" in proc.stderr
    assert "rebuilding it" in proc.stderr


@pytest.mark.parametrize("damage", ["empty", "truncated", "no digest"])
def test_a_damaged_runtime_object_is_rebuilt_with_a_note(cache, damage):
    runtime = build.runtime_object()
    data = runtime.read_bytes()
    if damage == "empty":
        runtime.write_bytes(b"")
    elif damage == "truncated":
        runtime.write_bytes(data[:len(data) // 2])
    else:
        (runtime.parent / (runtime.name + ".sha256")).unlink()
    why = {"empty": "is empty", "truncated": "does not match the digest",
           "no digest": "has no recorded digest"}[damage]
    with pytest.warns(UserWarning, match=rf"cached build {runtime.name} {why}.*; rebuilding it"):
        lib = build.build_library(kernel(f"runtime {damage}"), filename="damaged.cu")
    assert run_fill(lib).tolist() == [7] * 4  # before: "`threadIdx` is used but never defined"
    assert runtime.read_bytes() == data
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build.runtime_object()  # repaired for good


def test_every_entry_records_its_digest(cache):
    lib = build.build_library(kernel("digests"), filename="digests.cu")
    entries = [p for p in cache.joinpath("emulator").iterdir() if p.suffix in (".so", ".o")]
    assert lib.path in entries and len(entries) >= 2
    for entry in entries:
        recorded = entry.with_name(entry.name + ".sha256").read_text().strip()
        assert recorded == build._file_digest(entry)


def test_a_library_changed_after_it_was_built_does_not_load_in_a_child(cache):
    lib = build.build_library(kernel("reopen"), filename="reopen.cu")
    again = pickle.loads(pickle.dumps(lib))  # how a spawned child process gets it
    assert run_fill(again).tolist() == [7] * 4
    changed = lib.path.with_name("changed.so")
    changed.write_bytes(lib.path.read_bytes()[:1000])
    os.replace(changed, lib.path)  # a new file: this process's mapping of the old one stays
    with pytest.raises(DeviceError, match=r"changed after it was built; run the cell again"):
        pickle.loads(pickle.dumps(lib))


def test_a_build_that_stops_half_way_leaves_no_entry(cache, monkeypatch):
    source = kernel("interrupted")
    real = subprocess.run

    def stopped_while_linking(cmd, *args, **kwargs):  # Ctrl-C with half the library written
        if "-shared" in cmd:
            with open(cmd[cmd.index("-o") + 1], "wb") as out:
                out.write(b"\x7fELF half a library")
            raise KeyboardInterrupt
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(build.subprocess, "run", stopped_while_linking)
    with pytest.raises(KeyboardInterrupt):
        build.build_library(source, filename="interrupted.cu")
    monkeypatch.setattr(build.subprocess, "run", real)
    folder = cache / "emulator"
    assert not list(folder.glob("interrupted-*.so*")) and not list(folder.glob(".*.tmp"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing damaged to report: there is no entry
        lib = build.build_library(source, filename="interrupted.cu")
    assert run_fill(lib).tolist() == [7] * 4


# --------------------------------------------------------------------------- compiler messages

@pytest.mark.parametrize("code,line,opening", [
    ('extern "C" __global__ void k(int* x) {\n'
     '  if (threadIdx.x < 3) {\n'
     '    x[threadIdx.x] = 1;\n'
     '}\n', 1, 'extern "C" __global__ void k(int* x) {'),
    ('extern "C" {\n'
     '__global__ void k(int* x) { x[0] = 1; }\n', 1, 'extern "C" {'),
], ids=["if block", "extern C block"])
def test_a_missing_closing_brace_is_named_at_the_learners_line(cache, code, line, opening):
    with pytest.raises(CompileError) as info:
        build.build_library(code, filename="brace.cu")
    assert str(info.value) == (f"brace.cu line {line}: expected '}}' at end of input (to match "
                               f"the '{{' on this line)\n    {opening}")


def test_the_learners_own_first_error_still_comes_first(cache):
    code = ('extern "C" __global__ void k(int* x) {\n'
            '  x[0] = undefined_name;\n')
    with pytest.raises(CompileError, match=r"^brace2\.cu line 2: 'undefined_name' was not "
                                           r"declared"):
        build.build_library(code, filename="brace2.cu")


# --------------------------------------------------------------------------- the compiler

@pytest.fixture
def gxx() -> str:
    found = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not found:
        pytest.skip("no C++ compiler on PATH")
    return found


def test_cxx_may_start_with_launcher_words(cache, tmp_path, monkeypatch, gxx):
    log = tmp_path / "launched"
    launcher = tmp_path / "launch.sh"
    launcher.write_text(f'#!/bin/sh\necho "$@" >> {shlex.quote(str(log))}\nexec "$@"\n')
    launcher.chmod(0o755)
    for cxx in (f"{shlex.quote(str(launcher))} {shlex.quote(gxx)}",
                f"env GPUCOURSE_TEST_LAUNCHER=1 {shlex.quote(gxx)}"):
        monkeypatch.setenv("CXX", cxx)
        command, identity = build.compiler(fresh=True)
        assert command == cxx and identity
        lib = build.build_library(kernel(f"launcher {cxx}"), filename="launched.cu")
        assert run_fill(lib).tolist() == [7] * 4
    assert "-shared" in log.read_text()  # the launcher ran the compiler


def test_a_cxx_that_is_not_a_command_is_named(monkeypatch):
    monkeypatch.setenv("CXX", 'g++ "-O2')
    with pytest.raises(DeviceError, match=r"^CXX='g\+\+ \"-O2' cannot be read as a command "
                                          r"\(No closing quotation\); set CXX to a compiler"):
        build.compiler(fresh=True)


# --------------------------------------------------------------------------- static shared memory

@pytest.mark.parametrize("use", [
    "out[threadIdx.x] = 1.0f;",                                              # never used
    "big[threadIdx.x] = 2.0f;\n  out[threadIdx.x] = 1.0f;",                  # only written
    "big[threadIdx.x] = 2.0f;\n  out[threadIdx.x] = big[threadIdx.x];",      # folded away
], ids=["unused", "written", "folded"])
def test_static_shared_arrays_count_even_where_the_compiler_drops_them(cache, use):
    code = ('extern "C" __global__ void dropped(float* out) {\n'
            '  __shared__ float big[16384];  // 64 KB\n'
            f'  {use}\n'
            '}\n')
    with pytest.raises(CompileError, match=r"^dropped\.cu: kernel dropped uses more than the 48 KB "
                                           r"of static shared memory a block may have \(65536 "
                                           r"__shared__ bytes, 49152 allowed\)"):
        gk.from_source(code, name="dropped.cu", backend="cpu")
    lib = build.build_library(code.replace("16384", "8192"), filename="kept.cu")
    assert lib.kernel_static_shared("dropped") == 32768
