"""How each op instance of a region nests in a dataflow (loop) order.

An instance iterates its own variables plus the variables of its consumers that come before
its last variable in the order (`nest`): a producer placed inside a consumer's extra loop is
recomputed for every iteration of it. Reductions become `reduce` nodes when the reduction
variables are innermost in the nest, or an order-1 sparse accumulator when exactly one
non-reduction variable follows the reduction variable (order 2 with two, for written outputs).

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.region import Region
    >>> p = from_mlir("tests/mlir/matmul_chain.mlir")
    >>> r = Region.build(p, ["T", "O"])
    >>> n = Nesting(r, ["i", "l", "k", "j"])
    >>> [(r.instances[k].tensor, n.nest[r.instances[k].id], n.plan[r.instances[k].id]) for k in range(2)]
    [('T', ['i', 'l', 'k'], ('spacc', 'l')), ('O', ['i', 'k', 'j'], ('spacc', 'k'))]
"""
from __future__ import annotations

import itertools
import math

from ..errors import UserError
from .region import Region


def _scopes(region: Region) -> dict[int, set[str]]:
    """Each instance's variables and those of its consumers, transitively (order-independent,
    so computed once per region)."""
    cached = region.__dict__.get("_scopes")
    if cached is None:
        cached = {}
        for inst in reversed(region.instances):  # consumers first
            scope = set(inst.local_vars)
            for consumer, _ in inst.consumers:
                scope |= cached[consumer]
            cached[inst.id] = scope
        region.__dict__["_scopes"] = cached
    return cached


def _var_index(region: Region) -> tuple[dict, dict, dict]:
    """Per region (cached): each instance's topological position, the instances using each
    variable, and each instance's number of distinct variables."""
    cached = region.__dict__.get("_var_index")
    if cached is None:
        topo = {inst.id: k for k, inst in enumerate(region.instances)}
        users: dict[str, list[int]] = {}
        counts = {}
        for inst in region.instances:
            names = set(inst.local_vars)
            counts[inst.id] = len(names)
            for v in names:
                users.setdefault(v, []).append(inst.id)
        cached = region.__dict__["_var_index"] = (topo, users, counts)
    return cached


