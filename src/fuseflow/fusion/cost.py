"""The order search's cost of a loop nest: how many iterations each op instance runs.

`nest_cost` sums, over the instances, the iterations of each one's nest (an op recomputed inside
a consumer's extra loop pays for every iteration of it): by sizes alone, or, where data statistics
(`Region.stats`) show compressed inputs, the coordinates the nest streams. `loop_work` breaks
ties between equal-size orders by assuming a fixed density for compressed levels. An
accumulator holding more partial sums than fit on chip (`ACCUMULATOR_CAPACITY`) pays for each of
them once more (`spilled_cost`): they go out to memory and come back.

Why this is not `fusion.estimate.CostModel`: the search evaluates this cost on *prefixes* of
orders, millions of times per region, and prunes with it, so it must be cheap and a lower bound
of every order that extends the prefix (an instance's cost only grows as loops are placed). The
heuristic estimates a finished, lowered kernel (FLOPs, memory words, tokens, the busiest node's
steps and cycles) with densities propagated through producers' merges and the written formats;
that is neither monotone over prefixes nor cheap. Both read nests from `Nesting`, what an
intersection looks up rather than streams from `merge.located_operands`, and level densities
from `ir.stats.DataStats`.

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.region import Region
    >>> from fuseflow.fusion.nesting import Nesting
    >>> r = Region.build(from_mlir("tests/mlir/matmul_chain.mlir"), ["T", "O"])
    >>> nest_cost(Nesting(r, ["i", "l", "k", "j"])) < nest_cost(Nesting(r, ["i", "j", "l", "k"]))
    True
"""
from __future__ import annotations

import math

from .instances import LeafInput
from .region import Region

SPARSE_DENSITY = 0.1  # assumed share of a compressed level's coordinates that are stored
ACCUMULATOR_CAPACITY = 1 << 16  # partial sums an accumulator holds on chip (256 KiB of 4-byte words)


def loop_work(region: Region, inst, nest: list[str]) -> float:
    """Steps of an instance's loop nest: each level visits every coordinate of its variable for
    every surviving iteration of the levels above it, and a level over a compressed level of a
    stored operand lets `SPARSE_DENSITY` of them through (a nest's prefix gives a lower bound);
    0 for an instance without compressed operands.
    Breaks ties of `nest_cost`: A(i,k)·X(k,j) with A sparse costs less in order i,k,j than i,j,k."""
    sparse = region.index.sparse_vars(inst)
    if not sparse:
        return 0.0  # only sparse operands make one equal-size order cheaper than another
    work, reach = 0.0, 1.0
    for v in nest:
        reach *= region.extent[v]
        work += reach
        if v in sparse:
            reach *= SPARSE_DENSITY
    return work


def _kept_by(region: Region, leaves: dict, pos: dict[str, int]) -> dict[str, float]:
    """Per variable, the least share of its coordinates that the compressed `leaves` keep."""
    kept: dict[str, float] = {}
    for leaf in leaves.values():
        for v, share in region.index.kept(leaf, pos).items():
            kept[v] = min(kept.get(v, 1.0), share)
    return kept


def loops_cost(region: Region, inst, loops, pos: dict[str, int]) -> float:
    """Iterations of `inst` in `loops`: the product of their extents; with data statistics
    (`region.stats`), each extent times the share of its coordinates that the compressed data
    read by the instance or its consumers keeps (at least one iteration per loop)."""
    extent = region.extent
    leaves = region.index.filter_leaves[inst.id] if region.stats is not None else None
    if not leaves:
        return math.prod(extent[v] for v in loops)
    kept = _kept_by(region, leaves, pos)
    return math.prod(max(1.0, extent[v] * kept.get(v, 1.0)) for v in loops)


