"""The positions a kernel will store of an output, derived from its structure and its inputs'
stored positions, without simulating it: what a sampled producer hands a later kernel.

A kernel's level writers store the coordinates its iteration visits at the output's variables
(`fusion.lower_write`): the points of its nest down to the deepest output variable, each
variable's coordinates the merge of its operands there (an intersection for a product, a union
for a sum, every coordinate for the universe), projected onto the output's variables (a sparse
accumulator's row is the union over the reduction it accumulates). Values do not enter: a
product's zeros, a ReLU's zeros and a sum over an empty fiber stay stored, as in the whole run.
Where the nest reaches every position (each output variable visits every coordinate, each summed
one at least one: GCN's A·X when every node has an edge and X is dense), the pattern is
`footing.EveryPosition`, found from the operands' levels without listing a point. Derived here:
kernels of one op over stored operands of up to two dimensions; anything else is None (the
sampled mode then simulates every window of the producer; an output dense at every level needs
no pattern: `footing.patterns_read_as_written`). `tests/test_modes_agree.py` checks each
derived pattern against the one the windows wrote.

    >>> import fuseflow
    >>> from fuseflow.pipeline import prepared
    >>> from fuseflow.partition.windows import kernel_setup, reference_values
    >>> p = fuseflow.from_mlir("tests/mlir/spmm_ikj.mlir")
    >>> data, compiled = prepared(p, "full", None, 1, 0.05)
    >>> kernel = compiled.kernels[0]
    >>> setup = kernel_setup(kernel, reference_values(p, data))
    >>> derived_pattern(kernel, setup, "Y").shape  # rank x positions
    (2, 336)
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..fusion.instances import LeafInput
from ..fusion.patterns import Intersect, Nothing, Operand, Union, Universe
from ..memory import Budget
from ..sim.storage import level_entries
from .footing import EveryPosition, Pattern, positions, sorted_unique, unique_positions

POINT_BYTES = 96  # a point held while a nest is extended: its columns, keys and the copies made on the way


class _TooLarge(Exception):
    pass


_EVERY = object()  # a product shortcut's answer: every position of the output


def derived_pattern(kernel, setup, name: str, budget: Budget | None = None) -> Pattern | None:
    """The positions `kernel` will store of output `name` (rank x n coordinates per tensor
    dimension, as `footing.written_pattern` gives them, or `footing.EveryPosition`), its inputs those stored in `setup`
    (`windows.KernelSetup`); None where this cannot be derived here, or not within `budget`
    (default: what is available)."""
    max_points = (budget or Budget()).allowed() // POINT_BYTES
    meta = kernel.graph.tensors[name]
    shape = tuple(int(s) for s in meta.shape)
    if meta.block or not shape:
        return None
    region = kernel.region
    if region is None or len(region.instances) != 1 or region.output_instance.get(name) is None:
        return None
    inst = region.instances[0]
    if isinstance(inst.op.init, str) or not all(isinstance(x, LeafInput) for x in inst.operands):
        return None
    try:
        return _Nest(kernel, setup, inst, max_points).pattern(shape)
    except _TooLarge:
        return None


class _Nest:
    """The points one instance's nest visits, as columns of coordinates (one per variable)."""

    def __init__(self, kernel, setup, inst, max_points: int):
        self.kernel, self.inst, self.max_points = kernel, inst, max_points
        self.table = kernel.table
        self.extent = kernel.region.extent
        self._projections: dict = {}  # operand -> {(variables bound, variable): its stored pairs}
        self.operands = []  # per operand: its variables and (when asked) the coordinates it stores of them
        self.levels, self.prefixes = [], []  # per operand: its stored levels, and their variables in order
        for k, ref in enumerate(inst.operands):
            leaf = kernel.region.leaves[ref.leaf]
            stored = setup.stored.get(leaf.storage)
            if stored is None or stored.fmt is None or stored.fmt.block:
                raise _TooLarge
            access = inst.access(k)
            self.operands.append(_Operand(stored, access))
            kept = [m for m in stored.fmt.mode_order if isinstance(access[m], str)]
            self.levels.append([stored.levels[stored.fmt.mode_order.index(m)] for m in kept]
                               if len(kept) == len(access) else [])
            self.prefixes.append([access[m] for m in kept] if len(kept) == len(access) else [])

    def pattern(self, shape: tuple) -> Pattern | None:
        out = self.inst.out_indices
        out_vars = [v for v in out if isinstance(v, str)]
        nest = self.kernel.table.nesting.nest[self.inst.id]
        if any(v not in nest for v in out_vars):
            return None
        depth = max(nest.index(v) for v in out_vars) + 1
        names = nest[:depth]
        if len(out_vars) == len(out) and self._every_position(names, out_vars):
            return EveryPosition(shape)
        shortcut = self._product_shortcut(names, out_vars)
        if shortcut is _EVERY:
            return EveryPosition(shape)
        if shortcut is not None:
            points, names = shortcut
        else:
            points = np.zeros((1, 0), dtype=np.int64)
            for v in names:
                points = self._extend(points, names[:names.index(v)], v)
        columns = [points[:, names.index(v)] if isinstance(v, str) else np.zeros(len(points), dtype=np.int64)
                   for v in out]
        return unique_positions(np.array(columns, dtype=np.int64).reshape(len(out), -1), shape)

    def _every_position(self, names: list[str], out_vars: list[str]) -> bool:
        """Whether the nest over `names` reaches every position of the output variables: each of
        them visits every coordinate under every point above it, and each variable summed away
        among them at least one (GCN's A·X when every node has an edge, X dense)."""
        for depth, v in enumerate(names):
            bound, merge = names[:depth], self._merge(v)
            if not (self._visits_every(merge, v, bound) if v in out_vars else self._visits_one(merge, v, bound)):
                return False
        return True

    def _visits_one(self, merge, v: str, bound: list[str]) -> bool:
        """Whether `merge` at `v` visits at least one coordinate under every point over `bound`."""
        if int(self.extent[v]) == 0:
            return False
        if isinstance(merge, Operand):
            return v not in self.operands[merge.index].names or self._stores_one(merge.index, v, bound)
        if isinstance(merge, Intersect):  # one part with some coordinate, every other part with all
            return any(self._visits_one(p, v, bound) and
                       all(self._visits_every(q, v, bound) for q in merge.parts if q is not p) for p in merge.parts)
        if isinstance(merge, Union):
            return any(self._visits_one(p, v, bound) for p in merge.parts)
        return self._visits_every(merge, v, bound)

    def _stores_one(self, k: int, v: str, bound: list[str]) -> bool:
        """Whether operand k stores some coordinate of `v` under every point over `bound`: the
        levels above `v`'s hold bound variables only and store every position, and no fiber of
        `v`'s level is empty."""
        operand, prefix = self.operands[k], self.prefixes[k]
        if not self._above(k, v, bound) or not operand.spans(self.extent):
            return False
        depth = prefix.index(v)
        level = operand.stored.levels[depth]
        return _entries_at(operand.stored.levels[:depth]) == operand.positions(depth) and \
            (not level.is_compressed or bool((np.diff(level.seg) > 0).all()))

    def _above(self, k: int, v: str, bound: list[str]) -> bool:
        """Whether operand k's levels above `v`'s store exactly its variables among `bound`."""
        prefix = self.prefixes[k]
        return v in prefix and set(prefix[:prefix.index(v)]) == set(bound) & set(prefix)

    def _visits_every(self, merge, v: str, bound: list[str]) -> bool:
        """Whether `merge` at `v` visits every coordinate of `v` under every point over `bound`:
        the universe, an operand that stores every coordinate there (or does not index `v`), an
        intersection of such, a union with one."""
        if isinstance(merge, Universe):
            return True
        if isinstance(merge, Operand):
            return v not in self.operands[merge.index].names or self._stores_every(merge.index, v, bound)
        if isinstance(merge, Intersect):
            return all(self._visits_every(p, v, bound) for p in merge.parts)
        if isinstance(merge, Union):
            return any(self._visits_every(p, v, bound) for p in merge.parts)
        return False

    def _stores_every(self, k: int, v: str, bound: list[str]) -> bool:
        """Whether operand k stores every coordinate of `v` under every point over `bound`: its
        levels down to `v`'s store every position when the levels above it hold bound variables
        only (an adjacency's rows when no node is isolated, dense features), else the whole
        operand stores every position."""
        operand, prefix = self.operands[k], self.prefixes[k]
        if not operand.spans(self.extent):
            return False
        levels = operand.stored.levels
        if self._above(k, v, bound):
            levels = levels[:prefix.index(v) + 1]
        return _entries_at(levels) == operand.positions(len(levels))

    def _merge(self, v: str):
        cell = self.table.cells.get((v, self.table.inst_key(self.inst.id)))
        return cell.merge if cell is not None and cell.merge is not None else self.table.merge(self.inst, v)

    def _extend(self, points: np.ndarray, bound: list[str], v: str) -> np.ndarray:
        """`points` (over `bound`) extended by the coordinates the merge at `v` visits under each."""
        rows, crd = self._visit(self._merge(v), points, bound, v)
        return np.column_stack([points[rows], crd]) if len(rows) else np.zeros((0, len(bound) + 1), dtype=np.int64)

    def _visit(self, merge, points: np.ndarray, bound: list[str], v: str) -> tuple[np.ndarray, np.ndarray]:
        """(point index, coordinate) pairs of `merge` at `v` under each of `points`, sorted."""
        n, extent = len(points), int(self.extent[v])
        if isinstance(merge, Universe):
            self._fits(n * extent)
            return np.repeat(np.arange(n), extent), np.tile(np.arange(extent, dtype=np.int64), n)
        if isinstance(merge, Nothing):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        if isinstance(merge, Operand):
            return self._fibers(merge.index, points, bound, v)
        if isinstance(merge, Intersect):  # the fewest candidates, kept where every other part has them
            first = min(merge.parts, key=lambda p: self._count(p, points, bound, v))
            rows, crd = self._visit(first, points, bound, v)
            keep = np.ones(len(rows), dtype=bool)
            for other in merge.parts:
                if other is not first:
                    keep &= self._member(other, points, bound, v, rows, crd)
            return rows[keep], crd[keep]
        if not isinstance(merge, Union):
            raise _TooLarge
        parts = [self._visit(p, points, bound, v) for p in merge.parts]
        key = sorted_unique(np.concatenate([rows * extent + crd for rows, crd in parts]))
        return key // extent, key % extent

    def _count(self, merge, points: np.ndarray, bound: list[str], v: str) -> float:
        """How many pairs `_visit` would give (inf where not counted cheaply)."""
        if isinstance(merge, Universe):
            return float(len(points)) * float(self.extent[v])
        if isinstance(merge, Nothing):
            return 0.0
        if isinstance(merge, Operand) and v in self.operands[merge.index].names:
            pairs, want = self._pairs(merge.index, points, bound, v)
            return float((np.searchsorted(pairs[:, 0], want, "right") - np.searchsorted(pairs[:, 0], want)).sum())
        return float("inf")

    def _member(self, merge, points, bound, v, rows: np.ndarray, crd: np.ndarray) -> np.ndarray:
        """Whether each (point index, coordinate) pair is among `merge`'s at `v`."""
        if isinstance(merge, Universe):
            return np.ones(len(rows), dtype=bool)
        if isinstance(merge, Nothing):
            return np.zeros(len(rows), dtype=bool)
        if isinstance(merge, Operand):
            if v not in self.operands[merge.index].names:
                return np.ones(len(rows), dtype=bool)
            pairs, want = self._pairs(merge.index, points, bound, v)
            extent = int(self.extent[v])
            have = pairs[:, 0] * extent + pairs[:, 1]  # sorted: pairs are unique rows in order
            asked = want[rows] * extent + crd
            at = np.minimum(np.searchsorted(have, asked), max(len(have) - 1, 0))
            return (have[at] == asked) if len(have) else np.zeros(len(rows), dtype=bool)
        found = [self._member(p, points, bound, v, rows, crd) for p in merge.parts]
        if isinstance(merge, Intersect):
            return np.logical_and.reduce(found)
        if isinstance(merge, Union):
            return np.logical_or.reduce(found)
        raise _TooLarge

    def _fibers(self, k: int, points: np.ndarray, bound: list[str], v: str) -> tuple[np.ndarray, np.ndarray]:
        """(point index, coordinate) pairs: operand k's stored coordinates at `v` under each point
        (its stored positions projected onto its variables bound so far and `v`)."""
        if v not in self.operands[k].names:
            return self._visit(Universe(), points, bound, v)
        pairs, want = self._pairs(k, points, bound, v)
        lo, hi = np.searchsorted(pairs[:, 0], want, "left"), np.searchsorted(pairs[:, 0], want, "right")
        counts = hi - lo
        total = int(counts.sum())
        self._fits(total)
        rows = np.repeat(np.arange(len(points)), counts)
        at = np.repeat(lo, counts) + np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        return rows, pairs[at, 1]

    def _pairs(self, k: int, points: np.ndarray, bound: list[str], v: str) -> tuple[np.ndarray, np.ndarray]:
        """Operand k's stored (key of its variables bound so far, coordinate at `v`) pairs, unique
        and sorted, and the key each of `points` looks up."""
        names = self.operands[k].names
        on = [u for u in names if u in bound]
        extents = [self.extent[u] for u in on]
        cache = self._projections.setdefault(k, {})
        key = (tuple(on), v)
        if key not in cache:
            prefix = self.prefixes[k]
            depth = next((m for m in range(1, len(prefix) + 1) if set(prefix[:m]) == set(on) | {v}), None)
            if depth is not None:  # the stored coordinates of its first levels: each once already
                self._fits(_entries_at(self.levels[k][:depth]))
                _, level_coords = level_entries(self.levels[k][:depth])
                columns = dict(zip(prefix[:depth], level_coords))
                flat = sorted_unique(_keys([columns[u] for u in on], extents, len(level_coords[0])) *
                                     int(self.extent[v]) + columns[v])
            else:
                self._fits(_entries_at(self.levels[k]) if self.levels[k] else 0)
                coords = self.operands[k].coords()
                keys = _keys([coords[names.index(u)] for u in on], extents, coords.shape[1])
                flat = sorted_unique(keys * int(self.extent[v]) + coords[names.index(v)])
            cache[key] = np.column_stack([flat // int(self.extent[v]), flat % int(self.extent[v])])
        return cache[key], _keys([points[:, bound.index(u)] for u in on], extents, len(points))

    def _product_shortcut(self, names: list[str], out_vars: list[str]):
        """A nest of three variables whose middle or first one is summed away and whose last one
        depends on that one only (an SpMM's `i,k,j` or `k,i,j`): the pattern is a sparse boolean
        product of the points over the first two and the last variable's fibers under the summed
        one, never the three-variable points (an SpMM over a graph's edges x features).
        Returns (points over the output variables, their names), `_EVERY` where that product
        is every position (known from its factors, never listed), or None."""
        if len(names) != 3 or len(out_vars) != 2:
            return None
        summed = [v for v in names if v not in out_vars]
        last = names[2]
        if len(summed) != 1 or last not in out_vars:
            return None
        r = summed[0]
        if any(last in op.names and any(u not in (r, last) for u in op.names) for op in self.operands):
            return None
        first_two = np.zeros((1, 0), dtype=np.int64)
        for v in names[:2]:
            first_two = self._extend(first_two, names[:names.index(v)], v)
        other = [v for v in names[:2] if v != r][0]
        rs = np.unique(first_two[:, names.index(r)]).reshape(-1, 1)
        under = self._extend(rs, [r], last)
        left = sp.csr_array((np.ones(len(first_two)), (first_two[:, names.index(other)], first_two[:, names.index(r)])),
                            shape=(int(self.extent[other]), int(self.extent[r])))
        right = sp.csr_array((np.ones(len(under)), (under[:, 0], under[:, 1])),
                             shape=(int(self.extent[r]), int(self.extent[last])))
        if left.nnz == left.shape[0] * left.shape[1] and len(np.unique(right.indices)) == right.shape[1]:
            return _EVERY  # every row meets every summed coordinate, and those reach every column
        product = left @ right
        product.sort_indices()
        product = product.tocoo()
        return np.column_stack([product.row, product.col]).astype(np.int64), [other, last]

    def _fits(self, count: int) -> None:
        if count > self.max_points:
            raise _TooLarge


@dataclass
class _Operand:
    """A stored operand's variables (its constant indices left out) and, listed only when first
    asked for, the coordinates of its positions per variable (a dense operand's are its whole
    shape; its first levels usually suffice: `_Nest._pairs`)."""

    stored: object
    access: tuple
    names: list = field(init=False)
    _coords: np.ndarray | None = field(default=None, init=False)

    def __post_init__(self):
        self.names = [v for v in self.access if isinstance(v, str)]
        if len(set(self.names)) != len(self.names):  # a diagonal access (A(i,i)): not derived here
            raise _TooLarge

    def spans(self, extent: dict) -> bool:
        """Whether each of its dimensions indexed by a variable is as long as that variable's `extent`."""
        return all(int(extent[v]) == int(self.stored.shape[d]) for d, v in enumerate(self.access) if isinstance(v, str))

    def positions(self, depth: int) -> int:
        """How many positions its first `depth` levels have (all of them stored or not)."""
        order = self.stored.fmt.mode_order
        return int(np.prod([int(self.stored.shape[order[m]]) for m in range(depth)], dtype=np.int64))

    def coords(self) -> np.ndarray:
        if self._coords is None:
            kept = [d for d, v in enumerate(self.access) if isinstance(v, str)]
            self._coords = positions(self.stored.levels, self.stored.fmt.mode_order)[kept]
        return self._coords


def _entries_at(levels) -> int:
    """Positions stored down to the last of `levels` (counted from the levels, nothing listed)."""
    count = 1
    for level in levels:
        count = len(level.crd) if level.is_compressed else count * int(level.dim)
    return count


def _keys(columns: list[np.ndarray], extents: list[int], n: int) -> np.ndarray:
    """One int64 key per row of `columns` (mixed radix over `extents`); zeros when there are none."""
    out = np.zeros(n, dtype=np.int64)
    for column, extent in zip(columns, extents):
        out = out * int(extent) + np.asarray(column, dtype=np.int64)
    return out
