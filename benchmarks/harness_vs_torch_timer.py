#!/usr/bin/env python3
"""Time the same CPU operations with gpucourse.bench and torch.utils.benchmark.Timer.

Not a test: prints each op's median from both harnesses and their ratio. A ratio near 1
says the course's harness measures what PyTorch's reference harness measures.

    python benchmarks/harness_vs_torch_timer.py
"""
from __future__ import annotations

import torch
import torch.utils.benchmark as tb

import gpucourse as gc

torch.manual_seed(0)


def cases():
    x = torch.randn(1 << 20)
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    small = torch.randn(64)
    return {
        "sum of 1M floats": (lambda: x.sum(), {"x": x}, "x.sum()"),
        "256x256 matmul": (lambda: a @ b, {"a": a, "b": b}, "a @ b"),
        "relu of 1M floats": (lambda: torch.relu(x), {"x": x, "torch": torch}, "torch.relu(x)"),
        "tiny add (64 floats)": (lambda: small + 1, {"small": small}, "small + 1"),
    }


def main():
    torch.set_num_threads(1)  # one thread: less noise from the other core
    print(f"{'operation':<24} {'gc.bench':>12} {'torch Timer':>12} {'ratio':>7}")
    for name, (fn, glob, stmt) in cases().items():
        ours = gc.bench.benchmark(fn, label=name, min_time_s=0.5, backend="cpu")
        theirs = tb.Timer(stmt=stmt, globals=glob, num_threads=1).blocked_autorange(min_run_time=0.5)
        ratio = ours.median_s / theirs.median
        print(f"{name:<24} {ours.median_s * 1e6:>10.2f}us {theirs.median * 1e6:>10.2f}us "
              f"{ratio:>7.3f}")


if __name__ == "__main__":
    main()
