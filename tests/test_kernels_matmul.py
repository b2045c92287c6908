"""kernels/matmul.py, the Python home of matmul.cu: launch shapes, shared memory, reference,
tolerance, FLOPs and bytes, and the per-version traffic count."""
import numpy as np
import pytest

import gpucourse as gc
from gpucourse.emulator.build import SHARED_MEM_LIMIT
from gpucourse.errors import InputError
from gpucourse.kernels import matmul

DEFINES = (None, {"TILE": 16}, {"BM": 64, "BN": 128, "BK": 8}, {"BM": 128, "BN": 64, "BK": 16})


def test_the_versions_are_the_kernels_of_the_cu_file_in_order():
    assert matmul.VERSIONS == tuple(matmul.load(backend="cpu").names)
    assert [matmul.version_number(v) for v in matmul.VERSIONS] == [1, 2, 3, 4, 5, 6]
    assert matmul.version_number("v6") == 6


def test_an_unknown_version_is_one_sentence():
    with pytest.raises(InputError, match=r"^unknown matmul version 'matmul_v9'; use one of "
                                         r"matmul_v1_naive, .*matmul_v6_vectorized\.$"):
        matmul.launch_config("matmul_v9", 1, 1)


def test_launch_configs():
    assert matmul.launch_config("matmul_v1_naive", 100, 50) == ((4, 2), (32, 32))
    assert matmul.launch_config("matmul_v2_coalesced", 100, 50) == ((2, 4), (32, 32))
    assert matmul.launch_config("matmul_v3_shared", 100, 50, {"TILE": 16}) == ((4, 7), (16, 16))
    assert matmul.launch_config("matmul_v4_1d_blocking", 4096, 4096) == ((64, 64), 512)
    assert matmul.launch_config("matmul_v5_2d_blocking", 4096, 4096) == ((32, 32), 256)
    assert matmul.launch_config("matmul_v6_vectorized", 4096, 4096, {"BN": 64}) == ((64, 32), 128)
    with pytest.raises(ValueError, match="unknown matmul version"):
        matmul.launch_config("matmul_v9", 1, 1)


@pytest.mark.parametrize("defines", DEFINES)
def test_static_shared_memory_is_what_the_source_declares(defines):
    """The emulator counts each kernel's __shared__ arrays in the build: the home agrees."""
    mod = matmul.load(defines, backend="cpu")
    for v in matmul.VERSIONS:
        counted = SHARED_MEM_LIMIT - mod.emulator_limits(v).max_dynamic_shared
        assert matmul.static_shared_bytes(v, defines) == counted, v


@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (37, 70, 19)])
def test_every_launch_covers_the_output_and_matches_the_reference(M, N, K):
    A = gc.check.random_array((M, K), seed=M)
    B = gc.check.random_array((K, N), seed=N)
    ref = matmul.reference(A, B)
    rtol, atol = matmul.tolerance(A, B)
    assert rtol == 0.0 and atol == gc.precision.matmul_error_bound(A, B) > 0
    mod = matmul.load(backend="cpu")
    for v in matmul.VERSIONS:
        C = matmul.run(v, A, B, module=mod)  # NaN where no thread wrote
        gc.check.assert_close(C, ref, rtol=rtol, atol=atol, name=f"{v} at {M}×{N}×{K}")


def test_mismatched_inner_dimensions_are_one_sentence():
    with pytest.raises(InputError, match="inner dimensions differ: A is 2×3, B is 4×5"):
        matmul.run("matmul_v2_coalesced", np.zeros((2, 3), np.float32),
                   np.zeros((4, 5), np.float32), module=matmul.load(backend="cpu"))


def test_flops_and_bytes_of_a_product():
    assert matmul.flops(2, 3, 4) == 48.0
    assert matmul.bytes_moved(2, 3, 4) == 4 * (2 * 4 + 4 * 3 + 2 * 3)
    assert matmul.bytes_moved(1024, 1024, 1024, itemsize=2) == 3.0 * 2 * 1024 * 1024


def test_traffic_per_fma_falls_down_the_ladder():
    g, s = zip(*(matmul.traffic_per_fma(v) for v in matmul.VERSIONS))
    assert g[0] == pytest.approx(33.0) and g[1] == pytest.approx(5.0)
    assert all(a >= b for a, b in zip(g, g[1:]))
    assert s == pytest.approx((0.0, 0.0, 2.0, 9 / 8, 0.25, 1 / 16))
    # a smaller shared tile reuses each loaded value fewer times
    assert matmul.traffic_per_fma("matmul_v3_shared", {"TILE": 16})[0] == pytest.approx(2 * g[2])
