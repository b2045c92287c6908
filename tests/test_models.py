"""The analytic models: hand-worked examples (arithmetic in each docstring) and properties."""
import dataclasses
import pickle
import random

import numpy as np
import pytest

from gpucourse import models, specs
from gpucourse.errors import CourseError, ModelInputError, PrecisionError, SpecError

# --------------------------------------------------------------------------- occupancy, by hand
# Rules (CUDA occupancy calculator): warps/block = ceil(threads/32); registers are allocated
# per warp, rounded up to 256, and a warp must fit in one of the SM's 4 sub-partitions
# (64K/4 = 16384 registers each); shared memory per block = round_up(bytes + reserve,
# unit) with a 1 KB reserve and 128-byte unit on cc >= 8.0 (none and 256 bytes on 7.x);
# blocks/SM = min over warps, registers, shared memory and the block limit.


def _occ(*args):
    return models.occupancy(*args)


def test_occupancy_a100_256_threads_32_regs():
    """cc 8.0, 256 threads, 32 regs, no smem: 8 warps/block; warps 64/8 = 8 blocks;
    regs 32*32 = 1024/warp, 16384/1024 = 16 warps per sub-partition -> 64 warps -> 8 blocks;
    smem (0 + 1024) -> 167936/1024 = 164; block limit 32. -> 8 blocks, 64 warps, 100 %,
    limited by warps and registers together."""
    o = _occ("8.0", 256, 32, 0)
    assert (o.active_blocks, o.active_warps, o.occupancy) == (8, 64, 1.0)
    assert o.limited_by == "warps and registers"
    assert dict(o.block_limits) == {"warps": 8, "registers": 8, "shared memory": 164, "blocks": 32}


def test_occupancy_a100_256_threads_64_regs():
    """cc 8.0, 256 threads, 64 regs: 64*32 = 2048/warp; 16384/2048 = 8 warps per sub-partition
    -> 32 warps -> 32/8 = 4 blocks -> 32/64 warps = 50 %, limited by registers."""
    o = _occ("8.0", 256, 64, 0)
    assert (o.active_blocks, o.active_warps, o.occupancy, o.limited_by) == (4, 32, 0.5, "registers")
    assert o.registers_per_block == 16384


def test_occupancy_register_sub_partitions_matter():
    """cc 8.0, 96 threads (3 warps), 40 regs: 40*32 = 1280/warp (a multiple of 256);
    per sub-partition floor(16384/1280) = 12 warps -> 48 warps -> floor(48/3) = 16 blocks,
    48/64 = 75 %. Dividing the whole file instead (65536/1280 = 51 warps -> 17 blocks) is wrong."""
    o = _occ("8.0", 96, 40, 0)
    assert (o.active_blocks, o.active_warps, o.occupancy, o.limited_by) == (16, 48, 0.75, "registers")


def test_occupancy_register_rounding_to_256():
    """cc 8.0, 128 threads, 33 regs: 33*32 = 1056 rounds up to 1280 per warp; 16384/1280 = 12
    warps per sub-partition -> 48 warps -> 12 blocks of 4 warps = 75 %. With 32 regs it is
    1024/warp -> 64 warps -> 16 blocks = 100 %: one register more costs a quarter of the warps."""
    assert _occ("8.0", 128, 33, 0).occupancy == 0.75
    assert _occ("8.0", 128, 32, 0).occupancy == 1.0


def test_occupancy_ga10x_1024_threads():
    """cc 8.6 (48 warps/SM), 1024 threads = 32 warps, 32 regs: warps 48/32 = 1 block;
    regs 1024/warp -> 64 warps -> 2 blocks. -> 1 block, 32/48 = 66.7 %, limited by warps."""
    o = _occ("8.6", 1024, 32, 0)
    assert (o.active_blocks, o.active_warps, o.limited_by) == (1, 32, "warps")
    assert o.occupancy == pytest.approx(2 / 3)


