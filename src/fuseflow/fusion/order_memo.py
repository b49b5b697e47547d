"""Default orders remembered across regions that search alike: the layers of a model repeat the
same groups over other tensors (GPT-3's twelve decoder blocks), and each group's order search,
region variant by variant, is the bulk of a compile.

`search_fingerprint` is everything `search.default_order` reads of a region, with the tensors
named by where they first appear (their names only pick a tensor's background, coverage and data
statistics, which the fingerprint holds instead): equal fingerprints give the same default order.
The memo lives for the process, as `proof`'s remembered walks do.

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.region import Region
    >>> r = Region.build(from_mlir("tests/mlir/matmul_chain.mlir"), ["T", "O"])
    >>> search_fingerprint(r) == search_fingerprint(Region.build(from_mlir("tests/mlir/matmul_chain.mlir"), ["T", "O"]))
    True
"""
from __future__ import annotations

from .region import Region

REMEMBERED_ORDERS = 4096  # default orders kept (the memo is cleared when it holds this many)

_ORDERS: dict[tuple, list[str] | None] = {}  # (budget, proof work, fingerprint) -> the default order


class _TensorNames:
    """Tensors numbered in the order they are first asked for."""

    def __init__(self):
        self.numbers: dict[str, int] = {}

    def __call__(self, name):
        if not isinstance(name, str):
            return name
        return self.numbers.setdefault(name, len(self.numbers))


def search_fingerprint(region: Region) -> tuple | None:
    """Everything the order search reads of `region`, tensors numbered (see the module); None
    where data statistics weigh a free leaf (its densities depend on the order: not remembered)."""
    name = _TensorNames()
    instances = tuple(_instance_key(inst, name) for inst in region.instances)
    leaves = tuple((leaf.id, name(leaf.tensor), leaf.indices, repr(leaf.format), repr(leaf.declared), leaf.shape,
                    leaf.free) for leaf in region.leaves)
    stats = _stats_key(region)
    if stats is False:
        return None
    variant = region.variant
    buffered = tuple(sorted((name(t), k) for t, k in variant.buffered))
    isolated = tuple(sorted(name(t) for t in variant.isolated))
    tensors = list(name.numbers)  # every tensor the instances and leaves name
    return (tuple(region.vars), tuple(region.extent[v] for v in region.vars), tuple(sorted(region.before)),
            instances, leaves, tuple(sorted((name(n), i) for n, i in region.output_instance.items())),
            tuple(name(n) for n in region.outputs),
            tuple(region.background.get(t, 0.0) for t in tensors),
            tuple(tuple(sorted(region.covered[t])) if t in region.covered else None for t in tensors),
            (variant.separate_reductions, variant.share_covered, buffered, isolated),
            stats)


def _instance_key(inst, name: _TensorNames) -> tuple:
    op = inst.op
    return (inst.id, name(inst.tensor), op.output.indices, tuple((name(a.tensor), a.indices) for a in op.inputs),
            repr(op.body), op.reduce_vars, op.reduce_kind, name(op.init) if isinstance(op.init, str) else op.init,
            tuple(sorted(inst.var_of.items())), tuple(inst.consumers),
            tuple(sorted((k, tuple(sorted(r.items()))) for k, r in inst.rename.items())),
            tuple((type(x).__name__, getattr(x, "leaf", None), getattr(x, "producer", None)) for x in inst.operands))


def _stats_key(region: Region):
    """The level densities the search may read (False: a free leaf's, which vary with the order)."""
    stats = region.stats
    if stats is None:
        return None
    found = []
    for leaf in region.leaves:
        if leaf.tensor in stats and any(lv.is_compressed for lv in leaf.format.levels):
            if leaf.free:
                return False
            found.append((leaf.id, tuple(region.index.kept(leaf, {}).items())))
    return tuple(found)


def remembered_order(region: Region, budget: int, proof_work: int, find) -> list[str] | None:
    """`find(region)`, or the order it gave for a region with the same `search_fingerprint`."""
    fingerprint = search_fingerprint(region)
    if fingerprint is None:
        return find(region)
    key = (budget, proof_work, fingerprint)
    if key not in _ORDERS:
        if len(_ORDERS) >= REMEMBERED_ORDERS:
            _ORDERS.clear()
        _ORDERS[key] = find(region)
    order = _ORDERS[key]
    return None if order is None else list(order)
