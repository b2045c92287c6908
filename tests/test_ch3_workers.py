"""Chapter 3 on the CPU: real gloo worker processes run every experiment at small sizes.

One group of two workers serves all the experiments (starting one costs seconds); the
failure tests start their own, since a failure stops the group on purpose.
"""
import ipaddress
import os
import signal
import socket
import sys
import threading
import time

import pytest
import torch
import torch.distributed as dist  # the learner functions below run in the workers, where it exists

from gpucourse.check import ch3 as c3
from gpucourse.check import expect_failure
from gpucourse.errors import CourseError
from gpucourse.experiments import ch3
from gpucourse.experiments.ch3 import allreduce, tasks, torchrun, worker
from gpucourse.experiments.ch3 import pool as ch3_pool  # `pool` is the shared group's fixture


@pytest.fixture(scope="module")
def pool():
    with ch3.Workers(2, backend="gloo") as p:
        yield p


def test_group_starts_like_torchrun_and_is_reused(pool):
    assert pool.backend == "gloo" and pool.n == 2
    first = ch3.hello(pool)
    again = ch3.hello(pool)
    assert [h["rank"] for h in first] == [0, 1]
    assert all(h["sum_of_ranks"] == 1.0 for h in first)
    assert [h["pid"] for h in first] == [h["pid"] for h in again] == pool.pids
    assert "2 worker processes in one gloo process group" in pool.describe()


def _listening_sockets(pids) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state that the processes ``pids`` hold,
    from /proc/net/tcp and tcp6 (addresses there are little-endian hex words)."""
    inodes = set()
    for pid in pids:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:  # closed meanwhile
                continue
            if link.startswith("socket:["):
                inodes.add(int(link[8:-1]))
    found = []
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        if not os.path.exists(table):
            continue
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                addr_hex, port_hex = fields[1].split(":")
                if fields[3] != "0A" or int(fields[9]) not in inodes:  # 0A: LISTEN
                    continue
                raw = b"".join(bytes.fromhex(addr_hex[i:i + 8])[::-1]
                               for i in range(0, len(addr_hex), 8))
                found.append((socket.inet_ntop(family, raw), int(port_hex, 16)))
    return found


def _is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return ip.is_loopback or bool(getattr(ip, "ipv4_mapped", None) and ip.ipv4_mapped.is_loopback)


def _other_ipv4_addresses() -> list[str]:
    """This machine's IPv4 addresses outside the loopback network (one per interface)."""
    import fcntl
    import struct

    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                req = struct.pack("256s", name.encode()[:15])
                raw = fcntl.ioctl(s.fileno(), 0x8915, req)  # SIOCGIFADDR
            except OSError:  # no IPv4 address on this interface
                continue
            address = socket.inet_ntoa(raw[20:24])
            if not ipaddress.ip_address(address).is_loopback:
                found.append(address)
    return found


def _master_port(ctx):
    import os

    return int(os.environ["MASTER_PORT"])


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="reads Linux's /proc/net/tcp")
def test_the_group_listens_on_the_loopback_address_only(pool):
    """The rendezvous store (MASTER_PORT) and gloo's own sockets accept no connection from
    another machine: nothing the workers hold listens outside 127.0.0.0/8 and ::1."""
    port = pool.run(_master_port)[0]
    listening = _listening_sockets(pool.pids)
    assert port in {p for _, p in listening}, listening
    assert all(_is_loopback(address) for address, _ in listening), listening
    for address in _other_ipv4_addresses():
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(5.0)
            with pytest.raises(ConnectionRefusedError):
                s.connect((address, port))


def test_ddp_gradients_equal_single_process_full_batch(pool):
    check = ch3.ddp_check(pool)
    assert str(check).startswith("DDP gradients on 2 workers match")
    assert check.max_rel_error < 1e-12  # float64 all through, not float32's 1e-7


