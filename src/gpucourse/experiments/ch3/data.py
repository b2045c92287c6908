"""The chapter's models and data: square MLPs (the same weights on every rank for a seed),
seeded non-uniform batches, the loss that makes micro-batch losses add up to the batch's,
the split of layers into pipeline stages, and a small transformer's gradient shapes."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

from ...check.compare import random_array
from .worker import DistributedError


# The data-parallel model: 16 square layers of 512 (4.2 M parameters, 16.8 MB of fp32
# gradients in 1 MiB weight tensors, so the bucket size decides how many all-reduces run).
DDP_WIDTH, DDP_DEPTH = 512, 16
# The model split across devices: 8 layers of 768 (4.7 M parameters), batches of 250 rows.
PIPE_WIDTH, PIPE_DEPTH, PIPE_ROWS = 768, 8, 250
# The small model of the exact-gradient checks.
CHECK_WIDTH, CHECK_DEPTH = 96, 3


def mlp_blocks(width: int, depth: int, seed: int = 0) -> list[nn.Module]:
    """``depth`` blocks of Linear(width, width) (+ ReLU except the last), same weights for a seed."""
    torch.manual_seed(seed)
    blocks: list[nn.Module] = []
    for i in range(depth):
        lin = nn.Linear(width, width)
        blocks.append(lin if i == depth - 1 else nn.Sequential(lin, nn.ReLU()))
    return blocks


def mlp(width: int, depth: int, seed: int = 0) -> nn.Sequential:
    """The chapter's model: a square MLP, identical on every rank for the same seed."""
    return nn.Sequential(*mlp_blocks(width, depth, seed))


def batch(rows: int, width: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random non-uniform inputs (mixed magnitudes) and targets, seeded."""
    x = torch.from_numpy(random_array((rows, width), np.float32, seed=seed))
    y = torch.from_numpy(random_array((rows, width), np.float32, seed=seed + 7919,
                                      kind="uniform"))
    return x, y


def loss_sum(out: torch.Tensor, target: torch.Tensor, total: int) -> torch.Tensor:
    """Squared error summed over ``out`` and divided by ``total`` elements of the whole batch.

    Summing per micro-batch and dividing by the FULL batch's size makes micro-batch losses
    add up to the full batch's mean, whatever the micro-batch sizes.
    """
    return ((out - target) ** 2).sum() / total


def split_stages(depth: int, stages: int) -> list[range]:
    """Contiguous block ranges, one per stage, as equal as possible."""
    if stages > depth:
        raise DistributedError(f"cannot split {depth} layers into {stages} stages: use at most "
                               f"{depth} workers for the pipeline.")
    bounds = np.linspace(0, depth, stages + 1).round().astype(int)
    return [range(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def tensor_bytes(tensors) -> int:
    return int(sum(t.numel() * t.element_size() for t in tensors if t is not None))


def grads_numpy(module: nn.Module) -> list[np.ndarray]:
    return [p.grad.detach().cpu().double().numpy().copy() for p in module.parameters()]


def transformer_grad_shapes(d_model: int = 128, layers: int = 8) -> list[tuple[int, ...]]:
    """Gradient shapes of a small transformer: 12 tensors per block, half of them tiny."""
    d = d_model
    block = [(3 * d, d), (3 * d,), (d, d), (d,), (d,), (d,),
             (4 * d, d), (4 * d,), (d, 4 * d), (d,), (d,), (d,)]
    return [s for _ in range(layers) for s in block]
