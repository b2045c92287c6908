"""Correctness before timing, in three parts by meaning:

- ``check.compare``: numerical comparison (``assert_close``, ``compare_report``, with the
  tolerances by dtype of ``precision.tolerance``) and the seeded, awkward inputs every check
  runs on (``random_array``, ``awkward_sizes``, ``awkward_shapes``);
- ``check.lab``: the lab harness (``Exercise`` and its one-block failure, the answer-type
  helpers, a learner's CUDA C on the emulator);
- ``check.thresholds``: the acceptance records of the chapters' ``gpu_check()``.

Chapter lab checkers live in ``check.chN`` (and ``check.timing``); they may use ``kernels``,
``models``, ``profiler`` and ``precision`` but never ``experiments``. This package exports
what notebooks, solutions, experiments, tools and tests use.
"""
from __future__ import annotations

from .compare import (assert_close, awkward_shapes, awkward_sizes, compare_report,
                      random_array, rng)
from .lab import (Exercise, check_function, expect_failure, learner_kernel, number_answer,
                  run_learner_kernel, whole_answer)
from .thresholds import THRESHOLD_RULES, at_least, at_most, limit_text, more_than, threshold

__all__ = ["assert_close", "awkward_shapes", "awkward_sizes", "compare_report", "random_array",
           "rng", "Exercise", "check_function", "expect_failure", "learner_kernel",
           "number_answer", "run_learner_kernel", "whole_answer", "THRESHOLD_RULES", "at_least",
           "at_most", "limit_text", "more_than", "threshold"]
