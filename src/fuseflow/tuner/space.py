"""The tuner's search space: groupings of a program's ops, each group's dataflow order, the
storage of tensors written between kernels, the layout rule, and parallel lanes.

A *grouping* is a partition of the ops into groups whose quotient graph is acyclic (each group
then runs as one kernel after the groups it reads; reshapes stay alone). Groupings are not only
contiguous runs of source lines: ops on parallel branches (GraphSAGE's self and neighbour paths,
a decoder's Q, K and V projections) may share a group without the ops between them. `groupings`
enumerates them by placing ops in program order into an existing group or a new one, refusing a
placement that would close a cycle between groups (an edge u -> v is added only when v does not
reach u), so every partition is produced once.

A *candidate* (`Candidate`) is a grouping with a layout rule and the items that refine it:
`order.K=...` for groups given an order other than the default, `format.T=...` for tensors
written between kernels in other level formats, `par.K=V:P` for lanes. Its schedule string
(`Candidate.schedule`) is what `fuseflow simulate --schedule` takes.

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.ir.canonicalize import prepare
    >>> graph = OpGraph.of(prepare(from_mlir("tests/mlir/shared_filter.mlir")))
    >>> graph.names, [sorted(p) for p in graph.preds]
    (('T', 'Y', 'Z'), [[], [0], [0, 1]])
    >>> [g for g in groupings(graph)]  # [T,Z][Y] would need Y before and after its group
    [[['T', 'Y', 'Z']], [['T', 'Y'], ['Z']], [['T'], ['Y', 'Z']], [['T'], ['Y'], ['Z']]]
    >>> c = Candidate((("T", "Y"), ("Z",)), "induced", orders=((1, ("j", "i")),), formats=(("Y", "dense,compressed"),))
    >>> c.schedule
    'fusion=[T,Y][Z] order.1=j,i format.Y=dense,compressed layout=induced'
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

from ..fusion.cost import nest_cost
from ..fusion.nesting import Nesting, valid_orders
from ..ir.program import IndexOp, Program, op_output
from ..schedule.schedule import OrderChoice, Schedule

LAYOUTS = ("induced", "declared")
LEVELS = ("dense", "compressed")
ENUM_LIMIT = 5000  # groupings enumerated; above, the search walks from the presets by moves
ORDERS_SCANNED = 64  # valid orders of a group looked at when picking the cheapest to try


@dataclass
class SpaceSpec:
    """Which choices the search varies (the validation bench narrows them to enumerate a space)."""

    layouts: tuple = LAYOUTS
    orders: int = 6  # other valid orders tried per group (0: defaults only)
    formats: bool = True  # vary the level formats of tensors written between kernels
    lanes: int = 1  # lanes any kernel may use (1: none; compared at equal hardware)
    moves: bool = True  # grouping moves around the best candidates
    max_groupings: int = ENUM_LIMIT


@dataclass(frozen=True)
class OpGraph:
    """The ops of a canonical program: names (the tensors they write), each op's producers among
    the ops (indices), and which ops are reshapes (always alone in a group)."""

    names: tuple[str, ...]
    preds: tuple[frozenset, ...]
    reshape: tuple[bool, ...]

    @staticmethod
    def of(program: Program) -> "OpGraph":
        names = [op_output(op) for op in program.ops]
        index = {n: k for k, n in enumerate(names)}
        preds = tuple(frozenset(index[t] for t in op.tensors_read if t in index) for op in program.ops)
        return OpGraph(tuple(names), preds, tuple(not isinstance(op, IndexOp) for op in program.ops))

    def __len__(self) -> int:
        return len(self.names)


def groupings(graph: OpGraph, limit: int | None = None, allowed=None):
    """Every partition of the ops into groups with an acyclic quotient graph, reshapes alone
    (at most `limit`); `allowed(frozenset of op names)` may refuse a finished group (the
    groups the compiler cannot build). Yields lists of groups (op names in program order),
    groups in the order of their first op."""
    n = len(graph)
    groups: list[list[int]] = []
    succ: list[set[int]] = []
    assign = [0] * n
    count = [0]

    def reaches(a: int, b: int) -> bool:
        seen, stack = {a}, [a]
        while stack:
            x = stack.pop()
            if x == b:
                return True
            for y in succ[x]:
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
        return False

    def place(k: int):
        if limit is not None and count[0] >= limit:
            return
        if k == n:
            if allowed is None or all(allowed(frozenset(graph.names[m] for m in g)) for g in groups):
                count[0] += 1
                yield [[graph.names[m] for m in g] for g in groups]
            return
        options = [] if graph.reshape[k] else [g for g in range(len(groups)) if not graph.reshape[groups[g][0]]]
        options.append(len(groups))
        for g in options:
            new = g == len(groups)
            sources = {assign[p] for p in graph.preds[k]} - {g}
            if not new and any(reaches(g, h) for h in sources):
                continue  # h -> g would close a cycle
            if new:
                groups.append([])
                succ.append(set())
            groups[g].append(k)
            assign[k] = g
            added = [h for h in sources if g not in succ[h]]
            for h in added:
                succ[h].add(g)
            yield from place(k + 1)
            for h in added:
                succ[h].discard(g)
            groups[g].pop()
            if new:
                groups.pop()
                succ.pop()

    yield from place(0)


def count_groupings(graph: OpGraph, limit: int) -> int:
    """How many groupings there are, counting at most `limit` (then `limit`)."""
    return sum(1 for _ in groupings(graph, limit))


@dataclass(frozen=True)
class Candidate:
    """One point of the search space (see the module): groups (op names), the layout rule, and
    the refining items, each a sorted tuple so that equal candidates compare equal."""

    groups: tuple[tuple[str, ...], ...]
    layout: str = "induced"
    orders: tuple = ()  # ((group index, (var, ...)), ...)
    formats: tuple = ()  # ((tensor, "levels[;order=..]"), ...)
    pars: tuple = ()  # ((group index, ((var, lanes), ...)), ...)
    block: int | None = None  # blocked execution's tile size (kept from the presets of a blocked model)
    label: str = field(default="", compare=False)  # a preset's name, for the report

    @property
    def schedule(self) -> str:
        s = Schedule(fusion="groups", groups=[list(g) for g in self.groups], layout=self.layout, block=self.block)
        s.orders = {k: OrderChoice(tuple(v)) for k, v in self.orders}
        s.formats = dict(self.formats)
        s.pars = {k: list(levels) for k, levels in self.pars}
        return str(s)

    @property
    def grouping(self) -> tuple:
        return self.groups

    @property
    def lanes(self) -> int:
        """The most lanes any kernel uses (1 without a par item)."""
        best = 1
        for _, levels in self.pars:
            total = 1
            for _, p in levels:
                total *= p
            best = max(best, total)
        return best

    def with_order(self, k: int, order) -> "Candidate":
        orders = dict(self.orders)
        orders[k] = tuple(order)
        return replace(self, orders=tuple(sorted(orders.items())), label="")

    def with_format(self, tensor: str, fmt: str) -> "Candidate":
        formats = dict(self.formats)
        formats[tensor] = fmt
        return replace(self, formats=tuple(sorted(formats.items())), label="")

    def with_par(self, k: int, levels) -> "Candidate":
        pars = dict(self.pars)
        pars[k] = tuple(levels)
        return replace(self, pars=tuple(sorted(pars.items())), label="")

    def without_pars(self) -> "Candidate":
        return replace(self, pars=(), label="")

    def regrouped(self, groups) -> "Candidate":
        """The candidate with other groups (in run order), keeping the order and lanes of every
        group that stays as it was and the formats of the tensors such groups write.

            >>> c = Candidate((("a", "b"), ("c",)), orders=((0, ("i", "j")), (1, ("j", "i"))))
            >>> c.regrouped((("a",), ("b",), ("c",))).orders
            ((2, ('j', 'i')),)
        """
        groups = tuple(tuple(g) for g in groups)
        where = {g: k for k, g in enumerate(groups)}
        moved = {k: where[g] for k, g in enumerate(self.groups) if g in where}
        kept = {n for g in self.groups if g in where for n in g}
        return replace(self, groups=groups, label="",
                       orders=tuple(sorted((moved[k], v) for k, v in self.orders if k in moved)),
                       pars=tuple(sorted((moved[k], v) for k, v in self.pars if k in moved)),
                       formats=tuple((t, f) for t, f in self.formats if t in kept))


def candidate_of(schedule: Schedule, program: Program, label: str = "") -> Candidate | None:
    """The candidate a parsed schedule stands for (its groups as `Schedule.partition` orders them),
    or None when it has items the space does not hold (order=reference, orders by index)."""
    if schedule.order_rule != "search" or \
            any(c.index is not None for c in schedule.orders.values()):
        return None
    groups = tuple(tuple(g) for g in schedule.partition(program))
    return Candidate(groups, schedule.layout, tuple(sorted((k, tuple(c.vars)) for k, c in schedule.orders.items())),
                     tuple(sorted(schedule.formats.items())),
                     tuple(sorted((k, tuple(v)) for k, v in schedule.pars.items())), schedule.block, label)


def ordered_groups(program: Program, groups) -> tuple[tuple[str, ...], ...]:
    """The groups in the order the compiler runs them (`Schedule.partition`), so that `order.K`
    and `par.K` count groups as the schedule string lists them."""
    s = Schedule(fusion="groups", groups=[list(g) for g in groups])
    return tuple(tuple(g) for g in s.partition(program))


def level_formats(levels: tuple[str, ...], mode_order: tuple[int, ...]) -> list[str]:
    """Every other way to store a tensor with these levels in the same mode order: each level
    dense or compressed, written as a `format.T=` value.

        >>> level_formats(("dense", "dense"), (1, 0))
        ['dense,compressed;order=1,0', 'compressed,dense;order=1,0', 'compressed,compressed;order=1,0']
    """
    out = []
    suffix = "" if tuple(mode_order) == tuple(range(len(mode_order))) else \
        ";order=" + ",".join(str(m) for m in mode_order)
    for combo in itertools.product(LEVELS, repeat=len(levels)):
        if tuple(combo) != tuple(levels):
            out.append(",".join(combo) + suffix)
    return out


def acyclic(graph: OpGraph, groups) -> bool:
    """Whether these groups (op names) run in some order: no two depend on each other through
    the ops, and a reshape is alone."""
    owner = {n: k for k, g in enumerate(groups) for n in g}
    index = {n: k for k, n in enumerate(graph.names)}
    succ: dict[int, set[int]] = {k: set() for k in range(len(groups))}
    for k, g in enumerate(groups):
        if len(g) > 1 and any(graph.reshape[index[n]] for n in g):
            return False
        for n in g:
            for p in graph.preds[index[n]]:
                if owner[graph.names[p]] != k:
                    succ[owner[graph.names[p]]].add(k)
    state: dict[int, int] = {}

    def visit(k: int) -> bool:  # False on a cycle
        state[k] = 1
        for j in succ[k]:
            if state.get(j) == 1 or (j not in state and not visit(j)):
                return False
        state[k] = 2
        return True

    return all(k in state or visit(k) for k in succ)


def grouping_moves(graph: OpGraph, groups) -> list[list[list[str]]]:
    """The groupings one step from `groups`: two groups merged (where the result runs), or a
    group split in two at a point of its ops in program order (which always runs).

        >>> g = OpGraph(("a", "b", "c"), (frozenset(), frozenset({0}), frozenset({1})), (False,) * 3)
        >>> grouping_moves(g, [["a", "b"], ["c"]])
        [[['a', 'b', 'c']], [['a'], ['b'], ['c']]]
    """
    position = {n: k for k, n in enumerate(graph.names)}
    groups = [list(g) for g in groups]
    out = []
    for i in range(len(groups)):
        for j in range(i + 1, len(groups)):
            merged = sorted(groups[i] + groups[j], key=position.__getitem__)
            rest = [g for k, g in enumerate(groups) if k not in (i, j)]
            trial = rest[:i] + [merged] + rest[i:]
            if acyclic(graph, trial):
                out.append(trial)
    for i, g in enumerate(groups):
        ordered = sorted(g, key=position.__getitem__)
        for cut in range(1, len(ordered)):
            out.append(groups[:i] + [ordered[:cut], ordered[cut:]] + groups[i + 1:])
    return out


def other_orders(kernel, count: int) -> list[list[str]]:
    """Up to `count` valid orders of a compiled kernel's region other than its own, the cheapest
    by the compiler's loop-work measure (`fusion.cost.nest_cost`) among the first
    `ORDERS_SCANNED` the walk finds."""
    if not count or kernel.region is None:
        return []
    found = [o for o in itertools.islice(valid_orders(kernel.region), ORDERS_SCANNED) if o != kernel.order]
    found.sort(key=lambda o: nest_cost(Nesting(kernel.region, o)))
    return found[:count]


def written_between(compiled) -> list[tuple[object, str, object]]:
    """(writer kernel, tensor, its stored metadata) for each tensor a kernel writes and a later
    kernel reads (tiles of blocked tensors left out)."""
    kernels = [k for k in compiled.kernels if k.graph is not None and k.region is not None]
    out = []
    for kernel in kernels:
        for name in kernel.region.outputs:
            meta = kernel.graph.tensors.get(name)
            if meta is not None and not meta.block and any(name in k.graph.tensors for k in kernels if k is not kernel):
                out.append((kernel, name, meta))
    return out
