"""Sharded windows cut to equal work, and each batch of runs spread over a cluster's workers.

A kernel's outer coordinates do not cost the same: a row of a graph's adjacency with more
neighbours carries more token events. Windows of equal width leave one worker busy after the
other is done (GCN CiteSeer `full`, 2 windows: 9% more work per coordinate in the first half).
So the windows are cut where the work under the outer loop reaches equal shares
(`equal_work_windows`; the work is `sampled.window_work`, the stored positions under each outer
coordinate, which follows the simulation's CPU seconds within about 2% of the total at any cut
on GCN CiteSeer `full`), and every batch of runs (a settling round's L, R and LR runs, then the
windows and the other boundaries' runs) is dealt to the workers largest first, each run to the
worker with the least work so far (`spread`): the margin is settled on all workers at once,
before the windows, so no worker's share is a guess.

    >>> [str(w) for w in equal_work_windows(np.array([1, 1, 1, 1, 4, 4]), 2)]
    ['0:5', '5:6']
    >>> spread([Window(((0, 2),)), Window(((2, 5),)), Window(((5, 6),))], np.array([1, 1, 1, 1, 4, 4]), ["a", "b"])
    ['b', 'a', 'b']
"""
from __future__ import annotations

from dataclasses import dataclass

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


def spread(windows: list[Window], work: np.ndarray, workers: list[str]) -> list[str]:
    """The worker each of `windows` runs on: largest first, each to the worker with the least
    work so far (ties to the earlier worker), so the batch ends as evenly as its runs allow."""
    before = prefix_work(work)
    costs = [window_cost(w, before) for w in windows]
    load = [0.0] * len(workers)
    placed = [""] * len(windows)
    for k in sorted(range(len(windows)), key=lambda k: -costs[k]):
        least = min(range(len(workers)), key=lambda j: load[j])
        placed[k] = workers[least]
        load[least] += costs[k]
    return placed


@dataclass(frozen=True)
class Spread:
    """Where each batch of runs goes: dealt over `workers` by `work` (`spread`)."""

    workers: list[str]
    work: np.ndarray

    def pins(self, windows: list[Window]) -> list[str]:
        return spread(windows, self.work, self.workers)
