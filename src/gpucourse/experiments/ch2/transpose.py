"""Chapter 2, section 3: the transpose ladder. Naive, shared-tile and padded-tile versions of
transpose.cu, checked at awkward shapes (the shared ones race-checked on the emulator); bank
conflicts from a model and from the kernels' own traced accesses; on a GPU, timed against
two copy kernels and the library's copy."""
from __future__ import annotations

import math

import numpy as np

from ... import bench, check, device, emulator, kernels, models, profiler
from ...check.ch2 import TRANSPOSE_SHAPES  # the lab checker's awkward shapes
from ...errors import CourseError, LaunchError
from ...kernels import copy as copy_home
from ...kernels import tile_copy as tile_copy_home
from ...kernels import transpose as transpose_home
from ...paths import KERNEL_DIR
from .common import MiB, cupy_or_none, target_gpu


TRANSPOSE_VERSIONS = {"naive": "transpose_v1_naive", "shared tile": "transpose_v2_shared",
                      "padded tile": "transpose_v3_padded"}


def tile_access_conflicts(tile: int = 32, padded: bool = False, elem_bytes: int = 4) -> dict:
    """Bank-conflict model of the two shared-memory accesses of a tiled transpose.

    The tile is ``float t[tile][tile + pad]``; a warp of 32 lanes writes along a row
    (``t[ty][tx]``) and reads down a column (``t[tx][ty]``).
    """
    pitch = tile + (1 if padded else 0)
    lanes = min(32, tile)
    rows_per_warp = max(1, 32 // tile)  # a 16-wide tile puts two rows in one warp
    write, read = [], []
    for lane in range(32):
        tx, ty = lane % tile, lane // tile
        if ty >= tile:
            break
        write.append((ty * pitch + tx) * elem_bytes)
        read.append((tx * pitch + ty) * elem_bytes)
    w = models.bank_conflicts(write, word_bytes=elem_bytes)
    r = models.bank_conflicts(read, word_bytes=elem_bytes)
    return {"tile": tile, "padded": padded, "pitch": pitch, "lanes": lanes,
            "rows_per_warp": rows_per_warp, "write_ways": w.ways, "read_ways": r.ways,
            "read_addresses": read, "write_addresses": write,
            "read_banks": [models.bank_of(a) for a in read],
            "write_banks": [models.bank_of(a) for a in write],
            "read_words_per_bank": list(r.words_per_bank), "smem_bytes": tile * pitch * elem_bytes}


BLOCK_ROWS = transpose_home.BLOCK_ROWS


def transpose_module(tile: int = 32, backend: str | None = None):
    """transpose.cu built for ``tile`` (16 or 32) with BLOCK_ROWS = 8."""
    if tile not in (8, 16, 32):
        raise LaunchError(f"tile={tile} is not supported: use 16 or 32 (a tile of TILE x TILE "
                          "floats, moved by a block of TILE x 8 threads).")
    return transpose_home.load(tile, BLOCK_ROWS, backend=backend)


def run_transpose(version: str, a, tile: int = 32, module=None):
    """Transpose the 2-D array ``a`` with one version of transpose.cu on the active backend."""
    mod = module or transpose_module(tile)
    rows, cols = a.shape
    out = device.empty((cols, rows), dtype=np.float32)
    transpose_home.run(mod[TRANSPOSE_VERSIONS[version]], a, out, tile, BLOCK_ROWS)
    return out


def check_transpose(tile: int = 32, shapes=TRANSPOSE_SHAPES, seed: int = 0) -> None:
    """Every version equals NumPy's transpose at awkward shapes; the shared versions are also
    race-checked on the emulator (a missing barrier shows as a race)."""
    mod = transpose_module(tile)
    for rows, cols in shapes:
        host = check.random_array((rows, cols), np.float32, seed=seed + rows * 1000 + cols)
        a = device.asarray(host)
        for version in TRANSPOSE_VERSIONS:
            check.assert_close(run_transpose(version, a, tile, mod), transpose_home.reference(host),
                               *transpose_home.TOLERANCE,
                               name=f"{version} transpose of {rows} x {cols} (tile {tile})")
    if emulator_problem():
        return  # a GPU machine without a C++ compiler: the race check needs the emulator
    emu = transpose_module(tile, backend="cpu")
    rows, cols = 67, 45
    host = check.random_array((rows, cols), np.float32, seed=seed)
    for version in ("shared tile", "padded tile"):
        out = np.full((cols, rows), np.nan, np.float32)
        transpose_home.run(emu[TRANSPOSE_VERSIONS[version]], host, out, tile, BLOCK_ROWS,
                           race_check=True)


def emulator_problem() -> str:
    """'' when the CPU emulator can build kernels here, else why not (one sentence)."""
    try:
        emulator.compiler()
    except CourseError as exc:
        return str(exc)
    return ""


def transpose_conflicts(tile: int = 32) -> dict:
    """Bank conflicts of each version's shared-memory accesses, from the addresses the
    kernel itself computes (traced on the emulator, one block) and ``models.bank_conflicts``."""
    if emulator_problem():  # no tracing without the emulator: the analytic pattern instead
        model = {p: tile_access_conflicts(tile, p) for p in (False, True)}
        return {"naive": {"accesses_per_thread": 0, "worst_ways": 0, "mean_ways": 0.0},
                **{v: {"accesses_per_thread": 2 * tile // BLOCK_ROWS,
                       "worst_ways": max(m["read_ways"], m["write_ways"]),
                       "mean_ways": (m["read_ways"] + m["write_ways"]) / 2}
                   for v, m in (("shared tile", model[False]), ("padded tile", model[True]))}}
    source = (KERNEL_DIR / "transpose.cu").read_text()
    side = 2 * tile
    a = check.random_array((side, side), np.float32, seed=1)
    grid, block = transpose_home.launch_config(side, side, tile, BLOCK_ROWS)
    out = {}
    for version, name in TRANSPOSE_VERSIONS.items():
        res = np.full((side, side), np.nan, np.float32)
        trace = profiler.trace_shared_accesses(source, name, grid, block,
                                               transpose_home.args(a, res, side, side),
                                               defines=transpose_home.defines(tile, BLOCK_ROWS))
        ways = [acc["ways"] for acc in trace["accesses"]]
        out[version] = {"accesses_per_thread": len({acc["access"] for acc in trace["accesses"]}),
                        "worst_ways": max(ways, default=0),
                        "mean_ways": float(np.mean(ways)) if ways else 0.0}
    return out


def transpose_side(gpu_l2_bytes: int | None = None) -> int:
    """Side of a square float32 matrix at least ten times the L2 cache (a multiple of 1024)."""
    l2 = gpu_l2_bytes or device.describe().l2_bytes or 50 * MiB
    side = math.sqrt(10 * l2 / 4)
    return int(max(4096, math.ceil(side / 1024) * 1024))


CEILINGS = ("copy (copy.cu)", "tile copy (tile_copy.cu)")


def transpose_ladder(quick: bool = True, side: int | None = None, tile: int = 32,
                     min_time_s: float = 0.2, seed: int = 0) -> dict:
    """Check every version, then (on a GPU) time naive, shared and padded transposes of a
    side x side matrix against two copy kernels (the ceiling is the faster) and the library's
    device-to-device copy (``ref``); bank conflicts of each version from the trace."""
    check_transpose(tile, seed=seed)
    out = {"tile": tile, "device": device.describe().short_name,
           "conflicts": transpose_conflicts(tile), "kind": "model", "timings": []}
    if not device.is_cuda():
        return out
    if not device.cupy_works():
        out["note"] = "the kernels need CuPy on a GPU (pip install -e .[gpu]); not measured"
        return out
    side = side or transpose_side()
    host = check.random_array((side, side), np.float32, seed=seed, kind="uniform")
    a = device.asarray(host)
    n = side * side
    kw = dict(bytes=transpose_home.bytes_moved(side, side), size=side, min_time_s=min_time_s,
              min_samples=5)
    grid, block = transpose_home.launch_config(side, side, tile, BLOCK_ROWS)
    dst = device.empty((side, side), dtype=np.float32)
    flat, flat_dst = a.reshape(-1), dst.reshape(-1)
    copy_k = kernels.load("copy").copy_v1_coalesced
    tile_k = tile_copy_home.load(tile, BLOCK_ROWS).tile_copy_v1_rows
    flat_copy = copy_home.launch(copy_k.name, n)
    copies = {CEILINGS[0]: (copy_k, flat_copy.grid, flat_copy.block,
                            copy_home.args(copy_k.name, flat, flat_dst, n), copy_home.TOLERANCE),
              CEILINGS[1]: (tile_k, grid, block, tile_copy_home.args(a, dst, side, side),
                            tile_copy_home.TOLERANCE)}
    timings = bench.Timings()
    for label, (k, g, b, args, tolerance) in copies.items():
        dst.fill(np.nan)
        k(g, b, args)
        check.assert_close(device.to_host(dst[:: 257, :: 263]), host[:: 257, :: 263], *tolerance,
                           name=f"{label} at {side} x {side}")
        timings.append(bench.benchmark(k, g, b, args, label=label, **kw))
    mod = transpose_module(tile)
    args = transpose_home.args(a, dst, side, side)
    for version, name in TRANSPOSE_VERSIONS.items():
        k = mod[name]
        dst.fill(np.nan)
        k(grid, block, args)
        # The reference, sampled: host.T is a view, where transpose_home.reference would copy it.
        check.assert_close(device.to_host(dst[:: 257, :: 263]), host.T[:: 257, :: 263],
                           *transpose_home.TOLERANCE, name=f"{version} at {side} x {side}")
        timings.append(bench.benchmark(k, grid, block, args, label=version, **kw))
    cp = cupy_or_none()
    timings.append(bench.benchmark(cp.copyto, dst, a, label="ref (library device-to-device copy)",
                                   **kw))
    ceiling = max(t.gbps for t in timings if t.label in CEILINGS)
    out.update(kind="measured", side=side, timings=[t.to_dict() for t in timings],
               copy_gbps=ceiling, spec_gbps=target_gpu().bandwidth_Bps / 1e9)
    return out


def transpose_summary(ladder: dict) -> dict:
    """Padded as % of the faster copy kernel and padded over naive, from a measured ladder."""
    t = {d["label"]: bench.Timing.from_dict(d) for d in ladder["timings"]}
    if not t:
        return {}
    ceiling = max((t[c] for c in CEILINGS), key=lambda x: x.gbps)
    return {"ceiling": ceiling.label,
            "padded_pct_of_copy": 100 * t["padded tile"].gbps / ceiling.gbps,
            "padded_pct_of_each_copy": {c: 100 * t["padded tile"].gbps / t[c].gbps for c in CEILINGS},
            "padded_over_naive": t["padded tile"].speedup_over(t["naive"]),
            "shared_over_naive": t["shared tile"].speedup_over(t["naive"]),
            "gbps": {k: v.gbps for k, v in t.items()}}


def transpose_config(tile: int = 32, padded: bool = True, min_time_s: float = 0.1) -> dict:
    """One configuration for the widget: its bank-conflict model, its correctness on the
    active backend, and (on a GPU) its bandwidth against the copy kernel."""
    version = "padded tile" if padded else "shared tile"
    measure = device.is_cuda() and cupy_or_none() is not None
    if not measure:  # the ladder checks every version itself before it times them
        check_transpose(tile, shapes=((67, 45), (tile, tile)))
    model = tile_access_conflicts(tile, padded)
    out = {"tile": tile, "padded": padded, "version": version, "model": model,
           "device": device.describe().short_name, "gbps": None, "copy_gbps": None}
    if measure:
        lad = transpose_ladder(tile=tile, min_time_s=min_time_s)
        s = {d["label"]: d["gbps"] for d in lad["timings"]}
        out.update(gbps=s[version], copy_gbps=lad["copy_gbps"])
    return out

