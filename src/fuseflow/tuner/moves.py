"""The tuner's candidate generator: the candidates the search has yet to compile, best first.

- Base candidates (`Proposals.plan`): every grouping of the ops (`space.groupings`) under each
  layout rule, with default orders and formats. Where there are few, all are queued alike (and
  compiled at once); where there are more, they are queued by a cheap *composed* estimate (each
  distinct group compiled once beside unfused neighbours, `GroupTable`); where there are too
  many to enumerate, grouping moves from the presets (two groups merged, one split) are queued.
- Neighbours of a good simulated candidate (`Proposals.neighbours`): each group's other valid
  orders (the cheapest by the compiler's loop-work measure), each tensor written between
  kernels in the other level formats, grouping moves, and lanes where `SpaceSpec.lanes` allows;
  queued before every base candidate.

A candidate is proposed once: `seen` holds every candidate met, compiled or not.

    >>> import fuseflow
    >>> from fuseflow.tuner.context import TuneContext
    >>> from fuseflow.tuner.costs import load_calibration
    >>> from fuseflow.tuner.space import SpaceSpec
    >>> ctx = TuneContext.from_program(fuseflow.from_mlir("tests/mlir/shared_filter.mlir"))
    >>> queue = Proposals(ctx, SpaceSpec(layouts=("induced",)), load_calibration())
    >>> queue.plan([], deadline=float("inf"))
    >>> queue.space, len(queue)
    ({'groupings': 4, 'mode': 'enumerated'}, 4)
    >>> queue.pop()[1].schedule
    'fusion=[T,Y,Z] layout=induced'
"""
from __future__ import annotations

import heapq
import itertools
import math
import time

from ..errors import FuseflowError
from .space import (
    Candidate,
    SpaceSpec,
    count_groupings,
    grouping_moves,
    groupings,
    level_formats,
    ordered_groups,
    other_orders,
    written_between,
)

DIRECT_LIMIT = 300  # base candidates compiled up front when there are at most this many
NEIGHBOUR = -1.0  # the priority of a good candidate's neighbours: before every base candidate


class GroupTable:
    """Composed estimates of groupings: each distinct group compiled once per layout beside
    unfused neighbours (its kernel's calibrated estimate), a grouping's estimate the sum over its
    groups. A group that does not compile there counts as infinitely costly (queued last)."""

    def __init__(self, ctx, cal, all_groupings: list, layouts, deadline: float):
        self.ctx, self.cal, self.costs = ctx, cal, {}
        singles = [[n] for n in ctx.graph.names]
        groups = sorted({tuple(g) for gs in all_groupings for g in gs if len(g) > 1}, key=len)
        for layout in layouts:
            self._context(singles, layout, None)
            for g in groups:
                if time.perf_counter() > deadline:
                    return
                self._context([list(g)] + [s for s in singles if s[0] not in g], layout, g)

    def _context(self, groups, layout: str, wanted) -> None:
        ctx = self.ctx
        cand = Candidate(ordered_groups(ctx.canonical, groups), layout, block=ctx.block)
        try:
            compiled = ctx.compile(cand.schedule)
        except FuseflowError:
            if wanted is not None:
                self.costs[(wanted, layout)] = math.inf
            return
        for kernel, cost in zip(compiled.kernels, ctx.costs(compiled)):
            g = tuple(kernel.group)
            if wanted is None or g == tuple(wanted):
                self.costs[(g, layout)] = self.cal.kernel_cycles(cost)

    def estimate(self, groups, layout: str) -> float:
        total = 0.0
        for g in groups:
            g = tuple(g)
            if (g, layout) in self.costs:
                total += self.costs[(g, layout)]
            else:  # not reached in time: its ops as singletons
                total += sum(self.costs.get(((n,), layout), 0.0) for n in g)
        return total