class Nesting:
    """The nests and reduction plans of `order`. With `partial=True`, `order` may be a prefix of
    an order: only instances whose variables are all placed are analysed, and only the checks
    whose instances are all analysed run, so a problem found for a prefix holds for every
    order that extends it (the order search prunes with this)."""

    def __init__(self, region: Region, order: list[str], partial: bool = False):
        self.region = region
        self.order = list(order)
        if not partial and sorted(order) != sorted(region.vars):
            raise UserError(f"order {','.join(order)} must list each of {','.join(region.vars)} once")
        self.pos = {v: k for k, v in enumerate(order)}
        by_id = region._by_id
        self.scope = _scopes(region)
        self.last: dict[int, str] = {}
        self.nest: dict[int, list[str]] = {}
        self.plan: dict[int, tuple] = {}
        self.value_vars: dict[int, list[str]] = {}
        self.problem: str | None = None
        self.analysed: list = []  # instances whose variables are all placed, producers first
        topo, users, counts = _var_index(region)
        placed: dict[int, int] = {inst_id: 0 for inst_id, count in counts.items() if count == 0}
        for v in self.order:  # only instances that use a placed variable need a look
            for inst_id in users.get(v, ()):
                placed[inst_id] = placed.get(inst_id, 0) + 1
        open_instances = []
        for inst_id in sorted(placed, key=topo.__getitem__):
            inst = by_id[inst_id]
            if placed[inst_id] < counts[inst_id]:
                self._check_open_reduction(inst)  # a prefix that does not place all of its variables yet
                open_instances.append(inst)
                continue
            self.analysed.append(inst)
            last = max(inst.local_vars, key=self.pos.get) if inst.local_vars else None
            self.last[inst.id] = last
            limit = self.pos[last] if last is not None else -1
            nest = sorted((v for v in self.scope[inst.id] if self.pos.get(v, limit + 1) <= limit), key=self.pos.get)
            self.nest[inst.id] = nest
            self.plan[inst.id] = self._plan(inst, nest)
            self.value_vars[inst.id] = [v for v in nest if v not in inst.reduce_vars]
        for inst in open_instances:
            self._check_open_nesting(inst, by_id)
        if self.problem is None:
            self._check_values(by_id)
        if self.problem is None:
            self._check_accumulators(by_id)

    def _fail(self, why: str) -> None:
        if self.problem is None:
            self.problem = why

    def _check_open_reduction(self, inst) -> None:
        """For a prefix: an instance that has placed a reduction variable but not all of its own
        variables will nest every unplaced one of them after it, besides the placed loops after it
        (its last variable, not yet placed, comes later); too many for an accumulator is a problem
        for every order that extends the prefix."""
        red = [v for v in inst.reduce_vars if v in self.pos]
        if not red:
            return
        first = min(self.pos[v] for v in red)
        own = set(inst.local_vars)
        after = [v for v in self.scope[inst.id] if v not in inst.reduce_vars and
                 (self.pos[v] > first if v in self.pos else v in own)]
        if (len(inst.reduce_vars) > 1 and after) or len(after) > 2 or (len(after) == 2 and inst.consumers):
            self._fail(f"{inst.tensor} reduces {','.join(red)} with {len(after)} loops inside it")

    def _check_open_nesting(self, inst, by_id) -> None:
        """For a prefix: an instance with an unplaced variable of its own will be nested inside
        every placed loop of its consumers (its last variable comes later), so its values vary
        along them; a consumer that will not iterate such a loop cannot read it (`_check_values`)."""
        own = set(inst.local_vars)
        outer = [v for v in self.scope[inst.id] if v in self.pos and v not in own]
        for consumer_id, _ in inst.consumers:
            reach = self.nest.get(consumer_id)
            if reach is None:  # not placed yet: it will iterate at most its scope
                reach = self.scope[consumer_id]
            missing = [v for v in outer if v not in reach]
            if missing:
                self._fail(f"{inst.tensor} iterates {','.join(sorted(missing))} that "
                           f"{by_id[consumer_id].tensor} does not")
                return

    def _plan(self, inst, nest: list[str]) -> tuple:
        red = inst.reduce_vars
        if not red:
            return ("none",)
        first = min(self.pos[v] for v in red)
        after = [v for v in nest if self.pos[v] > first]
        if all(v in red for v in after):
            return ("reduce",)
        if len(red) == 1 and len(after) == 1:
            return ("spacc", red[0])
        if len(red) == 1 and len(after) == 2:
            if inst.consumers:
                self._fail(f"{inst.tensor} needs an order-2 sparse accumulator, whose outer output "
                           "cannot feed a fused consumer")
            return ("spacc2", red[0], tuple(after))
        self._fail(f"{inst.tensor} reduces {','.join(red)} with {','.join(v for v in after if v not in red)} "
                   "inside it (needs a sparse accumulator of order >= 3)")
        return ("unsupported",)

    def _check_values(self, by_id) -> None:
        for inst in self.analysed:
            vs = self.value_vars[inst.id]
            for consumer_id, k in inst.consumers:
                if consumer_id not in self.nest:
                    continue
                consumer = by_id[consumer_id]
                nest = self.nest[consumer_id]
                rename = consumer.rename.get(k, {})
                seen = [rename.get(v, v) for v in vs]  # a buffered read runs loops of its own
                if not set(seen) <= set(nest):
                    self._fail(f"{inst.tensor} iterates {','.join(sorted(set(seen) - set(nest)))} that "
                               f"{consumer.tensor} does not")
                    continue
                if rename and sorted(seen, key=self.pos.get) != seen:
                    self._fail(f"{consumer.tensor} would read the buffered {inst.tensor} transposed")
                    continue
                if vs and vs[0] in rename:  # a buffer holds what one iteration of a shared loop makes
                    self._fail(f"{consumer.tensor} would buffer all of {inst.tensor}")
                    continue
                if seen:
                    limit = self.pos[seen[-1]]
                    inner = [v for v in nest if self.pos[v] <= limit and v not in seen]
                    if inner:
                        self._fail(f"the values of {inst.tensor} would have to be replayed inside "
                                   f"{','.join(inner)} for {consumer.tensor}")
        for name, inst_id in self.region.output_instance.items():
            if inst_id not in self.nest:
                continue
            inst = by_id[inst_id]
            out_vars = [v for v in inst.out_indices if isinstance(v, str)]
            if sorted(self.value_vars[inst_id]) != sorted(out_vars):
                extra = sorted(set(self.value_vars[inst_id]) - set(out_vars))
                self._fail(f"output {name} is recomputed inside {','.join(extra)} and cannot be written")

    def _check_accumulators(self, by_id) -> None:
        """A consumer reads an accumulator's output at the accumulator's innermost variable, so the
        accumulator's inputs must be complete by then (not only after a later variable)."""
        done: dict[int, int] = {}
        for inst in self.analysed:  # producers first
            producers = [ref for kind, ref in inst.operands if kind == "inst"]
            if inst.id not in self.last or any(ref not in done for ref in producers):
                continue
            ends = [self.pos.get(self.last[inst.id], -1)] + [done[ref] for ref in producers]
            done[inst.id] = max(ends)
            if self.plan[inst.id][0].startswith("spacc") and inst.consumers and done[inst.id] > ends[0]:
                late = self.order[done[inst.id]]
                self._fail(f"the accumulated {inst.tensor} is read at {self.last[inst.id]} but its inputs "
                           f"complete only at {late}")
            for k, rename in inst.rename.items():  # a buffered read starts once its producer is complete
                ref = inst.operands[k][1]
                first = min(self.pos[v] for v in rename.values())
                if done[ref] >= first:
                    self._fail(f"{inst.tensor} reads {by_id[ref].tensor} again in loop {self.order[first]} "
                               f"before it is complete (at {self.order[done[ref]]})")

    @property
    def valid(self) -> bool:
        return self.problem is None


