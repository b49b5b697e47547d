"""Sharded windows cut to equal work, and what each run costs when a batch is dealt over a
cluster's workers.

A kernel's outer coordinates do not cost the same: a row of a graph's adjacency with more
neighbours carries more token events. Windows of equal width leave one worker busy after the
other is done (GCN CiteSeer `full`, 2 windows: 9% more work per coordinate in the first half).
So the windows are cut where the work under the outer loop reaches equal shares
(`equal_work_windows`; the work is `sampled.window_work`, the stored positions under each outer
coordinate, which follows the simulation's CPU seconds within about 2% of the total at any cut
on GCN CiteSeer `full`). What is left (that 2%, and two workers' cores running 1-4% apart) is
taken up as the runs go: every batch (the windows with the first settling rounds, later rounds,
the other boundaries' runs) is dealt costliest first, one run to each worker, then the next to
whichever worker is done first (`window_tasks.dealt_as_freed`, costs from `Spread`).

    >>> [str(w) for w in equal_work_windows(np.array([1, 1, 1, 1, 4, 4]), 2)]
    ['0:5', '5:6']
    >>> Spread(["a", "b"], np.array([1, 1, 1, 1, 4, 4])).cost(Window(((3, 5),)))
    5.0
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..sim.window import Window


def prefix_work(work: np.ndarray) -> np.ndarray:
    """Work before each coordinate: entry c is the sum of `work[:c]` (one more entry than `work`)."""
    return np.concatenate([[0.0], np.cumsum(np.asarray(work, dtype=np.float64))])


def equal_work_windows(work: np.ndarray, count: int) -> list[Window]:
    """`count` windows covering the outer loop in order (fewer when it is shorter), each cut at
    the coordinate where the sum of `work` (one value per coordinate) comes nearest an equal
    share; every window keeps at least one coordinate."""
    extent = len(work)
    count = max(1, min(count, extent))
    before = prefix_work(work)
    cuts = [0]
    for k in range(1, count):
        target = before[-1] * k / count
        at = int(np.searchsorted(before, target))  # first cut with at least the target before it
        if at > 0 and target - before[at - 1] < before[min(at, extent)] - target:
            at -= 1
        cuts.append(min(extent - (count - k), max(cuts[-1] + 1, at)))
    cuts.append(extent)
    return [Window(((cuts[k], cuts[k + 1]),)) for k in range(count)]


def window_cost(window: Window, before: np.ndarray) -> float:
    """The work under `window` (`before`: `prefix_work` of the kernel's work)."""
    return float(sum(before[hi] - before[lo] for lo, hi in window.ranges))


@dataclass(frozen=True)
class Spread:
    """Where a batch of runs goes: over `workers`, the costliest by `work` (one value per outer
    coordinate) first (`window_tasks.dealt_as_freed`)."""

    workers: list[str]
    work: np.ndarray

    @cached_property
    def before(self) -> np.ndarray:
        """`prefix_work` of `work`, made once."""
        return prefix_work(self.work)

    def cost(self, window: Window) -> float:
        return window_cost(window, self.before)
