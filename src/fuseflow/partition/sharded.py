"""Sharded mode: every kernel's outer loop cut into N windows, all simulated (dask tasks when a
client is given), outputs and counts combined.

A whole run overlaps one slice's drain with the next one's fill; separate window runs each pay
both. So every boundary between two windows is measured on its own: the `margin` coordinates
left of it (L), right of it (R), and both (LR) are simulated, and its overlap is L + R - LR.
The margin is widened until the overlap settles (`settled_margin`: a whole run can hold many
outer coordinates in flight around a boundary), at most 1/32 of a window, so the margins cost at
most about a fifth of a window per boundary. Combined: cycles = sum(window cycles) -
sum(overlaps), and the same for tokens and counters (each run pays its own stops and `D`s,
which the overlap counts too). Tokens and counters come out exact on the test programs, cycles
exact or within a few cycles per boundary on most; a kernel whose accumulator reorders its
output over the outer loop keeps a gap (`docs/partitioned.md` has the measured gaps).

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

from dataclasses import dataclass

from ..sim.window import Window
from .windows import KernelSetup, WindowRun, combined_outputs, run_window_of


def map_windows(setup: KernelSetup, windows: list[Window], hw, engine: str, client) -> list[WindowRun]:
    """Simulate each window of `setup`'s kernel: dask tasks on `client`'s workers (the kernel's
    stored inputs sent to each worker once), or one after another here without a client."""
    if client is None:
        return [run_window_of(setup, w, hw, engine) for w in windows]
    shared = client.scatter(setup, broadcast=True, hash=False)  # its own key: an earlier call's may be released
    futures = [client.submit(run_window_of, shared, w, hw, engine, pure=False) for w in windows]
    return client.gather(futures)


MIN_MARGIN = 4  # a boundary's first margin (coordinates on each side) ...
SETTLED = 0.02  # ... doubled while the measured overlap still grows by more than this share
PROBES = 3  # boundaries the margin is settled on
SHARD_MARGIN_SHARE = 32  # sharded: margins at most a window's width / this (their runs cost ~6/32 of a window)


@dataclass
class Boundary:
    """The runs that measure what a whole run overlaps at a boundary between two windows."""

    left: WindowRun
    right: WindowRun
    both: WindowRun

    def overlap(self, value) -> int:
        return value(self.left) + value(self.right) - value(self.both)


def boundary_windows(extent: int, at: int, margin: int) -> list[Window]:
    """The left, right and joint windows of `margin` coordinates on each side of `at`."""
    lo, hi = max(0, at - margin), min(extent, at + margin)
    return [Window(((lo, at),)), Window(((at, hi),)), Window(((lo, hi),))]


def overlaps(setup: KernelSetup, edges: list[int], margin: int, hw, engine: str, client) -> list[Boundary]:
    """Each boundary at `edges` measured with `margin` coordinates on each side."""
    runs = map_windows(setup, [w for at in edges for w in boundary_windows(setup.extent, at, margin)], hw, engine,
                       client)
    return [Boundary(*runs[3 * k:3 * k + 3]) for k in range(len(edges))]


def settled_margin(setup: KernelSetup, edges: list[int], limit: int, hw, engine: str, client) -> int:
    """The margin at which the overlap (mean over up to PROBES of `edges`) stops growing: a whole
    run can hold many outer coordinates in flight around a boundary (an unbounded channel lets
    fast nodes run ahead), so a margin narrower than that misses part of the overlap. Doubled
    from MIN_MARGIN while the overlap grows by more than SETTLED, at most `limit`."""
    return settle_margin(setup, edges, limit, hw, engine, client)[0]


def settle_margin(setup: KernelSetup, edges: list[int], limit: int, hw, engine: str, client) -> tuple[int, float]:
    """`settled_margin`, and the cycles its last doubling still added to a boundary's overlap
    (what a margin may still miss there; 0 when it was not doubled)."""
    probes = [edges[k * len(edges) // PROBES] for k in range(min(PROBES, len(edges)))]
    margin, previous, growth = min(MIN_MARGIN, max(1, limit)), None, 0.0
    while probes:
        mean = sum(b.overlap(lambda r: r.cycles) for b in overlaps(setup, probes, margin, hw, engine, client)) / \
            len(probes)
        growth = abs(mean - previous) if previous is not None else 0.0
        if (previous is not None and mean - previous <= SETTLED * max(previous, 1.0)) or 2 * margin > limit:
            break
        previous, margin = mean, 2 * margin
    return margin, growth


@dataclass
class KernelShards:
    """A kernel's window runs and its boundaries' runs, combined."""

    setup: KernelSetup
    runs: list[WindowRun]
    boundaries: list[Boundary]

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


def shard_kernel(setup: KernelSetup, shards: int, hw, engine: str, client) -> KernelShards:
    """Run `setup`'s kernel as `shards` windows of equal width (fewer when its outer loop is
    shorter) and the runs that measure each boundary's overlap."""
    windows = Window.even(setup.extent, max(1, min(shards, setup.extent)))
    edges = [w.ranges[0][1] for w in windows[:-1]]
    limit = max(MIN_MARGIN, min(w.width() for w in windows) // SHARD_MARGIN_SHARE)
    margin = settled_margin(setup, edges, limit, hw, engine, client)
    extra = [w for at in edges for w in boundary_windows(setup.extent, at, margin)]
    runs = map_windows(setup, [*windows, *extra], hw, engine, client)
    rest = runs[len(windows):]
    return KernelShards(setup, runs[:len(windows)], [Boundary(*rest[3 * k:3 * k + 3]) for k in range(len(edges))])
