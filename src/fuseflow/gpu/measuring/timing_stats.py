"""Timing statistics of repeated GPU runs (CUDA events, warm-up, median of the timed runs).

The statistics are plain arithmetic on the recorded samples, so they are tested without a GPU:

    >>> t = Timing.from_samples_ms([0.010] * 19 + [0.5], warmup=3)
    >>> t.median_us, t.runs, round(t.p90_us, 1)
    (10.0, 20, 10.0)
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

MIN_RUNS = 20
WARMUP = 5


@dataclass(frozen=True)
class Timing:
    """Microseconds of one kernel or function over ``runs`` timed runs after ``warmup`` untimed ones."""

    median_us: float
    min_us: float
    p10_us: float
    p90_us: float
    runs: int
    warmup: int
    samples_us: tuple = ()

    @classmethod
    def from_samples_ms(cls, samples_ms, warmup: int) -> "Timing":
        us = np.asarray(samples_ms, dtype=np.float64) * 1e3
        if len(us) < MIN_RUNS:
            raise ValueError(f"{len(us)} timed runs; the median needs at least {MIN_RUNS}")
        if not np.isfinite(us).all() or (us <= 0).any():
            raise ValueError("a timed run is not a positive finite time")
        return cls(float(np.median(us)), float(us.min()), float(np.percentile(us, 10)), float(np.percentile(us, 90)),
                   len(us), warmup, tuple(float(v) for v in us))

    def tflops(self, flops: float) -> float:
        """Throughput at the median time."""
        return flops / (self.median_us * 1e-6) / 1e12

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict | None) -> "Timing | None":
        if data is None:
            return None
        return cls(**{**data, "samples_us": tuple(data.get("samples_us", ()))})


def time_cuda(fn, torch, reps: int = 25, warmup: int = WARMUP) -> Timing:
    """Time ``fn()`` on the current CUDA stream: ``warmup`` untimed calls, then one pair of CUDA
    events around each of ``reps`` calls; the stream is synchronised once at the end."""
    for _ in range(warmup):
        fn()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return Timing.from_samples_ms([start.elapsed_time(end) for start, end in events], warmup)
