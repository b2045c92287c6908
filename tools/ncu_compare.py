"""Compare the emulator profiler's counts with Nsight Compute's on a real GPU.

    python3 tools/ncu_compare.py [--json PATH]

For a set of the course's kernels (copies, transposes, a shared-memory reduction, a tiled
matmul, a histogram) it counts global-memory requests and sectors, shared-memory bank
conflicts and wavefronts, and global atomic requests twice: with gc.profiler.profile on the
CPU emulator, and with Nsight Compute (ncu) on this machine's GPU, running the same launch
on the same data. It prints ncu's value, the profiler's and their ratio (1.00: the same).
Without ncu, a CUDA GPU or a C++ compiler it prints one line saying so and exits 0, as
make gpu-check expects. Puts src/ on the path; installs nothing.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

# (label, ncu metrics summed, the profiler's count of the same thing)
COUNTS = [
    ("global load requests", ["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"],
     lambda p: p.global_load.requests),
    ("global load sectors", ["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"],
     lambda p: p.global_load.sectors),
    ("global store requests", ["l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"],
     lambda p: p.global_store.requests),
    ("global store sectors", ["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"],
     lambda p: p.global_store.sectors),
    ("shared load bank conflicts", ["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"],
     lambda p: p.shared_load.replays),
    ("shared store bank conflicts", ["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"],
     lambda p: p.shared_store.replays),
    ("shared load wavefronts", ["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"],
     lambda p: p.shared_load.wavefronts),
    ("shared store wavefronts", ["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"],
     lambda p: p.shared_store.wavefronts),
    ("global atomic requests", ["l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum",
                                "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum"],
     lambda p: p.global_atomic.requests),
]
# Metrics every ncu since 2019 has; the others are dropped if this ncu lacks them.
CORE_METRICS = {m for _, ms, _ in COUNTS[:6] for m in ms}


def _f32(rng, *shape):
    return (rng.random(shape, dtype=np.float32) + 0.5).astype(np.float32)


def cases() -> list[dict]:
    """The launches compared: file, kernel, grid, block, shared memory and NumPy arguments;
    each launch shape comes from the kernel's home."""
    from gpucourse.kernels import copy as copy_cu  # after ROOT/src is on the path
    from gpucourse.kernels import histogram as histogram_cu
    from gpucourse.kernels import matmul as matmul_cu
    from gpucourse.kernels import reduce as reduce_cu
    from gpucourse.kernels import transpose as transpose_cu

    rng = np.random.default_rng(2024)
    n = 1 << 20
    x = _f32(rng, n)
    m = 1024
    a = _f32(rng, m, m)
    k = 256
    A, B = _f32(rng, k, k), _f32(rng, k, k)
    skewed = np.where(rng.random(n) < 0.9, 3, rng.integers(0, 256, n)).astype(np.int32)
    f32 = lambda *s: np.zeros(s, np.float32)  # noqa: E731

    def shape(launch) -> dict:  # a 1-D kernels.shape.Launch
        return dict(grid=launch.grid, block=launch.block, shared=launch.shared_mem)

    out = [
        dict(file="copy", kernel="copy_v1_coalesced", **shape(copy_cu.launch("copy_v1_coalesced", n)),
             args=lambda: (x, f32(n), np.int32(n))),
    ]
    for stride in (2, 32):
        out.append(dict(file="copy", kernel="copy_v2_strided", tag=f"stride {stride}",
                        **shape(copy_cu.launch("copy_v2_strided", n, stride=stride)),
                        args=lambda stride=stride: (x, f32(n), np.int32(n), np.int32(stride))))
    grid, block = transpose_cu.launch_config(m, m)
    for name in transpose_cu.VERSIONS:
        out.append(dict(file="transpose", kernel=name, grid=grid, block=block,
                        args=lambda: (a, f32(m, m), np.int32(m), np.int32(m))))
    grid, block = matmul_cu.launch_config("matmul_v3_shared", k, k)
    out += [
        dict(file="reduce", kernel="reduce_v2_shared_tree",
             **shape(reduce_cu.launch("reduce_v2_shared_tree", n)),
             args=lambda: (x, f32(1), np.int32(n))),
        dict(file="matmul", kernel="matmul_v3_shared", grid=grid, block=block,
             args=lambda: (A, B, f32(k, k), np.int32(k), np.int32(k), np.int32(k))),
        dict(file="histogram", kernel="histogram_v1_global_atomics", tag="skewed",
             **shape(histogram_cu.launch("histogram_v1_global_atomics", n, blocks=64)),
             args=lambda: (skewed, np.zeros(256, np.uint32), np.int32(n))),
    ]
    for c in out:
        c.setdefault("shared", 0)
        c.setdefault("tag", "")
    return out


