"""Chapter 5 on a real GPU: matmul.cu through CuPy against cuBLAS, and the experiments' GPU
paths at small sizes (gpu_check() measures the full-size figures)."""
import numpy as np
import pytest

import gpucourse as gc

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy", reason="CuPy is not installed (pip install -e .[gpu])")
if not gc.device.is_cuda() or not gc.device.cupy_works():
    pytest.skip("needs a CUDA GPU with CuPy", allow_module_level=True)

from gpucourse.experiments import ch5  # noqa: E402
from gpucourse.kernels import matmul  # noqa: E402
from gpucourse.plot import ch5 as p5  # noqa: E402


def test_every_matmul_version_is_right_on_the_gpu():
    table = ch5.check_matmul(backend="cuda")
    assert "on the GPU" in table.caption


def test_tuned_tile_shapes_are_right_on_the_gpu():
    A = gc.device.asarray(gc.check.random_array((300, 260), seed=1))
    B = gc.device.asarray(gc.check.random_array((260, 388), seed=2))
    ref = cupy.asnumpy(A).astype(np.float64) @ cupy.asnumpy(B)
    for d in matmul.V6_TUNING:
        C = matmul.run("matmul_v6_vectorized", A, B, module=matmul.load(d), defines=d)
        gc.check.assert_close(cupy.asnumpy(C), ref, *matmul.tolerance(cupy.asnumpy(A), cupy.asnumpy(B)),
                              name=str(d))


def test_sgemm_ladder_measures_against_cublas():
    res = ch5.sgemm_ladder(n=1024, min_time_s=0.02)
    assert res["source"] == "measured"
    g = {t.label: t.gflops for t in res["timings"]}
    assert g["matmul_v6_vectorized"] > 5 * g["matmul_v1_naive"]
    assert 0 < res["best_pct_of_cublas"] < 150
    p5.sgemm_figure(res)
    str(ch5.sgemm_summary(res))


def test_conv_and_cudnn_benchmark_mode():
    res = ch5.conv_ladder({"batch": 4, "channels": 16, "size": 28, "out_channels": 32, "kernel": 3},
                          min_time_s=0.02)
    assert "cuDNN" in res["timings"][-1].label
    cu = ch5.cudnn_benchmark_mode(shapes=((8, 32, 64, 28, 3, 1),), min_time_s=0.02)
    assert cu["rows"][0]["steady_on_s"] > 0
    str(ch5.cudnn_table(cu))


def test_sparse_sweep_with_cupyx():
    s = ch5.sparse_sweep(n=2048, k=64, densities=(0.001, 0.05, 0.5), min_time_s=0.02)
    assert len(s["cupyx_s"]) == 3 and s["library"] == "cuSPARSE"
    p5.sparse_figure(s)


def test_fusion_with_an_elementwise_kernel():
    res = ch5.fusion(n=1 << 24, use_compile=False, min_time_s=0.02)  # 64 MB > L2
    assert res["cupy_speedup"] > 1.5
    p5.fusion_figure(res)


def test_precisions_on_the_gpu():
    res = ch5.precision_sweep(n=2048, min_time_s=0.02)
    by = {t.label: t.gflops for t in res["timings"]}
    assert "fp32" in by
    if "bf16" in by:
        assert by["bf16"] > by["fp32"]  # tensor cores
    str(ch5.precision_table(res))
