"""The default dataflow order of a region: the valid order with the least `cost.nest_cost`,
found by branch and bound over prefixes (`search_order`) on each independent part of the region
(`independent_parts`), with producer-by-producer orders (`greedy_orders`) as the fallback.

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.region import Region
    >>> default_order(Region.build(from_mlir("tests/mlir/matmul_chain.mlir"), ["T", "O"]))
    ['i', 'l', 'k', 'j']
"""
from __future__ import annotations

import itertools

from ..errors import UserError
from .binding import UnionFind
from .cost import prefix_bound
from .nesting import Nesting, part_orders
from .order_memo import remembered_order
from .precedence import has_no_valid_order
from .proof import settle
from .region import Region


class NoValidOrder(UserError):
    """A group has no valid dataflow order: every order was tried, and the reason is the one
    that rejects them. `induced`: the schedule compiled with `layout=induced`, when that works."""

    induced = None


SEARCH_WORK = 2_000_000_000  # (instances x variables) x prefixes an order search may spend
PROOF_WORK = 20_000  # prefixes the walk that finds any valid order (or proves there is none) may visit
QUICK_PROOF_WORK = 2_000  # prefixes the precedence-pruned walk may visit before a search, to prove there is no order


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
    link = UnionFind(region.vars)
    together = [inst.local_vars for inst in region.instances]
    together += [[v for v in leaf.level_vars() if isinstance(v, str)] for leaf in region.leaves]
    together += [list(pair) for pair in region.before]
    for names in together:
        for a, b in zip(names, names[1:]):
            link.union(a, b)
    parts: dict[str, list[str]] = {}
    for v in region.vars:
        parts.setdefault(link.find(v), []).append(v)
    return list(parts.values())


class _OrderSearch:
    """Depth-first branch and bound over prefixes of orders of `names` (see `search_order`)."""

    def __init__(self, region: Region, names: list[str], budget: int):
        self.region = region
        self.names = names
        inside = set(names)
        self.inside = inside
        self.preds = {v: {a for a, b in region.before if b == v and a in inside} for v in names}
        self.instances = [inst for inst in region.instances if set(inst.local_vars) <= inside]
        self.best: list | None = None
        self.best_cost = (float("inf"), float("inf"))
        self.visited = 0
        self.dive = len(names) * (len(names) + 1) // 2  # prefixes one descent to a full order may try
        self.budget = max(budget, min(8 * self.dive, SEARCH_WORK // max(1, len(self.instances) * len(names))))

    def seed(self, seeds: int) -> None:
        """The best of the first `seeds` orders of the enumeration: a first incumbent."""
        for order in itertools.islice(part_orders(self.names, self.preds), seeds):
            nesting = Nesting(self.region, order, partial=True)
            cost = prefix_bound(nesting, self.instances, self.inside) if nesting.valid else None
            if cost is not None and cost < self.best_cost:
                self.best, self.best_cost = order, cost

    def run(self) -> None:
        if self.budget >= self.dive:  # else not even one descent would reach a full order
            self.extend([], (0.0, 0.0))

    def extend(self, prefix: list[str], cost: tuple, parent: Nesting | None = None) -> None:
        if len(prefix) == len(self.names):
            self.best, self.best_cost = list(prefix), cost
            return
        placed = set(prefix)
        children = []
        for v in self.names:
            if v not in placed and self.preds[v] <= placed:
                self.visited += 1
                nesting = Nesting(self.region, prefix + [v], partial=True, parent=parent)
                if nesting.valid:
                    children.append((prefix_bound(nesting, self.instances, placed | {v}), len(children), v, nesting))
        for child_cost, _, v, nesting in sorted(children, key=lambda child: child[:3]):
            if child_cost >= self.best_cost or self.visited >= self.budget:
                return
            self.extend(prefix + [v], child_cost, nesting)


def search_order(region: Region, names: list[str] | None = None, budget: int = 5000,
                 seeds: int = 300) -> list[str] | None:
    """The valid order of `names` (default: all variables) with the least `nest_cost` (ties: the
    least `loop_work`, which prefers walking dense operands inside sparse loops), found by
    depth-first branch and bound over prefixes: a prefix is dropped as soon as `Nesting` finds a
    problem in it or its cost bound (`cost.prefix_bound`) reaches the best order so far. Cheaper
    prefixes are extended first (ties in first-use order). The first `seeds` orders of the
    enumeration give the first bound. After `budget` prefixes (raised to 8 descents to a full
    order, within `SEARCH_WORK`; no search if one descent does not fit), the best found so far.

        >>> from fuseflow.frontend import from_mlir
        >>> from fuseflow.fusion.region import Region
        >>> search_order(Region.build(from_mlir("tests/mlir/matmul_chain.mlir"), ["T", "O"]))
        ['i', 'l', 'k', 'j']
    """
    search = _OrderSearch(region, list(region.vars if names is None else names), budget)
    search.seed(seeds)
    search.run()
    return search.best


def default_order(region: Region, budget: int = 5000, proof_work: int = PROOF_WORK) -> list[str] | None:
    """The valid order with the least `nest_cost` (`search_order` on each independent part,
    concatenated), else the first valid producer-by-producer order, else the first valid order
    at all (`proof.settle`, walking at most `proof_work` prefixes); None if none is found. Before
    that walk, a faster one pruned by the loop precedences (`precedence.has_no_valid_order`) may
    prove that no valid order exists; that walk also runs first, within `QUICK_PROOF_WORK`
    prefixes, and spares the search of a region it proves has none. A region that searches like
    one searched before (another layer's copy of the group, `order_memo`) gets that order."""
    return remembered_order(region, budget, proof_work, lambda r: _searched_order(r, budget, proof_work))


def _searched_order(region: Region, budget: int, proof_work: int) -> list[str] | None:
    if has_no_valid_order(region, QUICK_PROOF_WORK):  # most region variants tried have none: skip their search
        return None
    parts = [search_order(region, names, budget) for names in independent_parts(region)]
    if all(part is not None for part in parts):
        order = [v for part in parts for v in part]
        if Nesting(region, order).valid:
            return order
    for order in greedy_orders(region):
        if Nesting(region, order).valid:
            return order
    if not proof_work or has_no_valid_order(region, proof_work):
        return None
    return settle(region, proof_work).order


def no_order_proof(region: Region) -> tuple[str, bool]:
    """(why the region has no valid order, whether that is proven: `proof.settle`) for a region
    whose `default_order` is None."""
    settled = settle(region, PROOF_WORK)
    assert settled.order is None, f"{region.group} has the valid order {settled.order}"
    return settled.why, settled.proven
