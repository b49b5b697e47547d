"""Nonzero statistics of input data, per storage level: what the heuristic cost model reads.

For a tensor stored with some level formats in some mode order, the density of level k is the
average fraction of a fiber's coordinates that the level's scanner emits: 1 for a dense level
(it streams every coordinate), and for a compressed level the stored coordinates divided by
(positions of the parent level x the level's dimension). The statistics are computed once per
(tensor, mode order, level formats) from the actual array, and cached.

    >>> import numpy as np
    >>> from fuseflow.ir.formats import TensorFormat
    >>> A = np.array([[1.0, 0, 0, 0], [0, 0, 0, 0], [2.0, 3.0, 0, 0], [0, 0, 0, 4.0]])
    >>> s = DataStats({"A": A})
    >>> s.level_densities("A", TensorFormat.parse("dense,compressed"))
    [1.0, 0.25]
    >>> s.level_densities("A", TensorFormat.parse("compressed,compressed"))
    [0.75, 0.3333333333333333]
    >>> s.level_densities("A", TensorFormat.parse("compressed,compressed;order=1,0"))
    [0.75, 0.3333333333333333]
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .formats import TensorFormat
from .values import densify, is_sparse, nnz, shape_of

ASKED_FROM = 1 << 24  # masks of this many bytes or more are asked of a budget first


class DataStats:
    """Level densities of named arrays (the inputs of one data point): dense arrays, or scipy
    sparse matrices (whose background is 0), read as they are."""

    def __init__(self, arrays: dict, fills: dict[str, float] | None = None, budget=None):
        """`budget` (`memory.Budget`), when given, is asked before each mask of `ASKED_FROM`
        bytes or more (a byte per entry, and 8 more where a sparse array over another background
        is made dense first; smaller ones, a sampled window's by the thousand, are not asked)."""
        self.shapes = {name: shape_of(a) for name, a in arrays.items()}
        self._masks: dict[str, np.ndarray] = {}
        self._sparse: dict = {}
        fills = fills or {}
        for name, array in arrays.items():
            fill = fills.get(name, 0.0)
            if is_sparse(array) and fill == 0.0:
                self._sparse[name] = array
                continue
            nbytes = float(np.prod(self.shapes[name], dtype=np.float64)) * (9 if is_sparse(array) else 1)
            if budget is not None and nbytes >= ASKED_FROM:
                budget.check(nbytes, f"the heuristic's statistics of {name}")
            array = densify(array, f"input {name}")
            if fill is None:  # stored everywhere
                mask = np.ones(array.shape, dtype=bool)
            else:
                mask = array != fill
            self._masks[name] = mask
        self._cache: dict[tuple, list[float]] = {}
        self._prefix: dict[tuple, list[int]] = {}

    def __contains__(self, name: str) -> bool:
        return name in self._masks or name in self._sparse

    def density(self, name: str) -> float:
        """Fraction of stored entries of the whole tensor."""
        if name in self._sparse:
            size = float(np.prod(self.shapes[name], dtype=np.float64))
            return nnz(self._sparse[name]) / size if size else 0.0
        mask = self._masks[name]
        return float(mask.mean()) if mask.size else 0.0

    def nonempty_prefixes(self, name: str, mode_order: tuple) -> list[int]:
        """Number of coordinate prefixes of length k (k = 0..rank) with a stored entry below."""
        key = (name, tuple(mode_order))
        if key not in self._prefix and name in self._sparse:
            self._prefix[key] = _sparse_prefixes(self._sparse[name], tuple(mode_order))
        if key not in self._prefix:
            mask = self._masks[name]
            tiled = np.transpose(mask, mode_order) if mask.ndim else mask
            counts = [1 if tiled.any() or tiled.ndim == 0 else 0]
            for k in range(1, tiled.ndim + 1):
                has = tiled.any(axis=tuple(range(k, tiled.ndim))) if k < tiled.ndim else tiled
                counts.append(int(np.count_nonzero(has)))
            self._prefix[key] = counts
        return self._prefix[key]

    def level_densities(self, name: str, fmt: TensorFormat) -> list[float]:
        """Average fraction of each level's coordinates its scanner emits per fiber visit."""
        key = (name, tuple(fmt.mode_order), tuple(lv.is_compressed for lv in fmt.levels))
        if key in self._cache:
            return self._cache[key]
        shape = self.shapes[name]
        prefix = self.nonempty_prefixes(name, tuple(fmt.mode_order))
        positions = 1.0  # positions of the parent level (dense levels keep empty subtrees)
        out = []
        for k, level in enumerate(fmt.levels):
            dim = shape[fmt.mode_order[k]]
            if not level.is_compressed:
                out.append(1.0)
                positions *= dim
            else:
                stored = prefix[k + 1]
                out.append(stored / (positions * dim) if positions * dim else 0.0)
                positions = float(stored)
        self._cache[key] = out
        return out


def _sparse_prefixes(matrix, mode_order: tuple) -> list[int]:
    """`DataStats.nonempty_prefixes` of a scipy sparse matrix's nonzero entries, read off its CSR
    index pointers and column indices (listing every entry's coordinates, or sorting them,
    took seconds per matrix of 10⁸ entries)."""
    csr = sp.csr_array(matrix)  # shares a csr_array's arrays
    csr.sum_duplicates()
    nonzero = csr.data != 0
    stored = int(np.count_nonzero(nonzero))
    if mode_order == (0, 1):  # rows holding a nonzero: nonzeros counted up to each row's end
        upto = np.concatenate(([0], np.cumsum(nonzero)))
        outer = int(np.count_nonzero(upto[csr.indptr[1:]] > upto[csr.indptr[:-1]]))
    else:  # columns holding a nonzero: a mark per column
        seen = np.zeros(csr.shape[1], dtype=bool)
        seen[csr.indices if stored == nonzero.size else csr.indices[nonzero]] = True
        outer = int(np.count_nonzero(seen))
    return [1 if stored else 0, outer, stored]


def stats_for(program, data: dict[str, np.ndarray]) -> DataStats:
    """Statistics of a data point's inputs, with each input's background as the fill value."""
    from .background import backgrounds

    bg = backgrounds(program)
    return DataStats({n: a for n, a in data.items() if n in program.inputs},
                     {n: bg.get(n, 0.0) for n in data})
