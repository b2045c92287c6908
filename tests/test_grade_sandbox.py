"""The grader's sandbox: the supervisor around a learner's kernel, run here around plain
Python commands (quick), and the environment a kernel gets."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from gpucourse.grade import sandbox

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def supervise(tmp_path, code, cgroup=None, wait=60, signal_after=None, **limits):
    """Run ``code`` under the supervisor; return (its report, exit code, stderr)."""
    spec = {"cpu_seconds": 60, "memory_bytes": 1 << 30, "file_bytes": 1 << 30,
            "processes": 16, "notebook_seconds": 60, "grace_seconds": 0}
    spec.update(limits)
    status = tmp_path / "status.json"
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", sandbox.__file__, json.dumps(spec), str(status),
         cgroup or "", "--", sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path, stderr=subprocess.PIPE, text=True, start_new_session=True)
    if signal_after is not None:
        time.sleep(signal_after)
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=wait)
    return sandbox.read_report(str(status)), proc.returncode, err


def alive(pids) -> list[int]:
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    out.append(pid)
        except OSError:
            pass
    return out


def test_cpu_time_is_limited(tmp_path):
    t0 = time.monotonic()
    report, code, _ = supervise(tmp_path, "while True: pass", cpu_seconds=1)
    assert report["event"] == "cpu" and code == 1
    assert time.monotonic() - t0 < 30


def test_memory_is_limited_but_address_space_reservations_are_not(tmp_path):
    """RLIMIT_DATA stops a real allocation, yet lets a process reserve 64 GiB of inaccessible
    address space as the emulator does around every array (RLIMIT_AS would refuse that)."""
    reserve = """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        p = libc.mmap(None, 64 << 30, 0, 0x02 | 0x20 | 0x4000, -1, 0)  # PROT_NONE, NORESERVE
        assert p not in (None, ctypes.c_void_p(-1).value), "the reservation was refused"
        print("reserved")
    """
    report, code, err = supervise(tmp_path, reserve, memory_bytes=256 << 20)
    assert code == 0 and report["event"] == "exited", err
    report, code, err = supervise(tmp_path, "bytearray(512 << 20)", memory_bytes=256 << 20)
    assert report == {**report, "event": "exited", "code": 1} and "MemoryError" in err


def test_too_many_processes_are_all_killed(tmp_path):
    spawn = """
        import subprocess, sys, time
        procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
                 for _ in range(24)]
        open("pids", "w").write(" ".join(str(p.pid) for p in procs))
        time.sleep(60)
    """
    report, _, _ = supervise(tmp_path, spawn, processes=8)
    assert report["event"] == "processes" and report["most_processes"] > 8
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()] if \
        (tmp_path / "pids").exists() else []
    assert not alive(pids)


def test_a_process_that_leaves_its_session_is_killed_too(tmp_path):
    """Double fork and setsid: the orphan comes back to the supervisor (a child subreaper)."""
    escape = """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                open("escapee", "w").write(str(os.getpid()))
                time.sleep(120)
            os._exit(0)
        time.sleep(120)
    """
    report, _, _ = supervise(tmp_path, escape, signal_after=3)
    assert report["event"] == "terminated"
    for _ in range(50):
        if (tmp_path / "escapee").exists():
            break
        time.sleep(0.1)
    assert not alive([int((tmp_path / "escapee").read_text())])


def test_the_notebook_time_is_a_hard_stop(tmp_path):
    t0 = time.monotonic()
    report, _, _ = supervise(tmp_path, "import time; time.sleep(60)", notebook_seconds=1)
    assert report["event"] == "time" and time.monotonic() - t0 < 15


def test_a_fork_bomb_hits_the_cgroup_cap_and_is_killed(tmp_path):
    cgroup, why = sandbox.Cgroup.create(f"gpucourse-grade-{os.getpid()}-test", 40)
    if cgroup is None:
        pytest.skip(f"no pids cgroup here ({why}); the polling test covers this machine")
    bomb = """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
    """
    try:
        report, _, _ = supervise(tmp_path, bomb, cgroup=cgroup.path, processes=16)
        assert report["cgroup"] and report["event"] in ("tasks", "processes")
        assert cgroup.pids() == []
    finally:
        cgroup.remove()
    assert not os.path.exists(cgroup.path)


def test_secrets_stay_out_of_the_kernels_environment(tmp_path):
    environ = {"PATH": "/usr/bin:/bin", "LANG": "de_DE.UTF-8", "LC_ALL": "C", "HOME": "/root",
               "GITHUB_TOKEN": "t", "AWS_SECRET_ACCESS_KEY": "k", "AWS_REGION": "eu",
               "MY_API_KEY": "k", "GPUCOURSE_DEVICE": "cpu", "GPUCOURSE_API_KEY": "k",
               "GPUCOURSE_CACHE": "/root/.cache/x", "OMP_NUM_THREADS": "4", "SSH_AUTH_SOCK": "s",
               "DATABASE_PASSWORD": "p", "HF_TOKEN": "t", "PYTHONPATH": "/elsewhere"}
    env = sandbox.scrubbed_env(str(tmp_path), environ, threads=2, python_path="/src")
    assert {k for k in env if k in environ} == {"PATH", "LANG", "LC_ALL", "HOME",
                                                "GPUCOURSE_DEVICE", "OMP_NUM_THREADS",
                                                "PYTHONPATH"}
    assert env["HOME"] == str(tmp_path) and env["TMPDIR"].startswith(str(tmp_path))
    assert env["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)
    assert env["OMP_NUM_THREADS"] == "4" and env["MKL_NUM_THREADS"] == "2"
    assert env["PYTHONPATH"] == "/src"


def test_stale_cgroups_and_folders_of_a_dead_grader_are_removed(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    (tmp_path / f"gpucourse-grade-{dead}-abc").mkdir()
    (tmp_path / f"gpucourse-grade-{os.getpid()}-abc").mkdir()
    (tmp_path / "gpucourse-grade-other").mkdir()
    sandbox.remove_stale(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"gpucourse-grade-{os.getpid()}-abc", "gpucourse-grade-other"]


def test_no_cgroup_is_said_in_one_sentence(monkeypatch, tmp_path):
    readonly = tmp_path / "ro"
    readonly.mkdir()
    readonly.chmod(0o500)
    monkeypatch.setattr(sandbox, "_pids_bases", lambda: [str(readonly / "missing")])
    cgroup, why = sandbox.Cgroup.create("x", 10)
    assert cgroup is None and why.startswith(str(readonly / "missing")) and "not writable" in why
