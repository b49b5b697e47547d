"""Kernels run on a CUDA GPU: compiled, checked against PyTorch and timed (`kernel_runner`), the timing
statistics (`timing_stats`), the records of what was measured (`measurements`), and the staged GPU run:
its jobs and code paths (`kernel_jobs`), the append-only result lines (`result_log`), the child that runs
jobs (`kernel_child`) under a watchdog (`watchdog`), compute-sanitizer (`sanitizer`), the stages
(`device_run`) and the chains rebuilt from the result lines (`result_summary`).

    >>> from fuseflow.gpu.measuring.timing_stats import Timing
    >>> Timing.from_samples_ms([0.01] * 20, warmup=5).median_us
    10.0
"""