def topological_orders(region: Region):
    """Every order of the region's variables that respects its storage constraints, generated
    by backtracking over the variables in first-use order (index 0 is the most natural order)."""
    preds = {v: {a for a, b in region.before if b == v} for v in region.vars}
    return _part_orders(region, list(region.vars), preds)


def valid_orders(region: Region):
    """Topological orders that the lowering supports (see `Nesting.problem` for the others)."""
    for order in topological_orders(region):
        if Nesting(region, order).valid:
            yield order


def order_problem(region: Region, order: list[str]) -> str | None:
    """Why `order` cannot be used for `region`, or None."""
    bad = [(a, b) for a, b in region.before if order.index(a) > order.index(b)] if sorted(order) == sorted(
        region.vars) else []
    if bad:
        a, b = sorted(bad)[0]
        holders = [str(leaf) for leaf in region.leaves  # the leaves that constrain orders (`Region.before`)
                   if a in leaf.level_vars() and b in leaf.level_vars() and not leaf.free and not leaf.format.is_dense]
        what = f"mode order of {holders[0].split('(')[0]}" if holders else "the declared output format"
        return f"order {','.join(order)} violates the {what} ({a} before {b})"
    return Nesting(region, order).problem


__all__ = ["Nesting", "topological_orders", "valid_orders", "order_problem"]


SEARCH_WORK = 2_000_000_000  # (instances x variables) x prefixes an order search may spend
SPARSE_DENSITY = 0.1  # assumed share of a compressed level's coordinates that are stored


