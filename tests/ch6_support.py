"""What chapter 6's test modules share: the chapter's quick ``run_all`` results, computed once
per test process (about half a minute on a 2-core CPU), and stand-ins for ``torch._int_mm``.

On x86 CPUs without VNNI, ``torch._int_mm`` can run through oneDNN's u8 x s8 kernels, which
add 128 to each signed activation and sum pairs of products in INT16 with saturation
(vpmaddubsw). Where ``torch._int_mm`` does not call oneDNN it is exact, so the tests replace
it with :func:`saturating_int_mm`, a stand-in that computes what those kernels compute.
"""
import functools

import torch

from gpucourse.experiments import ch6


@functools.lru_cache(maxsize=1)
def quick_results() -> dict:
    """``ch6.run_all(quick=True)``; tests read it and never change it."""
    return ch6.run_all(quick=True)


def saturating_int_mm(a, b):
    """a @ b as oneDNN's u8 x s8 kernels without VNNI compute it: a + 128 (unsigned), pairs of
    products summed and saturated to INT16, pair sums added in INT32, 128 * sum(b) taken off."""
    u, w = a.to(torch.int64) + 128, b.to(torch.int64)
    if u.shape[1] % 2:
        u, w = torch.nn.functional.pad(u, (0, 1)), torch.nn.functional.pad(w, (0, 0, 0, 1))
    out = torch.zeros(u.shape[0], w.shape[1], dtype=torch.int64)
    step = 2 * max(1, 2 ** 22 // (u.shape[0] * w.shape[1]))  # (m, pairs, n) blocks of 4M values
    for p in range(0, u.shape[1], step):
        pairs = (u[:, p:p + step:2, None] * w[None, p:p + step:2]
                 + u[:, p + 1:p + step:2, None] * w[None, p + 1:p + step:2])
        out += pairs.clamp(-32768, 32767).sum(1)
    return (out - 128 * w.sum(0)).to(torch.int32)


def exact_int_mm(a, b):
    return (a.to(torch.int64) @ b.to(torch.int64)).to(torch.int32)
