"""Level storage of tensors as the simulator reads and writes them.

Levels are kept in mode order: level k stores tensor dimension `fmt.mode_order[k]`. A compressed
level has `seg` (one entry per parent position, plus one) and `crd`; a dense level only has `dim`.
Positions follow SAM: the root position is 0; a dense level's position is `parent_pos*dim + crd`;
a compressed level's positions index its `crd` array. `vals` holds one value per position of the
last level, in position order. `from_dense` stores a coordinate of a compressed level when the
subtensor below it holds a value other than the tensor's background `fill` (0 unless an op makes
it, e.g., -inf for masked scores); positions not stored read back as `fill`. Arrays are numpy.

A blocked format (`block=16x16`) stores the tensor's grid of blocks in its levels and one dense
tile per position (`vals` has shape (positions, *block)); a block is stored when any of its
entries differs from `fill`, and missing blocks read back as `fill`.

    >>> import numpy as np
    >>> from fuseflow.ir.formats import TensorFormat
    >>> A = np.array([[1.0, 0.0], [2.0, 3.0]])
    >>> t = StoredTensor.from_dense(A, TensorFormat.parse("dense,compressed"))
    >>> t.levels[1].seg.tolist(), t.levels[1].crd.tolist(), t.vals.tolist()
    ([0, 1, 3], [0, 0, 1], [1.0, 2.0, 3.0])
    >>> t = StoredTensor.from_dense(A, TensorFormat.parse("compressed,compressed;order=1,0"))
    >>> t.levels[0].crd.tolist(), t.levels[1].seg.tolist(), t.levels[1].crd.tolist(), t.vals.tolist()
    ([0, 1], [0, 2, 3], [0, 1, 1], [1.0, 2.0, 3.0])
    >>> bool((t.to_dense() == A).all())
    True
    >>> B = np.kron([[1.0, 0.0], [0.0, 2.0]], np.ones((2, 2)))
    >>> t = StoredTensor.from_dense(B, TensorFormat.parse("dense,compressed;block=2x2"))
    >>> t.levels[1].crd.tolist(), t.vals.shape, bool((t.to_dense() == B).all())
    ([0, 1], (2, 2, 2), True)
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..errors import UserError
from ..ir.formats import TensorFormat
from ..ir.values import entries, is_sparse


@dataclass
class Level:
    """One stored level: `format` is 'dense' or 'compressed'."""

    format: str
    dim: int | None = None
    seg: np.ndarray | None = None
    crd: np.ndarray | None = None

    def __post_init__(self):
        if self.seg is not None:
            self.seg = np.asarray(self.seg, dtype=np.int64)
        if self.crd is not None:
            self.crd = np.asarray(self.crd, dtype=np.int64)

    @property
    def is_compressed(self) -> bool:
        return self.format == "compressed"

    def child_positions(self, pos: int):
        """(coordinate, position) pairs of the fiber at parent position `pos` (Python ints)."""
        if self.is_compressed:
            lo, hi = int(self.seg[pos]), int(self.seg[pos + 1])
            return list(zip(self.crd[lo:hi].tolist(), range(lo, hi)))
        return [(c, pos * self.dim + c) for c in range(self.dim)]

    def children(self, parents: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For an array of parent positions: (index of the parent, coordinate, position) of every
        child, in order."""
        parents = np.asarray(parents, dtype=np.int64)
        if not self.is_compressed:
            d = int(self.dim)
            rows = np.repeat(np.arange(len(parents)), d)
            crd = np.tile(np.arange(d, dtype=np.int64), len(parents))
            return rows, crd, np.repeat(parents * d, d) + crd
        starts, ends = self.seg[parents], self.seg[parents + 1]
        counts = ends - starts
        rows = np.repeat(np.arange(len(parents)), counts)
        offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        pos = np.repeat(starts, counts) + offsets
        return rows, self.crd[pos], pos


