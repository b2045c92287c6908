"""Chapter 3's float checks compare with bounds from error analysis, not with fixed tolerances:
the bounds hold for every summation order, split of the rows and thread count tried here, and
are still tight enough to catch the mistakes the checks exist for. In-process, no workers."""
import copy

import numpy as np
import pytest
import torch
import torch.nn as nn

from gpucourse import check
from gpucourse.experiments.ch3 import bounds, data


def _grads(blocks, x, y, dtype, parts=1, order=None, threads=1, total=None):
    """Gradients of loss_sum over the whole batch (of ``total`` elements), accumulated over
    ``parts`` micro-batches of the rows taken in ``order``, with ``threads`` intra-op threads
    (each changes the order of the sums)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        model = nn.Sequential(*copy.deepcopy(blocks)).to(dtype)
        if order is not None:
            x, y = x[order], y[order]
        for xs, ys in zip(x.tensor_split(parts), y.tensor_split(parts)):
            data.loss_sum(model(xs.to(dtype)), ys.to(dtype), total or x.numel()).backward()
        return [p.grad.double().numpy() for p in model.parameters()]
    finally:
        torch.set_num_threads(before)


def _case(width, depth, rows, seed=0):
    blocks = data.mlp_blocks(width, depth, seed)
    x, y = data.batch(rows, width, seed)
    return blocks, x, y, _grads(blocks, x, y, torch.float64)


def _orders(rows):
    g = torch.Generator().manual_seed(1)
    return [(1, None, 1), (4, None, 1), (rows, None, 1), (1, torch.randperm(rows, generator=g), 2),
            (3, torch.arange(rows - 1, -1, -1), 2)]


@pytest.mark.cpu_check
@pytest.mark.parametrize("width, depth, rows", [(data.CHECK_WIDTH, data.CHECK_DEPTH, 74),
                                                (data.CHECK_WIDTH, data.PIPE_DEPTH, 31)])
def test_the_gradient_bound_holds_in_float32_for_every_order(width, depth, rows):
    """The analysis itself: float32 gradients, computed in five different orders, all lie
    within the float32 bound of the float64 ones (the bound is a worst case, so far wider)."""
    blocks, x, y, ref = _case(width, depth, rows)
    bound = bounds.mlp_grad_bound(blocks, x.double(), y.double(), 1 / x.numel(), bounds.U32)
    for parts, order, threads in _orders(rows):
        got = _grads(blocks, x, y, torch.float32, parts, order, threads)
        for g, w, b in zip(got, ref, bound):
            assert np.all(np.abs(g - w) <= b.numpy())


@pytest.mark.parametrize("rows", [31, 4096])  # 4096: make gpu-check's pipeline batch
def test_float64_micro_batches_pass_the_pipeline_check_in_any_order(rows):
    blocks, x, y, ref = _case(data.CHECK_WIDTH, data.PIPE_DEPTH, rows)
    bound = [b.numpy() for b in
             bounds.mlp_grad_bound(blocks, x.double(), y.double(), 1 / x.numel(), bounds.U64)]
    names = [f"tensor {i}" for i in range(len(ref))]
    orders = _orders(rows)
    if rows > 1000:  # one row per micro-batch would take long: 8 micro-batches stand in
        orders = [(8, None, 1)] + orders[3:4]
    for parts, order, threads in orders:
        got = _grads(blocks, x, y, torch.float64, parts, order, threads)
        bounds._check_grads(got, ref, bound, names, "pipeline", "why")


@pytest.mark.parametrize("mistake", ["a lost micro-batch", "no division by the micro-batches",
                                     "one micro-batch's gradient counted twice"])
def test_the_pipeline_check_catches_mistakes_in_every_tensor(mistake):
    rows = 64
    blocks, x, y, ref = _case(data.CHECK_WIDTH, data.PIPE_DEPTH, rows)
    bound = [b.numpy() for b in
             bounds.mlp_grad_bound(blocks, x.double(), y.double(), 1 / x.numel(), bounds.U64)]
    if mistake == "a lost micro-batch":  # the last of 4
        got = _grads(blocks, x[:48], y[:48], torch.float64, parts=3, total=x.numel())
    elif mistake == "no division by the micro-batches":
        got = [4 * g for g in ref]
    else:
        first = _grads(blocks, x[:16], y[:16], torch.float64, total=x.numel())
        got = [g + f for g, f in zip(ref, first)]
    for i, (g, w, b) in enumerate(zip(got, ref, bound)):
        with pytest.raises(AssertionError, match="do not add up to the whole batch"):
            bounds._check_grads([g], [w], [b], [f"tensor {i}"], "stage 0",
                                "the micro-batches do not add up to the whole batch")


def test_a_ddp_gradient_of_one_shard_is_rejected():
    blocks, x, y, ref = _case(data.CHECK_WIDTH, data.CHECK_DEPTH, 74)
    bound = [b.numpy() for b in
             bounds.mlp_grad_bound(blocks, x.double(), y.double(), 1 / x.numel(), bounds.U64)]
    names = [n for n, _ in data.mlp(data.CHECK_WIDTH, data.CHECK_DEPTH).named_parameters()]
    shard = _grads(blocks, x[:37], y[:37], torch.float64)  # its shard's mean, not the average
    with pytest.raises(AssertionError, match=r"DDP gradient on rank 1: 0\.0\.weight differs "
                                             r"from the full-batch gradient at \(\d+, \d+\)"):
        bounds._check_grads(shard, ref, bound, names, "DDP gradient on rank 1",
                            "DDP did not average the shards' gradients")


def test_a_float32_all_reduce_with_cancellation_passes_and_a_missing_rank_fails():
    """Eight ranks whose values nearly cancel: the float32 sum of the float32-rounded data is
    about 2e-5 from the float64 sum, which a fixed atol of 1e-5 rejected though nothing is wrong."""
    terms = np.array([[1000.0 + 1 / 3], [-1000.0], [7.1], [-7.1], [0.25], [-0.25], [3e-3], [-3e-3]])
    got = np.float32(0)
    for t in terms.astype(np.float32)[:, 0]:  # one order a ring may take
        got = np.float32(got + t)
    got = np.array([got], dtype=np.float64)
    assert abs(got[0] - terms.sum()) > 1e-5 + 1e-5 * abs(terms.sum())  # the old check failed
    assert bounds._check_all_reduce(got, terms, "all_reduce") <= 1.0
    with pytest.raises(AssertionError, match="did not sum every rank"):
        bounds._check_all_reduce(got - np.float32(0.25), terms, "all_reduce")


def test_random_all_reduce_data_passes_in_reverse_order_on_many_ranks():
    p, n = 16, 4099
    terms = [check.random_array(n, np.float64, seed=r) for r in range(p)]
    got = np.zeros(n, dtype=np.float32)
    for t in reversed(terms):
        got += t.astype(np.float32)
    ratio = bounds._check_all_reduce(got.astype(np.float64), terms, "all_reduce")
    assert 0 < ratio <= 1.0
