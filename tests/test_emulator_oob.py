"""Indices out of bounds on the emulator: every launch reports them on the kernel's own line
(thread, block, array, element) and the Python process goes on; launch keywords are checked.

The launches that could kill a process run in a subprocess, so that a regression fails a
test instead of killing pytest."""
from __future__ import annotations

import ctypes
import json
import math
import re
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import gpucourse.kernels as gk
from gpucourse.check import run_learner_kernel
from gpucourse.emulator import KernelError, checks, racecheck
from gpucourse.errors import CourseError, InputError, LaunchError
from gpucourse.paths import KERNEL_DIR

ROOT = KERNEL_DIR.parents[2]
F32 = np.float32
N = 1000  # 4000 bytes: a multiple of 16 that does not fill its last page

SOURCE = textwrap.dedent(r"""
extern "C" __global__ void write_at(float* out, int n, long long at) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 1.0f;
  if (i == 70) out[at] = 2.0f;  // STRAY WRITE
}

extern "C" __global__ void read_at(const float* in, float* out, int n, long long at) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
  if (i == 70) out[i] = in[at];  // STRAY READ
}

extern "C" __global__ void spin(int* x) { volatile int* v = x; while (v[0] == 0) {} }

extern "C" __global__ void quit(int* x) { abort(); }

extern "C" __global__ void twice(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * in[i];
}
""")
LINES = {tag: 1 + i for i, text in enumerate(SOURCE.splitlines())
         for tag in ("STRAY WRITE", "STRAY READ") if tag in text}

# Runs each case of argv[1] (JSON) in this process, prints one JSON line per case, then
# churns the heap: memory a stray write had damaged would crash here.
RUNNER = textwrap.dedent(r"""
import gc, json, sys
import numpy as np
import gpucourse.kernels as gk
from gpucourse.emulator import racecheck
from test_emulator_oob import SOURCE, N

if "--no-detector" in sys.argv:
    racecheck.toolchain_problem = lambda: "it needs Linux"
mod = gk.from_source(SOURCE, name="oob.cu", backend="cpu")
for case in json.loads(sys.argv[1]):
    kind, mode, at = case["kind"], case["mode"], case["at"]
    keywords = {"plain": {}, "isolated": {"isolate": True, "timeout": 60},
                "race": {"race_check": True, "timeout": 60}}[mode]
    x = np.arange(N, dtype=np.float32)
    out = np.zeros(N, np.float32)
    args = ((out, np.int32(N), np.int64(at)) if kind == "write"
            else (x, out, np.int32(N), np.int64(at)))
    print(json.dumps({"start": case}), flush=True)
    try:
        getattr(mod, kind + "_at")(2, 64, args, **keywords)
        error = message = None
    except Exception as exc:
        error, message = type(exc).__name__, str(exc)
    print(json.dumps({"case": case, "error": error, "message": message,
                      "untouched": bool((out == 0).all()), "out70": repr(float(out[70]))}),
          flush=True)
junk = [np.ones(1000 + k) for k in range(3000)]
del junk
gc.collect()
print("survived", flush=True)
""")

# (bytes away from the array, element index): the access starts that far past its end, or
# ends that far before its start.
PAST = [(4, N), (8 << 10, N + 2047), (400 << 10, N + 102399), (4 << 20, N + 1048575)]
BEFORE = [(4, -1), (8 << 10, -2048), (400 << 10, -102400), (4 << 20, -1048576)]


def run_cases(cases, *flags) -> dict:
    proc = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(cases), *flags],
                          capture_output=True, text=True, timeout=900, cwd=ROOT / "tests")
    lines = [json.loads(t) for t in proc.stdout.splitlines() if t.startswith("{")]
    done = {json.dumps(r["case"], sort_keys=True): r for r in lines if "case" in r}
    started = [r["start"] for r in lines if "start" in r]
    assert proc.returncode == 0 and proc.stdout.rstrip().endswith("survived"), (
        f"the process died (exit code {proc.returncode}) in case {started[-1:]}: "
        f"{proc.stderr[-2000:]}")
    return done