def loop_work(region: Region, inst, nest: list[str]) -> float:
    """Steps of an instance's loop nest: each level visits every coordinate of its variable for
    every surviving iteration of the levels above it, and a level over a compressed level of a
    stored operand lets `SPARSE_DENSITY` of them through (a nest's prefix gives a lower bound);
    0 for an instance without compressed operands.
    Breaks ties of `nest_cost`: A(i,k)·X(k,j) with A sparse costs less in order i,k,j than i,j,k."""
    cached = region.__dict__.setdefault("_sparse_vars", {})
    if inst.id not in cached:
        leaves = [region.leaves[ref] for kind, ref in inst.operands if kind == "leaf"]
        cached[inst.id] = {v for leaf in leaves
                           for v, level in zip(leaf.level_vars(), leaf.format.levels) if level.is_compressed}
    if not cached[inst.id]:
        return 0.0  # only sparse operands make one equal-size order cheaper than another
    work, reach = 0.0, 1.0
    for v in nest:
        reach *= region.extent[v]
        work += reach
        if v in cached[inst.id]:
            reach *= SPARSE_DENSITY
    return work


def _filter_leaves(region: Region) -> dict[int, list]:
    """Per instance: the stored operands with compressed levels, and data statistics, that it or
    a consumer downstream reads; their stored coordinates filter the loops the instance runs in."""
    cached = region.__dict__.get("_filter_leaves")
    if cached is None:
        cached = {}
        for inst in reversed(region.instances):  # consumers first
            found = {ref: region.leaves[ref] for kind, ref in inst.operands if kind == "leaf"
                     and region.leaves[ref].tensor in region.stats
                     and any(lv.is_compressed for lv in region.leaves[ref].format.levels)}
            for consumer, _ in inst.consumers:
                found.update(cached[consumer])
            cached[inst.id] = found
        region.__dict__["_filter_leaves"] = cached
    return cached


def _kept(region: Region, leaf, pos: dict[str, int]) -> dict[str, float]:
    """Share of each variable's coordinates that the compressed levels of `leaf` keep, with its
    levels stored as they are or, for a free leaf, in the order `pos` visits them."""
    if leaf.free:
        far = len(pos)
        dims = tuple(sorted(range(len(leaf.indices)), key=lambda d: (
            pos.get(leaf.indices[d], far) if isinstance(leaf.indices[d], str) else -1, d)))
    else:
        dims = tuple(leaf.format.mode_order)
    cache = region.__dict__.setdefault("_kept", {})
    if (leaf.id, dims) not in cache:
        from ..ir.formats import TensorFormat

        shares = region.stats.level_densities(leaf.tensor, TensorFormat(leaf.format.levels, dims))
        cache[leaf.id, dims] = {leaf.indices[d]: x for d, x, lv in zip(dims, shares, leaf.format.levels)
                                if lv.is_compressed and isinstance(leaf.indices[d], str)}
    return cache[leaf.id, dims]


def _kept_by(region: Region, leaves: dict, pos: dict[str, int]) -> dict[str, float]:
    """Per variable, the least share of its coordinates that the compressed `leaves` keep."""
    kept: dict[str, float] = {}
    for leaf in leaves.values():
        for v, share in _kept(region, leaf, pos).items():
            kept[v] = min(kept.get(v, 1.0), share)
    return kept


def loops_cost(region: Region, inst, loops, pos: dict[str, int]) -> float:
    """Iterations of `inst` in `loops`: the product of their extents; with data statistics
    (`region.stats`), each extent times the share of its coordinates that the compressed data
    read by the instance or its consumers keeps (at least one iteration per loop)."""
    extent = region.extent
    leaves = _filter_leaves(region)[inst.id] if region.stats is not None else None
    if not leaves:
        return math.prod(extent[v] for v in loops)
    kept = _kept_by(region, leaves, pos)
    return math.prod(max(1.0, extent[v] * kept.get(v, 1.0)) for v in loops)


