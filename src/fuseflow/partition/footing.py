"""What a partitioned run's later kernels read of an earlier kernel's outputs: what it wrote.

A whole run hands a kernel an intermediate exactly as its producer stored it when the reader
takes the producer's layout (`execute._as_written`): every stored position, explicit zeros
included (a ReLU's zeros, a sum over an empty fiber, a product with a dense operand's zeros).
The partitioned modes compute values with the reference, which knows numeric nonzeros only; so
each window run also reports the positions its outputs stored (`written_pattern`), the windows'
patterns together are the producer's (`combined_pattern`), and the reader's input is stored on
that pattern with the reference's values (`stored_as_written`). A pattern holding every position
(a product over dense features: GCN's X·W over a graph's nodes) is kept as `EveryPosition`, its
coordinates never listed. The readers that need a producer's pattern are found before anything
runs (`patterns_read_as_written`).

    >>> import numpy as np
    >>> from fuseflow.sam.graph import GraphTensor
    >>> meta = GraphTensor("output", (2, 3), ("dense", "compressed"), (0, 1))
    >>> t = stored_as_written(np.array([[0, 0, 1], [0, 1, 1]]), meta, np.array([[0.0, 5.0, 0.0], [1.0, 2.0, 0.0]]))
    >>> t.levels[1].crd.tolist(), t.vals.tolist()  # position (0, 0) stored, its value an explicit zero
    ([0, 1, 1], [0.0, 5.0, 2.0])
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..execute import same_layout
from ..ir.formats import TensorFormat
from ..ir.values import is_sparse
from ..sim.storage import StoredTensor, level_entries


@dataclass(frozen=True)
class EveryPosition:
    """The stored pattern of a producer that stored every position of a tensor of `shape` (of
    its grid of blocks, when blocked), kept without its coordinates (GCN's logits over the MAG
    twin would list 257 M of them).

        >>> p = EveryPosition((2, 3))
        >>> p.count, p.coords().tolist()
        (6, [[0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2]])
    """

    shape: tuple

    @property
    def count(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def coords(self) -> np.ndarray:
        """Every position as coordinates per dimension (rank x count), in row-major order."""
        grid = np.indices(self.shape, dtype=np.int64)
        return grid.reshape(len(self.shape), -1)


Pattern = np.ndarray | EveryPosition  # positions as coordinates per dimension (rank x n), or all of them


def pattern_count(pattern: Pattern) -> int:
    """How many positions `pattern` stores."""
    return pattern.count if isinstance(pattern, EveryPosition) else int(pattern.shape[1])


def as_coords(pattern: Pattern) -> np.ndarray:
    """`pattern` as coordinates per dimension (rank x n), row-major."""
    return pattern.coords() if isinstance(pattern, EveryPosition) else pattern


def compacted(pattern: Pattern, meta) -> Pattern:
    """`pattern` (unique positions) as `EveryPosition` where it stores every position of
    `meta`'s tensor (of its grid of blocks, when blocked).

        >>> from fuseflow.sam.graph import GraphTensor
        >>> compacted(np.array([[0, 1], [0, 0]]), GraphTensor("output", (2, 1), ("dense", "compressed"), (0, 1)))
        EveryPosition(shape=(2, 1))
    """
    shape = tuple(int(s) // int(b) for s, b in zip(meta.shape, meta.block or (1,) * len(meta.shape)))
    if isinstance(pattern, EveryPosition) or pattern.shape[1] != int(np.prod(shape, dtype=np.int64)):
        return pattern
    return EveryPosition(shape)


def written_pattern(written, meta) -> np.ndarray | None:
    """The positions a run's writers stored of one output, as coordinates per tensor dimension
    (rank x n; a blocked tensor's are coordinates of its grid of blocks); None when the writers
    did not store a level per dimension (no reader takes such a tensor as written) or it is a
    scalar (stored the same either way)."""
    rank = len(meta.shape)
    if len(written.levels) != rank or not rank:
        return None
    return positions([written.levels[k] for k in range(rank)], meta.mode_order)


def positions(levels, mode_order) -> np.ndarray:
    """Every position `levels` store (level k storing dimension `mode_order[k]`), as coordinates
    per tensor dimension (rank x n).

        >>> from fuseflow.sim.storage import Level
        >>> positions([Level("dense", 2), Level("compressed", 3, [0, 1, 3], [2, 0, 1])], (1, 0)).tolist()
        [[2, 0, 1], [0, 1, 1]]
    """
    _, coords = level_entries(list(levels))
    by_dim = [None] * len(mode_order)
    for k, dim in enumerate(mode_order):
        by_dim[dim] = coords[k]
    return np.array(by_dim, dtype=np.int64).reshape(len(mode_order), -1)


def combined_pattern(patterns: list[np.ndarray], shape) -> np.ndarray:
    """The positions stored by any of `patterns` (windows' rows, or partial sums' overlapping
    positions) of a tensor of `shape`, each once, in row-major order."""
    joined = np.concatenate(patterns, axis=1) if patterns else np.zeros((len(shape), 0), dtype=np.int64)
    return unique_positions(joined, shape)


def unique_positions(pattern: np.ndarray, shape) -> np.ndarray:
    """`pattern`'s positions (rank x n) each once, in row-major order over `shape`.

        >>> unique_positions(np.array([[1, 0, 1], [0, 2, 0]]), (2, 3)).tolist()
        [[0, 1], [2, 0]]
    """
    if pattern.shape[1] == 0:
        return pattern
    flat = sorted_unique(np.ravel_multi_index(tuple(pattern), tuple(int(s) for s in shape)))
    return np.array(np.unravel_index(flat, tuple(int(s) for s in shape)), dtype=np.int64).reshape(len(shape), -1)


def sorted_unique(keys: np.ndarray) -> np.ndarray:
    """`np.unique(keys)`, without sorting keys already strictly increasing (what level order
    and a row-major product give: sorting 29 M of them costs seconds)."""
    keys = np.asarray(keys, dtype=np.int64)
    return keys if len(keys) < 2 or bool((keys[1:] > keys[:-1]).all()) else np.unique(keys)


def stored_as_written(pattern: Pattern, meta, value) -> StoredTensor:
    """The tensor a producer wrote in `meta`'s layout, storing exactly `pattern`'s positions
    (`written_pattern`, or `EveryPosition`), each holding `value`'s entry there (a dense array, or
    a scipy sparse matrix: 0 where it has no entry)."""
    fmt, shape, fill = TensorFormat.of(meta), tuple(int(s) for s in meta.shape), float(meta.fill)
    if isinstance(pattern, EveryPosition):
        dense = value.toarray() if is_sparse(value) else np.asarray(value, dtype=np.float64).reshape(shape)
        return StoredTensor.every_position(dense, fmt, fill)
    coords = [np.asarray(c, dtype=np.int64) for c in pattern]
    if not meta.block:
        return StoredTensor.from_entries(shape, coords, _values_at(value, coords), fmt, fill)
    block = tuple(int(b) for b in meta.block)
    grid = tuple(s // b for s, b in zip(shape, block))
    n = len(coords[0]) if coords else 1
    order = StoredTensor.from_entries(grid, coords, np.arange(n, dtype=np.float64),
                                      TensorFormat(fmt.levels, fmt.mode_order), -1.0)
    at = order.vals.astype(np.int64)  # for each stored position, the pattern's entry there (-1: none)
    tiles = np.full((len(at),) + block, fill)
    dense = np.asarray(value.toarray() if is_sparse(value) else value, dtype=np.float64)
    split = dense.reshape([x for g, b in zip(grid, block) for x in (g, b)])
    rank = len(shape)
    by_block = np.transpose(split, tuple(range(0, 2 * rank, 2)) + tuple(range(1, 2 * rank, 2)))
    present = at >= 0
    tiles[present] = by_block[tuple(c[at[present]] for c in coords)]
    return StoredTensor(order.levels, tiles, shape, fmt, fill)


def _values_at(value, coords: list[np.ndarray]) -> np.ndarray:
    """`value`'s entries at `coords` (a scipy sparse matrix's missing entries are 0)."""
    if not is_sparse(value):
        return np.asarray(value, dtype=np.float64)[tuple(coords)] if coords else np.asarray(value).reshape(1)
    csr = sp.csr_array(value)
    csr.sum_duplicates()
    rows, cols = coords
    n_cols = csr.shape[1]
    keys = np.repeat(np.arange(csr.shape[0], dtype=np.int64), np.diff(csr.indptr)) * n_cols + csr.indices
    want = rows * n_cols + cols
    at = np.searchsorted(keys, want)
    found = at < len(keys)
    found[found] = keys[at[found]] == want[found]
    out = np.zeros(len(want), dtype=np.float64)
    out[found] = csr.data[at[found]]
    return out


def patterns_read_as_written(kernels) -> list[set[str]]:
    """For each kernel of a compiled schedule, the outputs a later kernel reads in the layout it
    wrote them in (so their stored patterns must be known, not only their values). Left out, as
    stored alike from values: scalars, and layouts dense at every level (every position stored:
    GCN's 736,389 x 349 logits over the MAG twin would be 257 M positions to carry)."""
    wanted: list[set[str]] = [set() for _ in kernels]
    writer: dict[str, tuple[int, object]] = {}
    for i, kernel in enumerate(kernels):
        if kernel.is_reshape:
            continue
        for name, meta in kernel.graph.tensors.items():
            if meta.role != "input":
                continue
            source = writer.get(meta.stores(name))
            if source is not None and len(meta.shape) and same_layout(source[1], meta) and \
                    any(level != "dense" for level in meta.levels):
                wanted[source[0]].add(meta.stores(name))
        for name, meta in kernel.graph.tensors.items():
            if meta.role == "output":
                writer[name] = (i, meta)
    return wanted
