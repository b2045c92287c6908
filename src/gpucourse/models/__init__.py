"""Analytic models of GPU behaviour: occupancy, waves and bytes in flight (``occupancy``),
memory sectors and bank conflicts (``memory``), warp divergence (``divergence``), the roofline
(``roofline``), transfers and streams (``transfer``), all-reduce and pipeline bubbles
(``parallel``), training precision and memory (``training``).

Pure functions of their arguments (no GPU needed). Each model returns a small frozen record
whose printed and HTML forms say "model", so a learner never mistakes one for a measurement.
"""
from __future__ import annotations

from .base import WARP_SIZE
from .base import _bytes, _ModelResult, _seconds  # the profiler and chapter 3 show models too
from .divergence import WarpEfficiency, warp_efficiency
from .memory import (BANK_WORD_BYTES, LINE_BYTES, SECTOR_BYTES, SHARED_BANKS, BankConflicts,
                     Sectors, bank_conflicts, bank_of, sectors, strided_addresses)
from .occupancy import (OCCUPANCY_LIMITS, InFlight, Occupancy, Waves, bytes_in_flight,
                        occupancy, occupancy_by_block, waves)
from .parallel import (AllReduce, PipelineBubble, PipelineOp, pipeline_bubble,
                       ring_allreduce_time)
from .roofline import LAUNCH_OVERHEAD_S, Roofline, roof_share, roofline
from .training import (DTYPE_BYTES, OPTIMIZER_STATES, TrainingMemory, training_memory,
                       training_precision)
from .transfer import (ENGINES, TRANSFER_LATENCY_S, StreamTimeline, TimelineOp, Transfer,
                       stream_timeline, transfer_time)

__all__ = [
    "WARP_SIZE",
    "WarpEfficiency", "warp_efficiency",
    "BANK_WORD_BYTES", "LINE_BYTES", "SECTOR_BYTES", "SHARED_BANKS", "BankConflicts", "Sectors",
    "bank_conflicts", "bank_of", "sectors", "strided_addresses",
    "OCCUPANCY_LIMITS", "InFlight", "Occupancy", "Waves", "bytes_in_flight", "occupancy",
    "occupancy_by_block", "waves",
    "AllReduce", "PipelineBubble", "PipelineOp", "pipeline_bubble", "ring_allreduce_time",
    "LAUNCH_OVERHEAD_S", "Roofline", "roofline", "roof_share",
    "DTYPE_BYTES", "OPTIMIZER_STATES", "TrainingMemory", "training_memory", "training_precision",
    "ENGINES", "TRANSFER_LATENCY_S", "StreamTimeline", "TimelineOp", "Transfer",
    "stream_timeline", "transfer_time",
]
