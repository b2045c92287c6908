"""kernels/bias_gelu.py, the Python home of bias_gelu.cu and bias_gelu_backward.cu: which file
holds each version, the launch shape, the float64 references and the error bound."""
import numpy as np
import pytest
import torch

import gpucourse as gc
from gpucourse.errors import LaunchError
from gpucourse.kernels import bias_gelu


def test_each_version_is_the_kernel_of_its_file():
    for version, file in bias_gelu.FILES.items():
        assert gc.kernels.load(file, backend="cpu").names == [version]


def test_launch_shape():
    assert bias_gelu.launch("bias_gelu_v1_fused", 1000) == (4, 256, 0)
    assert bias_gelu.launch("bias_gelu_backward_v1_fused", 1000, block=96) == (11, 96, 0)
    with pytest.raises(LaunchError, match=r"^bias_gelu.cu has no version 'bias_gelu_v2'"):
        bias_gelu.launch("bias_gelu_v2", 10)


def test_the_references_are_torchs_gelu_and_its_backward():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(7, 13, dtype=torch.float64, generator=g) * 3
    b = torch.randn(13, dtype=torch.float64, generator=g)
    dy = torch.randn(7, 13, dtype=torch.float64, generator=g)
    y = torch.nn.functional.gelu(x + b)
    dx = torch.ops.aten.gelu_backward(dy, x + b)
    assert np.allclose(bias_gelu.reference(x.numpy(), b.numpy()), y.numpy(), rtol=1e-12, atol=0)
    assert np.allclose(bias_gelu.reference_backward(dy.numpy(), x.numpy(), b.numpy()), dx.numpy(),
                       rtol=1e-12, atol=1e-15)
    flat = bias_gelu.reference(x.numpy().reshape(-1), b.numpy())  # a flat x, bias per column
    assert np.array_equal(flat.reshape(7, 13), bias_gelu.reference(x.numpy(), b.numpy()))


def test_the_bound_is_sixteen_float32_roundings_of_the_scale():
    x, b = np.array([[1.0, -2.0]]), np.array([0.5, 0.25])
    assert np.allclose(bias_gelu.scale(x, b), np.abs(bias_gelu.reference(x, b)) + [1.5, 1.75])
    assert np.allclose(bias_gelu.bound(np.array([1.0])), 16 * 2.0 ** -24 + 1e-30)
    assert bias_gelu.bytes_moved(10) == 80 and bias_gelu.bytes_moved(10, backward=True) == 120