class Proposals:
    """The queue of candidates not yet compiled (see the module): a heap of (priority, n,
    candidate, origin), the least priority first, ties in the order queued."""

    def __init__(self, ctx, spec: SpaceSpec, cal):
        self.ctx, self.spec, self.cal = ctx, spec, cal
        self.heap: list = []
        self.counter = itertools.count()
        self.seen: set = set()  # candidates met (compiled or not)
        self.space: dict = {}  # how many groupings, and whether enumerated
        self.table_seconds = 0.0  # compiling the composed estimates' groups

    def __len__(self) -> int:
        return len(self.heap)

    def head(self) -> float:
        """The priority of the next candidate (the queue is not empty)."""
        return self.heap[0][0]

    def push(self, cand: Candidate, priority: float, origin: str) -> None:
        if cand not in self.seen:
            heapq.heappush(self.heap, (priority, next(self.counter), cand, origin))

    def pop(self) -> tuple[float, Candidate, str] | None:
        """The next candidate not met yet, with its priority and origin; None when none is left."""
        while self.heap:
            pre, _, cand, origin = heapq.heappop(self.heap)
            if cand not in self.seen:
                return pre, cand, origin
        return None

    def plan(self, presets: list[Candidate], deadline: float, say=None) -> None:
        """Queue the base candidates (the module); `presets`: where to walk from when the
        groupings are too many to enumerate; the composed estimates stop at `deadline`."""
        graph, spec = self.ctx.graph, self.spec
        count = count_groupings(graph, spec.max_groupings + 1)
        if count > spec.max_groupings:
            self.space = {"groupings": f"more than {spec.max_groupings:,}", "mode": "moves from the presets"}
            for cand in presets:
                self.moves(cand)
            return
        found = list(groupings(graph))
        self.space = {"groupings": len(found), "mode": "enumerated"}
        table = None
        if len(found) * len(spec.layouts) > DIRECT_LIMIT:
            before = self.ctx.compile_seconds
            table = GroupTable(self.ctx, self.cal, found, spec.layouts, deadline)
            self.table_seconds = self.ctx.compile_seconds - before
        for groups in found:
            for layout in spec.layouts:
                cand = Candidate(ordered_groups(self.ctx.canonical, groups), layout, block=self.ctx.block)
                self.push(cand, table.estimate(groups, layout) if table else 0.0, "grouping")
        if table is not None and say is not None:
            say(f"{len(found):,} groupings x {len(spec.layouts)} layouts queued by composed estimates")

    def moves(self, cand: Candidate, priority: float = 0.0) -> None:
        """Queue the grouping moves from `cand` (its unchanged groups keep their refinements)."""
        if not self.spec.moves:
            return
        # enumerated groupings are queued under every layout already; walking, try each layout
        layouts = (cand.layout,) if self.space.get("mode") == "enumerated" else self.spec.layouts
        for groups in grouping_moves(self.ctx.graph, cand.groups):
            regrouped = cand.regrouped(ordered_groups(self.ctx.canonical, groups))
            for layout in layouts:
                new = regrouped if layout == cand.layout else \
                    Candidate(regrouped.groups, layout, block=cand.block)  # refinements were for the other layout
                self.push(new, priority, "move")

    def neighbours(self, cand: Candidate, compiled, out_of_time=lambda: False) -> None:
        """Queue the neighbours of a good simulated candidate (`compiled`: its compilation)."""
        spec = self.spec
        found: list[tuple[Candidate, str]] = []
        kernels = [k for k in compiled.kernels if k.region is not None]
        for kernel in kernels:
            if out_of_time():
                break
            found += [(cand.with_order(kernel.index, o), "order") for o in other_orders(kernel, spec.orders)]
        if spec.formats:
            for _, name, meta in written_between(compiled):
                found += [(cand.with_format(name, f), "format") for f in level_formats(meta.levels, meta.mode_order)]
        if spec.lanes > 1:
            found += [(c, "lanes") for c in self.lane_variants(cand, kernels)]
        for new, origin in found:
            self.push(new, NEIGHBOUR, origin)
        self.moves(cand, NEIGHBOUR)

    def lane_variants(self, cand: Candidate, kernels) -> list[Candidate]:
        """Each kernel's outermost loop dealt over the lanes allowed (one kernel at a time, and
        all at once); kernels run one after another, so each may use them all."""
        out, every = [], cand
        for kernel in kernels:
            var = kernel.order[0]
            lanes = min(self.spec.lanes, int(kernel.region.extent.get(var, 1)))
            if lanes < 2 or dict(cand.pars).get(kernel.index):
                continue
            out.append(cand.with_par(kernel.index, ((var, lanes),)))
            every = every.with_par(kernel.index, ((var, lanes),))
        if every != cand and every not in out:
            out.append(every)
        return out