def test_occupancy_hopper_48k_shared_memory():
    """cc 9.0, 128 threads, 32 regs, 48 KB smem: (49152 + 1024) = 50176 (already a multiple of 128);
    233472 / 50176 = 4.65 -> 4 blocks x 4 warps = 16/64 = 25 %, limited by shared memory."""
    o = _occ("9.0", 128, 32, 48 * 1024)
    assert (o.active_blocks, o.active_warps, o.occupancy, o.limited_by) == (4, 16, 0.25, "shared memory")
    assert o.smem_allocated_per_block == 50176


def test_occupancy_shared_memory_unit_and_reserve():
    """cc 9.0, 64 threads, 20096 B: 20096 + 1024 = 21120 = 165 x 128; 233472 / 21120 = 11.05 -> 11 blocks
    (a 256-byte unit would give 21248 -> 10; the H200's runtime answers 11).
    cc 7.0 has no reserve and a 256-byte unit: 20096 -> 20224; 98304 / 20224 = 4.86 -> 4 blocks."""
    assert _occ("9.0", 64, 32, 20096).active_blocks == 11
    o = _occ("7.0", 64, 32, 20096)
    assert (o.active_blocks, o.smem_allocated_per_block) == (4, 20224)


def test_occupancy_turing_small_blocks():
    """cc 7.5 (32 warps, 16 blocks/SM), 64 threads = 2 warps, 32 regs: warps 32/2 = 16; blocks 16;
    regs 1024/warp -> 64 warps -> 32 blocks; no smem limit. -> 16 blocks, 32 warps, 100 %,
    limited by warps and blocks."""
    o = _occ("7.5", 64, 32, 0)
    assert (o.active_blocks, o.active_warps, o.occupancy) == (16, 32, 1.0)
    assert o.limited_by == "warps and blocks"


def test_occupancy_ada_one_warp_blocks():
    """cc 8.9 (48 warps, 24 blocks/SM), 32 threads, 16 regs: block limit 24 -> 24 warps = 50 %,
    limited by blocks: tiny blocks cannot fill an SM."""
    o = _occ("8.9", 32, 16, 0)
    assert (o.active_blocks, o.occupancy, o.limited_by) == (24, 0.5, "blocks")


def test_occupancy_volta_255_registers():
    """cc 7.0, 256 threads, 255 regs: 255*32 = 8160 -> 8192/warp; 16384/8192 = 2 warps per
    sub-partition -> 8 warps -> 1 block of 8 warps = 8/64 = 12.5 %, limited by registers."""
    o = _occ("7.0", 256, 255, 0)
    assert (o.active_blocks, o.occupancy, o.limited_by) == (1, 0.125, "registers")


def test_occupancy_odd_block_size_rounds_to_whole_warps():
    """cc 8.0, 100 threads -> 4 warps (the last one 4/32 full); 64/4 = 16 blocks = 64 warps = 100 %
    of warp slots even though only 1600 of 2048 thread slots hold threads."""
    o = _occ("8.0", 100, 32, 0)
    assert (o.warps_per_block, o.active_blocks, o.occupancy, o.active_threads) == (4, 16, 1.0, 1600)


def test_occupancy_accepts_a_gpu_name():
    assert _occ("T4", 256, 32, 0).cc == "7.5"
    assert _occ(specs.lookup("H200"), 256, 32, 0).cc == "9.0"


# --------------------------------------------------------------------------- occupancy, bad input

@pytest.mark.parametrize("block", [0, -32, 1025, 2048])
def test_block_size_outside_the_limit_is_refused(block):
    with pytest.raises(SpecError, match="1024"):
        _occ("8.0", block, 32, 0)


def test_bad_register_and_shared_memory_requests_are_refused():
    with pytest.raises(SpecError, match="255"):
        _occ("8.0", 128, 256, 0)
    with pytest.raises(SpecError, match="166,912"):
        _occ("8.0", 128, 32, 200 * 1024)
    # 1024 threads x 72 regs: 2304/warp x 32 warps = 73728 > 65536 registers per block
    with pytest.raises(SpecError, match="65,536"):
        _occ("8.0", 1024, 72, 0)
    with pytest.raises(CourseError, match="whole number"):
        _occ("8.0", 64.5, 32, 0)


