"""Facts about a region that do not depend on the dataflow order, which the order search asks for
again and again: computed on first use and kept (`Region.index`).

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.region import Region
    >>> r = Region.build(from_mlir("tests/mlir/matmul_chain.mlir"), ["T", "O"])
    >>> T, O = r.instances
    >>> sorted(r.index.scopes[T.id]), r.index.users["l"] == [T.id], sorted(r.index.sparse_vars(T))
    (['i', 'j', 'k', 'l'], True, ['i', 'l'])
"""
from __future__ import annotations

from ..ir.formats import TensorFormat
from .merge import located_operands


class RegionIndex:
    """Order-independent lookups over one region, each computed once. The leaves' layouts and
    the region's data statistics are read when a lookup is first made."""

    def __init__(self, region):
        self.region = region
        self._scopes: dict[int, set[str]] | None = None
        self._users: tuple | None = None
        self._locals: dict[int, frozenset[str]] | None = None
        self._sparse: dict[int, set[str]] = {}
        self._filters: dict[int, dict] | None = None
        self._kept: dict[tuple, dict[str, float]] = {}
        self._located: dict[tuple, set[int]] = {}

    @property
    def scopes(self) -> dict[int, set[str]]:
        """Each instance's variables and those of its consumers, transitively."""
        if self._scopes is None:
            scopes: dict[int, set[str]] = {}
            for inst in reversed(self.region.instances):  # consumers first
                scope = set(inst.local_vars)
                for consumer, _ in inst.consumers:
                    scope |= scopes[consumer]
                scopes[inst.id] = scope
            self._scopes = scopes
        return self._scopes

    def _user_index(self) -> tuple[dict, dict, dict]:
        if self._users is None:
            topo = {inst.id: k for k, inst in enumerate(self.region.instances)}
            users: dict[str, list[int]] = {}
            counts = {}
            for inst in self.region.instances:
                names = set(inst.local_vars)
                counts[inst.id] = len(names)
                for v in names:
                    users.setdefault(v, []).append(inst.id)
            self._users = (topo, users, counts)
        return self._users

    @property
    def local_vars(self) -> dict[int, frozenset[str]]:
        """Each instance's own variables, as a set."""
        if self._locals is None:
            self._locals = {inst.id: frozenset(inst.local_vars) for inst in self.region.instances}
        return self._locals

    @property
    def topo(self) -> dict[int, int]:
        """Each instance's position in the region's topological order."""
        return self._user_index()[0]

    @property
    def users(self) -> dict[str, list[int]]:
        """The instances using each variable."""
        return self._user_index()[1]

    @property
    def var_counts(self) -> dict[int, int]:
        """Each instance's number of distinct variables."""
        return self._user_index()[2]

    def sparse_vars(self, inst) -> set[str]:
        """Variables of compressed levels among the instance's stored operands."""
        if inst.id not in self._sparse:
            leaves = [self.region.leaves[ref] for ref in inst.leaf_ids()]
            self._sparse[inst.id] = {v for leaf in leaves
                                     for v, level in zip(leaf.level_vars(), leaf.format.levels) if level.is_compressed}
        return self._sparse[inst.id]

    @property
    def filter_leaves(self) -> dict[int, dict]:
        """Per instance: the stored operands with compressed levels, and data statistics, that it
        or a consumer downstream reads (leaf id -> leaf); their stored coordinates filter the loops
        the instance runs in."""
        if self._filters is None:
            region = self.region
            found_by: dict[int, dict] = {}
            for inst in reversed(region.instances):  # consumers first
                found = {ref: region.leaves[ref] for ref in inst.leaf_ids()
                         if region.leaves[ref].tensor in region.stats
                         and any(lv.is_compressed for lv in region.leaves[ref].format.levels)}
                for consumer, _ in inst.consumers:
                    found.update(found_by[consumer])
                found_by[inst.id] = found
            self._filters = found_by
        return self._filters

    def kept(self, leaf, pos: dict[str, int]) -> dict[str, float]:
        """Share of each variable's coordinates that the compressed levels of `leaf` keep, with its
        levels stored as they are or, for a free leaf, in the order `pos` visits them."""
        if leaf.free:
            far = len(pos)
            dims = tuple(sorted(range(len(leaf.indices)), key=lambda d: (
                pos.get(leaf.indices[d], far) if isinstance(leaf.indices[d], str) else -1, d)))
        else:
            dims = tuple(leaf.format.mode_order)
        if (leaf.id, dims) not in self._kept:
            shares = self.region.stats.level_densities(leaf.tensor, TensorFormat(leaf.format.levels, dims))
            self._kept[leaf.id, dims] = {leaf.indices[d]: x for d, x, lv in zip(dims, shares, leaf.format.levels)
                                         if lv.is_compressed and isinstance(leaf.indices[d], str)}
        return self._kept[leaf.id, dims]

    def located(self, inst, v: str) -> set[int]:
        """Operands the intersection of `inst` at `v` looks up instead of streaming, before the
        order settles the layout of free leaves (`merge.located_operands(settled=False)`)."""
        if (inst.id, v) not in self._located:
            self._located[inst.id, v] = located_operands(self.region, inst, v, settled=False)
        return self._located[inst.id, v]

