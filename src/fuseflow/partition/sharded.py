"""Sharded mode: every kernel's outer loop cut into N windows, all simulated (dask tasks when a
client is given), outputs and counts combined.

A whole run overlaps one slice's drain with the next one's fill; separate window runs each pay
both. So every boundary between two windows is measured on its own: the `margin` coordinates
left of it (L), right of it (R), and both (LR) are simulated, and its overlap is L + R - LR.
The margin is widened until the overlap settles (`settle_boundaries`: a whole run can hold many
outer coordinates in flight around a boundary), at most 1/32 of a window, so the margins cost at
most about a fifth of a window per boundary. Combined: cycles = sum(window cycles) -
sum(overlaps), and the same for tokens and counters (each run pays its own stops and `D`s,
which the overlap counts too). Tokens and counters come out exact on the test programs, cycles
exact or within a few cycles per boundary on most; a kernel whose accumulator reorders its
output over the outer loop keeps a gap (`docs/partitioned.md` has the measured gaps). On a
cluster of two or more workers the windows are cut to equal work and every batch of runs is
spread over the workers (`partition.balance`).

    >>> import fuseflow
    >>> from fuseflow.fusion.compile import compile_schedule
    >>> from fuseflow.partition.windows import kernel_setup, reference_values
    >>> p = fuseflow.from_mlir("tests/mlir/spmv.mlir")
    >>> data = fuseflow.random_inputs(p, density=0.3, seed=1)
    >>> setup = kernel_setup(compile_schedule(p, "full").kernels[0], reference_values(p, data))
    >>> shards = shard_kernel(setup, 4, None, "fast", None)
    >>> whole = fuseflow.simulate(p, "full", seed=1, density=0.3)
    >>> len(shards.runs), len(shards.boundaries), shards.cycles == whole.cycles, shards.tokens == whole.tokens
    (4, 3, True, True)
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..sim.window import Window
from .balance import Spread, equal_work_windows
from .window_tasks import (
    MIN_MARGIN,
    Boundary,
    boundary_windows,
    first_margins,
    map_windows,
    probe_edges,
    settle_boundaries,
    share,
)
from .windows import KernelSetup, WindowRun, combined_outputs

SHARD_MARGIN_SHARE = 32  # sharded: margins at most a window's width / this (their runs cost ~6/32 of a window)


@dataclass
class KernelShards:
    """A kernel's window runs and its boundaries' runs, combined."""

    setup: KernelSetup
    runs: list[WindowRun]
    boundaries: list[Boundary]
    settling: list[WindowRun] = field(default_factory=list)  # every run of settling the margin

    def _combined(self, value) -> int:
        return sum(value(r) for r in self.runs) - sum(b.overlap(value) for b in self.boundaries)

    @property
    def cycles(self) -> int:
        return self._combined(lambda r: r.cycles)

    @property
    def tokens(self) -> int:
        return self._combined(lambda r: r.tokens)

    def counter(self, name: str) -> int:
        return self._combined(lambda r: r.counters.get(name, 0))

    @property
    def max_occupancy(self) -> int:
        return max(r.max_occupancy for r in self.runs)

    def outputs(self) -> dict:
        return combined_outputs(self.setup, self.runs)


MIN_WINDOW = 8  # coordinates a sharded window spans at least (narrower, its boundaries' margin runs cost more)


def window_count(shards: int, extent: int) -> int:
    """The windows a kernel of `extent` outer coordinates is cut into when `shards` are asked
    for: at most one per MIN_WINDOW coordinates (1000 shards of a 64-row loop: 8 windows, not 64
    whose 63 boundaries' runs took 24 s against 1.7 s whole).

        >>> window_count(1000, 64), window_count(3, 64), window_count(4, 5)
        (8, 3, 1)
    """
    return max(1, min(shards, extent // MIN_WINDOW))


def shard_kernel(setup: KernelSetup, shards: int, hw, engine: str, client,
                 work: np.ndarray | None = None) -> KernelShards:
    """Run `setup`'s kernel as `shards` windows and the runs that measure each boundary's
    overlap (the probes' from settling the margin, the others' at the settled margin), the
    margin settled first. On a cluster of two or more workers the windows are cut to equal
    `work` (one value per outer coordinate, e.g. `sampled.window_work`; equal widths without it)
    and every batch of runs is spread over the workers (`partition.balance`); else windows of
    equal width (fewer when the outer loop is shorter) run one after another."""
    count = window_count(shards, setup.extent)
    limit = max(MIN_MARGIN, (setup.extent // count) // SHARD_MARGIN_SHARE)
    workers = sorted(client.scheduler_info()["workers"]) if client is not None else []
    spread = None
    if len(workers) >= 2 and count >= 2:
        work = np.ones(setup.extent) if work is None else np.asarray(work, dtype=np.float64)
        windows, spread = equal_work_windows(work, count), Spread(workers, work)
    else:
        windows = Window.even(setup.extent, count)
    edges = [w.ranges[0][1] for w in windows[:-1]]
    shared = share(setup, client)
    if spread is not None:  # the windows and the first settling rounds in one batch, dealt together
        window_runs, first = windows_and_first_rounds(shared, windows, edges, limit, setup.extent, hw, engine,
                                                      client, spread)
        settled = settle_boundaries(setup, edges, limit, hw, engine, client, shared, spread, first)
        rest = [at for at in edges if at not in settled.boundaries]
        runs = window_runs + map_windows(shared, [w for at in rest for w in boundary_windows(setup.extent, at,
                                                                                              settled.margin)],
                                         hw, engine, client, spread)
    else:
        settled = settle_boundaries(setup, edges, limit, hw, engine, client, shared, spread)
        rest = [at for at in edges if at not in settled.boundaries]
        jobs = windows + [w for at in rest for w in boundary_windows(setup.extent, at, settled.margin)]
        runs = map_windows(shared, jobs, hw, engine, client, spread)  # the windows and the other boundaries at once
    measured = dict(settled.boundaries)
    measured.update({at: Boundary(*runs[len(windows) + 3 * k:len(windows) + 3 * k + 3]) for k, at in enumerate(rest)})
    return KernelShards(setup, runs[:len(windows)], [measured[at] for at in edges], settled.runs)


def windows_and_first_rounds(shared, windows: list[Window], edges: list[int], limit: int, extent: int, hw,
                             engine: str, client, spread: Spread) -> tuple[list[WindowRun], dict[int, list[Boundary]]]:
    """The windows' runs and the probes' boundaries at `first_margins` (what any settling runs),
    as one batch dealt over the workers (`dealt_as_freed`): each worker starts a window at once,
    the small runs go to whichever is done first, and no worker waits for a settling round to
    come back before its window (GCN CiteSeer full on 2 workers: 0.9 s of settling rounds first,
    before)."""
    probes = probe_edges(edges)
    margins = first_margins(limit)
    rounds = [w for m in margins for at in probes for w in boundary_windows(extent, at, m)]
    runs = map_windows(shared, windows + rounds, hw, engine, client, spread)
    found, at = {}, len(windows)
    for m in margins:
        found[m] = [Boundary(*runs[at + 3 * k:at + 3 * k + 3]) for k in range(len(probes))]
        at += 3 * len(probes)
    return runs[:len(windows)], found
