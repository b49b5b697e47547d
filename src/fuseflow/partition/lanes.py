"""Sharded windows laid out on a cluster's workers so the margins' runs go beside the windows.

Settling a boundary's margin is a chain of small runs (each round waits for the one before),
and every boundary needs its L, R and LR runs. Run after the windows (or before them) they add
to the critical path; so one worker, the *lane*, takes them all, and the windows are cut so each
worker's share of the outer loop, the lane's margin runs counted in coordinates, is the same:
window k runs on worker k mod W, and the lane is the last window's worker. The margin runs'
cost is not known before they run (the margin settles after two rounds or only at its
limit); it is taken as two rounds' (`margin_cost`), the common case (GCN CiteSeer `full` and
Cora `partial` settle at a margin of 8, where the runs' own start and drain about double
their coordinates' cost), and a lane whose margin goes further ends that much later.

    >>> [(str(w), k) for w, k in lane_windows(1000, 2, 2, 100)]
    [('0:550', 0), ('550:1000', 1)]
    >>> margin_cost(42, 4, 0)  # rounds at 4 and 8; up to 4, 8, 16, 32 (240) at the limit
    48
"""
from __future__ import annotations

from ..sim.window import Window


def margin_cost(limit: int, first: int, rest: int) -> int:
    """Coordinates a lane's margin runs are expected to take: two rounds (`first`, then doubled
    within `limit`), each round's L, R and LR runs 4 margins, and `rest` boundaries besides
    the probe measured at the second margin."""
    first = max(1, min(first, limit))
    second = 2 * first if 2 * first <= limit else first
    rounds = [first, second] if second != first else [first]
    return 4 * sum(rounds) + 4 * rounds[-1] * rest


def lane_windows(extent: int, shards: int, workers: int, extra: int) -> list[tuple[Window, int]]:
    """`shards` windows covering 0..extent-1 in order, each with the worker it runs on (window k
    on k mod `workers`), cut so every worker gets the same number of coordinates counting the
    lane's `extra` (the last window's worker runs the margins)."""
    lane = (shards - 1) % workers
    count = [len(range(k, shards, workers)) for k in range(workers)]
    share = (extent + extra) / min(workers, shards)
    lane_width = max(float(count[lane]), share - extra) / count[lane]
    other = (extent - lane_width * count[lane]) / max(1, shards - count[lane])
    widths = [lane_width if k % workers == lane else other for k in range(shards)]
    cuts, at = [0], 0.0
    for w in widths[:-1]:
        at += w
        cuts.append(min(extent - (shards - len(cuts)), max(cuts[-1] + 1, round(at))))
    cuts.append(extent)
    return [(Window(((cuts[k], cuts[k + 1]),)), k % workers) for k in range(shards)]