def streamed_cost(region: Region, inst, nest: list[str], pos: dict[str, int]) -> float:
    """With data statistics: coordinates the nest of `inst` streams. At each loop, the iterations
    of the loops above times the longest fiber one of its operands streams there (a computed
    operand, or a dense one the intersection does not look up, streams every coordinate, even
    where an intersection keeps few); the loops below iterate what the intersection keeps
    (`loops_cost`). A(i,k)·W(k,j) with W sparse costs less in order i,k,j than i,j,k, where A's
    dense rows are streamed once per j."""
    extent = region.extent
    leaves = region.index.filter_leaves[inst.id]
    kept = _kept_by(region, leaves, pos)
    longest: dict[str, float] = {}
    for k, operand in enumerate(inst.operands):
        stored = isinstance(operand, LeafInput) and operand.leaf in leaves
        shares = region.index.kept(region.leaves[operand.leaf], pos) if stored else {}
        for v in inst.access(k):
            if isinstance(v, str) and k not in region.index.located(inst, v):
                longest[v] = max(longest.get(v, 0.0), shares.get(v, 1.0))
    points = total = 1.0
    for v in nest:
        total += points * extent[v] * longest.get(v, kept.get(v, 1.0))
        points *= max(1.0, extent[v] * kept.get(v, 1.0))
    return max(total, points)


def finished_cost(region: Region, inst, nest: list[str], pos: dict[str, int]) -> float:
    """`streamed_cost` where the data's densities filter the instance's loops, else `loops_cost`."""
    if region.stats is None or not region.index.filter_leaves[inst.id]:
        return loops_cost(region, inst, nest, pos)
    return streamed_cost(region, inst, nest, pos)


def nest_cost(nesting) -> float:
    """Iterations of every op instance in its nest, an estimate of the work an order implies (an
    op recomputed inside a consumer's extra loop pays for every iteration of it): by sizes alone,
    or, where data statistics show compressed inputs, the coordinates streamed (`finished_cost`);
    plus the partial sums an accumulator beyond the chip spills (`spilled_cost`)."""
    return sum(finished_cost(nesting.region, inst, nesting.nest[inst.id], nesting.pos) +
               spilled_cost(nesting, inst) for inst in nesting.region.instances)


def spilled_cost(nesting, inst) -> float:
    """Partial sums an accumulator of `inst` sends out to memory and back: where the partial sums
    it holds at once (the extents of the loops inside its reduction variable multiplied: a fiber
    for order 1, a matrix for order 2) exceed `ACCUMULATOR_CAPACITY`, all of them, each time the
    loops outside the reduction variable come round; else 0. For an instance of a prefix, a
    lower bound: the loops known to come inside its placed reduction variable (its own unplaced
    ones among them) and those placed outside it. t(i,j) = sum[k] a(i,k) * w(j,k) over 736,389
    rows i and 349 columns j holds the whole result in order k,j,i and a column of it in j,k,i
    (both spill all 257M), a row in i,k,j (349: none)."""
    plan = nesting.plan.get(inst.id)
    red = [v for v in inst.reduce_vars if v in nesting.pos]
    if (plan is not None and not plan.accumulates) or len(inst.reduce_vars) != 1 or not red:
        return 0.0
    first, own = nesting.pos[red[0]], set(inst.local_vars)
    scope = nesting.nest[inst.id] if plan is not None else nesting.scope[inst.id]
    inner = [v for v in scope if v not in inst.reduce_vars and
             (nesting.pos[v] > first if v in nesting.pos else v in own)]
    held = math.prod(nesting.region.extent[v] for v in inner)
    if held <= ACCUMULATOR_CAPACITY:
        return 0.0
    outer = [v for v in scope if v in nesting.pos and nesting.pos[v] < first and v not in inst.reduce_vars]
    return float(held * math.prod(nesting.region.extent[v] for v in outer))


def prefix_bound(nesting, instances: list, placed: set[str]) -> tuple[float, float]:
    """Lower bounds of (`nest_cost` with `spilled_cost`, `loop_work`), each summed over
    `instances`, of every order that extends the prefix `nesting.order`: an unfinished instance
    will still iterate its own loops and every placed loop of its consumers, and its nest starts
    with those placed loops."""
    region = nesting.region
    size = work = 0.0
    for inst in instances:
        nest = nesting.nest.get(inst.id)
        if nest is not None:
            size += finished_cost(region, inst, nest, nesting.pos)
        else:  # at most what it will stream
            loops = set(inst.local_vars) | (nesting.scope[inst.id] & placed)
            size += loops_cost(region, inst, loops, nesting.pos)
        work += loop_work(region, inst, nest if nest is not None else
                          [v for v in nesting.order if v in nesting.scope[inst.id]])
        size += spilled_cost(nesting, inst)
    return size, work