def expected(kind: str, index: int, named: bool = True) -> str:
    verb, array = ("writes", "out") if kind == "write" else ("reads", "in")
    tag = "STRAY WRITE" if kind == "write" else "STRAY READ"
    line = (rf" at oob\.cu line {LINES[tag]} \(`if \(i == 70\) out\[(at|i)\] = "
            rf"(2\.0f|in\[at\]);  // {tag}`\)" if named else "")
    side = "before its start" if index < 0 else "past its end"
    return (rf"^kernel {kind}_at: thread \(6,0,0\) of block \(1,0,0\) {verb} `{array}` out of "
            rf"bounds{line}, element {index} of {N} \({side}\); .*guard the access")


def blind(mode: str, kind: str, distance: int, index: int) -> bool:
    """A read a few bytes before an array's start, inside the page that holds its first
    bytes: no page can fault there, so only the race detector sees it."""
    return mode != "race" and kind == "read" and index < 0 and distance < 4096


@pytest.mark.parametrize("mode", ["plain", "isolated", "race"])
def test_every_read_and_write_out_of_bounds_is_named_and_the_process_survives(mode):
    cases = [{"kind": kind, "mode": mode, "at": index, "distance": distance}
             for kind in ("write", "read") for distance, index in PAST + BEFORE]
    done = run_cases(cases)
    for case in cases:
        r = done[json.dumps(case, sort_keys=True)]
        if blind(mode, case["kind"], case["distance"], case["at"]):
            # It reads the pattern around the copy, a NaN: the result shows it.
            assert r["error"] is None and r["out70"] == "nan", r
            continue
        assert r["error"] == "OutOfBounds", r
        assert re.match(expected(case["kind"], case["at"]), r["message"]), r
        assert r["untouched"], f"the failed launch changed the caller's array: {r}"


def test_without_the_race_detector_the_launch_still_names_thread_block_array_and_element():
    cases = [{"kind": kind, "mode": mode, "at": index, "distance": d}
             for kind, mode in (("write", "plain"), ("read", "isolated"))
             for d, index in (PAST[2], BEFORE[3])]
    done = run_cases(cases, "--no-detector")
    for case in cases:
        r = done[json.dumps(case, sort_keys=True)]
        assert r["error"] == "OutOfBounds", r
        assert re.match(expected(case["kind"], case["at"], named=False),
                                      r["message"]), r


@pytest.fixture(scope="module")
def mod():
    return gk.from_source(SOURCE, name="oob.cu", backend="cpu")


def test_a_stray_write_leaves_the_callers_buffer_alone(mod):
    """A view at the start of a longer buffer: the element after it belongs to the caller,
    and a write to it (it would not fault) is found in the pattern around the copy."""
    buf = np.full(N + 8, 7.0, F32)
    with pytest.raises(KernelError, match=r"writes `out` out of bounds at oob\.cu line \d+ .*"
                                          rf"element {N} of {N} \(past its end\)"):
        mod.write_at(2, 64, (buf[:N], np.int32(N), np.int64(N)))
    assert (buf == 7).all(), "the caller's memory was written"
    # 998 floats: 3992 bytes, so the copy ends 8 bytes before its page does.
    with pytest.raises(KernelError, match=r"element 998 of 998 \(past its end\)"):
        mod.write_at(2, 64, (buf[:998], np.int32(998), np.int64(998)))
    mod.write_at(16, 64, (buf[:N], np.int32(N), np.int64(3)))  # in bounds
    assert buf[3] == 2 and (buf[:N] != 7).all() and (buf[N:] == 7).all()


def test_arrays_that_share_memory_share_one_copy(mod):
    x = np.arange(300, dtype=F32)
    mod.twice(5, 64, (x, x, np.int32(300)))  # in place
    np.testing.assert_array_equal(x, 2 * np.arange(300))
    y = np.arange(600, dtype=F32)
    mod.twice(5, 64, (y[300:], y[:300], np.int32(300)))  # the second half into the first
    np.testing.assert_array_equal(y, np.r_[2 * np.arange(300, 600), np.arange(300, 600)])