def test_scaling_and_allreduce_sweep(pool):
    s = ch3.ddp_scaling(pool, per_worker=16, samples=2)
    assert s.workers == 2 and s.single.count == 2 and s.multi.count == 2
    assert 0 < s.efficiency < 5
    sw = ch3.allreduce_sweep(pool, sizes=[1024, 65536, 1 << 20], samples=2)
    assert len(sw.allreduce) == 3 and len(sw.pingpong) == 3
    assert sw.latency_s >= 0 and sw.bandwidth_Bps > 0
    mod = sw.model()
    assert mod[0].time < mod[-1].time  # the model grows with the message
    # the ring model's bandwidth term for p=2 is bytes / bandwidth
    assert mod[-1].bandwidth_time == pytest.approx((1 << 20) / sw.bandwidth_Bps)


def test_fit_latency_bandwidth_recovers_a_line():
    sizes = [1e3, 1e4, 1e5, 1e6, 1e7]
    lat, bw = allreduce.fit_latency_bandwidth(sizes, [2e-5 + n / 3e9 for n in sizes])
    assert lat == pytest.approx(2e-5, rel=1e-6) and bw == pytest.approx(3e9, rel=1e-6)


def test_bucket_indices_follow_backward_order():
    assert tasks.bucket_indices([4, 4, 4, 4], 0) == [[3], [2], [1], [0]]
    assert tasks.bucket_indices([4, 4, 4, 4], 8) == [[3, 2], [1, 0]]
    assert tasks.bucket_indices([4, 100, 4], 8) == [[2], [1], [0]]
    assert tasks.bucket_indices([1, 2, 3], 1e9) == [[2, 1, 0]]


def test_bucketing_checks_then_times(pool):
    b = ch3.bucketing(pool, d_model=16, layers=2, caps=(0, 4096, 2**20), samples=2)
    assert b.buckets[0] == b.tensors == 24 and b.buckets[-1] == 1
    assert [t.label for t in b.timings][0] == "one all-reduce per tensor"
    assert len(b.model(1e-5, 1e9)) == 3


def test_ddp_timeline_shows_buckets(pool):
    tl = ch3.ddp_timeline(pool, bucket_cap_mb=1.0, per_worker=8, samples=1)
    names = {n for n, _, _ in tl.events[0]}
    assert {"forward", "backward"} <= names
    assert tl.buckets >= 2 and sum(tl.bucket_bytes) == tl.grad_bytes
    assert 0.0 <= tl.overlap_fraction <= 1.0
    one = ch3.ddp_timeline(pool, bucket_cap_mb=100.0, per_worker=8, samples=1)
    assert one.buckets < tl.buckets


def test_pipeline_checks_gradients_and_measures_the_bubble(pool):
    p = ch3.pipeline(pool, microbatches=(1, 3), rows=31, samples=1)
    assert p.stages == 2 and [r.microbatches for r in p.runs] == [1, 3]
    assert sum(p.stage_param_bytes) == p.whole_param_bytes
    assert all(0 <= r.bubble < 1 for r in p.runs)
    one = p.run_for(1)
    # with one micro-batch each stage runs 1 forward and 1 backward
    assert [len(ev) for ev in one.events] == [2, 2]
    assert p.model(3).bubble_fraction == pytest.approx(1 / 4)
    assert "2 stage(s), 1 and 3 micro-batch(es)" in p.check_line()


def test_pipeline_rejects_bad_sizes(pool):
    with pytest.raises(CourseError, match="micro-batch"):
        ch3.pipeline(pool, microbatches=(0,))
    with pytest.raises(CourseError, match="micro-batch"):  # one count, not a list of them
        ch3.pipeline(pool, microbatches=0)


def test_lab_average_gradients_runs_learner_code_in_workers(pool):
    def average_gradients(model, world_size):
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world_size

    def sum_only(model, world_size):
        for p in model.parameters():
            dist.all_reduce(p.grad)

    def divide_only(model, world_size):
        for p in model.parameters():
            p.grad /= world_size

    c3.check_average_gradients(ch3.try_average_gradients(average_gradients, pool))
    with expect_failure("divide by the world size"):
        c3.check_average_gradients(ch3.try_average_gradients(sum_only, pool))
    with expect_failure("all_reduce it first"):
        c3.check_average_gradients(ch3.try_average_gradients(divide_only, pool))


