"""Schedules: fusion granularity, dataflow order per group, formats of materialized tensors.

A schedule is a printable, parsable string of whitespace-separated items:

- `unfused` (each op its own kernel), `full` (one kernel, split only at reshapes), `partial`
  (one kernel per statement of the source: consecutive ops made by the same line of a PyTorch
  model's `forward`, e.g. one per layer), or
  `fusion=[t2,t6][t9,t13]` (explicit groups, named by the tensors their ops produce; ops not
  listed get a group each);
- `order=i,k,j` or `order=#3` for group 0, `order.1=...` for group 1 (by name, or an index into
  the group's valid orders, as `fuseflow orders` lists them); without one, a group takes the
  valid order with the least estimated work (`fusion.search.default_order`): by sizes alone,
  or weighed by the inputs' densities when data is known (studies and sweeps);
- `order=reference`: every group without an `order.N=` item takes the order FuseFlow's reference
  compiler takes, the first topological order concordant with the stored layouts
  (`fusion.reference_order`), instead of the searched one (`order=search`, the default); with
  the declared layouts only (not with `layout=induced`);
- `format.T=compressed,compressed` or `format.T=dense,dense;order=1,0` for a tensor that is
  written between kernels (or an input's storage);
- `block=B`: blocked execution: every variable whose extent is a multiple of B is counted in
  BxB.. blocks, tensors store dense tiles per block (compressed block levels where blocks are
  empty) and value streams carry tiles (`sim.tiles`); other variables stay scalar;
- `layout=induced`: store every program input in the mode order the dataflow order visits it
  (its data is laid out to match, so every order of the variables is open); the default
  `layout=declared` keeps each input's declared mode order and so constrains the orders;
- `par=i:4` (group 0) or `par.1=i:4` (group 1): deal the iterations of variable i over 4 fork/join
  lanes; `par=i:4,j:4` parallelizes two levels, outer first (`sam.parallel`).

    >>> s = Schedule.parse("fusion=[a,b][c] order.1=j,i format.b=dense,compressed par.1=j:2,i:4")
    >>> s.groups, s.orders[1].vars, s.pars
    ([['a', 'b'], ['c']], ('j', 'i'), {1: [('j', 2), ('i', 4)]})
    >>> str(s)
    'fusion=[a,b][c] order.1=j,i format.b=dense,compressed par.1=j:2,i:4'
    >>> str(Schedule.parse("unfused block=32"))
    'unfused block=32'
    >>> str(Schedule.parse("order=reference full order=i,k,j"))
    'full order=reference order.0=i,k,j'
"""
from __future__ import annotations

import graphlib
import heapq
import re
from dataclasses import dataclass, field

from ..errors import UserError
from ..ir.formats import TensorFormat
from ..ir.program import IndexOp, Program, op_output

ORDER_RULES = ("search", "reference")  # `order=RULE`: how a group without `order.N=` gets its order


@dataclass(frozen=True)
class OrderChoice:
    """A group's dataflow order as a schedule gives it: its variables in order (`order.N=i,k,j`),
    or `index`, a position in the group's list of valid orders (`order.N=#3`).

        >>> OrderChoice.parse("#3", 0).index, OrderChoice.parse("i,k,j", 0).vars
        (3, ('i', 'k', 'j'))
    """

    vars: tuple[str, ...] = ()
    index: int | None = None

    @staticmethod
    def parse(text: str, group: int) -> OrderChoice:
        if text.startswith("#"):
            try:
                return OrderChoice(index=int(text[1:]))
            except ValueError:
                raise UserError(f"order {text!r} of group {group} is not #N or a list of variables",
                                "schedule") from None
        return OrderChoice(vars=tuple(v.strip() for v in text.split(",")))

    def __str__(self) -> str:
        return f"#{self.index}" if self.index is not None else ",".join(self.vars)


