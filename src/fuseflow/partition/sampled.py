"""Sampled mode: a kernel's cycles estimated from a stratified sample of its outer-loop windows.

The outer loop is cut into windows of equal width (at most `MAX_WINDOWS`, at least `MIN_WIDTH`
coordinates each). Each window's
auxiliary value x is its estimated work: its outer coordinates plus the stored positions under
them in every tensor its outer scanners read (the nonzeros per row and per fiber the heuristic
cost model counts). Windows are stratified by x, sampled (`estimate`), simulated, and each
sampled window's cycles less the overlap at its left boundary (measured as the sharded mode
does, with a margin settled on a few boundaries first: what a whole run overlaps of the previous
window's drain and this one's fill) are y, so that the y of all windows sum to a whole run's
cycles. The kernel's cycles: the ratio estimate of sum(y) with a 95% interval (the overlaps'
spread included). Tokens and counters are ratio estimates too (no
interval). With `error`, windows are added (doubling the sample) until the interval's half-width
is at most `error` of the estimate, or every window was simulated (then the result is exact, as
the sharded mode's).

    >>> import fuseflow
    >>> from fuseflow.partition.windows import kernel_setup, reference_values
    >>> from fuseflow.pipeline import prepared
    >>> p = fuseflow.from_mlir("tests/mlir/sddmm_masked.mlir")
    >>> data, compiled = prepared(p, "full", None, seed=2, density=0.3)
    >>> setup = kernel_setup(compiled.kernels[0], reference_values(p, data))
    >>> plan = SamplePlan(fraction=0.25, seed=0, min_width=1)  # 40 windows, at least 2 from each of 8 strata
    >>> est = sample_kernel(setup, plan, None, "fast", None)
    >>> bool(est.cycles.low <= est.cycles.total <= est.cycles.high), est.fraction
    (True, 0.4)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import UserError
from ..sim.window import Window, outer_scanners
from .estimate import RatioEstimate, allocate, draw, ratio_total, stratify
from .sharded import Boundary, map_windows, overlaps, settled_margin
from .windows import KernelSetup, WindowRun

MAX_WINDOWS = 256  # windows per kernel (fewer when the outer loop is shorter) ...
MIN_WIDTH = 64  # ... each at least this many outer coordinates (a boundary's overlap stays small beside it)
MARGIN_SHARE = 4  # a boundary's margin: at most a window's width / this
STRATA = 8
COUNTERS = ("flops", "mem_reads", "mem_writes")


@dataclass(frozen=True)
class SamplePlan:
    """What to sample: a `fraction` of the windows, or enough for a relative `error` (the 95%
    interval's half-width, 0.02 for 2%); `seed` draws them."""

    fraction: float | None = None
    error: float | None = None
    seed: int = 0
    windows: int = MAX_WINDOWS
    min_width: int = MIN_WIDTH

    def __post_init__(self):
        if (self.fraction is None) == (self.error is None):
            raise UserError("give a sampled fraction or a target error, one of them", "sampling")
        if self.fraction is not None and not 0 < self.fraction <= 1:
            raise UserError(f"sampled fraction {self.fraction} is outside (0, 1]", "--sample")
        if self.error is not None and not 0 < self.error < 1:
            raise UserError(f"target error {self.error} is outside (0, 1)", "--error", "e.g. --error 2%")

    @property
    def method(self) -> str:
        target = f"{self.fraction:.3g} of windows" if self.fraction else f"to +-{self.error:.3g}"
        return f"stratified ratio estimate ({target}, seed {self.seed}, 95% t interval)"


def window_work(setup: KernelSetup) -> np.ndarray:
    """Estimated work under each outer coordinate: 1 (the coordinate itself) plus the positions
    stored below it, at every level, in each tensor an outer scanner reads."""
    work = np.ones(setup.extent, dtype=np.float64)
    for nid in outer_scanners(setup.graph):
        tensor = setup.stored.get(setup.graph.nodes[nid].params.get("tensor"))
        if tensor is None:  # a variable's universe: no storage under it
            continue
        top = tensor.levels[0]
        if top.is_compressed:
            positions = np.arange(int(top.seg[0]), int(top.seg[1]))
            coords = np.asarray(top.crd[positions], dtype=np.int64)
        else:
            positions = coords = np.arange(int(top.dim), dtype=np.int64)
        lo, hi, below = positions, positions + 1, np.zeros(len(positions))
        for level in tensor.levels[1:]:
            lo, hi = (level.seg[lo], level.seg[hi]) if level.is_compressed else (lo * level.dim, hi * level.dim)
            below += hi - lo
        keep = coords < setup.extent
        np.add.at(work, coords[keep], below[keep])
    return work


@dataclass
class KernelSample:
    """A kernel's sampled estimate: cycles with their interval, tokens and counters."""

    setup: KernelSetup
    cycles: RatioEstimate
    tokens: int
    counters: dict[str, int]
    runs: list[WindowRun]
    fraction: float
    max_occupancy: int


def _windows(setup: KernelSetup, count: int, min_width: int) -> tuple[list[Window], np.ndarray]:
    """Windows of equal width and the estimated work of each."""
    windows = Window.even(setup.extent, max(1, min(count, setup.extent // min_width)))
    work = np.cumsum(np.concatenate([[0.0], window_work(setup)]))
    x = np.array([work[w.ranges[0][1]] - work[w.ranges[0][0]] for w in windows])
    return windows, x


def _grow(labels, x, picked: np.ndarray, n: int, rng) -> np.ndarray:
    """`picked` with windows added per stratum up to an allocation of `n` in all."""
    fresh = np.ones(len(x), dtype=bool)
    fresh[picked] = False
    extra = []
    for h, k in allocate(x, labels, n).items():
        have = int((labels[picked] == h).sum())
        pool = np.flatnonzero((labels == h) & fresh)
        extra.append(rng.choice(pool, size=min(len(pool), max(0, k - have)), replace=False))
    return np.sort(np.concatenate([picked, *extra])).astype(np.int64)


def sample_kernel(setup: KernelSetup, plan: SamplePlan, hw, engine: str, client) -> KernelSample:
    """Estimate `setup`'s kernel from a stratified sample of its windows (see the module doc)."""
    windows, x = _windows(setup, plan.windows, plan.min_width)
    labels = stratify(x, STRATA)
    rng = np.random.default_rng(plan.seed)
    first = math.ceil((plan.fraction or 0.01) * len(windows))
    picked = draw(labels, allocate(x, labels, first), rng)
    edges = [w.ranges[0][1] for w in windows[:-1]]
    margin = settled_margin(setup, sorted(rng.permutation(edges).tolist()), max(1, min(w.width() for w in windows)
                                                                                 // MARGIN_SHARE), hw, engine, client)
    runs: dict[int, WindowRun] = {}
    left: dict[int, Boundary | None] = {}
    while True:
        todo = [int(i) for i in picked if int(i) not in runs]
        for i, run in zip(todo, map_windows(setup, [windows[i] for i in todo], hw, engine, client)):
            runs[i] = run
        inner = [i for i in todo if i > 0]
        left.update(zip(inner, overlaps(setup, [windows[i].ranges[0][0] for i in inner], margin, hw, engine, client)))
        left.update({i: None for i in todo if i == 0})
        est = _estimate(x, labels, picked, runs, left, lambda r: r.cycles)
        if plan.error is None or est.half_width <= plan.error or len(picked) == len(windows):
            break
        picked = _grow(labels, x, picked, 2 * len(picked), rng)
    tokens = round(_estimate(x, labels, picked, runs, left, lambda r: r.tokens).total)
    counters = {c: round(_estimate(x, labels, picked, runs, left, lambda r, c=c: r.counters.get(c, 0)).total)
                for c in COUNTERS}
    sampled = [runs[int(i)] for i in picked]
    return KernelSample(setup, est, tokens, counters, sampled, len(picked) / len(windows),
                        max(r.max_occupancy for r in sampled))


def _estimate(x, labels, picked, runs, left: dict, value) -> RatioEstimate:
    """The ratio estimate of a whole run's `value`: each window's value less the overlap at its
    left boundary (what a whole run does not pay twice there), summed over all windows."""
    y = np.array([value(runs[int(i)]) - (left[int(i)].overlap(value) if left[int(i)] else 0) for i in picked],
                 dtype=np.float64)
    return ratio_total(x, labels, picked, y)
