"""The `.npz` graph format: CSR adjacency + CSR features + labels, readable without pickle.

Keys (all plain numeric arrays, so `numpy.load(path, allow_pickle=False)` reads them):

    adj_indptr  int, N+1       row pointers of the adjacency (row = source node)
    adj_indices int, E         column (target node) of every stored directed edge
    x_indptr    int, N+1       row pointers of the feature matrix
    x_indices   int, nnz       feature column of every stored feature value
    x_data      float, nnz     the feature values
    x_shape     int, 2         (N, F)
    y           int, N         class label per node (>= 0)
    name        str, optional  the dataset name (a 0-d unicode array)

Edges are unweighted (no data array), with no self loops and no duplicates within a row; an
undirected graph stores each edge in both directions.

    >>> import tempfile, os
    >>> from fuseflow.data.graphs import karate
    >>> path = os.path.join(tempfile.mkdtemp(), "karate.npz")
    >>> save_graph(karate(), path)
    >>> read_npz(path).describe().stored_edges
    156
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import UserError
from ..memory import Budget
from .archive import REAL_KINDS, read_arrays
from .graphs import Graph

REQUIRED_KEYS = ("adj_indptr", "adj_indices", "x_indptr", "x_indices", "x_data", "x_shape", "y")
FIX_FORMAT = "see docs/datasets.md for the format, or write the file with fuseflow.data.save_graph"


def save_graph(graph: Graph, path) -> None:
    """Write `graph` to `path` (an `.npz`, compressed) in the format above."""
    path = Path(path)
    adj = sp.csr_matrix(graph.adjacency, copy=True)
    adj.eliminate_zeros()
    adj.sum_duplicates()
    adj.sort_indices()
    n = adj.shape[0]
    if adj.shape != (n, n):
        raise UserError(f"adjacency of {graph.name!r} is {adj.shape[0]}x{adj.shape[1]}, not square",
                        where=str(path))
    if adj.diagonal().any():
        raise UserError(f"graph {graph.name!r} has self loops; the format stores none",
                        where=str(path), fix="remove the diagonal (A.setdiag(0); A.eliminate_zeros())")
    features = np.asarray(graph.features)
    if features.ndim != 2 or features.shape[0] != n:
        raise UserError(f"features of {graph.name!r} have shape {features.shape}, expected ({n}, F)",
                        where=str(path))
    labels = np.asarray(graph.labels)
    if labels.shape != (n,):
        raise UserError(f"labels of {graph.name!r} have shape {labels.shape}, expected ({n},)",
                        where=str(path))
    x = sp.csr_matrix(features)
    x.sort_indices()
    np.savez_compressed(
        path, adj_indptr=adj.indptr.astype(np.int64), adj_indices=adj.indices.astype(np.int64),
        x_indptr=x.indptr.astype(np.int64), x_indices=x.indices.astype(np.int64), x_data=x.data,
        x_shape=np.array(features.shape, dtype=np.int64), y=labels.astype(np.int64),
        name=np.array(graph.name))


def read_npz(path, name: str | None = None, budget: Budget | None = None) -> Graph:
    """Read and validate a graph `.npz`; every problem is a one-line UserError naming the file.
    Sizes declared by the file (its arrays, the dense feature matrix) are checked against
    `budget` before they are allocated."""
    path = Path(path)
    where = str(path)
    if not path.is_file():
        raise UserError("graph file not found", where=where,
                        fix="check the path, or pass --data-dir (data_dir=) to load_graph")
    budget = budget or Budget()
    arrays = read_arrays(path, where, budget, kinds=REAL_KINDS + "U", what=f"graph {path.name}")
    missing = [k for k in REQUIRED_KEYS if k not in arrays]
    if missing:
        raise UserError(f"missing key(s) {', '.join(missing)} (has: {', '.join(sorted(arrays)) or 'none'})",
                        where=where, fix=FIX_FORMAT)

    def ints(key: str, ndim: int = 1) -> np.ndarray:
        a = arrays[key]
        if a.ndim != ndim or not (np.issubdtype(a.dtype, np.integer) or a.size == 0):
            raise UserError(f"{key} must be a {ndim}-d integer array, got {a.ndim}-d {a.dtype}",
                            where=where, fix=FIX_FORMAT)
        return a.astype(np.int64, copy=False)

    def check(cond: bool, what: str) -> None:
        if not cond:
            raise UserError(what, where=where, fix=FIX_FORMAT)

    indptr, indices, y = ints("adj_indptr"), ints("adj_indices"), ints("y")
    n = len(indptr) - 1
    check(n >= 0, "adj_indptr is empty; it needs N+1 entries")
    check(indptr[0] == 0 and bool(np.all(np.diff(indptr) >= 0)) and indptr[-1] == len(indices),
          f"adj_indptr is not a valid row-pointer array for {len(indices)} adj_indices "
          f"(must start at 0, not decrease, and end at {len(indices)}; ends at {indptr[-1]})")
    check(len(indices) == 0 or (indices.min() >= 0 and indices.max() < n),
          f"adj_indices out of range for {n} nodes (min {indices.min() if len(indices) else 0}, "
          f"max {indices.max() if len(indices) else 0})")
    check(y.shape == (n,), f"y has {len(y)} labels but the adjacency has {n} nodes")
    check(n == 0 or y.min() >= 0, f"y has a negative label ({y.min() if n else 0})")
    rows = np.repeat(np.arange(n), np.diff(indptr))
    loops = int(np.count_nonzero(rows == indices))
    check(loops == 0, f"adjacency has {loops} self loop(s) (node {rows[rows == indices][:1].tolist()})")
    adj = sp.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(n, n))
    if not adj.has_sorted_indices:
        adj.sort_indices()
    dup = np.flatnonzero((np.diff(adj.indices) == 0) & (np.diff(rows) == 0)) if len(indices) > 1 else []
    check(len(dup) == 0, f"adjacency has duplicate edges (first in row {rows[dup[0]] if len(dup) else 0})")

    shape = ints("x_shape")
    check(shape.shape == (2,) and shape.min() >= 0, f"x_shape must be (N, F), got {shape.tolist()}")
    check(int(shape[0]) == n, f"x_shape {tuple(shape.tolist())} has {shape[0]} rows but the adjacency has {n} nodes")
    f = int(shape[1])
    xptr, xind, xdata = ints("x_indptr"), ints("x_indices"), arrays["x_data"]
    check(xdata.ndim == 1 and (np.issubdtype(xdata.dtype, np.number) or xdata.dtype == bool),
          f"x_data must be a 1-d numeric array, got {xdata.ndim}-d {xdata.dtype}")
    check(len(xptr) == n + 1, f"x_indptr has {len(xptr)} entries, expected N+1 = {n + 1}")
    check(len(xind) == len(xdata), f"x_indices has {len(xind)} entries but x_data has {len(xdata)}")
    check(bool(np.isfinite(xdata).all()), "x_data holds NaN or infinite values")
    check(xptr[0] == 0 and bool(np.all(np.diff(xptr) >= 0)) and xptr[-1] == len(xind),
          f"x_indptr is not a valid row-pointer array for {len(xind)} x_indices")
    check(len(xind) == 0 or (xind.min() >= 0 and xind.max() < f),
          f"x_indices out of range for {f} features (max {xind.max() if len(xind) else 0})")
    budget.check(n * f * xdata.dtype.itemsize + 8 * len(indices), f"graph {path.name} (dense features {n}x{f})")
    features = sp.csr_matrix((xdata, xind, xptr), shape=(n, f)).toarray()

    if name is None:
        stored = arrays.get("name")
        name = str(stored) if stored is not None and stored.ndim == 0 and stored.dtype.kind == "U" \
            else path.stem
    return Graph(name, adj, features, y)
