"""A barrier that one thread waits at, or that one thread never reached, is reported in the
singular: "1 thread ... waits", "1 thread never reached"."""
import numpy as np
import pytest

from gpucourse import kernels
from gpucourse.errors import KernelError

SOURCE = r"""
extern "C" __global__ void early_return(float* x, int n) {
  if (threadIdx.x >= n) return;
  __syncthreads();
  x[threadIdx.x] = 1.0f;
}
"""


@pytest.mark.parametrize("n, words", [
    (1, r"1 thread of block \(0,0,0\) waits at __syncthreads\(\) on line 4 that 31 threads never"),
    (31, r"31 threads of block \(0,0,0\) wait at __syncthreads\(\) on line 4 that 1 thread never"),
])
def test_one_thread_is_one_thread(n, words):
    module = kernels.from_source(SOURCE, name="barrier_wording.cu", backend="cpu")
    with pytest.raises(KernelError, match=words):
        module.early_return((1,), (32,), (np.zeros(32, np.float32), np.int32(n)))