@dataclass
class Schedule:
    """A parsed schedule string (grammar above, and `fuseflow help schedules`): fusion groups,
    dataflow order, parallelization and storage choices; `str()` prints it back."""

    fusion: str = "full"  # unfused | full | partial | groups
    groups: list[list[str]] = field(default_factory=list)
    orders: dict[int, OrderChoice] = field(default_factory=dict)
    formats: dict[str, str] = field(default_factory=dict)
    layout: str = "declared"
    pars: dict[int, list[tuple[str, int]]] = field(default_factory=dict)  # group -> [(var, lanes)], outer first
    block: int | None = None  # tile size of blocked execution
    order_rule: str = "search"  # search | reference: how groups without a given order get one

    def __str__(self) -> str:
        items = ["fusion=" + "".join("[" + ",".join(g) + "]" for g in self.groups)
                 if self.fusion == "groups" else self.fusion]
        if self.order_rule != "search":
            items.append(f"order={self.order_rule}")
        for k in sorted(self.orders):
            items.append(f"order={self.orders[k]}" if k == 0 and len(self.orders) == 1 and self.fusion != "groups"
                         and self.order_rule == "search" else f"order.{k}={self.orders[k]}")
        items += [f"format.{name}={fmt}" for name, fmt in sorted(self.formats.items())]
        if self.layout != "declared":
            items.append(f"layout={self.layout}")
        for k in sorted(self.pars):
            items.append(("par=" if k == 0 else f"par.{k}=") + ",".join(f"{v}:{p}" for v, p in self.pars[k]))
        if self.block is not None:
            items.append(f"block={self.block}")
        return " ".join(items)

    @staticmethod
    def parse(text: str) -> "Schedule":
        if not text.split():
            raise UserError("the schedule is empty", "schedule",
                            "give one (unfused, partial, full, fusion=[...]) or leave it out for the default")
        s = Schedule()
        for item in text.split():
            key, sep, value = item.partition("=")
            if item in ("unfused", "full", "partial"):
                s.fusion = item
            elif key == "fusion" and sep:
                if value in ("unfused", "full", "partial"):
                    s.fusion = value
                    continue
                groups = re.findall(r"\[([^\]]*)\]", value)
                if not groups or "".join(f"[{g}]" for g in groups) != value:
                    raise UserError(f"cannot read groups {value!r}", "schedule", "write fusion=[t1,t2][t3]")
                s.fusion, s.groups = "groups", [[n for n in g.split(",") if n] for g in groups]
            elif key == "order" and value in ORDER_RULES:
                s.order_rule = value
            elif key == "order" or key.startswith("order."):
                group = _group_number(item, "0" if key == "order" else key[6:], "order.1=i,j,k")
                if value in ORDER_RULES:
                    raise UserError(f"schedule item {item!r}: order={value} is for every group", "schedule",
                                    f"write order={value}, and order.N=i,k,j for a group that takes another")
                s.orders[group] = OrderChoice.parse(value, group)
            elif (key == "par" or key.startswith("par.")) and sep:
                group = _group_number(item, "0" if key == "par" else key[4:], "par.1=i:4")
                s.pars[group] = parse_par(value, item)
            elif key == "layout" and value in ("declared", "induced"):
                s.layout = value
            elif key == "block" and sep:
                if not _is_count(value) or int(value) < 1:
                    raise UserError(f"schedule item {item!r}: the block size must be a positive integer",
                                    "schedule", "write e.g. block=32")
                s.block = int(value)
            elif key.startswith("format.") and sep:
                TensorFormat.parse(value, where=f"schedule item {item}")
                s.formats[key[7:]] = value
            else:
                raise UserError(f"unknown schedule item {item!r}", "schedule",
                                "use unfused, full, fusion=[..][..], order[.N]=..., order=reference, format.T=..., "
                                "layout=induced, par[.N]=VAR:P, block=B")
        s.check()
        return s

    def check(self) -> None:
        """Refuse items that do not go together: `order=reference` reads the stored layouts,
        which `layout=induced` leaves to the order."""
        if self.order_rule not in ORDER_RULES:
            raise UserError(f"unknown order rule {self.order_rule!r}", "schedule",
                            "use order=search or order=reference")
        if self.order_rule == "reference" and self.layout == "induced":
            raise UserError("order=reference takes the first order concordant with the declared layouts, and "
                            "layout=induced lays the inputs out by the order instead", "schedule",
                            "drop one of order=reference and layout=induced")

    def partition(self, program: Program) -> list[list[str]]:
        """The groups (op output names), in an order where producers come first."""
        names = [op_output(op) for op in program.ops]
        reshapes = {op_output(op) for op in program.ops if not isinstance(op, IndexOp)}
        if self.fusion == "unfused":
            groups = [[n] for n in names]
        elif self.fusion == "partial":
            groups = statement_groups(program)
        elif self.fusion == "full":
            groups, current = [], []
            for n in names:
                if n in reshapes:
                    groups += [current, [n]] if current else [[n]]
                    current = []
                else:
                    current.append(n)
            groups += [current] if current else []
        else:
            seen: dict[str, int] = {}
            for k, g in enumerate(self.groups):
                for n in g:
                    if n not in names:
                        raise UserError(f"schedule group {k} names {n!r}, which no op produces",
                                        "schedule", f"ops produce {', '.join(names)}")
                    if n in seen:
                        raise UserError(f"{n} is in groups {seen[n]} and {k}", "schedule")
                    seen[n] = k
                if any(n in reshapes for n in g) and len(g) > 1:
                    raise UserError(f"group {k} fuses a reshape ({[n for n in g if n in reshapes][0]})",
                                    "schedule", "put each reshape in a group of its own")
            groups = [list(g) for g in self.groups if g] + [[n] for n in names if n not in seen]
        return _dependency_order(program, groups)