def streamed_cost(region: Region, inst, nest: list[str], pos: dict[str, int]) -> float:
    """With data statistics: coordinates the nest of `inst` streams. At each loop, the iterations
    of the loops above times the longest fiber one of its operands streams there (a computed
    operand, or a dense one the intersection does not look up, streams every coordinate, even
    where an intersection keeps few); the loops
    below iterate what the intersection keeps (`loops_cost`). A(i,k)·W(k,j) with W sparse costs
    less in order i,k,j than i,j,k, where A's dense rows are streamed once per j."""
    extent = region.extent
    leaves = _filter_leaves(region)[inst.id]
    kept = _kept_by(region, leaves, pos)
    longest: dict[str, float] = {}
    for k, (kind, ref) in enumerate(inst.operands):
        shares = _kept(region, region.leaves[ref], pos) if kind == "leaf" and ref in leaves else {}
        for v in inst.access(k):
            if isinstance(v, str) and k not in _located(region, inst, v):
                longest[v] = max(longest.get(v, 0.0), shares.get(v, 1.0))
    points = total = 1.0
    for v in nest:
        total += points * extent[v] * longest.get(v, kept.get(v, 1.0))
        points *= max(1.0, extent[v] * kept.get(v, 1.0))
    return max(total, points)


def _located(region: Region, inst, v: str) -> set[int]:
    """Operands the intersection of `inst` at `v` looks up instead of streaming (cached)."""
    cache = region.__dict__.setdefault("_located", {})
    if (inst.id, v) not in cache:
        from .table import located_operands

        cache[inst.id, v] = located_operands(region, inst, v, settled=False)
    return cache[inst.id, v]


def _finished_cost(region: Region, inst, nest: list[str], pos: dict[str, int]) -> float:
    """`streamed_cost` where the data's densities filter the instance's loops, else `loops_cost`."""
    if region.stats is None or not _filter_leaves(region)[inst.id]:
        return loops_cost(region, inst, nest, pos)
    return streamed_cost(region, inst, nest, pos)


def nest_cost(nesting: Nesting) -> float:
    """Iterations of every op instance in its nest, an estimate of the work an order implies (an
    op recomputed inside a consumer's extra loop pays for every iteration of it): by sizes alone,
    or, where data statistics show compressed inputs, the coordinates streamed (`_finished_cost`)."""
    return sum(_finished_cost(nesting.region, inst, nesting.nest[inst.id], nesting.pos)
               for inst in nesting.region.instances)


def greedy_orders(region: Region) -> list[list[str]]:
    """Orders built producer by producer: each op instance appends the variables it introduces
    (its output variables then its reduction variables, or the reverse), kept if they respect the
    storage constraints."""
    found = []
    for reductions_first in (False, True):
        order: list[str] = []
        for inst in region.instances:  # producers first
            outs = [inst.var_of[v] for v in inst.op.vars if v not in inst.op.reduce_vars]
            reds = inst.reduce_vars
            for v in (reds + outs if reductions_first else outs + reds):
                if v not in order:
                    order.append(v)
        for v in region.vars:
            if v not in order:
                order.append(v)
        pos = {v: k for k, v in enumerate(order)}
        if all(pos[a] < pos[b] for a, b in region.before) and order not in found:
            found.append(order)
    return found


def independent_parts(region: Region) -> list[list[str]]:
    """The region's variables split into groups that no op instance or stored tensor connects
    (e.g. the Q, K and V projections of a fused layer, each with its own copy of the layer norm);
    the parts' orders are independent, and any concatenation of valid ones is valid."""
    link = {v: v for v in region.vars}

    def find(v):
        while link[v] != v:
            link[v] = link[link[v]]
            v = link[v]
        return v

    together = [inst.local_vars for inst in region.instances]
    together += [[v for v in leaf.level_vars() if isinstance(v, str)] for leaf in region.leaves]
    together += [list(pair) for pair in region.before]
    for names in together:
        for a, b in zip(names, names[1:]):
            link[find(b)] = find(a)
    parts: dict[str, list[str]] = {}
    for v in region.vars:
        parts.setdefault(find(v), []).append(v)
    return list(parts.values())


