"""Whether a region has any valid order at all: a valid order, or a proof that there is none.

A walk over the prefixes of orders (`nesting.OrderWalk`) decides it, but a region with many
variables (a fused chain whose reductions keep their variables to themselves has sixteen: 10⁹
orders) may have more prefixes than any walk visits. So the walk first goes over the region's
*downstream parts*: an instance with all of its consumers, transitively. Every check of
`Nesting` among a part's instances sees the same scopes as in the whole region (each scope is
the instance's variables and its consumers'), and the checks that need a producer outside the
part are skipped, so any valid order of the region, restricted to a part's variables, is valid
for the part. A part without a valid order therefore proves the region has none, and a small
part (the softmax at the end of a chain) is walked in a few hundred prefixes.

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.region import Region
    >>> r = Region.build(from_mlir("tests/mlir/matmul_chain.mlir"), ["T", "O"])
    >>> [[i.tensor for i in part.instances] for part in downstream_parts(r)]
    [['O']]
    >>> settle(r).order
    ['i', 'k', 'j', 'l']
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .nesting import OrderWalk, storage_cycle
from .region import Region

PART_WORK = 2_000  # prefixes walked per downstream part
REMEMBERED_WALKS = 4096  # part walks kept for later settles (a group's region variants share many parts)


@dataclass(frozen=True)
class OrderVerdict:
    """A valid order, or None with why there is none and whether that is proven (every
    prefix of the region, or of one of its downstream parts, was walked)."""

    order: list[str] | None
    why: str | None = None
    proven: bool = False


def downstream_parts(region: Region) -> list[Region]:
    """The region restricted to each instance and its transitive consumers, smallest first,
    without the whole region and without repeats."""
    parts, seen = [], set()
    for inst in reversed(region.instances):  # consumers first: parts grow upstream
        keep, stack = {inst.id}, [inst.id]
        while stack:
            for consumer, _ in region.instance(stack.pop()).consumers:
                if consumer not in keep:
                    keep.add(consumer)
                    stack.append(consumer)
        key = frozenset(keep)
        if key not in seen and len(keep) < len(region.instances):
            seen.add(key)
            parts.append(_restricted(region, keep))
    return sorted(parts, key=lambda part: (len(part.vars), len(part.instances)))


def _restricted(region: Region, keep: set[int]) -> Region:
    instances = [inst for inst in region.instances if inst.id in keep]
    names = {v for inst in instances for v in inst.local_vars}
    return dataclasses.replace(
        region, instances=instances, vars=[v for v in region.vars if v in names],
        before={(a, b) for a, b in region.before if a in names and b in names},
        output_instance={n: i for n, i in region.output_instance.items() if i in keep})


@dataclass(frozen=True)
class PartWalk:
    """What `settle` keeps of one downstream part's walk: its valid orders, whether the walk
    finished within its work, and (finished without an order) why there is none."""

    orders: list
    finished: bool
    why: str | None


_PART_WALKS: dict[tuple, PartWalk] = {}  # (work, `fingerprint`) -> the walk, for every settle of the process


def fingerprint(region: Region) -> tuple:
    """Everything an `OrderWalk` over `region` reads (variables, storage constraints, each
    instance's variables, operands, consumers and buffered renames, written outputs, the
    leaves a storage conflict is reported with): equal fingerprints walk alike."""
    instances = tuple((inst.id, inst.tensor, tuple(inst.local_vars), tuple(inst.reduce_vars), inst.out_indices,
                       tuple(inst.consumers), _renames(inst),
                       tuple((type(x).__name__, getattr(x, "producer", None)) for x in inst.operands))
                      for inst in region.instances)
    leaves = tuple((str(leaf), tuple(leaf.level_vars()), leaf.free, leaf.format.is_dense) for leaf in region.leaves)
    return (tuple(region.vars), tuple(sorted(region.before)), instances,
            tuple(sorted(region.output_instance.items())), leaves)


def _renames(inst) -> tuple:
    return tuple(sorted((k, tuple(sorted(r.items()))) for k, r in inst.rename.items()))


def walk_part(part: Region, work: int) -> PartWalk:
    """`OrderWalk(part, work)` to its end, or the same walk remembered from an earlier settle."""
    key = (work, fingerprint(part))
    found = _PART_WALKS.get(key)
    if found is None:
        walk = OrderWalk(part, work)
        orders = list(walk.orders())
        found = PartWalk(orders, walk.finished, walk.why_none() if walk.finished and not orders else None)
        if len(_PART_WALKS) >= REMEMBERED_WALKS:
            _PART_WALKS.clear()
        _PART_WALKS[key] = found
    return found


def settle(region: Region, work: int = 20_000, part_work: int = PART_WORK) -> OrderVerdict:
    """A valid order of `region` (the first a walk of at most `work` prefixes finds), or why
    there is none. Each downstream part's valid orders are walked first (within `part_work`
    prefixes): a part without any proves the region has none, and the walk over the whole
    region drops every prefix that, restricted to a part's variables, starts no valid order of
    the part (`PartScreen`)."""
    cycle = storage_cycle(region)
    if cycle:
        return OrderVerdict(None, cycle, True)
    screen = PartScreen()
    for part in downstream_parts(region):
        walk = walk_part(part, part_work)
        if not walk.finished:
            continue
        names = ",".join(dict.fromkeys(inst.tensor for inst in part.instances))
        if not walk.orders:
            return OrderVerdict(None, f"its part {names} alone has no valid order: {walk.why}", True)
        screen.add(names, part.vars, walk.orders)
    walk = OrderWalk(region, work, screen)
    order = walk.first()
    if order is not None:
        return OrderVerdict(order)
    return OrderVerdict(None, walk.why_none(), walk.finished)


class PartScreen:
    """Prefixes of orders that no valid order of some downstream part starts like: the prefix
    restricted to the part's variables must begin one of the part's valid orders."""

    def __init__(self):
        self.parts: list[tuple[str, frozenset, set]] = []  # (tensors, variables, prefixes of valid orders)

    def add(self, names: str, variables: list[str], orders: list[list[str]]) -> None:
        starts = {tuple(order[:k]) for order in orders for k in range(1, len(order) + 1)}
        self.parts.append((names, frozenset(variables), starts))

    def __call__(self, prefix: list[str]) -> str | None:
        last = prefix[-1]
        for names, variables, starts in self.parts:
            if last in variables:
                mine = tuple(v for v in prefix if v in variables)
                if mine not in starts:
                    return f"no valid order of the part {names} starts {','.join(mine)}"
        return None
