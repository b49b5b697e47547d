"""Sharded windows laid out on a cluster's workers so the margins' runs go beside the windows.

Settling a boundary's margin is a chain of small runs (each round waits for the one before),
and every boundary needs its L, R and LR runs. Run after the windows (or before them) they add
to the critical path; so one worker, the *lane*, takes them all, and the windows are cut so each
worker's share of the outer loop, the lane's margin runs counted in coordinates, is the same:
window k runs on worker k mod W, and the lane is the last window's worker. The margin runs'
cost is not known before they run: the margin settles after two rounds or only at its limit
(GCN CiteSeer `full`, 2 shards: at 8 with the boundary at 1736, at 32 at 1688; the runs' own
fill and drain add about as much again), so it is taken halfway (`margin_cost`), and the lane
ends early or late by at most about half the difference.

    >>> [(str(w), k) for w, k in lane_windows(1000, 2, 2, 100)]
    [('0:550', 0), ('550:1000', 1)]
    >>> margin_cost(42, 4, 0)  # rounds at 4 and 8 (48 coordinates) up to 4, 8, 16, 32 (240)
    144
"""
from __future__ import annotations

from ..sim.window import Window


def margin_cost(limit: int, first: int, rest: int) -> int:
    """Coordinates a lane's margin runs are expected to take (each round's L, R and LR runs
    take 4 margins; `rest` boundaries besides the one probe are measured at the last margin):
    halfway between settling after two rounds (`first`, then doubled) and doubling up to `limit`."""
    rounds, margin = [], max(1, min(first, limit))
    while True:
        rounds.append(margin)
        if 2 * margin > limit:
            break
        margin *= 2
    least, most = rounds[:2], rounds
    return 2 * (sum(least) + least[-1] * rest) + 2 * (sum(most) + most[-1] * rest)


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
