"""Chapter 7: make a transformer fast, end to end.

One small GPT-style model, profiled first, then a ladder of the tools practitioners use,
each rung a switch of :class:`Setup`, checked against the naive version before it is timed:
autocast, scaled_dot_product_attention, torch.compile, CUDA Graphs, activation
checkpointing, fused AdamW, the course's own kernel as a custom operator, and Triton.
Sections: ``model`` (the GPT and its switches), ``step`` (a training step per setup),
``checks`` (check, then time), ``profile`` (step 0), ``ladder``, ``attention`` (SDPA and
memory), ``compiling`` (graph breaks), ``custom_op``, ``triton_fusion``, ``headless``.
This module exports what the notebook, its lab and the headless runner use.
"""
from .attention import attention_memory, memory_table
from .checks import check_trainer
from .compiling import compile_summary, graph_break_demo, graph_break_table
from .custom_op import where_it_runs
from .headless import gpu_check, profile_naive, run_all
from .ladder import (RUNG_NAMES, WIDGET_RUNGS, compare, ladder_table, optimizer_comparison,
                     precision_choices, run_ladder)
from .model import GPT, GPTConfig, Setup, parameter_count
from .profile import StepProfile
from .step import Trainer
from .triton_fusion import how_it_runs as triton_runs, missing_reason as triton_missing