# --------------------------------------------------------------------------- the GPU side

def child() -> None:
    """Run every case once on the GPU (this process runs under ncu)."""
    import gpucourse as gc

    for c in cases():
        kern = getattr(gc.kernels.load(c["file"], backend="cuda"), c["kernel"])
        args = tuple(gc.device.asarray(v) if isinstance(v, np.ndarray) else v for v in c["args"]())
        kern(c["grid"], c["block"], args, c["shared"])
    gc.device.synchronize()


def parse_ncu_csv(text: str, metrics: list[str]) -> list[tuple[str, dict]]:
    """[(kernel name, {metric: value})] in launch order, from ``ncu --csv`` output."""
    lines = [t for t in text.splitlines() if t.startswith('"')]
    start = next((i for i, t in enumerate(lines) if t.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    head, body = rows[0], rows[1:]
    col = {h: i for i, h in enumerate(head)}

    def number(text: str):
        try:
            return float(text.replace(",", ""))
        except ValueError:
            return None

    out: dict[str, tuple[str, dict]] = {}
    order: list[str] = []
    if "Metric Name" in col:  # one row per (launch, metric)
        for r in body:
            ident = r[col["ID"]]
            if ident not in out:
                out[ident] = (r[col["Kernel Name"]], {})
                order.append(ident)
            name = r[col["Metric Name"]]
            if name in metrics:
                out[ident][1][name] = number(r[col["Metric Value"]])
    else:  # raw page: one row per launch, one column per metric (plus a row of units)
        for r in body:
            ident = r[col["ID"]]
            if not ident.strip().isdigit():
                continue
            values = {m: number(r[col[m]]) for m in metrics if m in col}
            out[ident] = (r[col["Kernel Name"]], values)
            order.append(ident)
    return [(out[i][0].split("(")[0].strip(), out[i][1]) for i in order]


def run_ncu(ncu: str, metrics: list[str], names: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "GPUCOURSE_DEVICE": "cuda"}
    regex = "regex:^(" + "|".join(sorted(set(names))) + ")$"
    cmd = [ncu, "--clock-control", "none", "--csv", "--page", "raw", "--metrics", ",".join(metrics),
           "--kernel-name", regex, sys.executable, str(Path(__file__).resolve()), "--child"]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)


def gpu_counts(ncu: str, all_cases: list[dict]) -> tuple[list, list[str]] | str:
    """ncu's metrics per case, or a one-line reason why there are none."""
    metrics = [m for _, ms, _ in COUNTS for m in ms]
    names = [c["kernel"] for c in all_cases]
    proc = run_ncu(ncu, metrics, names)
    log = proc.stdout + proc.stderr
    if "ERR_NVGPUCTRPERM" in log:
        return ("ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): run as "
                "root or allow profiling for all users (NVreg_RestrictProfilingToAdminUsers=0)")
    rows = parse_ncu_csv(proc.stdout, metrics)
    if not rows and ("metric" in log.lower() or proc.returncode != 0):
        metrics = [m for m in metrics if m in CORE_METRICS]  # an older ncu: the core set
        proc = run_ncu(ncu, metrics, names)
        rows = parse_ncu_csv(proc.stdout, metrics)
        log = proc.stdout + proc.stderr
    if len(rows) != len(all_cases):
        tail = " ".join(log.strip().splitlines()[-3:])[:300]
        return (f"ncu reported {len(rows)} of {len(all_cases)} launches (exit {proc.returncode}): "
                f"{tail}")
    for (name, _), c in zip(rows, all_cases):
        if name != c["kernel"]:
            return f"ncu's launches came in another order ({name} where {c['kernel']} was expected)"
    return [values for _, values in rows], metrics


# --------------------------------------------------------------------------- comparing

def compare() -> dict | str:
    """The comparison as a dict for JSON, or a one-line reason it was skipped."""
    ncu = shutil.which("ncu")
    if not ncu:
        return "Nsight Compute (ncu) is not on PATH"
    try:
        import gpucourse as gc
    except ImportError as exc:
        return f"gpucourse does not import ({exc})"
    if not gc.device.cupy_works():
        return "no CUDA GPU usable through CuPy here"
    from gpucourse.errors import CourseError

    all_cases = cases()
    profiles = []
    try:
        for c in all_cases:
            kern = getattr(gc.kernels.load(c["file"], backend="cpu"), c["kernel"])
            profiles.append(gc.profiler.profile(kern, c["grid"], c["block"], c["args"](), c["shared"]))
    except CourseError as exc:  # no compiler, not Linux, no addr2line
        return f"the emulator profiler cannot run here: {exc}"
    got = gpu_counts(ncu, all_cases)
    if isinstance(got, str):
        return got
    per_case, metrics = got
    results = []
    for c, p, values in zip(all_cases, profiles, per_case):
        for label, names, ours in COUNTS:
            if not all(m in metrics and values.get(m) is not None for m in names):
                continue
            theirs = sum(values[m] for m in names)
            mine = ours(p)
            ratio = (theirs / mine if mine else (1.0 if theirs == 0 else float("inf")))
            results.append({"kernel": c["kernel"], "case": c["tag"], "count": label,
                            "ncu": theirs, "profiler": mine, "ratio": ratio})
    return {"gpu": gc.device.describe().short_name, "date": time.strftime("%Y-%m-%d"),
            "command": f"ncu --clock-control none --csv --page raw --metrics ... "
                       f"python3 tools/ncu_compare.py --child",
            "results": results}


def report(result: dict) -> None:
    print(f"profiler (CPU emulator) against Nsight Compute on the {result['gpu']}; "
          f"ratio = ncu / profiler; counts that are 0 in both are left out")
    shown = [r for r in result["results"] if r["ncu"] or r["profiler"]]
    if not shown:
        print("  no counts: every metric was 0 in both")
        return
    width = max(len(f"{r['kernel']} {r['case']}".strip()) for r in shown)
    print(f"  {'kernel':<{width}}  {'count':<28}{'ncu':>14}{'profiler':>14}{'ratio':>9}")
    for r in shown:
        name = f"{r['kernel']} {r['case']}".strip()
        print(f"  {name:<{width}}  {r['count']:<28}{r['ncu']:>14,.0f}{r['profiler']:>14,}"
              f"{r['ratio']:>9.3f}")
    close = sum(1 for r in shown if 0.9 <= r["ratio"] <= 1.1)
    print(f"  {close} of {len(shown)} counts within 10 %")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the comparison to this JSON file")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child()
        return 0
    try:
        result = compare()
    except subprocess.TimeoutExpired:
        result = "ncu did not finish within 30 minutes"
    if isinstance(result, str):
        print(f"ncu_compare: skipped, {result}.")
        return 0
    report(result)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        from gpucourse.reference import jsonable  # an infinite ratio is not JSON

        Path(args.json).write_text(json.dumps(jsonable(result), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
