"""Tile values in the fast engine.

A tile-valued stream is an `Arr` whose `Val` data are tile *ids* (exact in float64) into the
stream's `tiles` table (a stack of tiles). The numba kernels move ids like any payload and give
every timing, count and stop; since timing never depends on values, the values are computed
here per node, on whole stacks with the same `sim.tiles` functions the oracle calls on stacks of
one (so the bits agree): ALU results as one stacked op, reductions as elementwise folds over
stacks (step k combines the k-th element of every fiber), spacc entries by replaying the
accumulator's key order.

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tiles import Tile
    >>> import numpy as np
    >>> t = [Tile(np.full((2, 2), x)) for x in (1.0, 2.0)]
    >>> from fuseflow.sim.tokens import Val, Stop, Done
    >>> run = apply("reduce", {"val": [Val(t[0]), Val(t[1]), Stop(0), Done]},
    ...             {"kind": "sum", "tile": {"b": 2, "in": [["i", "j"]], "out": ["i"]}})
    >>> run.outs["val"][0].x.a.tolist(), run.counters["flops"]
    ([6.0, 6.0], 8)
"""
from __future__ import annotations

import numpy as np

from .fast_stream import EMPTY, STOP, VAL, Arr
from .tiles import TileSpec


def stack_of(arr: Arr, index: np.ndarray, axes, spec: TileSpec, empty: float = 0.0) -> np.ndarray:
    """The tiles of tokens `index` of a stream (an `N` is a tile of `empty`)."""
    shape = spec.shape(axes)
    if arr.tiles is None:  # a stream without tiles holds no Val among these tokens
        table = np.zeros((0,) + shape)
    else:
        table = arr.tiles.reshape((-1,) + shape)
    table = np.concatenate([table, np.full((1,) + shape, empty)])
    kind = arr.kind[index]
    ids = np.where(kind == VAL, arr.data[index], len(table) - 1).astype(np.int64)
    return table[ids]


def array_table(spec: TileSpec, vals, fill: float) -> np.ndarray:
    """Every stored tile over the node's axes, then the fill tile (id = number of stored tiles)."""
    stored = np.asarray(vals, dtype=np.float64)
    tiles = spec.read(stored.reshape((stored.shape[0], -1))) if stored.shape[0] else \
        np.zeros((0,) + spec.shape(spec.out))
    return np.concatenate([tiles, spec.full(1, fill)])


def alu(spec: TileSpec, op: str, ins: list[Arr], kind: np.ndarray, data: np.ndarray, scalar, pos):
    """(data, table) of an ALU's output tokens `kind`, `data` (the kernel's: stop levels kept,
    Val data replaced by ids); output token j comes from input tokens j."""
    sel = np.nonzero(kind == VAL)[0]
    ids = _ids(kind, data, sel.shape[0])
    if op == "coalesce":
        table = stack_of(ins[0], sel, spec.ins[0], spec, empty=scalar)
    elif op == "const":
        table = spec.full(sel.shape[0], scalar)
    else:
        table = spec.alu(op, [stack_of(a, sel, axes, spec) for a, axes in zip(ins, spec.ins)], scalar, pos)
    return ids, table


def fold(spec: TileSpec, kind: str, elems: np.ndarray, groups: list[list[int]]) -> np.ndarray:
    """Each group's elements combined in order from the identity, as the oracle does one by one:
    step k combines the k-th element of every group still that long."""
    acc = np.broadcast_to(spec.identity(kind), (len(groups),) + spec.shape(spec.out)).copy()
    longest = max((len(g) for g in groups), default=0)
    for k in range(longest):
        rows = np.array([r for r, g in enumerate(groups) if len(g) > k], dtype=np.int64)
        picks = np.array([groups[r][k] for r in rows], dtype=np.int64)
        acc[rows] = spec.combine(kind, acc[rows], elems[picks])
    return acc


def _elements(spec: TileSpec, kind: str, v: Arr) -> np.ndarray:
    """Every token of a reducer's input as its inner-reduced tile (`N`: zeros; others unused)."""
    index = np.arange(len(v))
    return spec.inner(stack_of(v, index, spec.ins[0], spec), kind)


def _ids(out_kind: np.ndarray, data: np.ndarray, count: int) -> np.ndarray:
    """A node's output data with its `count` Val tokens numbered 0, 1, .. (stop levels kept)."""
    ids = np.array(data, dtype=np.float64)
    ids[out_kind == VAL] = np.arange(count)
    return ids


def reduce(spec: TileSpec, kind: str, v: Arr, out_kind: np.ndarray, data: np.ndarray):
    """(data, table) of a reducer's output: each `S0` closes the elements since the last stop."""
    groups, current = [], []
    for p, (k, x) in enumerate(zip(v.kind.tolist(), v.data.tolist())):
        if k == VAL or k == EMPTY:
            current.append(p)
        elif k == STOP:
            if x == 0:
                groups.append(current)
            current = []
    return _ids(out_kind, data, len(groups)), fold(spec, kind, _elements(spec, kind, v), groups)


def spacc(spec: TileSpec, kind: str, inner: Arr, v: Arr, out_kind: np.ndarray, data: np.ndarray):
    """(data, table) of an order-1 accumulator: entries by inner coordinate, drained in order at
    each inner `S1` (the outer `S0`)."""
    groups, acc = [], {}
    for p, (k, x) in enumerate(zip(inner.kind.tolist(), inner.data.tolist())):
        if k == VAL:
            acc.setdefault(int(x), []).append(p)
        elif k == STOP and x == 1:
            groups += [acc[c] for c in sorted(acc)]
            acc = {}
    return _ids(out_kind, data, len(groups)), fold(spec, kind, _elements(spec, kind, v), groups)


def spacc2(spec: TileSpec, kind: str, mid: Arr, inner: Arr, v: Arr, out_kind: np.ndarray, data: np.ndarray):
    """(data, table) of an order-2 accumulator: entries by (mid, inner) coordinate; every inner
    stop consumes the mid head; an inner `S2` (the outer `S0`) drains them in order."""
    groups, acc, m = [], {}, 0
    mid_data = mid.data.tolist()
    for p, (k, x) in enumerate(zip(inner.kind.tolist(), inner.data.tolist())):
        if k == VAL:
            acc.setdefault(int(mid_data[m]), {}).setdefault(int(x), []).append(p)
        elif k == STOP:
            if x == 0:
                acc.setdefault(int(mid_data[m]), {})
            m += 1
            if x == 2:
                groups += [acc[w1][w2] for w1 in sorted(acc) for w2 in sorted(acc[w1])]
                acc = {}
    return _ids(out_kind, data, len(groups)), fold(spec, kind, _elements(spec, kind, v), groups)


def written(spec: TileSpec, v: Arr) -> list:
    """The tiles a value writer stores: one per `Val`/`N` (zeros) in order."""
    index = np.nonzero((v.kind == VAL) | (v.kind == EMPTY))[0]
    return list(stack_of(v, index, spec.out, spec))