def _is_count(text: str) -> bool:
    """Whether `text` is a whole number written in ASCII digits (`²` or `٣` are not)."""
    return text.isascii() and text.isdigit()


def _group_number(item: str, text: str, example: str) -> int:
    if not _is_count(text):
        raise UserError(f"bad group number in {item!r}", "schedule", f"write {example}")
    return int(text)


def parse_par(value: str, item: str) -> list[tuple[str, int]]:
    """`i:4,j:2` -> [('i', 4), ('j', 2)]: one or two (variable, lanes) levels, outer first.

    >>> parse_par("i:4,j:2", "par=i:4,j:2")
    [('i', 4), ('j', 2)]
    """
    levels = []
    for part in value.split(","):
        var, _, lanes = part.partition(":")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var) or not _is_count(lanes) or int(lanes) < 1:
            raise UserError(f"cannot read {part!r} in {item!r}", "schedule",
                            "write par=VAR:P with a whole number P >= 1, e.g. par=i:4 or par=i:4,j:2")
        levels.append((var, int(lanes)))
    if len(levels) > 2 or len({v for v, _ in levels}) != len(levels):
        raise UserError(f"{item!r} must name one or two different variables", "schedule",
                        "write par=i:4 or par=i:4,j:4 (outer first)")
    return levels


def statement_groups(program: Program) -> list[list[str]]:
    """One group per source statement: consecutive ops (in the model's execution order) made by
    the same line of its code (`loc` without the column); a line run once per layer in a loop
    gives one group per layer. Reshapes stay alone."""
    groups: list[list[str]] = []
    last = None
    for op in program.ops:
        name = op_output(op)
        line = (op.loc or name).rsplit(":", 1)[0]
        if not isinstance(op, IndexOp):
            groups.append([name])
            last = None
        elif groups and line == last:
            groups[-1].append(name)
        else:
            groups.append([name])
            last = line
    return groups


def _dependency_order(program: Program, groups: list[list[str]]) -> list[list[str]]:
    """Groups with producers first; among the groups ready at each step, the first listed."""
    owner = {n: k for k, g in enumerate(groups) for n in g}
    needs: dict[int, set[int]] = {k: set() for k in range(len(groups))}
    for op in program.ops:
        for t in op.tensors_read:
            if t in owner and owner[t] != owner[op_output(op)]:
                needs[owner[op_output(op)]].add(owner[t])
    sorter = graphlib.TopologicalSorter(needs)
    try:
        sorter.prepare()
    except graphlib.CycleError as err:
        raise UserError(f"groups {sorted(set(err.args[1]))} depend on each other in a cycle", "schedule",
                        "regroup so that no group needs a result of a later one") from None
    position = {op_output(op): k for k, op in enumerate(program.ops)}
    ready, ordered = list(sorter.get_ready()), []
    heapq.heapify(ready)
    while ready:
        k = heapq.heappop(ready)
        ordered.append(sorted(groups[k], key=position.__getitem__))
        sorter.done(k)
        for nxt in sorter.get_ready():
            heapq.heappush(ready, nxt)
    return ordered
