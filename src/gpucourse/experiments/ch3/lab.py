"""Lab support: a learner's ``average_gradients`` run in every worker, with what its checker
(``check.ch3.check_average_gradients``) compares."""
from __future__ import annotations

import ast
from typing import Callable

from .data import CHECK_DEPTH, CHECK_WIDTH
from .pool import Workers, _pool
from .tasks import _task_manual_average
from .worker import function_payload


def try_average_gradients(fn: Callable, pool: Workers | int | None = None, per_worker: int = 23,
                          seed: int = 1) -> dict:
    """Run a learner's ``average_gradients(model, world_size)`` in every worker.

    Each rank computes the gradients of its own shard, calls ``fn`` (which must leave the
    average over all ranks in every ``p.grad``), and returns them with the local gradients
    and the single-process full-batch reference, for ``check.ch3.check_average_gradients``.
    """
    pool = _pool(pool)
    payload = function_payload(fn)
    res = pool.run(_task_manual_average, payload, CHECK_WIDTH, CHECK_DEPTH, per_worker, seed)
    return {"world_size": pool.n, "names": res[0]["names"],
            "manual": [r["manual"] for r in res], "local": [r["local"] for r in res],
            "reference": res[0]["reference"],
            "reads_world_size": _reads_world_size(payload[2]) if payload[0] == "source" else None}


def _reads_world_size(source: str) -> bool:
    """Whether a function's body uses its ``world_size``, ``dist.get_world_size()`` or an
    averaging all-reduce (``ReduceOp.AVG``): one that divides by a fixed 2 is right on two
    workers only."""
    body = ast.parse(source).body[0].body
    names = {"world_size", "get_world_size", "AVG"}
    return any((isinstance(n, ast.Name) and n.id in names) or
               (isinstance(n, ast.Attribute) and n.attr in names)
               for stmt in body for n in ast.walk(stmt))
