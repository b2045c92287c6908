"""Chapter 5's tensor-core exercise: the WMMA kernels of wmma_matmul.cu, the checker of
Exercise 5.5 and the wrong answers it names, and the GPU timing path on the fake GPU."""
from __future__ import annotations

import re

import numpy as np
import pytest

from gpucourse.check import ch5_wmma
from gpucourse.errors import InputError
from gpucourse.experiments.ch5 import wmma as tc
from gpucourse.kernels import wmma_matmul as wmma_cu

SOLUTION = r"""
#include <mma.h>
using namespace nvcuda;

extern "C" __global__ void wmma_matmul(const half* A, const half* B, float* C, int M, int N, int K) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int row = (warp / (N / 16)) * 16, col = (warp % (N / 16)) * 16;
    if (row >= M) return;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, A + row * K + k, K);
        wmma::load_matrix_sync(b, B + k * N + col, N);
        wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(C + row * N + col, acc, N, wmma::mem_row_major);
}
"""


def test_the_solution_passes(capsys):
    ch5_wmma.check_wmma_matmul(SOLUTION)
    assert capsys.readouterr().out.strip() == "Exercise 5.5 passed: a tensor-core matmul with WMMA."


def _variant(old: str, new: str) -> str:
    assert old in SOLUTION, old
    return SOLUTION.replace(old, new)


# Each wrong answer, and what the checker's message must say.
WRONG = [
    ("B loaded column-major",
     _variant("half, wmma::row_major> b;", "half, wmma::col_major> b;"),
     r"B is row-major \(K×N\): declare its fragment wmma::row_major and load it with ldm = N"),
    ("the accumulator refilled in the loop",
     _variant("    for (int k = 0; k < K; k += 16) {\n",
              "    for (int k = 0; k < K; k += 16) {\n        wmma::fill_fragment(acc, 0.0f);\n"),
     r"C holds the product of the last 16 columns of A only: fill the accumulator with 0 once"),
    ("C stored column-major",
     _variant("wmma::mem_row_major", "wmma::mem_col_major"),
     r"each 16×16 tile of C is transposed: store it with wmma::mem_row_major and ldm = N"),
    ("the warp index without blockIdx",
     _variant("(blockIdx.x * blockDim.x + threadIdx.x) / 32", "threadIdx.x / 32"),
     r"kernel wmma_matmul has a race \(write-after-write hazard in global memory, `C\[0\]`\): "
     r"thread \(\d+,0,0\) of block \(1,0,0\) writes it at wmma_matmul\.cu line 18 "
     r"\(`wmma::store_matrix_sync"),
    ("half a warp returns",
     _variant("    if (row >= M) return;", "    if (row >= M || threadIdx.x % 32 >= 16) return;"),
     r"wmma::load_matrix_sync is called by lanes of warp 0 in block \(0,0,0\) while lanes 16-31 "
     r"returned first; every lane of the warp must make the call"),
    ("the k loop runs one step too far",
     _variant("k < K; k += 16", "k <= K; k += 16"),
     r"M=16, N=16, K=16: kernel wmma_matmul: thread .* reads `[AB]` out of bounds at "
     r"wmma_matmul\.cu line \d+"),
    ("plain float arithmetic instead of the tensor cores",
     r'''extern "C" __global__ void wmma_matmul(const half* A, const half* B, float* C, int M, int N, int K) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < M * N) { float s = 0; for (int k = 0; k < K; k++) s += (float)A[(i / N) * K + k] * (float)B[k * N + i % N]; C[i] = s; }
}''',
     r"multiply on the tensor cores: load fragments with wmma::load_matrix_sync"),
    ("only the first k-step",
     _variant("k < K; k += 16", "k < 16; k += 16"),
     r"C holds the product of the first 16 columns of A only: step k by 16 up to K"),
]


@pytest.mark.parametrize("label,source,match", WRONG, ids=[w[0] for w in WRONG])
def test_a_wrong_answer_is_named(label, source, match):
    with pytest.raises(AssertionError, match=r"Exercise 5\.5 \(a tensor-core matmul with WMMA\) "
                                             r"not yet right") as info:
        ch5_wmma.check_wmma_matmul(source)
    assert re.search(match, str(info.value)), f"{label}: {info.value}"


def test_the_course_kernels_are_right_on_the_emulator():
    table = tc.check_wmma(race_check=False)
    assert "all pass" in str(table)
    tc.check_wmma(shapes=((48, 80, 32),), race_check=True)
    with pytest.raises(InputError, match=r"M, N and K must be multiples of 16"):
        wmma_cu.run(wmma_cu.VERSIONS[0], np.zeros((17, 16), np.float16), np.zeros((16, 16), np.float16))


def test_without_a_gpu_the_ladder_says_what_it_needs():
    result = tc.tensor_core_ladder()
    assert result["source"] == "none" and "needs a CUDA GPU" in result["note"]
    assert "needs a CUDA GPU" in str(tc.tensor_core_summary(result))
    assert tc.gpu_record(result) == {"note": result["note"]}


def test_the_gpu_path_times_wmma_beside_the_fp32_ladder_and_cublas():
    from fakecuda.testing import installed, shrink_defaults

    with installed() as (cp, mp):
        from gpucourse.experiments import ch5

        from gpucourse.experiments.ch5 import sgemm as sgemm_section

        shrink_defaults(mp, sgemm_section.sgemm_ladder, min_time_s=0.0)
        sgemm = ch5.sgemm_ladder(n=64, versions=("matmul_v2_coalesced", "matmul_v3_shared"),
                                 min_time_s=0.0)
        result = tc.tensor_core_ladder(n=64, min_time_s=0.0, sgemm=sgemm)
        assert result["source"] == "measured" and result["n"] == 64
        labels = [t.label for t in result["timings"]]
        assert labels == ["matmul_v2_coalesced", "matmul_v3_shared", "ref (cuBLAS, cupy.matmul)",
                          *tc.WMMA_VERSIONS, "ref (cuBLAS FP16, cupy.matmul)"]
        assert result["best_simt"] in labels[:2] and result["best_wmma"] in tc.WMMA_VERSIONS
        record = tc.gpu_record(result)
        assert record["labels"] == labels and len(record["gflops"]) == len(labels)
        assert "× best FP32 SIMT" in str(tc.tensor_core_summary(result))
