"""Sharded mode: every kernel's outer loop cut into N windows, all simulated (dask tasks when a
client is given), outputs and counts combined.

A whole run overlaps one slice's drain with the next one's fill; separate window runs each pay
both. So every boundary b between two windows is measured on its own: the `margin` coordinates
left of it (L), right of it (R), and both (LR) are simulated, and the boundary's overlap is
L + R - LR. Combined: cycles = sum(window cycles) - sum(overlaps), and the same for tokens and
counters (each run pays its own stops and `D`s, which the overlap counts too). The margins cost
about 6 x margin x (N - 1) coordinates of extra work. Tokens and counters come out exact, cycles
exact or within a few cycles per boundary on most test kernels; a kernel whose nodes carry much
from one outer coordinate to the next (a row of a fused matmul chain in flight for hundreds of
cycles, an accumulator reordered over the outer loop) keeps a gap that shrinks as the margin
grows (`docs/partitioned.md` has the measured gaps).

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
    shared = client.scatter(setup, broadcast=True)
    futures = [client.submit(run_window_of, shared, w, hw, engine, pure=False) for w in windows]
    return client.gather(futures)


MARGIN_SHARE = 256  # a boundary's margin: the outer loop's extent / (MARGIN_SHARE x windows) ...
MIN_MARGIN = 4  # ... but at least this many coordinates (at most the neighbouring windows' widths)


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


def margin_for(extent: int, windows: list[Window]) -> int:
    narrowest = min(w.width() for w in windows)
    return max(1, min(narrowest, max(MIN_MARGIN, extent // (MARGIN_SHARE * len(windows)))))


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
    margin = margin_for(setup.extent, windows)
    edges = [w.ranges[0][1] for w in windows[:-1]]
    extra = [w for at in edges for w in boundary_windows(setup.extent, at, margin)]
    runs = map_windows(setup, [*windows, *extra], hw, engine, client)
    rest = runs[len(windows):]
    return KernelShards(setup, runs[:len(windows)], [Boundary(*rest[3 * k:3 * k + 3]) for k in range(len(edges))])
