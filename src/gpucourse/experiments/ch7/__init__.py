"""Chapter 7: make a transformer fast, end to end.

One small GPT-style model, profiled first, then a ladder of the tools practitioners use,
each rung a switch of :class:`Setup`, checked against the naive version before it is timed:
autocast, scaled_dot_product_attention, torch.compile, CUDA Graphs, activation
checkpointing, fused AdamW, the course's own kernel as a custom operator, and Triton.
Sections: ``model`` (the GPT and its switches), ``step`` (a training step per setup),
``checks`` (check, then time), ``profile`` (step 0), ``ladder``, ``attention`` (SDPA and
memory), ``compiling`` (graph breaks), ``custom_op``, ``triton_fusion``, ``headless``.
"""
from .attention import attention_memory, memory_table
from .checks import check_optimizer, check_replay, check_trainer, naive_reference
from .compiling import compile_summary, graph_break_demo, graph_break_table
from .custom_op import check_kernels_on_emulator, where_it_runs
from .headless import gpu_check, profile_naive, run_all
from .ladder import (RUNG_NAMES, WIDGET_RUNGS, compare, graphs_model, ladder_table, precision_choices,
                     optimizer_comparison, run_ladder, run_setup, rungs)
from .model import GPT, GPTConfig, Setup, make_batch, naive_attention, parameter_count
from .profile import CATEGORIES, StepProfile, profile_trainer
from .step import Trainer, build, make_optimizer
from .triton_fusion import how_it_runs as triton_runs, missing_reason as triton_missing
