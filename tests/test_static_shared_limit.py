"""The message for static __shared__ arrays over 48 KB: the limit and the ways around it."""
import pytest

import gpucourse.kernels as gk
from gpucourse.errors import CompileError

UNUSED = r"""
extern "C" __global__ void unused_tile(float* out) {
  __shared__ float tile[16 * 1024];  // 64 KB, never touched
  out[threadIdx.x] = 1.0f;
}
"""


def test_an_array_over_48_kb_names_the_limit_and_the_fixes_without_claiming_a_compile_error():
    with pytest.raises(CompileError) as info:
        gk.from_source(UNUSED, name="unused_tile.cu", backend="cpu")
    message = str(info.value)
    assert message.startswith("unused_tile.cu: kernel unused_tile uses more than the 48 KB of "
                              "static shared memory a block may have (65536 __shared__ bytes, "
                              "49152 allowed)"), message
    assert "smaller tile" in message and "cudaFuncSetAttribute" in message
    assert "extern __shared__" in message
    # nvcc may drop an array the kernel never uses: the message makes no claim about compilers.
    assert "compile" not in message.lower(), message