def test_a_task_error_names_the_rank_and_stops_the_group(pool):
    """The last test of the shared group: a failure stops it on purpose.

    The learner's function fails on rank 1 only (a name from the notebook does not exist in
    the workers): the error names that rank, says why, and carries the worker's traceback.
    """
    def uses_a_global_on_rank_1(model, world_size):
        if dist.get_rank() == 1:
            for p in model.parameters():
                p.grad /= WORLD  # noqa: F821  (defined in a notebook, not in the worker)

    t0 = time.monotonic()
    with pytest.raises(worker.WorkerError, match=r"rank 1 failed .* NameError: .*only torch, "
                                                 r"dist, nn, np, math and time") as info:
        ch3.try_average_gradients(uses_a_global_on_rank_1, pool)
    assert info.value.rank == 1 and "Traceback" in info.value.worker_traceback
    assert time.monotonic() - t0 < 10
    assert pool.closed and not any(proc.is_alive() for proc in pool._procs)
    with pytest.raises(CourseError, match="stopped"):
        pool.run(tasks._task_hello)


def test_a_killed_worker_gives_a_clear_error_not_a_hang():
    with ch3.Workers(2, backend="gloo") as p:
        victim = p.pids[1]
        threading.Timer(1.0, os.kill, (victim, signal.SIGKILL)).start()
        t0 = time.monotonic()
        with pytest.raises(worker.WorkerDiedError, match=r"rank 1 \(killed by SIGKILL\)") as info:
            p.run(tasks._task_sleep_collectives, 60.0, timeout_s=30)
        assert info.value.ranks == (1,)
        assert time.monotonic() - t0 < 15  # far below the task's 60 s
        assert not any(proc.is_alive() for proc in p._procs)


def test_a_peer_that_never_joins_times_out_and_is_named():
    with ch3.Workers(2, backend="gloo", collective_timeout_s=2.0) as p:
        t0 = time.monotonic()
        with pytest.raises(worker.CollectiveTimeoutError) as info:
            p.run(tasks._task_skip_collective, 1, timeout_s=60)
        assert time.monotonic() - t0 < 20
        err = info.value
        assert err.ranks == (1,) and err.waiting == (0,) and err.rank == 0
        assert isinstance(err, worker.WorkerError) and "Timed out" in err.worker_traceback
        assert str(err).startswith("worker rank 0 waited 2 s in a collective of task "
                                   "'_task_skip_collective' that rank 1 never joined (it finished "
                                   "the task without calling it); make every rank call the same "
                                   "collectives in the same order")
        assert str(err).endswith("then start new workers with ch3.workers(2).")
        assert "\n" not in str(err)


def test_a_collective_timeout_waits_for_late_joiners_and_names_a_busy_rank():
    """Rank 1 joins the all-reduce a second after rank 0 (so it gives up a second later) and
    rank 2 is busy elsewhere in the task: only rank 2 is named as missing."""
    def late_and_busy(ctx):
        if ctx.rank == 2:
            time.sleep(12.0)  # busy in other code, far past the others' timeouts
            return ctx.rank
        if ctx.rank == 1:
            time.sleep(1.0)
        dist.all_reduce(torch.ones(1))
        return ctx.rank

    with ch3.Workers(3, backend="gloo", collective_timeout_s=2.0) as p:
        t0 = time.monotonic()
        with pytest.raises(worker.CollectiveTimeoutError) as info:
            p.run(late_and_busy, timeout_s=60)
        assert time.monotonic() - t0 < 11  # reported before rank 2 is done
        assert info.value.ranks == (2,) and info.value.waiting == (0, 1)
        assert "ranks 0, 1 waited 2 s" in str(info.value)
        assert ("that rank 2 never joined (it was still busy elsewhere in the task)"
                in str(info.value))
        assert "collective_timeout_s" in str(info.value)
        assert not any(proc.is_alive() for proc in p._procs)


def test_a_task_error_is_named_before_the_timeouts_it_causes():
    """Rank 1 raises before the all-reduce, rank 0 then times out in it: rank 1's error is the
    one reported."""
    def fails_on_rank_1(ctx):
        if ctx.rank == 1:
            raise ValueError("bad shard")
        dist.all_reduce(torch.ones(1))

    with ch3.Workers(2, backend="gloo", collective_timeout_s=1.0) as p:
        with pytest.raises(worker.WorkerError,
                           match=r"rank 1 failed .* ValueError: bad shard") as info:
            p.run(fails_on_rank_1, timeout_s=60)
        assert not isinstance(info.value, worker.CollectiveTimeoutError)


