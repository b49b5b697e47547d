"""Window tasks, the service both partitioned modes use: a kernel's windows simulated one after
another here or as dask tasks (`map_windows`: the setup sent once to every worker, runs dealt to
the worker that comes free first), and the boundaries between windows measured with margins
settled until the overlap a whole run hides there stops growing (`settle_boundaries`).

    >>> import fuseflow
    >>> from fuseflow.partition.windows import kernel_setup, reference_values
    >>> from fuseflow.pipeline import prepared
    >>> p = fuseflow.from_mlir("tests/mlir/spmm_ikj.mlir")
    >>> data, compiled = prepared(p, "full", None, seed=1, density=0.3)
    >>> setup = kernel_setup(compiled.kernels[0], reference_values(p, data))
    >>> runs = map_windows(setup, Window.even(setup.extent, 2), None, "fast", None)
    >>> settled = settle_boundaries(setup, [runs[0].window.ranges[0][1]], 16, None, "fast", None)
    >>> len(runs), settled.margin >= MIN_MARGIN
    (2, True)
"""
from __future__ import annotations

from dataclasses import dataclass

from ..sim.window import Window
from .balance import Spread
from .windows import KernelSetup, WindowRun, run_window_of


def share(setup: KernelSetup, client):
    """`setup` as the tasks take it: sent once to every worker of `client` (its own key: an
    earlier call's may be released), or itself without a client. A local cluster's workers get it
    straight from this process, not through the scheduler (GCN CiteSeer's 99 MB: 0.07 s, not 0.3)."""
    if client is None:
        return setup
    return client.scatter(setup, broadcast=True, hash=False, direct=True if client.cluster is not None else None)


def submit_window(shared, window: Window, hw, engine: str, client, worker: str | None = None):
    """A dask future of `window`'s run from `share`'s copy, on `worker` when given (another
    worker only if that one is gone: a worker its nanny restarted has a new address)."""
    return client.submit(run_window_of, shared, window, hw, engine, pure=False,
                         **({"workers": [worker], "allow_other_workers": True} if worker else {}))


def dealt_as_freed(shared, windows: list[Window], hw, engine: str, client, spread: Spread) -> list[WindowRun]:
    """Each of `windows` run on the next of `spread`'s workers to come free, the costliest (by
    `spread`'s work) first: one run per worker at once, then one more each time a run ends. A
    worker whose runs cost more than their work said, or whose core is slower, leaves the rest to
    the others (GCN CiteSeer full, 2 windows of equal work: 2-4% apart in CPU seconds from run
    to run, the small settling runs then taken by the worker done first)."""
    from distributed import as_completed  # noqa: PLC0415 - dask is optional and slow to import

    waiting = sorted(range(len(windows)), key=lambda k: -spread.cost(windows[k]))
    runs: list[WindowRun | None] = [None] * len(windows)
    placed, ended = {}, as_completed()

    def next_on(worker: str) -> None:
        k = waiting.pop(0)
        future = submit_window(shared, windows[k], hw, engine, client, worker)
        placed[future.key] = (k, worker)
        ended.add(future)

    for worker in spread.workers[:len(waiting)]:
        next_on(worker)
    for future in ended:
        k, worker = placed.pop(future.key)
        runs[k] = future.result()
        if waiting:
            next_on(worker)
    return runs


def map_windows(setup, windows: list[Window], hw, engine: str, client,
                worker: str | Spread | None = None) -> list[WindowRun]:
    """Simulate each window of `setup`'s kernel (a `KernelSetup`, or `share`'s copy of it on
    `client`'s workers): dask tasks on `client`'s workers (on `worker` when it is an address;
    dealt to its workers as they come free when it is a `Spread`), or one after another here."""
    if client is None:
        return [run_window_of(setup, w, hw, engine) for w in windows]
    shared = share(setup, client) if isinstance(setup, KernelSetup) else setup
    if isinstance(worker, Spread):
        return dealt_as_freed(shared, windows, hw, engine, client, worker)
    return client.gather([submit_window(shared, w, hw, engine, client, worker) for w in windows])


MIN_MARGIN = 4  # a boundary's first margin (coordinates on each side) ...
SETTLED = 0.02  # ... doubled while the measured overlap still grows by more than this share
PROBES = 3  # boundaries the margin is settled on


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


def overlaps(setup: KernelSetup, edges: list[int], margin: int, hw, engine: str, client,
             shared=None, worker: str | Spread | None = None) -> list[Boundary]:
    """Each boundary at `edges` measured with `margin` coordinates on each side (the tasks take
    `shared`, `share`'s copy of `setup`, when given, and run on `worker` when given)."""
    runs = map_windows(setup if shared is None else shared,
                       [w for at in edges for w in boundary_windows(setup.extent, at, margin)], hw, engine, client,
                       worker)
    return [Boundary(*runs[3 * k:3 * k + 3]) for k in range(len(edges))]


@dataclass
class SettledMargin:
    """A settled margin, what its last doubling still added to a boundary's overlap (what the
    margin may still miss there; 0 when it was not doubled), the probe boundaries measured at it
    (by edge) and every run the settling took."""

    margin: int
    growth: float
    boundaries: dict[int, Boundary]
    runs: list[WindowRun]


def probe_edges(edges: list[int]) -> list[int]:
    """The boundaries (up to PROBES of `edges`, spread over them) a margin is settled on."""
    return [edges[k * len(edges) // PROBES] for k in range(min(PROBES, len(edges)))]


def first_margins(limit: int) -> list[int]:
    """The margins every settling measures: the first, and its double unless that passes `limit`.

        >>> first_margins(100), first_margins(6), first_margins(2)
        ([4, 8], [4], [2])
    """
    first = min(MIN_MARGIN, max(1, limit))
    return [first] + ([2 * first] if 2 * first <= limit else [])


def settle_boundaries(setup: KernelSetup, edges: list[int], limit: int, hw, engine: str, client,
                      shared=None, worker: str | Spread | None = None,
                      measured: dict[int, list[Boundary]] | None = None) -> SettledMargin:
    """The margin at which the overlap (mean over up to PROBES of `edges`) stops growing: a whole
    run can hold many outer coordinates in flight around a boundary (an unbounded channel lets
    fast nodes run ahead), so a margin narrower than that misses part of the overlap. Doubled
    from MIN_MARGIN while the overlap grows by more than SETTLED, at most `limit`; the probes'
    boundaries at the settled margin are kept (the last round measured them at it: no need to
    run them again); tasks as `overlaps`'. `measured`: the probes' boundaries already run at some
    margins (`first_margins`), taken instead of running them again."""
    probes = probe_edges(edges)
    margin, previous, growth, found, runs = min(MIN_MARGIN, max(1, limit)), None, 0.0, [], []
    while probes:
        found = (measured or {}).get(margin) or overlaps(setup, probes, margin, hw, engine, client, shared, worker)
        runs += [r for b in found for r in (b.left, b.right, b.both)]
        mean = sum(b.overlap(lambda r: r.cycles) for b in found) / len(probes)
        growth = abs(mean - previous) if previous is not None else 0.0
        if (previous is not None and mean - previous <= SETTLED * max(previous, 1.0)) or 2 * margin > limit:
            break
        previous, margin = mean, 2 * margin
    return SettledMargin(margin, growth, dict(zip(probes, found)), runs)
