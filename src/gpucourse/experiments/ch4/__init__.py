"""Chapter 4 (threads and scheduling): block size and occupancy, warp divergence, streams,
atomics and privatization, and the reduction ladder.

Every experiment checks its kernels before it times them. On a CUDA GPU the kernels run
through CuPy and are timed with CUDA events at sizes that fill the device; on the CPU they
run on the course's emulator for correctness only, and GPU behaviour comes from the
analytic models in ``gpucourse.models`` (labelled as models) and from reference
measurements taken on real GPUs (``gpucourse.reference``, key ``"ch4"``). How each kernel is
launched, its NumPy reference and its tolerance live in its home, ``gpucourse.kernels.<op>``.

One module per section: ``block_size``, ``warp_divergence``, ``stream_overlap``,
``atomics`` (the histogram), ``reduce_ladder``; ``chunk_pipeline`` is lab 4.5's measurement; ``common`` holds what several share and
``headless`` the runner's ``run_all`` and ``make gpu-check``'s ``gpu_check``. This package
exports what the notebook, the runner, the GPU check and the chapter's figures use.
"""
from ...specs import model_gpu
from .atomics import histogram, histogram_point
from .block_size import block_size_point, block_size_sweep, gpu_choices, sweep_point, sweep_table
from .chunk_pipeline import pipeline_sweep
from .common import kernel_source
from .headless import gpu_check, run_all
from .reduce_ladder import reduce_counts, reduction
from .stream_overlap import streams
from .warp_divergence import divergence

__all__ = [
    # the notebook
    "model_gpu", "block_size_sweep", "sweep_table", "block_size_point", "gpu_choices",
    "kernel_source", "divergence", "streams", "histogram", "histogram_point", "reduce_counts",
    "reduction",
    # lab 4
    "pipeline_sweep",
    # the figures (plot.ch4), the headless runner and make gpu-check
    "sweep_point", "run_all", "gpu_check",
]
