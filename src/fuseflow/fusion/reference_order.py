"""`order=reference`: a group's dataflow order as FuseFlow's reference compiler picks it, with no
search: the first topological order concordant with the stored layouts.

The reference's rule (LinalgToSam, TopoSort, FusedCIN): for every input tensor, in the order the
MLIR types list them (its weights stored input dimension first), add the precedence "level k
before level k+1" of its storage, dense levels too; number the index variables in the order
those tensors first touch them; take the first order of Kahn's algorithm that always picks the
lowest-numbered ready variable. Here the tensors are the region's stored accesses (`Region.leaves`)
ordered by where the program declares their tensor (inputs as the MLIR types list them, then
tensors written by earlier groups), then by the instance that reads them (producers first), then
operand; variables no stored access touches come last, in first-use order. The compiler takes
the first of the group's region variants (`variants.region_variants`: how producers are shared
or copied) whose such order is valid (`nesting.Nesting`), else reports why the first is not.

Unlike the search (`search.default_order`), the rule reads the order off the storage alone: a
fused GraphSAGE cannot put its 2-class loop outermost and read A a second time transposed.

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.region import Region
    >>> r = Region.build(from_mlir("tests/mlir/matmul_chain.mlir"), ["T", "O"])
    >>> storage_precedences(r)
    [('A', 'i', 'l'), ('B', 'l', 'k'), ('C', 'k', 'j')]
    >>> reference_order(r)
    ['i', 'l', 'k', 'j']
"""
from __future__ import annotations

import heapq

from ..errors import UserError
from ..ir.program import Program
from .nesting import order_problem
from .precedence import loop_precedences
from .region import Region
from .variants import region_variants


def _stored_accesses(region: Region) -> list:
    """The region's leaves in the reference's order: the tensor's place among the program's
    declared tensors, then the reading instance's place (producers first), then the operand."""
    declared = {name: k for k, name in enumerate(region.program.tensors)}
    topo = {inst.id: k for k, inst in enumerate(region.instances)}
    place = {}
    for inst in region.instances:
        for k, operand in enumerate(inst.operands):
            leaf = getattr(operand, "leaf", None)
            if leaf is not None:
                place[leaf] = (topo[inst.id], k)
    return sorted(region.leaves, key=lambda leaf: (declared.get(leaf.tensor, len(declared)),
                                                  place.get(leaf.id, (len(topo), 0))))


def storage_precedences(region: Region) -> list[tuple[str, str, str]]:
    """(tensor, a, b) for each pair of consecutive stored levels, a stored above b, in the
    reference's order of the tensors (see the module)."""
    found = []
    for leaf in _stored_accesses(region):
        levels = [v for v in leaf.level_vars() if isinstance(v, str)]
        found += [(leaf.tensor, a, b) for a, b in zip(levels, levels[1:])]
    return found


def _numbering(region: Region) -> dict[str, int]:
    """Each variable's number: in the order the stored accesses touch them, then first use."""
    seen: dict[str, int] = {}
    for leaf in _stored_accesses(region):
        for v in leaf.level_vars():
            if isinstance(v, str):
                seen.setdefault(v, len(seen))
    for v in region.vars:
        seen.setdefault(v, len(seen))
    return seen


def reference_order(region: Region) -> list[str] | None:
    """The first topological order of the storage precedences by Kahn's algorithm, always
    taking the lowest-numbered ready variable; None if the precedences form a cycle."""
    order, _ = _kahn(region)
    return order


def _kahn(region: Region) -> tuple[list[str] | None, dict[str, dict[str, str]]]:
    """(the reference order or None, and then each variable left with the variables stored
    above it that were never placed, each with the tensor that stores it so)."""
    number = _numbering(region)
    above: dict[str, dict[str, str]] = {v: {} for v in region.vars}
    for tensor, a, b in storage_precedences(region):
        above[b].setdefault(a, tensor)
    ready = [(number[v], v) for v in region.vars if not above[v]]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        _, v = heapq.heappop(ready)
        order.append(v)
        for w in region.vars:
            if v in above[w]:
                del above[w][v]
                if not above[w]:
                    heapq.heappush(ready, (number[w], w))
    if len(order) == len(region.vars):
        return order, {}
    return None, {v: a for v, a in above.items() if a}


def why_not(region: Region, order: list[str] | None) -> str | None:
    """Why the reference order of `region` (`order`, from `reference_order`) cannot be used:
    the storage precedences that form a cycle, or the precedence every valid order obeys that it
    breaks, with the rule that rejects it; None if it is valid."""
    if order is None:
        return "the stored layouts ask for a cycle: " + _cycle(_kahn(region)[1])
    problem = order_problem(region, order)
    if problem is None:
        return None
    pos = {v: k for k, v in enumerate(order)}
    broken = sorted((pos[b], a, b) for b, before in loop_precedences(region).items() for a in before
                    if pos[a] > pos[b])
    if not broken:
        return problem
    _, a, b = broken[0]
    return f"it puts {b} before {a}, but every valid order has {a} first; {problem}"


def _cycle(left: dict[str, dict[str, str]]) -> str:
    """A cycle among the variables Kahn's algorithm left (each has one stored before it that is
    left too): walked upwards until a variable repeats, each step with the tensor storing it."""
    steps, seen, v = [], {}, min(left)
    while v not in seen:
        seen[v] = len(steps)
        a = min(left[v])
        steps.append(f"{left[v][a]} stores {a} before {v}")
        v = a
    return ", ".join(reversed(steps[seen[v]:]))


def region_with_reference_order(prog: Program, group: list[str], formats: dict, shapes: dict | None, free: set,
                                k: int) -> tuple[Region, list[str]]:
    """The first of the group's `region_variants` whose reference order is valid, with that order;
    a `UserError` naming the first variant's failure if none is."""
    first = None
    for region in region_variants(prog, group, formats, shapes, free):
        order = reference_order(region)
        problem = why_not(region, order)
        if problem is None:
            return region, order
        first = first or (order, problem)
    order, problem = first
    shown = f" {','.join(order)}" if order is not None else ""
    raise UserError(f"group {k} ({','.join(group)}) has no valid reference order: the first order concordant "
                    f"with the stored layouts{shown} is not valid: {problem}", "schedule",
                    f"drop order=reference to search the valid orders, or give the group one: order.{k}=...")