def level_entries(levels: list[Level]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Positions of the last level's entries and their coordinates, level by level."""
    pos = np.zeros(1, dtype=np.int64)
    coords: list[np.ndarray] = []
    for level in levels:
        rows, crd, pos = level.children(pos)
        coords = [c[rows] for c in coords] + [crd]
    return pos, coords


def _blocks(shape, block) -> tuple[int, ...]:
    """The grid of blocks of `shape` (UserError unless every block size divides its dimension)."""
    shape, block = tuple(int(s) for s in shape), tuple(int(b) for b in block)
    if len(block) != len(shape) or any(b < 1 or s % b for s, b in zip(shape, block)):
        raise UserError(f"block shape {'x'.join(map(str, block))} does not divide tensor shape {shape}",
                        "format", "choose block sizes that divide every dimension")
    return tuple(s // b for s, b in zip(shape, block))


def _unblock(grid: np.ndarray, block) -> np.ndarray:
    """(g0, .., b0, ..) -> the dense (g0*b0, ..) array."""
    rank = len(block)
    inter = [a for d in range(rank) for a in (d, rank + d)]
    return np.transpose(grid, inter).reshape([grid.shape[d] * block[d] for d in range(rank)])


def _decode(levels: list[Level], vals, shape, mode_order, fill: float = 0.0, block=None) -> np.ndarray:
    if block:
        grid_shape = _blocks(shape, block)
        tiles = np.asarray(vals, dtype=np.float64).reshape((-1,) + tuple(block)) if len(vals) else \
            np.zeros((0,) + tuple(block))
        grid = _decode(levels, tiles, grid_shape, mode_order, fill)
        return _unblock(grid, tuple(block))
    shape = tuple(int(s) for s in shape)
    rank = len(shape)
    mode_order = tuple(range(rank)) if mode_order is None else tuple(mode_order)
    if len(levels) != rank or sorted(mode_order) != list(range(rank)):
        raise ValueError(f"{len(levels)} levels, mode order {mode_order} do not fit shape {shape}")
    dims = [shape[m] for m in mode_order]
    for k, level in enumerate(levels):
        if not level.is_compressed and level.dim != dims[k]:
            raise ValueError(f"dense level {k} has dim {level.dim}, the shape needs {dims[k]}")
    vals = np.asarray(vals if vals is not None else [], dtype=np.float64)
    tile = vals.shape[1:]  # () for scalars, the block shape for tiles
    if rank and all(not level.is_compressed for level in levels):  # every position, in row-major mode order
        if len(vals) != int(np.prod(dims, dtype=np.float64)):
            raise ValueError(f"{len(vals)} values for {int(np.prod(dims))} positions of the last level")
        return np.transpose(vals.reshape(tuple(dims) + tile),
                            tuple(np.argsort(mode_order)) + tuple(range(rank, rank + len(tile))))
    pos, coords = level_entries(levels)
    n_pos = (len(levels[-1].crd) if levels[-1].is_compressed else int(pos.max(initial=-1)) + 1) if levels else 1
    if len(vals) != n_pos:
        raise ValueError(f"{len(vals)} values for {n_pos} positions of the last level")
    for c, d in zip(coords, dims):
        if len(c) and (c.min() < 0 or c.max() >= d):
            raise ValueError(f"a coordinate is out of range {tuple(dims)}")
    dense = np.full(tuple(dims) + tile, fill, dtype=np.float64)
    if rank:
        dense[tuple(coords)] = vals[pos]
        return np.transpose(dense, tuple(np.argsort(mode_order)) + tuple(range(rank, rank + len(tile))))
    dense[()] = vals[0] if len(vals) else fill
    return dense


def storage_bytes(value, fmt: TensorFormat) -> int:
    """Peak bytes `StoredTensor.from_value(value, fmt)` allocates, estimated from the value's
    size alone (for the memory guard: checked before a kernel stores its inputs).

        >>> import scipy.sparse as sp
        >>> storage_bytes(sp.eye_array(1000, format="csr"), TensorFormat.parse("dense,compressed"))
        56016
        >>> storage_bytes(np.zeros((100, 10)), TensorFormat.parse("dense,dense"))
        12096
    """
    block = tuple(fmt.block or ())
    if is_sparse(value):
        nnz = int(value.nnz)
        if len(value.shape) == 2 and not block and fmt.levels[1].is_compressed:
            return 40 * nnz + 16 * (int(value.shape[fmt.mode_order[0]]) + 1)
        tiles = min(nnz, int(np.prod(_blocks(value.shape, block), dtype=np.float64))) if block else 0
        return 128 * nnz + 8 * tiles * int(np.prod(block, dtype=np.float64))
    size = int(np.prod(np.shape(value), dtype=np.float64))
    if not block and not any(lf.is_compressed for lf in fmt.levels):
        return 8 * size + 4096  # one transposed copy (and its header)
    return size * 8 * (np.ndim(value) + 3)


DENSE_PIECE = 1 << 22  # elements of a dense matrix converted to compressed form at a time


def _dense_compressed(matrix: np.ndarray) -> sp.csr_array:
    """A dense matrix's entries other than 0 as a CSR matrix, converted a piece of rows at a time
    into arrays sized once: about 12 bytes an entry at the peak, where scipy's conversion lists
    every entry's coordinates first (a 736,389 x 349 result: 4 GB of them, 12 GB in all).

        >>> m = np.array([[0.0, 2.0], [0.0, 0.0], [3.0, 4.0]])
        >>> c = _dense_compressed(m); c.indptr.tolist(), c.indices.tolist(), c.data.tolist()
        ([0, 1, 1, 3], [1, 0, 1], [2.0, 3.0, 4.0])
    """
    rows_at_once = max(1, DENSE_PIECE // max(1, matrix.shape[1]))
    counts = np.zeros(matrix.shape[0] + 1, dtype=np.int64)
    for lo in range(0, matrix.shape[0], rows_at_once):
        counts[lo + 1:lo + 1 + rows_at_once] = np.count_nonzero(matrix[lo:lo + rows_at_once], axis=1)
    indptr = np.cumsum(counts)
    index_type = np.int32 if matrix.shape[1] < 2**31 and indptr[-1] < 2**31 else np.int64
    indices, data = np.empty(indptr[-1], dtype=index_type), np.empty(indptr[-1], dtype=matrix.dtype)
    for lo in range(0, matrix.shape[0], rows_at_once):
        piece = matrix[lo:lo + rows_at_once]
        rows, cols = np.nonzero(piece)
        start, end = indptr[lo], indptr[min(lo + rows_at_once, matrix.shape[0])]
        indices[start:end], data[start:end] = cols, piece[rows, cols]
    return sp.csr_array((data, indices, indptr.astype(index_type)), shape=matrix.shape)


def _from_compressed_matrix(value, fmt: TensorFormat) -> "StoredTensor":
    """Storage of a matrix (scipy or dense) whose inner level is compressed, straight from the
    index pointers of its CSR (mode order 0,1) or CSC (1,0) form: no sort and no coordinate
    copies, about 16 bytes an entry where `from_entries` takes 90."""
    if not is_sparse(value):  # a dense array: its entries other than 0 (as from_dense stores them)
        value = np.asarray(value, dtype=np.float64)
        major = _dense_compressed(value if tuple(fmt.mode_order) == (0, 1) else value.T)
        if tuple(fmt.mode_order) != (0, 1):
            major = sp.csc_array((major.data, major.indices, major.indptr), shape=value.shape)
    else:
        major = sp.csr_array(value) if tuple(fmt.mode_order) == (0, 1) else sp.csc_array(value)
    if not (major.has_canonical_format and np.all(major.data != 0)):
        major = major.copy()
        major.sum_duplicates()
        major.eliminate_zeros()
    dims = [value.shape[m] for m in fmt.mode_order]
    indptr = np.asarray(major.indptr, dtype=np.int64)
    if fmt.levels[0].is_compressed:  # only the rows (columns) that hold an entry
        rows = np.flatnonzero(indptr[1:] != indptr[:-1])
        top = Level("compressed", dims[0], np.array([0, len(rows)]), rows)
        seg = np.append(indptr[rows], indptr[-1])
    else:
        top, seg = Level("dense", dims[0]), indptr
    levels = [top, Level("compressed", dims[1], seg, major.indices)]
    vals = np.asarray(major.data, dtype=np.float64)
    return StoredTensor(levels, vals, tuple(int(s) for s in value.shape), fmt, 0.0)


@dataclass
class StoredTensor:
    levels: list[Level]
    vals: np.ndarray
    shape: tuple[int, ...] | None = None
    fmt: TensorFormat | None = None
    fill: float = 0.0

    @staticmethod
    def from_dense(array, fmt: TensorFormat, fill: float = 0.0) -> "StoredTensor":
        array = np.asarray(array, dtype=np.float64)
        if fmt.rank != array.ndim:
            raise ValueError(f"format {fmt} has {fmt.rank} levels, the array has {array.ndim} dims")
        rank, block = array.ndim, tuple(fmt.block or ())
        if block:  # levels over the grid of blocks, one dense tile per position
            grid = _blocks(array.shape, block)
            split = array.reshape([x for g, b in zip(grid, block) for x in (g, b)])
            values = np.transpose(split, tuple(range(0, 2 * rank, 2)) + tuple(range(1, 2 * rank, 2)))
            nonfill = (values != fill).any(axis=tuple(range(rank, 2 * rank)))
        else:
            values, nonfill = array, array != fill
        tail = tuple(range(rank, values.ndim))
        tiled = np.transpose(values, tuple(fmt.mode_order) + tail) if rank else values
        stored = np.transpose(nonfill, fmt.mode_order) if rank else nonfill
        pos = np.zeros(1, dtype=np.int64)
        coords: list[np.ndarray] = []
        levels = []
        for k, lf in enumerate(fmt.levels):
            dim = tiled.shape[k]
            if lf.is_compressed:
                # a coordinate is stored when the subtensor below it holds a value other than fill
                has = stored.any(axis=tuple(range(k + 1, rank))) if k + 1 < rank else stored
                sub = has[tuple(coords)] if coords else has[None, :]
                rows, crd = np.nonzero(sub)
                seg = np.concatenate([[0], np.cumsum(sub.sum(axis=1))])
                levels.append(Level("compressed", dim, seg, crd))
                pos = np.arange(len(crd), dtype=np.int64)
            else:
                levels.append(Level("dense", dim))
                rows = np.repeat(np.arange(len(pos)), dim)
                crd = np.tile(np.arange(dim, dtype=np.int64), len(pos))
                pos = np.repeat(pos * dim, dim) + crd
            coords = [c[rows] for c in coords] + [crd]
        n_pos = (len(levels[-1].crd) if levels[-1].is_compressed else int(pos.max(initial=-1)) + 1) if levels else 1
        vals = np.full((n_pos,) + block, fill, dtype=np.float64)
        if levels:
            vals[pos] = tiled[tuple(coords)]
        else:
            vals[:] = tiled
        return StoredTensor(levels, vals, tuple(array.shape), fmt, fill)

    @staticmethod
    def from_value(value, fmt: TensorFormat, fill: float = 0.0) -> "StoredTensor":
        """Storage of a dense array, or of a scipy sparse matrix without making it dense; as
        `from_dense`, in a few bytes an entry for the common layouts (all levels dense, or a
        matrix with a compressed inner level)."""
        plain = not fmt.block and len(np.shape(value)) == fmt.rank
        if plain and not is_sparse(value) and all(not lf.is_compressed for lf in fmt.levels):
            array = np.asarray(value, dtype=np.float64)  # every position stored: the values in mode order
            vals = np.ascontiguousarray(np.transpose(array, fmt.mode_order)).reshape(-1) if array.ndim \
                else array.reshape(1).copy()
            return StoredTensor([Level("dense", array.shape[m]) for m in fmt.mode_order], vals, array.shape, fmt, fill)
        if plain and fill == 0.0 and len(np.shape(value)) == 2 and fmt.levels[1].is_compressed:
            return _from_compressed_matrix(value, fmt)
        if not is_sparse(value) or fill != 0.0:
            return StoredTensor.from_dense(np.asarray(value.toarray() if is_sparse(value) else value), fmt, fill)
        coords, vals = entries(value)
        return StoredTensor.from_entries(tuple(value.shape), coords, vals, fmt, fill)

    @staticmethod
    def from_entries(shape, coords: list[np.ndarray], vals: np.ndarray, fmt: TensorFormat,
                     fill: float = 0.0) -> "StoredTensor":
        """Storage of the entries (coordinates per dimension, values) that differ from `fill`;
        as `from_dense` of the array they describe."""
        shape = tuple(int(s) for s in shape)
        rank, block = len(shape), tuple(fmt.block or ())
        if fmt.rank != rank:
            raise ValueError(f"format {fmt} has {fmt.rank} levels, the tensor has {rank} dims")
        coords = [np.asarray(c, dtype=np.int64) for c in coords]
        vals = np.asarray(vals, dtype=np.float64)
        dims = shape
        inner = None
        if block:  # levels over the grid of blocks; each entry lands at an offset in its tile
            dims = _blocks(shape, block)
            inner = [c % b for c, b in zip(coords, block)]
            coords = [c // b for c, b in zip(coords, block)]
        lc = [coords[m] for m in fmt.mode_order]
        ldims = [dims[m] for m in fmt.mode_order]
        order = np.lexsort(lc[::-1]) if rank else np.zeros(len(vals), dtype=np.int64)
        lc = [c[order] for c in lc]
        pos = np.zeros(len(vals), dtype=np.int64)
        n_pos = 1
        levels = []
        for k, lf in enumerate(fmt.levels):
            if lf.is_compressed:
                key = pos * ldims[k] + lc[k]  # sorted: parents in order, coordinates within
                first = np.ones(len(key), dtype=bool)
                first[1:] = key[1:] != key[:-1]
                crd = lc[k][first]
                parents = pos[first]
                seg = np.concatenate([[0], np.cumsum(np.bincount(parents, minlength=n_pos))]) if n_pos \
                    else np.zeros(1, dtype=np.int64)
                levels.append(Level("compressed", ldims[k], seg, crd))
                pos = np.cumsum(first) - 1
                n_pos = int(first.sum())
            else:
                levels.append(Level("dense", ldims[k]))
                pos = pos * ldims[k] + lc[k]
                n_pos *= ldims[k]
        out = np.full((n_pos,) + block, fill, dtype=np.float64)
        if block:
            offsets = tuple(c[order] for c in inner)
            out[(pos,) + offsets] = vals[order]
        else:
            out[pos] = vals[order]
        return StoredTensor(levels, out, shape, fmt, fill)

    @staticmethod
    def every_position(value, fmt: TensorFormat, fill: float = 0.0) -> "StoredTensor":
        """Storage of every position of a dense `value` in `fmt`, those equal to `fill` included
        (what a producer that writes each position stores), built level by level without
        listing coordinates: a compressed level stores every coordinate under each parent.

            >>> fmt = TensorFormat(TensorFormat.all_compressed(2).levels, (1, 0))
            >>> t = StoredTensor.every_position(np.array([[0.0, 2.0], [3.0, 0.0]]), fmt)
            >>> t.levels[1].seg.tolist(), t.levels[1].crd.tolist(), t.vals.tolist()
            ([0, 2, 4], [0, 1, 0, 1], [0.0, 3.0, 2.0, 0.0])
        """
        value = np.asarray(value, dtype=np.float64)
        rank, block = value.ndim, tuple(fmt.block or ())
        if fmt.rank != rank:
            raise ValueError(f"format {fmt} has {fmt.rank} levels, the array has {rank} dims")
        if block:  # one tile per position of the grid of blocks, its elements in dimension order
            grid = _blocks(value.shape, block)
            split = value.reshape([x for g, b in zip(grid, block) for x in (g, b)])
            ordered = np.transpose(split, tuple(2 * m for m in fmt.mode_order) + tuple(range(1, 2 * rank, 2)))
        else:
            grid, ordered = value.shape, np.transpose(value, fmt.mode_order)
        levels, n_pos = [], 1
        for lf, m in zip(fmt.levels, fmt.mode_order):
            dim = int(grid[m])
            if lf.is_compressed:
                levels.append(Level("compressed", dim, np.arange(n_pos + 1, dtype=np.int64) * dim,
                                    np.tile(np.arange(dim, dtype=np.int64), n_pos)))
            else:
                levels.append(Level("dense", dim))
            n_pos *= dim
        vals = np.ascontiguousarray(ordered).reshape((n_pos,) + block)
        return StoredTensor(levels, vals, tuple(int(s) for s in value.shape), fmt, fill)

    def to_dense(self, shape=None) -> np.ndarray:
        shape = self.shape if shape is None else shape
        order = self.fmt.mode_order if self.fmt is not None else None
        block = self.fmt.block if self.fmt is not None else None
        return _decode(self.levels, self.vals, shape, order, self.fill, block)

    def __getstate__(self) -> dict:
        """Pickled (to a dask worker, a process) with `vals` packed when mostly `fill` (`packed`)."""
        state = dict(self.__dict__)
        state["vals"] = packed(self.vals, self.fill)
        return state

    def __setstate__(self, state: dict) -> None:
        vals = state["vals"]
        self.__dict__.update(state, vals=vals.unpacked() if isinstance(vals, PackedValues) else vals)


PACK_LEAST = 1 << 20  # values arrays of at least this many entries ...
PACK_SHARE = 0.25  # ... travel as their entries other than fill when those are at most this share


@dataclass
class PackedValues:
    """A values array as it travels: the flat positions (and values) of its entries whose bits
    differ from `fill`'s; the others are `fill` (exactly: -0.0 and NaNs kept as they are)."""

    shape: tuple[int, ...]
    fill: float
    at: np.ndarray
    values: np.ndarray

    def unpacked(self) -> np.ndarray:
        out = np.full(int(np.prod(self.shape, dtype=np.int64)), self.fill, dtype=np.float64)
        out[self.at] = self.values
        return out.reshape(self.shape)


def packed(vals: np.ndarray, fill: float) -> np.ndarray | PackedValues:
    """`vals` itself, or as `PackedValues` when it is large and mostly `fill` (a dense level over
    sparse data: GCN CiteSeer's features stored dense are 99 MB, 0.85% of them non-zero, and cost a
    sharded run 0.3 s to send to its workers).

        >>> v = np.zeros(PACK_LEAST); v[[3, 7]] = [1.0, -0.0]
        >>> p = packed(v, 0.0)
        >>> p.at.tolist(), bool(np.array_equal(p.unpacked(), v)), bool(np.signbit(p.unpacked()[7]))
        ([3, 7], True, True)
    """
    if vals.size < PACK_LEAST or vals.dtype != np.float64:
        return vals
    bits = np.ascontiguousarray(vals).reshape(-1).view(np.uint64)
    at = np.flatnonzero(bits != np.float64(fill).view(np.uint64))
    if len(at) > PACK_SHARE * vals.size:
        return vals
    at = at.astype(np.int32) if vals.size < 2**31 else at
    return PackedValues(vals.shape, float(fill), at, vals.reshape(-1)[at])


@dataclass
class WrittenTensor:
    """What the level writers and the value writer of one output tensor produced (`vals` are
    floats, or tiles of a blocked tensor: give `block` to decode them)."""

    levels: dict[int, Level] = field(default_factory=dict)
    vals: list | None = None

    def to_dense(self, shape, mode_order=None, fill: float = 0.0, block=None) -> np.ndarray:
        rank = len(tuple(shape))
        missing = [k for k in range(rank) if k not in self.levels]
        if missing or len(self.levels) != rank:
            raise ValueError(f"levels written {sorted(self.levels)}, a rank-{rank} tensor needs 0..{rank - 1}")
        return _decode([self.levels[k] for k in range(rank)], self.vals, shape, mode_order, fill, block)
