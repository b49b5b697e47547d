"""Kernels run on a CUDA GPU: compiled, checked against PyTorch and timed (`kernel_runner`), every
benchmark chain in its own process (`measured_bench`), the timing statistics (`timing_stats`) and
the records of what was measured (`measurements`).

    >>> from fuseflow.gpu.measuring.timing_stats import Timing
    >>> Timing.from_samples_ms([0.01] * 20, warmup=5).median_us
    10.0
"""