def search_order(region: Region, names: list[str] | None = None, budget: int = 5000,
                 seeds: int = 300) -> list[str] | None:
    """The valid order of `names` (default: all variables) with the least `nest_cost` (ties: the
    least `loop_work`, which prefers walking dense operands inside sparse loops), found by
    depth-first branch and bound over prefixes: a prefix is dropped as soon as `Nesting` finds a
    problem in it or its cost bound (finished instances exactly, the others at least their own
    and their consumers' placed loops) reaches the best order so far. Cheaper prefixes are
    extended first (ties in first-use order). The first `seeds` orders of the enumeration give the
    first bound. After `budget` prefixes (raised to 8 descents to a full order, within
    `SEARCH_WORK`; no search if one descent does not fit), the best found so far.

        >>> from fuseflow.frontend import from_mlir
        >>> search_order(Region.build(from_mlir("tests/mlir/matmul_chain.mlir"), ["T", "O"]))
        ['i', 'l', 'k', 'j']
    """
    names = list(region.vars if names is None else names)
    inside = set(names)
    preds = {v: {a for a, b in region.before if b == v and a in inside} for v in names}
    instances = [inst for inst in region.instances if set(inst.local_vars) <= inside]
    best: list = [None, (float("inf"), float("inf"))]
    visited = 0
    dive = len(names) * (len(names) + 1) // 2  # prefixes one descent to a full order may try
    budget = max(budget, min(8 * dive, SEARCH_WORK // max(1, len(instances) * len(names))))

    def bound(nesting: Nesting, placed: set[str]) -> tuple[float, float]:
        """Lower bounds of (`nest_cost`, `loop_work` summed) of every order that extends the
        prefix: an unfinished instance will still iterate its own loops and every placed loop
        of its consumers, and its nest starts with those placed loops."""
        size = work = 0.0
        for inst in instances:
            nest = nesting.nest.get(inst.id)
            if nest is not None:
                size += _finished_cost(region, inst, nest, nesting.pos)
            else:  # at most what it will stream
                loops = set(inst.local_vars) | (nesting.scope[inst.id] & placed)
                size += loops_cost(region, inst, loops, nesting.pos)
            work += loop_work(region, inst, nest if nest is not None else
                              [v for v in nesting.order if v in nesting.scope[inst.id]])
        return size, work

    def extend(prefix: list[str], cost: tuple) -> None:
        nonlocal visited
        if len(prefix) == len(names):
            best[:] = [list(prefix), cost]
            return
        placed = set(prefix)
        children = []
        for v in names:
            if v not in placed and preds[v] <= placed:
                visited += 1
                nesting = Nesting(region, prefix + [v], partial=True)
                if nesting.problem is None:
                    children.append((bound(nesting, placed | {v}), len(children), v))
        for child_cost, _, v in sorted(children):
            if child_cost >= best[1] or visited >= budget:
                return
            extend(prefix + [v], child_cost)

    for order in itertools.islice(_part_orders(region, names, preds), seeds):  # a first incumbent
        nesting = Nesting(region, order, partial=True)
        cost = bound(nesting, inside) if nesting.problem is None else None
        if cost is not None and cost < best[1]:
            best[:] = [order, cost]
    if budget >= dive:  # else not even one descent would reach a full order
        extend([], (0.0, 0.0))
    return best[0]


def _part_orders(region: Region, names: list[str], preds: dict):
    """Orders of `names` with each variable after its `preds`, by backtracking in list order."""
    chosen: list[str] = []
    used: set[str] = set()

    def extend():
        if len(chosen) == len(names):
            yield list(chosen)
            return
        for v in names:
            if v not in used and preds[v] <= used:
                chosen.append(v)
                used.add(v)
                yield from extend()
                chosen.pop()
                used.discard(v)

    yield from extend()


def default_order(region: Region, budget: int = 5000) -> list[str] | None:
    """The valid order with the least `nest_cost` (`search_order` on each independent part,
    concatenated), else the first valid producer-by-producer order; None if none is found."""
    parts = [search_order(region, names, budget) for names in independent_parts(region)]
    if all(part is not None for part in parts):
        order = [v for part in parts for v in part]
        if Nesting(region, order).valid:
            return order
    for order in greedy_orders(region):
        if Nesting(region, order).valid:
            return order
    return None