def test_only_a_distributed_timeout_counts_as_a_collective_timeout():
    def raised(exc):
        try:
            raise exc
        except Exception as caught:
            return caught

    gloo = RuntimeError("[gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 2000ms "
                        "for recv operation to complete")
    assert worker._is_collective_timeout(raised(gloo))
    assert not worker._is_collective_timeout(raised(TimeoutError("timed out")))
    assert not worker._is_collective_timeout(raised(RuntimeError("the solver timed out")))
    assert not worker._is_collective_timeout(raised(RuntimeError("gloo: connection closed")))


def test_notebook_functions_travel_as_source_and_lambdas_are_refused():
    def f(model, world_size):
        return world_size
    kind, name, src = worker.function_payload(f)
    assert kind == "source" and name == "f" and src.startswith("def f(")
    assert worker.function_payload(tasks._task_hello)[0] == "ref"
    with pytest.raises(CourseError, match="lambda"):
        worker.function_payload(lambda m, w: None)


def test_bad_worker_counts_are_refused():
    with pytest.raises(CourseError, match="whole number"):
        ch3.Workers(0)
    with pytest.raises(CourseError, match="one GPU per worker"):
        ch3.Workers(2, backend="nccl")


@pytest.mark.parametrize("experiment", [ch3.ddp_scaling, ch3.allreduce_sweep, ch3.bucketing,
                                        ch3.ddp_timeline, ch3.pipeline])
def test_zero_samples_is_refused_before_any_worker_starts(experiment, monkeypatch):
    monkeypatch.setattr(sys.modules[experiment.__module__], "_pool",
                        lambda pool: pytest.fail("workers were asked for"))
    with pytest.raises(CourseError, match="samples=0: use a whole number of at least 1"):
        experiment(2, samples=0)


def test_more_cpu_workers_than_the_machine_can_hold_are_refused_before_any_starts(monkeypatch):
    monkeypatch.setattr(ch3_pool, "_cpu_count", lambda: 2)
    started = []
    monkeypatch.setattr(ch3_pool, "rendezvous_socket", lambda: started.append(1) or 0)
    with pytest.raises(CourseError, match="use at most 4"):
        ch3.Workers(64, backend="gloo")
    assert not started
    monkeypatch.setattr(ch3_pool, "_cpu_count", lambda: 16)
    assert ch3_pool.max_gloo_workers() == 32



def test_nccl_workers_bind_torch_and_cupy_to_their_local_rank(monkeypatch):
    """Under torchrun with several GPUs per node, local rank 1 must time on GPU 1: torch and
    CuPy (whose events the harness uses) are both bound to it before the group is joined."""
    import sys
    import types

    calls = []
    monkeypatch.setattr(torch.cuda, "set_device", lambda i: calls.append(("torch", i)))
    fake_cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(
        Device=lambda i: types.SimpleNamespace(use=lambda: calls.append(("cupy", i)))))
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    monkeypatch.setattr(dist, "init_process_group",
                        lambda **kw: calls.append(("group", kw["backend"], kw.get("device_id"))))
    monkeypatch.setattr(torchrun, "gpu_count", lambda: 4)
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # keep this process's
    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    ctx = torchrun._torchrun_context()
    assert ctx.device == "cuda:1" and ctx.local_rank == 1 and ctx.rank == 5
    assert calls == [("torch", 1), ("cupy", 1), ("group", "nccl", torch.device("cuda:1"))]


def test_the_notebooks_torchrun_command_runs_on_the_cpu(tmp_path):
    """`torchrun --standalone --nproc-per-node=2 -m gpucourse.experiments.ch3 hello`, as chapter 3
    tells learners to run it: torchrun's own processes join a gloo group and all-reduce."""
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node=2", "-m", "gpucourse.experiments.ch3", "hello"],
                          capture_output=True, text=True, timeout=180, cwd=tmp_path,
                          env={**os.environ, "GPUCOURSE_DEVICE": "cpu"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    rank0 = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rank0["rank"] == 0 and rank0["backend"] == "gloo" and rank0["sum_of_ranks"] == 1.0
