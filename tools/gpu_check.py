"""`make gpu-check`: on a machine with a CUDA GPU, run the GPU tests and time the course's kernels.

    PYTHONPATH=src python3 tools/gpu_check.py [--out DIR] [--skip-tests] [--skip-chapters] [--skip-kernels]
                                              [--chapters 1,4] [--budget-s 270]

Uses the Python it is run with and installs nothing; a missing piece (CuPy, pytest, a
chapter) is skipped with one line saying why. Steps: `pytest tests/gpu -m gpu`; the
`gpu_check()` of each chapter module gpucourse.experiments.chN that has one, its dict stored
under "chapters" (first, so that chapter 1 finds its copy kernel not yet built); then every
kernel of vector_add, copy, transpose and reduce on arrays much larger than the L2 cache,
launched as the chapters launch them, checked against a reference first, then timed with
gpucourse.bench (median of CUDA-event samples). Writes results/gpu_check-<date>.json (GPU,
driver, date, command, figures) and prints a short table. Meant to finish in under 5 minutes.
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import json
import math
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

TEST_TIMEOUT_S = 150


def note(what: str, why: str) -> None:
    print(f"skip: {what}: {why}", flush=True)


# --------------------------------------------------------------------------- tests

def run_gpu_tests() -> dict:
    try:
        import pytest  # noqa: F401
    except ImportError:
        note("GPU tests", "pytest is not installed in this Python")
        return {"status": "skipped", "reason": "pytest missing"}
    # The chapters' whole gpu_check() runs once, in the chapter step: not here as well.
    cmd = [sys.executable, "-m", "pytest", "tests/gpu", "-m", "gpu and not full_gpu_check", "-q",
           "-p", "no:cacheprovider"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    print("$ " + " ".join(["python", *cmd[1:]]), flush=True)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=TEST_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(f"GPU tests did not finish within {TEST_TIMEOUT_S} s", flush=True)
        return {"status": "timeout", "seconds": TEST_TIMEOUT_S}
    lines = [l for l in proc.stdout.strip().splitlines() if l.strip()]
    summary = lines[-1] if lines else proc.stderr.strip()[-200:]
    failures = [l for l in lines if l.startswith(("FAILED", "ERROR"))]
    print(f"GPU tests: {summary}", flush=True)
    for line in failures[:20]:
        print("  " + line)
    return {"status": "passed" if proc.returncode == 0 else "failed", "summary": summary,
            "failures": failures, "returncode": proc.returncode,
            "seconds": round(time.perf_counter() - t0, 1)}


# --------------------------------------------------------------------------- kernels

def _sizes(cp) -> dict:
    """Sizes well over the L2 cache (16x where memory allows), powers of two."""
    dev = cp.cuda.Device()
    l2 = int(dev.attributes["L2CacheSize"])
    free, _ = cp.cuda.runtime.memGetInfo()
    floats = 1 << max(22, math.ceil(math.log2(16 * l2 / 4)))
    while floats * 4 * 4 > free * 0.6 and floats > 1 << 20:  # vector add holds 3 arrays (+ slack)
        floats //= 2
    side = 1 << (int(math.log2(floats)) // 2)
    return {"n": floats, "side": side, "l2_bytes": l2, "sms": int(dev.attributes["MultiProcessorCount"])}


def kernel_benchmarks() -> tuple[list[dict], dict]:
    try:
        import cupy as cp
        import numpy as np
    except ImportError:
        note("kernel benchmarks", "CuPy is not installed in this Python (pip install cupy-cuda12x)")
        return [], {}
    from gpucourse import bench, kernels

    sz = _sizes(cp)
    n, side, sms = sz["n"], sz["side"], sz["sms"]
    rng = np.random.default_rng(0)
    rows = []

    def run(file, name, fn, check, nbytes, size):
        row = {"file": file, "kernel": name, "size": size, "bytes": nbytes}
        try:
            fn()
            cp.cuda.Device().synchronize()
            problem = check()
            if problem:
                row.update(correct=False, error=problem)
                print(f"  {name}: WRONG RESULT, not timed: {problem}", flush=True)
            else:
                t = bench.benchmark(fn, label=name, bytes=nbytes, size=size, backend="cuda")
                row.update(correct=True, median_s=t.median_s, p20_s=t.p20_s, p80_s=t.p80_s,
                           gbps=t.gbps, samples=t.count)
        except Exception as exc:  # one broken kernel must not hide the others
            row.update(correct=False, error=f"{type(exc).__name__}: {exc}")
            print(f"  {name}: {type(exc).__name__}: {exc}", flush=True)
        rows.append(row)

    # vector_add: 12 bytes per element, each version launched as its home says.
    from gpucourse.kernels import copy as copy_home, vector_add as vector_add_home

    mod = kernels.load("vector_add", backend="cuda")
    a = cp.asarray(rng.standard_normal(n, dtype=np.float32))
    b = cp.asarray(rng.standard_normal(n, dtype=np.float32))
    out = cp.empty_like(a)
    ref = vector_add_home.reference(a, b)
    for k in mod:
        out.fill(cp.nan)
        run("vector_add", k.name, lambda k=k: vector_add_home.run(k, a, b, out, n, sm_count=sms),
            lambda: None if bool(cp.array_equal(out, ref)) else "differs from a + b",
            vector_add_home.bytes_moved(n), n)
    del b, ref

    # copy: 8 bytes per element whatever the stride, each version launched as its home says.
    mod = kernels.load("copy", backend="cuda")
    copies = {k.name: lambda k=k: copy_home.run(k, a, out, n, sm_count=sms)
              for k in mod if k.name != "copy_v2_strided"}
    for stride in (1, 2, 8, 32):
        copies[f"copy_v2_strided[stride={stride}]"] = \
            lambda s=stride, k=mod.copy_v2_strided: copy_home.run(k, a, out, n, stride=s)
    for name, launch in copies.items():
        out.fill(cp.nan)
        run("copy", name, launch,
            lambda: None if bool(cp.array_equal(out, a)) else "differs from the input",
            copy_home.bytes_moved(n), n)

    # transpose: side x side, 8 bytes per element, each version launched as its home says.
    from gpucourse.kernels import transpose as transpose_home

    mod = transpose_home.load(backend="cuda")
    x = a[:side * side].reshape(side, side)
    y = out[:side * side].reshape(side, side)
    for k in mod:
        y.fill(cp.nan)
        run("transpose", k.name, lambda k=k: transpose_home.run(k, x, y),
            lambda: None if bool(cp.array_equal(y, x.T)) else "differs from in.T",
            transpose_home.bytes_moved(side, side), f"{side}x{side}")

    # reduce: 4 bytes per element, every rung of chapter 4's ladder as its home launches it.
    from gpucourse.kernels import reduce as reduce_home

    total = cp.zeros(1, np.float32)
    want = float(cp.sum(a, dtype=np.float64).get())
    scale = float(cp.sum(cp.abs(a), dtype=np.float64).get())
    for name in reduce_home.VERSIONS:
        run("reduce", name, lambda v=name: reduce_home.run(v, a, n, total, sms),
            lambda: (None if abs(float(total.get()[0]) - want) <= 1e-5 * scale
                     else f"sum {float(total.get()[0])} vs {want}"), reduce_home.bytes_moved(n), n)
    return rows, sz


def print_table(rows: list[dict]) -> None:
    print(f"\n{'kernel':36s} {'size':>12s} {'median':>11s} {'GB/s':>8s}")
    for r in rows:
        if r.get("correct"):
            print(f"{r['kernel']:36s} {str(r['size']):>12s} {r['median_s'] * 1e3:9.3f} ms "
                  f"{r['gbps']:8.0f}")
        else:
            print(f"{r['kernel']:36s} {str(r['size']):>12s} {'failed':>11s}  {r.get('error', '')[:60]}")


# --------------------------------------------------------------------------- chapters

def chapter_checks(budget_end: float, save, record: dict, only=None) -> dict:
    from gpucourse.errors import MissingDependency
    from gpucourse.experiments import CHAPTERS

    out = record.setdefault("chapters", {})
    for n in sorted(CHAPTERS):
        if only and n not in only:
            continue
        name = f"gpucourse.experiments.ch{n}"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            note(f"chapter {n}", f"{name} needs {exc.name}, which is not installed")
            out[str(n)] = {"status": "skipped", "reason": f"missing {exc.name}"}
            continue
        check = getattr(module, "gpu_check", None)
        if check is None:
            continue
        if time.perf_counter() > budget_end:
            note(f"chapter {n}", "the time budget of this run is spent")
            out[str(n)] = {"status": "skipped", "reason": "time budget spent"}
            continue
        t0 = time.perf_counter()
        print(f"chapter {n}: gpu_check() ...", flush=True)
        try:
            result = check()
            out[str(n)] = {"status": "ok", "seconds": round(time.perf_counter() - t0, 1),
                           "result": result}
            print(f"chapter {n}: done in {time.perf_counter() - t0:.1f} s", flush=True)
        except MissingDependency as exc:  # e.g. no CUDA build of PyTorch: skip, say why
            note(f"chapter {n}", str(exc))
            out[str(n)] = {"status": "skipped", "reason": str(exc)}
        except Exception as exc:
            out[str(n)] = {"status": "error", "error": f"{type(exc).__name__}: {exc}",
                           "trace": traceback.format_exc()[-2000:]}
            print(f"chapter {n}: {type(exc).__name__}: {exc}", flush=True)
        save()
    return out


def recorded_command(argv: list[str]) -> str:
    """The command line as the reference data records it: the output folder is where this
    machine kept its files, which says nothing about the measurement, so it becomes DIR."""
    args = []
    for i, a in enumerate(argv):
        if i and argv[i - 1] == "--out":
            a = "DIR"
        elif a.startswith("--out="):
            a = "--out=DIR"
        args.append(a)
    return "python " + " ".join([os.path.relpath(__file__, ROOT), *args])


def print_thresholds(chapters: dict, record: dict | None = None) -> None:
    """Each chapter's acceptance figures, one line each: the summary an issue note needs,
    headed by the GPU, date and command of ``record`` (the run's record) when given."""
    from gpucourse import check

    print()
    if record:
        print(f"{record.get('gpu')}, {record.get('date')}, measured with `{record.get('command')}`")
    print("chapter thresholds (value vs limit):")
    for n, chapter in chapters.items():
        if chapter.get("status") != "ok":
            print(f"  ch{n}: {chapter.get('status')}: {chapter.get('reason') or chapter.get('error', '')}")
            continue
        result = chapter.get("result") or {}
        # every chapter reports check.threshold dicts; a yes/no check has no value and no limit
        for name, c in (result.get("checks") or {}).items():
            verdict = "PASS" if c.get("passed") else "FAIL"
            if c.get("value") is None and c.get("threshold") is None:
                print(f"  ch{n} {verdict} {name}: {c.get('what', '')}")
                continue
            value = "-" if c.get("value") is None else f"{c['value']:.3g}"
            print(f"  ch{n} {verdict} {name}: {value} (limit {check.limit_text(c)}) "
                  f"{c.get('what', '')}")


def write_reference(record: dict) -> Path:
    """Save what was measured as the course's reference data for this GPU.

    Notebooks overlay it on CPU runs and on other GPUs, labelled with GPU, date and command.
    Only sections that ran are updated; the file keeps the others.
    """
    from gpucourse import reference

    results = {}
    good = [r for r in record.get("kernels") or [] if r.get("correct")]
    if good:  # no correct row at all (e.g. after a CUDA error): the file keeps its kernel data
        results["kernels"] = {"sizes": record.get("kernel_sizes", {}), "rows": good}
    for n, chapter in (record.get("chapters") or {}).items():
        if isinstance(chapter, dict) and chapter.get("status") == "ok" \
                and isinstance(chapter.get("result"), dict):
            results[f"ch{n}"] = chapter["result"]
    return reference.write(results, gpu=record["gpu"], command=record["command"],
                           driver=str(record.get("driver") or ""), date=record["date"][:10])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "results"), help="folder for the JSON file")
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument("--skip-chapters", action="store_true")
    parser.add_argument("--skip-kernels", action="store_true",
                        help="skip the kernel timings and the Nsight Compute comparison "
                             "(tools/gpu_session.sh runs them as a step of their own)")
    parser.add_argument("--no-reference", action="store_true",
                        help="do not update src/gpucourse/data/reference/<gpu>.json")
    parser.add_argument("--budget-s", type=float, default=270,
                        help="chapters not started this many seconds into the chapter step are skipped")
    parser.add_argument("--chapters", default="",
                        help="comma-separated chapter numbers to check (default: all), e.g. 1,4")
    args = parser.parse_args()
    start = time.perf_counter()

    from gpucourse import device, reference

    if not device.cuda_available():
        print("no CUDA GPU works here (neither CuPy nor PyTorch sees one): nothing to check.")
        return 1
    os.environ.setdefault("GPUCOURSE_DEVICE", "cuda")
    info = device.describe()
    print(f"GPU: {info.name}, driver {info.driver_version}, CUDA runtime {info.runtime_version}",
          flush=True)
    record = {"gpu": info.name, "driver": info.driver_version, "runtime": info.runtime_version,
              "compute_capability": info.compute_capability, "device": info.to_dict(),
              "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
              "command": recorded_command(sys.argv[1:]),
              "platform": device.platform_summary()}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"gpu_check-{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}.json"

    def save():  # after every step, so that a run cut short keeps what it measured
        record["seconds"] = round(time.perf_counter() - start, 1)
        path.write_text(json.dumps(reference.jsonable(record), indent=2))

    record["tests"] = {"status": "skipped"} if args.skip_tests else run_gpu_tests()
    save()
    # The chapters first: chapter 1 times the copy kernel's cold first call, which must not
    # find it already built by the kernel benchmarks.
    only = {int(c) for c in args.chapters.split(",") if c.strip()}
    if args.skip_chapters:
        record["chapters"] = {}
    else:
        chapter_checks(time.perf_counter() + args.budget_s, save, record, only)
    save()
    # A step that fails as a whole (a CUDA error a chapter left behind is sticky, an allocation
    # fails) is recorded and the run goes on: the chapters' figures are still printed and
    # written to the reference data.
    rows, sizes = [], {}
    if not args.skip_kernels:
        try:
            rows, sizes = kernel_benchmarks()
        except Exception as exc:
            record["kernels_error"] = f"{type(exc).__name__}: {exc}"
            print(f"kernel benchmarks: {record['kernels_error']}", flush=True)
    record["kernel_sizes"] = sizes
    record["kernels"] = rows
    if rows:
        print_table(rows)
    save()
    print_thresholds(record["chapters"], record)
    # Before the Nsight Compute comparison, which may take long where ncu is installed: a run
    # stopped during it keeps its reference data.
    if not args.no_reference:
        print(f"reference data: {write_reference(record)}", flush=True)
    # The emulator profiler's counters against Nsight Compute's (skips itself without ncu).
    record["ncu_compare"] = "skipped (--skip-kernels)"
    if not args.skip_kernels:
        ncu_json = out / "ncu_compare.json"
        try:
            sys.path.insert(0, str(ROOT / "tools"))
            import ncu_compare

            ncu_compare.main(["--json", str(ncu_json)])
            record["ncu_compare"] = str(ncu_json) if ncu_json.exists() else "skipped"
        except Exception as exc:
            record["ncu_compare"] = f"failed: {type(exc).__name__}: {exc}"
            print(f"ncu_compare: {record['ncu_compare']}", flush=True)
    save()
    print(f"\nwrote {path} ({record['seconds']:.0f} s)")
    bad = (record["tests"].get("status") not in ("passed", "skipped")
           or "kernels_error" in record or str(record["ncu_compare"]).startswith("failed")
           or any(not r.get("correct") for r in rows)
           or any(c.get("status") == "error" for c in record["chapters"].values()))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
