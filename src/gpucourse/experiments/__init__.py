"""One module per chapter (``ch0`` … ``ch6``; ``ch7`` is a package, one module per section): functions that run an experiment and return
tidy results. Notebooks, the headless runner and the tests call them."""

CHAPTERS = {
    0: "start_here",
    1: "architecture_and_bottlenecks",
    2: "memory_management",
    3: "parallelism",
    4: "threads_and_scheduling",
    5: "accelerated_libraries",
    6: "mixed_precision_and_quantization",
    7: "transformer_end_to_end",
}