def test_unknown_cc_or_gpu_is_refused_with_the_known_values():
    with pytest.raises(SpecError, match="8.9"):
        _occ("6.1", 128, 32, 0)
    with pytest.raises(SpecError, match="H100-SXM"):
        _occ("Radeon", 128, 32, 0)


# --------------------------------------------------------------------------- occupancy, properties

CCS = specs.known_ccs()
BLOCKS = (1, 32, 64, 96, 100, 128, 192, 256, 384, 512, 640, 768, 1024)


def _blocks_or_zero(cc, block, regs, smem):
    try:
        return _occ(cc, block, regs, smem).active_blocks
    except SpecError:
        return 0


@pytest.mark.parametrize("cc", CCS)
def test_occupancy_is_a_fraction_and_within_every_limit(cc):
    lim = specs.occupancy_limits(cc)
    for block in BLOCKS:
        for regs in (0, 16, 32, 48, 64, 96, 128, 255):
            for smem in (0, 1, 4096, 40000):
                try:
                    o = _occ(cc, block, regs, smem)
                except SpecError:
                    continue
                assert 0 < o.occupancy <= 1
                assert o.active_blocks <= lim.max_blocks_per_sm
                assert o.active_warps <= lim.max_warps_per_sm
                assert o.active_blocks * o.registers_per_block <= lim.registers_per_sm
                assert o.active_blocks * o.smem_allocated_per_block <= lim.shared_memory_per_sm


@pytest.mark.parametrize("cc", CCS)
def test_more_registers_or_shared_memory_never_raise_occupancy(cc):
    for block in BLOCKS:
        by_regs = [_blocks_or_zero(cc, block, r, 0) for r in range(0, 256)]
        assert all(a >= b for a, b in zip(by_regs, by_regs[1:])), (cc, block)
        by_smem = [_blocks_or_zero(cc, block, 32, s) for s in range(0, 96 * 1024, 997)]
        assert all(a >= b for a, b in zip(by_smem, by_smem[1:])), (cc, block)


# --------------------------------------------------------------------------- waves

def test_waves_with_a_tail():
    """A100: 108 SMs x 8 blocks = 864 per wave; 1000 blocks = 1 full wave + 136 -> 2 waves;
    slots used 1000 / (2 x 864) = 57.9 %."""
    w = models.waves(1000, 8, 108)
    assert (w.blocks_per_wave, w.full_waves, w.tail_blocks, w.waves) == (864, 1, 136, 2)
    assert w.utilization == pytest.approx(1000 / 1728)


def test_waves_exact_fit_and_occupancy_input():
    """864 blocks fill exactly one wave; an Occupancy result can give blocks per SM (8)."""
    w = models.waves(864, _occ("8.0", 256, 32, 0), 108)
    assert (w.waves, w.tail_blocks, w.utilization) == (1, 0, 1.0)
    with pytest.raises(CourseError):
        models.waves(0, 8, 108)


# --------------------------------------------------------------------------- sectors

def test_stride_one_floats_touch_four_sectors():
    """32 lanes x 4 B contiguous = 128 B = 4 sectors of 32 B in 1 line; 128/128 = 100 %."""
    s = models.sectors(models.strided_addresses(1, 4), 4)
    assert (s.sectors, s.lines, s.requested_bytes, s.efficiency) == (4, 1, 128, 1.0)


@pytest.mark.parametrize("stride,nsec,nlines,eff", [
    (2, 8, 2, 0.5),       # 32 x 8 B span = 256 B: 8 sectors, half the bytes used
    (4, 16, 4, 0.25),     # 512 B span: 16 sectors
    (8, 32, 8, 0.125),    # every lane in its own sector (32 B apart)
    (32, 32, 32, 0.125),  # 128 B apart: a sector and a line per lane, 4 of 32 bytes used
])
def test_strided_floats(stride, nsec, nlines, eff):
    s = models.sectors(models.strided_addresses(stride, 4), 4)
    assert (s.sectors, s.lines, s.efficiency) == (nsec, nlines, eff)


