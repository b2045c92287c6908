"""The data and the model of chapter 6's inference experiments: a seeded synthetic
classification set with a held-out split, and an MLP classifier trained on it in FP32 (once per
process)."""
from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ... import device
from .common import threads_for


@dataclass
class Dataset:
    """A seeded synthetic classification set with a held-out split."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    classes: int

    @property
    def dim(self) -> int:
        return self.x_train.shape[1]


@functools.lru_cache(maxsize=8)
def make_dataset(n_train: int = 8192, n_test: int = 2048, dim: int = 64, classes: int = 10,
                 clusters_per_class: int = 3, spread: float = 0.5, seed: int = 0) -> Dataset:
    """Gaussian clusters, several per class, in ``dim`` dimensions, with a held-out split.

    Each class owns ``clusters_per_class`` random centres; a point is a centre plus Gaussian
    noise (unit variance); ``spread`` scales the centres. Classes overlap, so a good classifier
    stays well under 100 % on the held-out split (about 85 % with the defaults).
    """
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(classes * clusters_per_class, dim, generator=g) * spread
    n = n_train + n_test
    cluster = torch.randint(0, classes * clusters_per_class, (n,), generator=g)
    x = centres[cluster] + torch.randn(n, dim, generator=g)
    y = cluster % classes
    return Dataset(x[:n_train].contiguous(), y[:n_train].contiguous(), x[n_train:].contiguous(),
                   y[n_train:].contiguous(), classes)


def classifier(dim: int = 64, hidden: int = 512, classes: int = 10, seed: int = 0) -> torch.nn.Sequential:
    """The chapter's inference model: an MLP with two hidden layers (all Linear layers)."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, classes))


def accuracy(model, x: torch.Tensor, y: torch.Tensor, batch: int = 1024) -> float:
    """Share of correctly classified rows."""
    correct = 0
    with torch.inference_mode():
        for i in range(0, x.shape[0], batch):
            out = model(x[i:i + batch])
            correct += int((out.float().argmax(1) == y[i:i + batch].to(out.device)).sum())
    return correct / x.shape[0]


@functools.lru_cache(maxsize=4)
def _trained_classifier_state(hidden: int, steps: int, seed: int, dev: str):
    data = make_dataset(seed=seed)
    model = classifier(data.dim, hidden, data.classes, seed=seed).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    g = torch.Generator().manual_seed(seed)
    x, y = data.x_train.to(dev), data.y_train.to(dev)
    with threads_for(dev):
        for _ in range(steps):
            idx = torch.randint(0, x.shape[0], (128,), generator=g).to(dev)
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def trained_classifier(hidden: int = 512, steps: int = 100, seed: int = 0,
                       dev: str | None = None) -> torch.nn.Sequential:
    """The chapter's classifier trained in FP32 on :func:`make_dataset` (cached per process)."""
    dev = dev or device.torch_device()
    data = make_dataset(seed=seed)
    model = classifier(data.dim, hidden, data.classes, seed=seed).to(dev)
    model.load_state_dict(_trained_classifier_state(hidden, steps, seed, dev))
    return model.eval()