def test_guarded_copies_find_a_stray_byte_and_the_array_nearest_to_an_address(mod):
    params = mod.write_at.params
    out = np.zeros(10, F32)
    with checks.GuardedArrays(params, (out, np.int32(10), np.int64(0))) as arena:
        copy = arena.args[0]
        assert copy.ctypes.data % 16 == out.ctypes.data % 16 and copy.ctypes.data != out.ctypes.data
        assert arena.stray_write() is None
        np.copyto(copy, 5.0)
        assert arena.stray_write() is None, "the array's own bytes are not stray"
        end = copy.ctypes.data + copy.nbytes
        ctypes.memset(end + 2, 1, 1)
        assert arena.stray_write() == end + 2
        assert arena.owner(end + 2) == (0, 10, 10)
        assert arena.owner(copy.ctypes.data - 4096) == (0, -1024, 10)
        assert arena.contains(copy.ctypes.data - (1 << 30))
        arena.copy_back()
    assert (out == 5).all()


def test_race_check_runs_every_launch_in_a_child_process():
    """A kernel that aborts: under race_check the caller survives (before, its three thread
    orders ran in the caller's own process)."""
    script = textwrap.dedent("""
        import numpy as np, gpucourse.kernels as gk
        from test_emulator_oob import SOURCE
        mod = gk.from_source(SOURCE, name="oob.cu", backend="cpu")
        try:
            mod.quit(1, 1, (np.zeros(1, np.int32),), race_check=True, timeout=60)
        except Exception as exc:
            print(type(exc).__name__, exc)
        print("survived")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=ROOT / "tests")
    assert proc.returncode == 0 and "survived" in proc.stdout, proc.stderr[-2000:]
    assert "KernelError kernel quit crashed the process that ran it (SIGABRT)" in proc.stdout


# --------------------------------------------------------------------------- endless loops

SPIN = textwrap.dedent("""
    import sys, time, numpy as np, gpucourse.kernels as gk
    from gpucourse.check import run_learner_kernel
    from test_emulator_oob import SOURCE
    mod = gk.from_source(SOURCE, name="oob.cu", backend="cpu")
    t0 = time.perf_counter()
    try:
        if sys.argv[1] == "kernel":
            mod.spin(1, 1, (np.zeros(1, np.int32),), timeout=1.5)
        else:
            run_learner_kernel(mod.spin, 1, 1, (np.zeros(1, np.int32),), "n=1", timeout_s=1.5)
    except Exception as exc:
        print(type(exc).__name__, exc)
    print(f"{time.perf_counter() - t0:.2f}")
    mod.twice(1, 4, (np.ones(4, np.float32), np.ones(4, np.float32), np.int32(4)))
    print("survived")
""")


@pytest.mark.parametrize("how, error", [
    ("kernel", "KernelError kernel spin did not finish within 1.5 s"),  # in this process
    ("lab", "AssertionError n=1: kernel spin did not finish within 1.5 s"),  # in a child
])
def test_an_endless_loop_under_the_default_isolation_is_one_sentence_within_its_timeout(how, error):
    proc = subprocess.run([sys.executable, "-c", SPIN, how], capture_output=True, text=True,
                          timeout=120, cwd=ROOT / "tests")
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and lines[-1] == "survived", proc.stderr[-2000:]
    assert lines[0].startswith(error) and "(an endless loop" in lines[0], lines
    assert len(lines) == 3, "one sentence on one line"
    assert 1.5 <= float(lines[1]) < 1.5 + 3.0, lines


def test_learner_code_gets_a_time_limit_in_process_and_course_kernels_none(mod, monkeypatch):
    seen = []
    monkeypatch.setattr(checks, "launch", lambda *a, **k: seen.append(k["timeout"]))
    course = gk.load("vector_add", backend="cpu").vector_add_v1_naive
    x = np.ones(4, F32)
    course(1, 4, (x, x, x, np.int32(4)))
    mod.twice(1, 4, (x, x, np.int32(4)))
    mod.twice(1, 4, (x, x, np.int32(4)), timeout=2)
    course(1, 4, (x, x, x, np.int32(4)), timeout=np.float32(3))
    assert seen == [None, checks.DEFAULT_TIMEOUT_S, 2.0, 3.0]


# --------------------------------------------------------------------------- keywords

@pytest.mark.parametrize("value", [0, -1, "5", math.nan, math.inf, -math.inf, True, [5]])
def test_a_timeout_that_is_no_time_limit_is_one_sentence(mod, value):
    x = np.ones(4, F32)
    for keywords in ({}, {"isolate": True}, {"race_check": True}):
        with pytest.raises(LaunchError, match=rf"^timeout={re.escape(repr(value))} is not a time "
                                              r"limit: give the seconds a launch may take as a "
                                              r"number above 0 \(e\.g\. timeout=10\)\.$"):
            mod.twice(1, 4, (x, x, np.int32(4)), timeout=value, **keywords)


@pytest.mark.parametrize("what", ["race_check", "isolate"])
def test_race_check_and_isolate_are_switches(mod, what):
    x = np.ones(4, F32)
    with pytest.raises(LaunchError, match=rf"^{what}='yes' is not a switch: pass {what}=True or "
                                          rf"{what}=False\.$"):
        mod.twice(1, 4, (x, x, np.int32(4)), **{what: "yes"})
    mod.twice(1, 4, (x, x, np.int32(4)), **{what: np.bool_(False)})


@pytest.mark.parametrize("code, shown", [(None, "None"), (b"__global__", "a bytes"),
                                         (42, "a Python int")])
def test_from_source_wants_a_string(code, shown):
    with pytest.raises(InputError, match=rf"^from_source takes the CUDA C source as a string "
                                         rf"\(e\.g\. .*\), not {shown}\.$"):
        gk.from_source(code)
    with pytest.raises(InputError, match=r"^name=3 is not a file name"):
        gk.from_source(SOURCE, name=3)


def test_load_wants_a_file_name():
    with pytest.raises(InputError, match=r"^a kernel file is named by a string such as "
                                         r"\"transpose\", not None; the course has: .*\bcopy, "):
        gk.load(None)
    assert issubclass(InputError, CourseError)


def test_the_lab_harness_reports_an_index_out_of_bounds_as_a_failed_check(mod):
    with pytest.raises(AssertionError, match=r"^n=1000: kernel write_at: thread \(6,0,0\) of "
                                             r"block \(1,0,0\) writes `out` out of bounds at "
                                             r"oob\.cu line \d+"):
        run_learner_kernel(mod.write_at, 2, 64, (np.zeros(N, F32), np.int32(N), np.int64(-9)),
                           "n=1000")


def test_the_detector_checks_bounds_alone_without_shadow_memory(mod, monkeypatch):
    monkeypatch.setattr(racecheck, "MAX_SHADOW_BYTES", 1000)  # no room for any shadow
    det = racecheck.detector(mod.read_at)
    x, out = np.arange(N, dtype=F32), np.zeros(N, F32)
    hazard = det.run("read_at", (2, 1, 1), (64, 1, 1), [x, out, np.int32(N), np.int64(-1)],
                     bounds_only=True)
    assert hazard is not None and "reads `in` out of bounds" in hazard.message
    assert det.run("read_at", (2, 1, 1), (64, 1, 1), [x, out, np.int32(N), np.int64(1)],
                   bounds_only=True) is None
    assert (out == 0).all(), "the detector runs on copies"


def test_an_index_out_of_bounds_comes_before_a_race_found_earlier():
    """The detector keeps watching bounds after the first race, and names the stray access."""
    mod = gk.from_source(textwrap.dedent(r"""
    extern "C" __global__ void race_then_stray(float* out, int n) {
      out[0] += 1.0f;  // a race between every two threads
      __syncthreads();
      if (threadIdx.x == 63) out[n] = 1.0f;  // STRAY
    }"""), name="race_then_stray.cu", backend="cpu")
    det = racecheck.detector(mod.race_then_stray)
    hazard = det.run("race_then_stray", (1, 1, 1), (64, 1, 1), [np.zeros(64, F32), np.int32(64)])
    assert hazard is not None and not hazard.detail, hazard
    assert re.match(r"kernel race_then_stray: thread \(63,0,0\) of block \(0,0,0\) writes `out` "
                    r"out of bounds at race_then_stray\.cu line 5 .*element 64 of 64",
                    hazard.message)
    hazard = det.run("race_then_stray", (1, 1, 1), (64, 1, 1), [np.zeros(65, F32), np.int32(64)])
    assert hazard is not None and "has a race" in hazard.message, "in bounds: the race is named"