def test_misaligned_doubles_and_broadcast():
    """Floats from byte 4: bytes 4..131 touch sectors 0..4 (5) and lines 0..1; 128/160 = 80 %.
    Doubles, stride 1: 256 B = 8 sectors, 2 lines, 100 %. All lanes on one float: 1 sector, 4/32."""
    s = models.sectors(models.strided_addresses(1, 4, base=4), 4)
    assert (s.sectors, s.lines, s.efficiency) == (5, 2, 0.8)
    d = models.sectors(models.strided_addresses(1, 8), 8)
    assert (d.sectors, d.lines, d.efficiency) == (8, 2, 1.0)
    b = models.sectors([64] * 32, 4)
    assert (b.sectors, b.requested_bytes, b.efficiency) == (1, 4, 0.125)


def test_sectors_bad_input():
    with pytest.raises(CourseError, match="32 lanes"):
        models.sectors(range(0, 33 * 4, 4), 4)
    with pytest.raises(CourseError):
        models.sectors([], 4)
    with pytest.raises(CourseError, match="elem_bytes"):
        models.sectors([0], 3)
    with pytest.raises(CourseError):
        models.sectors([-4], 4)


# --------------------------------------------------------------------------- bank conflicts

def test_stride_32_words_is_a_32_way_conflict_and_padding_removes_it():
    """Column of a float tile[32][32]: lane i at word 32i -> bank (32i mod 32) = 0 for all, 32
    distinct words -> 32-way. With tile[32][33]: word 33i -> bank i -> no conflict."""
    col = models.bank_conflicts([i * 32 * 4 for i in range(32)])
    assert (col.ways, col.wavefronts, col.slowdown) == (32, 32, 32)
    padded = models.bank_conflicts([i * 33 * 4 for i in range(32)])
    assert (padded.ways, padded.wavefronts) == (1, 1)


@pytest.mark.parametrize("stride,ways", [(1, 1), (2, 2), (3, 1), (4, 4), (8, 8), (16, 16), (17, 1)])
def test_strided_words(stride, ways):
    """Word stride s puts 32 lanes in 32/gcd(s, 32) banks, gcd(s, 32) distinct words each."""
    assert models.bank_conflicts(models.strided_addresses(stride, 4)).ways == ways


