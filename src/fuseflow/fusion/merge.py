"""Merge semantics of an op instance in a region: how it joins its operands' coordinates at a
variable (`instance_merge`), which operands hold every coordinate there (`operand_is_full`), and
which an intersection looks up in a dense level instead of iterating (`located_operands`). The
fusion table shows these merges, the lowering builds them, and both cost models count with them.

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.region import Region
    >>> r = Region.build(from_mlir("tests/mlir/spmv.mlir"), ["y"])
    >>> y = r.instances[0]
    >>> instance_merge(r, y, "j"), located_operands(r, y, "j")
    (Intersect(parts=(Operand(index=0), Operand(index=1))), {1})
"""
from __future__ import annotations

from .coverage import operand_covers
from .instances import LeafInput
from .patterns import Intersect, Merge, Operand, merge_at, operand_indices, skip_value


def operand_is_full(region, operand, v: str) -> bool:
    """Whether an operand's coordinates at `v` are every coordinate (a dense stored level):
    joining it by intersection then drops nothing. An op's coordinates are not taken as full:
    its stream at `v` may come out of an accumulator or a filtered merge even where its own
    merge includes the universe."""
    if not isinstance(operand, LeafInput):
        return False
    leaf = region.leaves[operand.leaf]
    levels = leaf.level_vars()
    return v in levels and not leaf.format.levels[levels.index(v)].is_compressed


def producer_covers(region, inst, k: int, v: str) -> bool:
    """Whether operand k of `inst`, computed in the region, holds every coordinate of `v`: its
    tensor's stream covers every dimension `inst` reads at `v` (`coverage.covered_dims`). Joining
    it by intersection then drops nothing, and a product with a sparse partner visits only the
    partner's coordinates (where the partner stores nothing the product is an exact zero)."""
    if isinstance(inst.operands[k], LeafInput):
        return False
    local = [u for u, w in inst.var_of.items() if w == v]  # the op's own name for v
    return bool(local) and operand_covers(inst.op, region.covered, local[0])[k]


def operand_tensor(region, operand) -> str:
    """The tensor an operand reads: a leaf's, or the producer instance's output."""
    if isinstance(operand, LeafInput):
        return region.leaves[operand.leaf].tensor
    return region.instance(operand.producer).tensor


def instance_merge(region, inst, v: str) -> Merge:
    """How op instance `inst` merges its operands' coordinates at `v` (`patterns.merge_at`)."""
    indexes = [v in inst.access(k) for k in range(len(inst.operands))]
    bg = region.background
    backgrounds = [bg.get(operand_tensor(region, x), 0.0) for x in inst.operands]
    skip = skip_value(inst.op, bg.get(inst.tensor, 0.0), v in inst.reduce_vars)
    full = [indexes[k] and (operand_is_full(region, x, v) or producer_covers(region, inst, k, v))
            for k, x in enumerate(inst.operands)]
    return merge_at(inst.op.body, indexes, backgrounds, skip, full=full)


def located_operands(region, inst, v: str, settled: bool = True) -> set[int]:
    """Operands of `inst` that its intersection at `v` looks up in a dense stored level instead of
    iterating (iterate-locate; if every part is one, the lowering iterates the first). Before an
    order is chosen (`settled=False`), a free leaf with a compressed level counts as iterated:
    which of its dimensions gets the dense level depends on the order."""
    merge = instance_merge(region, inst, v)
    uses = list(operand_indices(merge))

    def unsettled(k: int) -> bool:
        x = inst.operands[k]
        return isinstance(x, LeafInput) and region.leaves[x.leaf].free and not region.leaves[x.leaf].format.is_dense

    found: set[int] = set()

    def visit(m) -> None:
        if isinstance(m, Intersect):
            dense = [p.index for p in m.parts if isinstance(p, Operand) and uses.count(p.index) == 1
                     and operand_is_full(region, inst.operands[p.index], v) and (settled or not unsettled(p.index))]
            found.update(dense if len(dense) < len(m.parts) else dense[1:])
        for p in getattr(m, "parts", ()):
            visit(p)

    visit(merge)
    return found
