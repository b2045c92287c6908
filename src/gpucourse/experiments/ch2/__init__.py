"""Chapter 2 (memory management): transfers, resident data, the transpose ladder, allocation
in a hot loop, and memory footprint by precision. Every experiment checks before it times.

On a CUDA GPU the transfers, the training loops, the kernels and the memory pools are
measured; on the CPU the kernels run on the emulator for correctness, transfers and overlap
come from labelled models (``models.transfer_time``, ``models.stream_timeline``), and the
allocation and footprint experiments are measured for real.

One module per section: ``transfers`` (1), ``loops`` (2), ``transpose`` (3), ``allocation``
(4), ``memory_footprint`` (5); ``headless`` runs them all; ``common`` holds what they share.
The kernels' launches are in their homes, ``kernels.transpose``, ``kernels.tile_copy`` and
``kernels.copy``. This package exports what the notebook, the runner and ``make gpu-check``
call.
"""
from ...display import Table
from .allocation import allocation_experiment, allocation_table, pool_demo, toy_pool_run
from .common import reference_note, target_gpu
from .headless import gpu_check, run_all
from .loops import check_loops, loop_timelines, step_model, time_loops
from .memory_footprint import (check_footprint, footprint_pair, footprints, largest_batches,
                               peak_memory)
from .transfers import transfer_at, transfer_sweep, transfer_table, zero_copy_model
from .transpose import transpose_config, transpose_ladder

__all__ = ["Table", "allocation_experiment", "allocation_table", "check_footprint", "check_loops",
           "footprint_pair", "footprints", "gpu_check", "largest_batches", "loop_timelines",
           "peak_memory", "pool_demo", "reference_note", "run_all", "step_model", "target_gpu",
           "time_loops", "toy_pool_run", "transfer_at", "transfer_sweep", "transfer_table",
           "transpose_config", "transpose_ladder", "zero_copy_model"]
