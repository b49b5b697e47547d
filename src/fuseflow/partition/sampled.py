"""Sampled mode: a kernel's cycles estimated from a stratified sample of its outer-loop windows.

The outer loop is cut into windows of one width (at most about `MAX_WINDOWS`, at least
`MIN_WIDTH` coordinates each; the last may be narrower). Each window's auxiliary value x is the
heuristic's estimate of the kernel on that window (`partition.window_cost`; given by the caller,
else the stored work under the window). Window 0 (it alone pays the pipeline's fill) and the
last one are simulated always; the others are stratified by x and sampled (`estimate`). A
sampled window is simulated from `margin` coordinates before it (so it starts with the pipeline
as full as inside a whole run), less a run of the margin alone: its y, what it adds to a whole
run, so that the y of all windows sum to a whole run's cycles. The margin is settled on a few
boundaries first (`window_tasks.settle_boundaries`), then doubled on the sampled windows themselves until
the estimate stops moving (`settle_on_sample`: a whole run can hide a heavy window's extra work
long after it, which a short margin shows again in every window's y). The kernel's cycles: the
regression estimate of sum(y) with a 95% interval, widened by what a sample cannot show
(`Population.widened`: a cycle per window, and on the side the estimate moved to, what the
margin's last doubling still moved it). Tokens and counters
are such estimates too (no interval). With `error`, the least sample comes first; then windows
are added, as many as its spread says the target needs (`next_size`, at least half as many again),
until the interval's half-width is at most `error` of the estimate, every window was simulated
(then the result is exact up to the margins), or the sample would pass `max_fraction`. The margin
is settled on the first sample only; the windows added later are simulated at the settled margin
(and the interval widened by the settling's last move, scaled to the estimate). A kernel
of fewer than `SAMPLE_FROM` windows runs whole instead (`too_small`): a sample of it would cost
about as much.

    >>> import fuseflow
    >>> from fuseflow.partition.windows import kernel_setup, reference_values
    >>> from fuseflow.pipeline import prepared
    >>> p = fuseflow.from_mlir("tests/mlir/sddmm_masked.mlir")
    >>> data, compiled = prepared(p, "full", None, seed=2, density=0.3)
    >>> setup = kernel_setup(compiled.kernels[0], reference_values(p, data))
    >>> plan = SamplePlan(fraction=0.25, seed=0, min_width=1, whole_below=0)  # 40 windows: 0 and 3 strata of 3
    >>> est = sample_kernel(setup, plan, None, "fast", None)
    >>> bool(est.cycles.low <= est.cycles.total <= est.cycles.high), est.fraction
    (True, 0.25)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..errors import NotSupported, UserError
from ..sim.window import Window, outer_extent, outer_scanners
from .stratified import RatioEstimate, allocate, draw, regression_total, stratify
from .window_tasks import map_windows, settle_boundaries
from .windows import KernelSetup, WindowRun

MAX_WINDOWS = 256  # windows per kernel (fewer when the outer loop is shorter) ...
MIN_WIDTH = 64  # ... each at least this many outer coordinates (a boundary's overlap stays small beside it)
MARGIN_SHARE = 2  # a window's first margin: at most its width / this (settled on a few boundaries) ...
MARGIN_CAP = 4  # ... then doubled on the sample itself up to this many windows' width
SETTLED = 1e-3  # the sample's margin is settled when doubling it moves the estimate by at most this share of it
STRATA = 8
LEAST_SAMPLED = 6  # windows drawn at the least besides windows 0 and last (fewer give no usable spread)
GROWTH = 1.5  # `error`: a grown sample has at least this many times the last one's windows ...
OVERSIZE = 1.2  # ... and this many times what the last one's spread says the target needs
SAMPLE_FROM = 64  # windows: a kernel with fewer runs whole (its least sample would cost about as much)
NARROWEST = 8  # outer coordinates a window split for its cost (`narrowed`) keeps at least
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
    whole_below: int = SAMPLE_FROM  # windows; 0 samples any kernel (the validation benchmark does)
    max_fraction: float = 1.0  # `error`: the sample grows no further than this share of the windows
    window_cycles: float | None = None  # windows estimated above this many cycles are split (`narrowed`)

    def __post_init__(self):
        if (self.fraction is None) == (self.error is None):
            raise UserError("give a sampled fraction or a target error, one of them", "sampling")
        if self.fraction is not None and not 0 < self.fraction <= 1:
            raise UserError(f"sampled fraction {self.fraction} is outside (0, 1]", "--sample")
        if self.error is not None and not 0 < self.error < 1:
            raise UserError(f"target error {self.error} is outside (0, 1)", "--error", "e.g. --error 2%")

    def first_share(self, windows: int) -> int:
        """Windows the first sample asks for: the fraction, or none (`error`: the least sample,
        grown as its spread asks)."""
        return math.ceil(self.fraction * windows) if self.fraction is not None else 0

    @property
    def method(self) -> str:
        target = f"{self.fraction:.3g} of windows" if self.fraction else f"to +-{self.error:.3g}" + \
            (f" within {self.max_fraction:.2g} of windows" if self.max_fraction < 1 else "")
        return f"stratified regression estimate ({target}, seed {self.seed}, 95% t interval)"


def window_work(setup: KernelSetup) -> np.ndarray:
    """Stored work under each outer coordinate: 1 (the coordinate itself) plus the positions
    stored below it, at every level, in each tensor an outer scanner reads (the auxiliary value
    where the heuristic cannot be evaluated on windows)."""
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


def window_count(extent: int, plan: SamplePlan) -> int:
    """How many windows an outer loop of `extent` coordinates is cut into: at most `plan.windows`,
    each at least `plan.min_width` coordinates (one at least).

        >>> window_count(1024, SamplePlan(error=0.02)), window_count(17716, SamplePlan(error=0.02))
        (16, 256)
    """
    return max(1, min(plan.windows, extent // plan.min_width))


@dataclass(frozen=True)
class WholeKernel:
    """A kernel a sample plan runs whole: too few windows of its outer loop to sample."""

    index: int
    windows: int
    load: float  # its estimated token events (tile elements for blocked schedules)


def whole_kernels(compiled, loads: dict, plan: SamplePlan) -> list[WholeKernel]:
    """The kernels of a compiled schedule that `plan` runs whole for having fewer than
    `plan.whole_below` windows (no outer scanner: one window), each with its load from `loads`
    (kernel index -> estimated token events). GPT-3 Small's feed-forward kernels, 1,024 rows,
    are 16 windows each; its attention kernels, the 12 heads outermost, one.

        >>> import fuseflow
        >>> from fuseflow.pipeline import prepared
        >>> p = fuseflow.from_mlir("tests/mlir/sddmm_masked.mlir")
        >>> _, compiled = prepared(p, "full", None, seed=2, density=0.3)
        >>> [(w.index, w.windows, w.load) for w in whole_kernels(compiled, {0: 5.0}, SamplePlan(error=0.1))]
        [(0, 1, 5.0)]
    """
    out = []
    for kernel in compiled.kernels:
        if kernel.is_reshape:
            continue
        try:
            windows = window_count(outer_extent(kernel.graph), plan)
        except NotSupported:
            windows = 1
        if windows < plan.whole_below:
            out.append(WholeKernel(kernel.index, windows, float(loads.get(kernel.index, 0.0))))
    return out


def largest_whole(whole: list[WholeKernel], count: int = 3) -> str:
    """The `count` largest of `whole_kernels`' kernels as a reason names them.

        >>> largest_whole([WholeKernel(2, 16, 3e10), WholeKernel(4, 1, 5e9)])
        'k2 (16 windows, 3e+10), k4 (1 windows, 5e+09)'
    """
    return ", ".join(f"k{w.index} ({w.windows} windows, {w.load:.2g})"
                     for w in sorted(whole, key=lambda w: -w.load)[:count])


def kernel_windows(setup: KernelSetup, plan: SamplePlan) -> list[Window]:
    """The windows a kernel is sampled from: `window_count` of them, all of one width but the
    last (which may be narrower: windows of unequal widths would add their difference to the
    sample's spread)."""
    count = window_count(setup.extent, plan)
    width = -(-setup.extent // count)
    return [Window(((lo, min(setup.extent, lo + width)),)) for lo in range(0, setup.extent, width)]


def narrowed(windows: list[Window], x: np.ndarray, plan: SamplePlan) -> tuple[list[Window], np.ndarray]:
    """`windows` split into pieces (of a window, at most one coordinate apart in width; at least
    `NARROWEST` coordinates) so that the average piece is estimated at about `plan.window_cycles`, each
    piece's x its window's x by its share of the width; unchanged without `plan.window_cycles` or
    where they are within it. A kernel whose rows each cost a scan of a whole dimension (fully
    fused GCN over 736,389 nodes: 47M cycles a window of 64 rows) then samples rows, not blocks.

        >>> plan = SamplePlan(error=0.02, window_cycles=100.0)
        >>> pieces, x = narrowed([Window(((0, 32),)), Window(((32, 64),))], np.array([320.0, 320.0]), plan)
        >>> [w.ranges[0] for w in pieces], x.tolist()
        ([(0, 10), (10, 21), (21, 32), (32, 42), (42, 53), (53, 64)], [100.0, 110.0, 110.0, 100.0, 110.0, 110.0])
    """
    coordinates = sum(w.width() for w in windows)
    if plan.window_cycles is None or not windows or not coordinates:
        return windows, x
    per_coordinate = float(np.sum(x)) / coordinates
    width = max(NARROWEST, int(plan.window_cycles // max(per_coordinate, 1e-12)))
    if width >= windows[0].width():
        return windows, x
    pieces, shares = [], []
    for window, value in zip(windows, x):
        (lo, hi), = window.ranges
        count = max(1, (hi - lo) // width)  # pieces at least `width` wide, at most one coordinate apart
        bounds = lo + (hi - lo) * np.arange(count + 1) // count
        pieces += [Window(((int(a), int(b)),)) for a, b in zip(bounds[:-1], bounds[1:])]
        shares += [value * (b - a) / (hi - lo) for a, b in zip(bounds[:-1], bounds[1:])]
    return pieces, np.asarray(shares, dtype=np.float64)


def too_small(windows: list[Window], plan: SamplePlan) -> str | None:
    """Why a kernel of these windows runs whole rather than sampled, or None."""
    if len(windows) < plan.whole_below:
        return (f"{len(windows)} windows of its outer loop, too few for a sample to cost less than the whole "
                f"(sampled from {plan.whole_below})")
    return None


@dataclass
class Population:
    """A kernel's windows, each one's auxiliary value x, its stratum, and the margin of
    coordinates simulated before a window so that it starts as it would inside a whole run.
    Window 0 (it alone pays the pipeline's fill) and the last window (it may be narrower) are
    strata of their own, always simulated."""

    windows: list[Window]
    x: np.ndarray
    labels: np.ndarray
    margin: int
    strata: int  # strata the rest of the windows were cut into
    growth: float = 0.0  # cycles the first margin's last doubling still added at a probed boundary

    def widened(self, est: RatioEstimate, move: float = 0.0) -> RatioEstimate:
        """`est` with what the sample cannot show added to its interval: a cycle per window on
        both sides (each starts and ends on a cycle of its own) and, on the side the estimate
        moved to, `move`: what the margin's last doubling on the sample still changed (a longer
        margin would move it on, by about as much or less: `settle_on_sample`)."""
        slack = len(self.windows)
        return RatioEstimate(est.total, est.low - slack - max(move, 0.0), est.high + slack + max(-move, 0.0),
                             est.sampled, est.population, est.strata, est.quantile)

    def margins(self) -> list[int]:
        """The margins a sample may be simulated with: the first, doubled up to MARGIN_CAP windows' width."""
        levels = [self.margin]
        while 0 < 2 * levels[-1] <= MARGIN_CAP * self.windows[0].width():
            levels.append(2 * levels[-1])
        return levels

    def first_sample(self, plan: SamplePlan) -> int:
        return min(len(self.windows), first_size(len(self.windows), plan))


def first_size(windows: int, plan: SamplePlan) -> int:
    """Windows the first sample simulates: windows 0 and last, and at least LEAST_SAMPLED more."""
    return max(plan.first_share(windows), 2 + LEAST_SAMPLED)


def strata_of(x: np.ndarray, plan: SamplePlan) -> tuple[np.ndarray, int]:
    """Each window's stratum (window 0 and the last window alone in strata of their own, simulated
    always) and how many strata the rest were cut into: one per window the first sample draws
    from them, at most STRATA (deep strata follow y's curve in x, which one slope cannot; strata
    of one draw share their variance with a neighbour: `estimate.regression_total`)."""
    strata = max(1, min(STRATA, first_size(len(x), plan) - 2))
    labels = np.zeros(len(x), dtype=np.int64)
    if len(x) > 2:
        labels[1:-1] = stratify(x[1:-1], strata) + 1
    labels[-1] = labels.max() + 1 if len(x) > 1 else 0
    return labels, strata


def population(setup: KernelSetup, plan: SamplePlan, x: np.ndarray | None, hw, engine: str, client,
               windows: list[Window] | None = None) -> Population:
    """The kernel's `windows` (default: `kernel_windows`) stratified by `x` (one value per window;
    the stored work under each window when None), and the margin settled on a few boundaries."""
    windows = windows if windows is not None else kernel_windows(setup, plan)
    if x is None:
        work = np.cumsum(np.concatenate([[0.0], window_work(setup)]))
        x = np.array([work[w.ranges[0][1]] - work[w.ranges[0][0]] for w in windows])
    labels, strata = strata_of(np.asarray(x, dtype=np.float64), plan)
    edges = [w.ranges[0][1] for w in windows[:-1]]
    limit = max(1, windows[0].width() // MARGIN_SHARE)  # the last window may be narrower: not its width
    settled = settle_boundaries(setup, edges, limit, hw, engine, client) if edges else None
    margin, growth = (settled.margin, settled.growth) if settled else (0, 0.0)
    return Population(windows, np.asarray(x, dtype=np.float64), labels, margin, strata, growth)


@dataclass
class WindowValue:
    """What window w adds to a whole run: its run started `margin` coordinates early, less the
    run of those coordinates alone (window 0 starts at the loop's start: no margin)."""

    run: WindowRun
    prefix: WindowRun | None

    def value(self, of) -> float:
        return of(self.run) - (of(self.prefix) if self.prefix is not None else 0)


def window_values(setup: KernelSetup, pop: Population, indices: list[int], hw, engine: str,
                  client, margin: int | None = None) -> dict[int, WindowValue]:
    """The values of the windows at `indices` (two runs each, one for window 0), simulated
    `margin` coordinates early (`pop.margin` when None)."""
    margin = pop.margin if margin is None else margin
    jobs, keys = [], []
    for i in indices:
        lo, hi = pop.windows[i].ranges[0]
        start = max(0, lo - margin)
        jobs.append(Window(((start, hi),)))
        keys.append((i, "run"))
        if lo > 0:
            jobs.append(Window(((start, lo),)))
            keys.append((i, "prefix"))
    runs = dict(zip(keys, map_windows(setup, jobs, hw, engine, client)))
    return {i: WindowValue(runs[(i, "run")], runs.get((i, "prefix"))) for i in indices}


@dataclass
class SettledEstimate:
    """A sample's estimate at the margin where doubling it stopped moving the estimate, and the
    last doubling's move (the previous margin's estimate less this one's; 0 with one margin)."""

    estimate: RatioEstimate
    margin: int
    move: float


def _settled(before: RatioEstimate, after: RatioEstimate) -> bool:
    return abs(before.total - after.total) <= SETTLED * abs(after.total)


def settle_on_sample(pop: Population, picked: np.ndarray, cycles_at, start: int | None = None,
                     tolerance: float | None = None) -> SettledEstimate:
    """Double the margin on the sampled windows themselves (`cycles_at(margin)`: their values
    simulated with that margin) from `start` (the first margin when None) until the estimate
    moves by at most SETTLED of itself, at most up to MARGIN_CAP windows. A whole run can hide a
    heavy window's extra work in the bottleneck's stream long after the window (a stage that is
    not the bottleneck falls behind and catches up later): a margin shorter than that history
    misses it and every window's value comes out high. The sample is stratified by work, so it
    holds the heavy windows the probed boundaries may miss. (Measured, the bias does not halve
    with each doubling: a move small beside the interval does not say the rest is small, so only
    a settled estimate or the cap stops it.) With a `tolerance` (an `error` plan's: half its
    target), each further doubling up to the cap is taken to move the estimate as much as the
    last one did: it stops once the last move times the doublings left (and itself) is at most
    `tolerance` of the estimate, and that product is the move the interval is widened by.

    >>> pop = Population([Window(((0, 8),))] * 10, np.ones(10), np.arange(10), margin=2, strata=8)
    >>> s = settle_on_sample(pop, np.arange(10), lambda m: np.full(10, 100.0 + 64 / m))
    >>> pop.margins(), s.margin, s.move
    ([2, 4, 8, 16, 32], 32, 20.0)
    """
    levels = pop.margins()
    k = levels.index(pop.margin if start is None else start)

    def at(level: int) -> RatioEstimate:
        return regression_total(pop.x, pop.labels, picked, np.asarray(cycles_at(levels[level]), dtype=np.float64))

    def still(before: RatioEstimate, est: RatioEstimate, level: int) -> float:
        """What doubling on from `level` would still move the estimate."""
        return (before.total - est.total) * (len(levels) - level if tolerance is not None else 1)

    est, before = at(k), at(k - 1) if k > 0 else None
    while k + 1 < len(levels) and (before is None or (
            not _settled(before, est) if tolerance is None else
            abs(still(before, est, k)) > tolerance * abs(est.total))):
        before, est, k = est, at(k + 1), k + 1
    return SettledEstimate(est, levels[k], still(before, est, k) if before is not None else 0.0)


def _drop_outputs_below(known: dict[tuple[int, int], WindowValue], margin: int) -> None:
    """Runs at a margin below `margin` (but window 0's, which has none) keep their cycles, tokens
    and counters but not their outputs: the margin only grows, and only the runs at the margin
    settled on are verified. (GraphSAGE's unfused t11*W over the MAG twin: 2 GB of outputs per
    margin level, four levels.)"""
    for key, value in known.items():
        if 0 < key[0] < margin and value.run.outputs:
            known[key] = WindowValue(replace(value.run, outputs={}),
                                     replace(value.prefix, outputs={}) if value.prefix is not None else None)


def estimate_total(pop: Population, picked: np.ndarray, values: dict[int, WindowValue], of) -> RatioEstimate:
    """The regression estimate of a whole run's `of` (cycles, tokens, a counter) from the picked windows."""
    y = np.array([values[int(i)].value(of) for i in picked], dtype=np.float64)
    return regression_total(pop.x, pop.labels, picked, y)


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


def _grow(labels, x, picked: np.ndarray, n: int, rng) -> np.ndarray:
    """`picked` with windows added per stratum up to an allocation of `n` in all; where the
    allocation falls short of `n` (strata taken whole, or sampled beyond their share before),
    the rest drawn from the windows not yet picked."""
    fresh = np.ones(len(x), dtype=bool)
    fresh[picked] = False
    extra = []
    for h, k in allocate(x, labels, n).items():
        have = int((labels[picked] == h).sum())
        pool = np.flatnonzero((labels == h) & fresh)
        extra.append(rng.choice(pool, size=min(len(pool), max(0, k - have)), replace=False))
    grown = np.concatenate([picked, *extra]).astype(np.int64)
    fresh[grown] = False
    rest = np.flatnonzero(fresh)
    short = min(len(rest), n - len(grown))
    return np.sort(np.concatenate([grown, rng.choice(rest, size=short, replace=False)] if short > 0 else [grown]))


def draw_sample(pop: Population, n: int, rng: np.random.Generator) -> np.ndarray:
    """Window 0, the last window and `n - 2` more, dealt to the strata in proportion to their total x."""
    counts = allocate(pop.x, pop.labels, n)
    counts[0] = counts[int(pop.labels[-1])] = 1
    return draw(pop.labels, counts, rng)


def next_size(picked: int, settled: RatioEstimate, widened: RatioEstimate, plan: SamplePlan, windows: int) -> int:
    """Windows the next sample takes (`error` plans): the spread's half-width shrinks as one over
    the root of the sample's size, so the target needs `picked` x (spread / room)^2, where the
    spread is taken at the normal quantile (the small sample's t falls as it grows) and the room is
    the target less what the margin's move added (at least half the target); at least GROWTH times
    `picked`, at most `max_fraction` of the `windows`.

    >>> est = RatioEstimate(100.0, 96.0, 104.0, 8, 1000, 6, quantile=1.96)
    >>> next_size(8, est, est, SamplePlan(error=0.02), 1000)  # +-4% to +-2%: four times, and 20% more
    39
    """
    room = max(plan.error - (widened.half_width - settled.half_width), plan.error / 2)
    wanted = picked * (settled.normal_half_width / room) ** 2 * OVERSIZE
    return int(min(math.floor(plan.max_fraction * windows), max(math.ceil(GROWTH * picked), math.ceil(wanted))))


def sample_kernel(setup: KernelSetup, plan: SamplePlan, hw, engine: str, client,
                  x: np.ndarray | None = None, windows: list[Window] | None = None) -> KernelSample:
    """Estimate `setup`'s kernel from a stratified sample of its `windows` (default:
    `kernel_windows`; see the module doc); `x`: the heuristic's estimate of each, if known."""
    pop = population(setup, plan, x, hw, engine, client, windows)
    rng = np.random.default_rng(plan.seed)
    picked = draw_sample(pop, pop.first_sample(plan), rng)
    known: dict[tuple[int, int], WindowValue] = {}  # (margin, window) -> its value; window 0 has no margin

    def values_at(margin: int) -> dict[int, WindowValue]:
        key = {int(i): (0 if pop.windows[int(i)].ranges[0][0] == 0 else margin, int(i)) for i in picked}
        todo = [i for i, k in key.items() if k not in known]
        known.update({key[i]: v for i, v in window_values(setup, pop, todo, hw, engine, client, margin).items()})
        _drop_outputs_below(known, max(m for m, _ in known))
        return {i: known[k] for i, k in key.items()}

    def cycles_at(margin: int) -> list[float]:
        return [v.value(setup.cycles_of) for v in values_at(margin).values()]

    settled = settle_on_sample(pop, picked, cycles_at,  # the margin: settled on the first sample alone
                               tolerance=plan.error / 2 if plan.error else None)
    move_share = settled.move / settled.estimate.total if settled.estimate.total else 0.0
    while True:
        values = values_at(settled.margin)
        est = pop.widened(settled.estimate, settled.move)
        size = next_size(len(picked), settled.estimate, est, plan, len(pop.windows)) if plan.error else 0
        if plan.error is None or est.half_width <= plan.error or len(picked) == len(pop.windows) or \
                size <= len(picked):
            break
        picked = _grow(pop.labels, pop.x, picked, size, rng)  # grows: size > picked, and windows are left
        grown = regression_total(pop.x, pop.labels, picked, np.asarray(cycles_at(settled.margin)))
        settled = SettledEstimate(grown, settled.margin, move_share * grown.total)
    tokens = round(estimate_total(pop, picked, values, lambda r: r.tokens).total)
    counters = {c: round(estimate_total(pop, picked, values, lambda r, c=c: r.counters.get(c, 0)).total)
                for c in COUNTERS}
    runs = [r for i in picked for r in (values[int(i)].run, values[int(i)].prefix) if r is not None]
    return KernelSample(setup, est, tokens, counters, runs, len(picked) / len(pop.windows),
                        max(r.max_occupancy for r in runs))
