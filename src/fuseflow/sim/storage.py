"""Level storage of tensors as the simulator reads and writes them.

Levels are kept in mode order: level k stores tensor dimension `fmt.mode_order[k]`. A compressed
level has `seg` (one entry per parent position, plus one) and `crd`; a dense level only has `dim`.
Positions follow SAM: the root position is 0; a dense level's position is `parent_pos*dim + crd`;
a compressed level's positions index its `crd` array. `vals` holds one value per position of the
last level, in position order. `from_dense` stores a coordinate of a compressed level when the
subtensor below it has a nonzero (explicit zeros are dropped).

    >>> import numpy as np
    >>> from fuseflow.ir.formats import TensorFormat
    >>> A = np.array([[1.0, 0.0], [2.0, 3.0]])
    >>> t = StoredTensor.from_dense(A, TensorFormat.parse("dense,compressed"))
    >>> t.levels[1].seg, t.levels[1].crd, t.vals
    ([0, 1, 3], [0, 0, 1], [1.0, 2.0, 3.0])
    >>> t = StoredTensor.from_dense(A, TensorFormat.parse("compressed,compressed;order=1,0"))
    >>> t.levels[0].crd, t.levels[1].seg, t.levels[1].crd, t.vals
    ([0, 1], [0, 2, 3], [0, 1, 1], [1.0, 2.0, 3.0])
    >>> bool((t.to_dense() == A).all())
    True
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ir.formats import TensorFormat


@dataclass
class Level:
    """One stored level: `format` is 'dense' or 'compressed'."""

    format: str
    dim: int | None = None
    seg: list[int] | None = None
    crd: list[int] | None = None

    @property
    def is_compressed(self) -> bool:
        return self.format == "compressed"

    def child_positions(self, pos: int):
        """(coordinate, position) pairs of the fiber at parent position `pos`."""
        if self.is_compressed:
            return [(self.crd[p], p) for p in range(self.seg[pos], self.seg[pos + 1])]
        return [(c, pos * self.dim + c) for c in range(self.dim)]


def _decode(levels: list[Level], vals, shape, mode_order) -> np.ndarray:
    shape = tuple(int(s) for s in shape)
    rank = len(shape)
    mode_order = tuple(range(rank)) if mode_order is None else tuple(mode_order)
    if len(levels) != rank or sorted(mode_order) != list(range(rank)):
        raise ValueError(f"{len(levels)} levels, mode order {mode_order} do not fit shape {shape}")
    dims = [shape[m] for m in mode_order]
    entries = [(0, ())]
    for k, level in enumerate(levels):
        if not level.is_compressed and level.dim != dims[k]:
            raise ValueError(f"dense level {k} has dim {level.dim}, the shape needs {dims[k]}")
        entries = [(p, pre + (c,)) for pos, pre in entries for c, p in level.child_positions(pos)]
    vals = list(vals or [])
    n_pos = (levels[-1].seg[-1] if levels[-1].is_compressed else
             (max((p for p, _ in entries), default=-1) + 1)) if levels else 1
    if len(vals) != n_pos:
        raise ValueError(f"{len(vals)} values for {n_pos} positions of the last level")
    dense = np.zeros(dims, dtype=np.float64)
    for pos, coords in entries:
        if any(not 0 <= c < d for c, d in zip(coords, dims)):
            raise ValueError(f"coordinate {coords} out of range {tuple(dims)}")
        dense[coords] = vals[pos]
    return np.transpose(dense, np.argsort(mode_order)) if rank else dense


@dataclass
class StoredTensor:
    levels: list[Level]
    vals: list[float]
    shape: tuple[int, ...] | None = None
    fmt: TensorFormat | None = None

    @staticmethod
    def from_dense(array, fmt: TensorFormat) -> "StoredTensor":
        array = np.asarray(array, dtype=np.float64)
        if fmt.block:
            raise NotImplementedError("blocked formats are not supported by the simulator yet")
        if fmt.rank != array.ndim:
            raise ValueError(f"format {fmt} has {fmt.rank} levels, the array has {array.ndim} dims")
        tiled = np.transpose(array, fmt.mode_order) if array.ndim else array
        nonzero = tiled != 0
        entries = [(0, ())]  # (position, coordinates in level order) of the current level
        levels = []
        for k, lf in enumerate(fmt.levels):
            dim = tiled.shape[k]
            if lf.is_compressed:
                # a coordinate is stored when the subtensor below it holds a nonzero
                has = nonzero.any(axis=tuple(range(k + 1, tiled.ndim))) if k + 1 < tiled.ndim else nonzero
                seg, crd, nxt = [0], [], []
                for _, pre in entries:
                    sub = has[pre]
                    for c in range(dim):
                        if sub[c]:
                            nxt.append((len(crd), pre + (c,)))
                            crd.append(c)
                    seg.append(len(crd))
                levels.append(Level("compressed", dim, seg, crd))
            else:
                nxt = [(pos * dim + c, pre + (c,)) for pos, pre in entries for c in range(dim)]
                levels.append(Level("dense", dim))
            entries = nxt
        n_pos = (max((p for p, _ in entries), default=-1) + 1) if levels else 1
        if levels and levels[-1].is_compressed:
            n_pos = len(levels[-1].crd)
        vals = [0.0] * n_pos
        for pos, pre in entries:
            vals[pos] = float(tiled[pre])
        return StoredTensor(levels, vals, tuple(array.shape), fmt)

    def to_dense(self, shape=None) -> np.ndarray:
        shape = self.shape if shape is None else shape
        order = self.fmt.mode_order if self.fmt is not None else None
        return _decode(self.levels, self.vals, shape, order)


@dataclass
class WrittenTensor:
    """What the level writers and the value writer of one output tensor produced."""

    levels: dict[int, Level] = field(default_factory=dict)
    vals: list[float] | None = None

    def to_dense(self, shape, mode_order=None) -> np.ndarray:
        rank = len(tuple(shape))
        missing = [k for k in range(rank) if k not in self.levels]
        if missing or len(self.levels) != rank:
            raise ValueError(f"levels written {sorted(self.levels)}, a rank-{rank} tensor needs 0..{rank - 1}")
        return _decode([self.levels[k] for k in range(rank)], self.vals, shape, mode_order)