def test_broadcast_is_not_a_conflict():
    """Every lane reads the same word, or pairs of lanes share words: one word per bank -> 1-way."""
    assert models.bank_conflicts([128] * 32).ways == 1
    assert models.bank_conflicts([(i // 2) * 4 for i in range(32)]).ways == 1
    # two distinct words in bank 0 (words 0 and 32) -> 2-way even though 16 lanes share each
    assert models.bank_conflicts([0] * 16 + [128] * 16).ways == 2


def test_wide_accesses_are_split_into_phases():
    """Doubles, stride 1: 2 phases of 16 lanes, each covering 32 consecutive words -> 1-way,
    2 wavefronts, no slowdown. Doubles at stride 2 (16 B apart): lane i of a phase uses words
    4i, 4i+1 -> banks repeat every 8 lanes -> 2 words per bank -> 2-way. Bytes: 32 lanes in 8 words."""
    d = models.bank_conflicts(models.strided_addresses(1, 8), 8)
    assert (d.ways, d.wavefronts, d.phases, d.slowdown) == (1, 2, 2, 1)
    assert models.bank_conflicts(models.strided_addresses(2, 8), 8).ways == 2
    f4 = models.bank_conflicts(models.strided_addresses(1, 16), 16)
    assert (f4.ways, f4.phases) == (1, 4)
    assert models.bank_conflicts(list(range(32)), 1).ways == 1


def test_random_accesses_stay_between_1_and_32_ways():
    rng = random.Random(7)
    for _ in range(200):
        addrs = [rng.randrange(0, 48 * 1024, 4) for _ in range(32)]
        r = models.bank_conflicts(addrs)
        distinct_banks = len({(a // 4) % 32 for a in addrs})
        assert 1 <= r.ways <= 32
        assert r.ways >= -(-len(set(addrs)) // 32)
        if distinct_banks == len(set(addrs)):
            assert r.ways == 1


# --------------------------------------------------------------------------- warp divergence

@pytest.mark.parametrize("lanes,passes,eff", [
    ([32], 1, 1.0),             # uniform branch
    ([16, 16], 2, 0.5),         # if/else split in half: two passes, half the lanes idle in each
    ([1, 31], 2, 0.5),          # one odd lane costs as much as an even split
    ([8, 8, 8, 8], 4, 0.25),    # a 4-way switch
    ([16, 0], 1, 0.5),          # a branch no lane takes is skipped
])
def test_warp_efficiency(lanes, passes, eff):
    w = models.warp_efficiency(lanes)
    assert (w.passes, w.efficiency) == (passes, eff)


def test_warp_efficiency_bad_input():
    with pytest.raises(CourseError, match="32"):
        models.warp_efficiency([33])
    with pytest.raises(CourseError):
        models.warp_efficiency([0, 0])


# --------------------------------------------------------------------------- roofline

def test_vector_add_is_memory_bound():
    """fp32 vector add of n = 2**26: n FLOPs, 12n bytes -> 1/12 FLOP/byte. H100 SXM: ridge
    67e12 / 3.35e12 = 20; memory time 12 x 2**26 / 3.35e12 = 240.4 us > compute 1.0 us;
    attainable 3.35e12 / 12 = 279 GFLOP/s."""
    n = 2**26
    r = models.roofline(n, 12 * n, "H100", "fp32")
    assert r.bound == "memory" and r.ridge_point == pytest.approx(20.0)
    assert r.time == pytest.approx(12 * n / 3.35e12)
    assert r.attainable_flops == pytest.approx(3.35e12 / 12)


def test_large_matmul_is_compute_bound():
    """bf16 4096^3 matmul: 2 x 4096^3 = 1.374e11 FLOPs, 3 x 4096^2 x 2 B = 1.007e8 bytes ->
    1365 FLOP/byte > ridge 295 -> compute-bound, 1.374e11 / 989.5e12 = 138.9 us."""
    r = models.roofline(2 * 4096**3, 3 * 4096**2 * 2, "H100", "bf16")
    assert r.bound == "compute"
    assert r.time == pytest.approx(2 * 4096**3 / 989.5e12)
    assert r.intensity == pytest.approx(4096 / 3)


@pytest.mark.parametrize("flops,nbytes", [(1e9, 1e8), (2e12, 1e8), (3e11, 1e8), (1e9, 0.0)])
def test_roof_share_is_the_rate_over_the_roofline_models_attainable_rate(flops, nbytes):
    """The share the check and the figures print is the rate over what models.roofline says
    the roof allows at that intensity: memory side, compute side, on the ridge, no bytes."""
    peak, bw = 3e11, 1e9  # ridge at 300 FLOP/byte
    seconds = 0.37
    intensity = flops / nbytes if nbytes else float("inf")
    want = flops / seconds / models.roofline(flops, nbytes, peak_flops=peak,
                                             bandwidth=bw).attainable_flops
    assert models.roof_share(flops / seconds, intensity, peak, bw) == pytest.approx(want, rel=1e-12)


def test_roofline_with_measured_cpu_ceilings():
    """peak 1e11 FLOP/s, 2e10 B/s -> ridge 5; 1e9 FLOPs over 1e8 bytes (10 FLOP/byte) ->
    compute-bound at 10 ms; over 1e9 bytes -> memory-bound at 50 ms."""
    r = models.roofline(1e9, 1e8, peak_flops=1e11, bandwidth=2e10)
    assert (r.ridge_point, r.bound, r.device) == (5.0, "compute", "given ceilings")
    assert r.time == pytest.approx(0.01)
    assert models.roofline(1e9, 1e9, peak_flops=1e11, bandwidth=2e10).time == pytest.approx(0.05)
    # an explicit ceiling overrides one of the GPU's
    assert models.roofline(1, 1, "A100", bandwidth=1e9).bandwidth == 1e9


def test_roofline_adds_a_launch_cost_only_when_asked():
    plain = models.roofline(2e3, 12e3, "H200")
    launched = models.roofline(2e3, 12e3, "H200", launch=models.LAUNCH_OVERHEAD_S)
    assert launched.time == pytest.approx(plain.time + 3e-6) and plain.launch_time == 0
    assert launched.bound == plain.bound == "memory" and "launch overhead" in str(launched)
    with pytest.raises(ModelInputError):
        models.roofline(2e3, 12e3, "H200", launch=-1)


def test_roofline_bad_input():
    with pytest.raises(CourseError, match="peak_flops"):
        models.roofline(1e9, 1e9)
    with pytest.raises(PrecisionError):
        models.roofline(1e9, 1e9, "T4", "bf16")
    with pytest.raises(CourseError):
        models.roofline(0, 0, "T4")
    assert models.roofline(1e9, 0, "T4").bound == "compute"


# --------------------------------------------------------------------------- transfers

def test_transfer_time_pinned_and_pageable():
    """1 GiB on a T4 (PCIe gen 3 x16, 15.754 GB/s): pinned 0.85 x -> 13.391 GB/s ->
    10 us + 2**30 / 13.391e9 = 80.19 ms; pageable at half the rate -> 160.4 ms."""
    pinned = models.transfer_time(2**30, "T4")
    assert pinned.time == pytest.approx(10e-6 + 2**30 / (0.85 * 15.7538e9), rel=1e-4)
    pageable = models.transfer_time(2**30, "T4", pinned=False)
    assert pageable.time == pytest.approx(10e-6 + 2**30 / (0.425 * 15.7538e9), rel=1e-4)


def test_small_transfers_are_latency_bound():
    """4 KiB pinned over gen 5: 4096 / 53.56e9 = 76 ns of streaming against 10 us latency."""
    t = models.transfer_time(4096, "H100")
    assert t.latency / t.time > 0.99
    assert models.transfer_time(0, "H100").time == pytest.approx(10e-6)
    assert models.transfer_time(1e9, bandwidth=10e9).time == pytest.approx(10e-6 + 1e9 / 8.5e9)
    with pytest.raises(SpecError):
        models.transfer_time(1e9, "GTX 480")
    with pytest.raises(CourseError):
        models.transfer_time(-1, "T4")


# --------------------------------------------------------------------------- streams

def test_one_stream_is_serial():
    """1 stream, H2D 3, kernel 4, D2H 2: 0-3, 3-7, 7-9 -> total 9 = serial."""
    t = models.stream_timeline(1, 3, 4, 2)
    assert [(o.op, o.start, o.end) for o in t.ops] == [("H2D 0", 0, 3), ("kernel 0", 3, 7), ("D2H 0", 7, 9)]
    assert t.total == t.serial_total == 9 and t.speedup == 1


def test_three_streams_overlap_copies_and_compute():
    """3 streams, each stage 3 in total -> 1 per chunk: the pipeline fills in 2 steps and drains
    in 2: total 3 + 2 = 5 against 9 serial."""
    t = models.stream_timeline(3, 3, 3, 3)
    assert t.total == pytest.approx(5) and t.serial_total == 9
    assert {o.stream for o in t.ops} == {0, 1, 2}


def test_more_chunks_than_streams_stay_in_order_per_stream():
    """2 streams, 4 chunks, H2D 4 / kernel 8 / D2H 4 -> 1 / 2 / 1 per chunk.
    c0 (s0): H2D 0-1, K 1-3, D2H 3-4.  c1 (s1): H2D 1-2, K 3-5, D2H 5-6.
    c2 (s0, free at 4): H2D 4-5, K 5-7, D2H 7-8.  c3 (s1, free at 6): H2D 6-7, K 7-9, D2H 9-10."""
    t = models.stream_timeline(2, 4, 8, 4, chunks=4)
    got = [(o.stream, o.op, o.start, o.end) for o in t.ops]
    assert got == [(0, "H2D 0", 0, 1), (0, "kernel 0", 1, 3), (0, "D2H 0", 3, 4),
                   (1, "H2D 1", 1, 2), (1, "kernel 1", 3, 5), (1, "D2H 1", 5, 6),
                   (0, "H2D 2", 4, 5), (0, "kernel 2", 5, 7), (0, "D2H 2", 7, 8),
                   (1, "H2D 3", 6, 7), (1, "kernel 3", 7, 9), (1, "D2H 3", 9, 10)]
    assert t.total == 10


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_timeline_is_a_valid_schedule(n):
    t = models.stream_timeline(n, 2.0, 5.0, 1.5, chunks=2 * n)
    for engine in models.ENGINES:
        bars = sorted((o.start, o.end) for o in t.ops if o.engine == engine)
        assert all(a[1] <= b[0] + 1e-12 for a, b in zip(bars, bars[1:])), "an engine ran two ops at once"
    for s in range(n):
        bars = [(o.start, o.end) for o in t.ops if o.stream == s]
        assert all(a[1] <= b[0] + 1e-12 for a, b in zip(bars, bars[1:])), "a stream ran out of order"
    assert max(2.0, 5.0, 1.5) <= t.total <= t.serial_total + 1e-12


# --------------------------------------------------------------------------- all-reduce

def test_ring_allreduce_time():
    """1e9 B over 8 workers at 100 GB/s, 5 us: 2 x 7/8 x 1e9 / 1e11 = 17.5 ms; 2 x 7 x 5 us = 70 us."""
    a = models.ring_allreduce_time(1e9, 8, 100e9, 5e-6)
    assert a.bandwidth_time == pytest.approx(0.0175)
    assert a.latency_time == pytest.approx(70e-6)
    assert a.time == pytest.approx(0.01757)


def test_ring_allreduce_edges():
    """One worker sends nothing; without latency the bus bandwidth is the link bandwidth."""
    assert models.ring_allreduce_time(1e9, 1, 100e9, 5e-6).time == 0
    assert models.ring_allreduce_time(1e9, 4, 50e9).bus_bandwidth == pytest.approx(50e9)
    with pytest.raises(CourseError):
        models.ring_allreduce_time(1e9, 0, 1e9)


# --------------------------------------------------------------------------- pipeline bubble

def test_gpipe_bubble():
    """p = 4 stages, m = 8 micro-batches: (4-1)/(8+4-1) = 3/11 = 27.3 %; with forward 1 and
    backward 2 the step takes (8+3) x 3 = 33 against 8 x 3 = 24 of work per stage."""
    b = models.pipeline_bubble(4, 8)
    assert b.bubble_fraction == pytest.approx(3 / 11)
    assert (b.total_time, b.ideal_time) == (33, 24)
    assert models.pipeline_bubble(4, 1).bubble_fraction == pytest.approx(3 / 4)
    assert models.pipeline_bubble(1, 5).bubble_fraction == 0


@pytest.mark.parametrize("p,m", [(2, 1), (4, 8), (3, 5), (8, 32)])
def test_gpipe_schedule_respects_dependencies(p, m):
    b = models.pipeline_bubble(p, m)
    ops = {(o.stage, o.microbatch, o.phase): o for o in b.schedule}
    assert len(ops) == 2 * p * m
    for s in range(p):
        bars = sorted((o.start, o.end) for o in b.schedule if o.stage == s)
        assert all(x[1] <= y[0] for x, y in zip(bars, bars[1:]))
        busy = sum(e - st for st, e in bars)
        assert 1 - busy / b.total_time == pytest.approx(b.bubble_fraction)
        for j in range(m):
            if s > 0:
                assert ops[(s, j, "forward")].start >= ops[(s - 1, j, "forward")].end
            if s < p - 1:
                assert ops[(s, j, "backward")].start >= ops[(s + 1, j, "backward")].end
            assert ops[(s, j, "backward")].start >= ops[(p - 1, m - 1, "forward")].end
    assert max(o.end for o in b.schedule) == b.total_time


# --------------------------------------------------------------------------- training memory

def test_training_memory_fp32_adam():
    """1e9 params fp32 + Adam: weights 4, grads 4, two states 8 -> 16 GB; 1e8 activations x 4 B = 0.4 GB."""
    m = models.training_memory(10**9, 10**8, "fp32", "adam")
    assert (m.weights, m.gradients, m.master_copy, m.optimizer_state, m.activations) == \
        (4 * 10**9, 4 * 10**9, 0, 8 * 10**9, 4 * 10**8)
    assert m.total == 16.4e9


def test_training_memory_mixed_precision():
    """bf16 + fp32 master weights + Adam: 2 + 2 + 4 + 8 = 16 bytes/param; activations 2 B each.
    SGD with momentum in fp16: 2 + 2 + 4 + 4 = 12. Without master weights (pure bf16 Adam):
    2 + 2 + 2 x 2 = 8. Plain fp32 SGD: 4 + 4 = 8."""
    m = models.training_memory(10**9, 10**8, "bf16", "adam")
    assert (m.total - m.activations, m.activations, m.master_weights) == (16 * 10**9, 2 * 10**8, True)
    assert models.training_memory(10**9, 0, "fp16", "momentum").total == 12 * 10**9
    assert models.training_memory(10**9, 0, "bf16", "adam", master_weights=False).total == 8 * 10**9
    assert models.training_memory(10**9, 0, "fp32", "sgd").total == 8 * 10**9


def test_training_memory_bad_input():
    with pytest.raises(CourseError, match="fp32"):
        models.training_memory(10, 10, "fp64")
    with pytest.raises(CourseError, match="adam"):
        models.training_memory(10, 10, "fp32", "lion")


# --------------------------------------------------------------------------- display

RESULTS = [
    _occ("8.0", 256, 32, 0), models.waves(1000, 8, 108), models.sectors(models.strided_addresses(2)),
    models.bank_conflicts(models.strided_addresses(2)), models.warp_efficiency([16, 16]),
    models.roofline(1e9, 1e9, "A100"), models.transfer_time(1e6, "L4"),
    models.stream_timeline(2, 1, 1, 1), models.ring_allreduce_time(1e6, 4, 1e9, 1e-6),
    models.pipeline_bubble(4, 4), models.training_memory(10**6, 10**6, "bf16"),
]


@pytest.mark.parametrize("result", RESULTS, ids=lambda r: type(r).__name__)
def test_every_result_is_labelled_a_model(result):
    assert str(result).startswith("model: ")
    assert ">model<" in result._repr_html_()
    with pytest.raises(AttributeError):
        result.time = 0  # frozen
    assert pickle.loads(pickle.dumps(result)) == result
    assert isinstance(dataclasses.asdict(result), dict)


def test_bytes_in_flight_is_littles_law():
    r = models.bytes_in_flight("H200", bytes_per_thread=4)
    assert r.bytes_in_flight == 132 * 2048 * 4
    assert r.covered_latency == pytest.approx(r.bytes_in_flight / r.bandwidth)
    # Wider loads cover proportionally more latency; a long latency caps the bandwidth.
    wide = models.bytes_in_flight("H200", bytes_per_thread=16)
    assert wide.covered_latency == pytest.approx(4 * r.covered_latency)
    assert r.bandwidth_at(2 * r.covered_latency) == pytest.approx(r.bandwidth / 2)
    assert r.bandwidth_at(r.covered_latency / 2) == pytest.approx(r.bandwidth)  # never above peak
    # A T4 holds 1024 threads per SM and has far less bandwidth: one float each covers more.
    t4 = models.bytes_in_flight("T4")
    assert t4.threads_per_sm == 1024 and t4.covered_latency > r.covered_latency
    assert str(r).startswith("model: ")
    with pytest.raises(ModelInputError):
        models.bytes_in_flight("H200", bytes_per_thread=0)


def test_a_count_given_as_text_is_one_sentence():
    with pytest.raises(ModelInputError, match="params must be a whole number, got '1e9'"):
        models.training_memory("1e9", 10)
    assert models.training_memory(np.int64(10), 1e3).total > 0  # NumPy and float counts are fine


def test_occupancy_by_block_leaves_out_blocks_that_cannot_launch():
    # 128 registers per thread: a 1024-thread block needs 131,072 of the 65,536 an SM has
    occ = models.occupancy_by_block("9.0", (256, 512, 1024), regs_per_thread=128)
    assert set(occ) == {256, 512} and occ[256] == models.occupancy("9.0", 256, 128).occupancy
    assert models.occupancy_by_block("9.0", (256,), smem_per_block=300_000) == {}
