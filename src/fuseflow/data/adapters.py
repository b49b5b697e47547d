"""Graphs from other libraries' objects: scipy sparse matrices and PyG-style `Data` objects.

Both give a `Graph` in fuseflow's convention (unweighted adjacency, entries 1.0, no self loops,
no duplicate edges; dense features; integer labels), ready for `fuseflow.model("gcn", dataset=g)`.
`from_pyg` is duck-typed: anything with `edge_index` (2 x E) and `x` works, torch tensors or
numpy arrays, so PyG itself is not needed.

    >>> import numpy as np, scipy.sparse as sp
    >>> adj = sp.csr_matrix(np.array([[0, 2, 0], [1, 1, 0], [0, 0, 0]]))
    >>> g = from_scipy(adj, np.ones((3, 2)), [0, 1, 1], name="tiny")
    >>> g.adjacency.toarray().astype(int).tolist(), g.num_classes
    ([[0, 1, 0], [1, 0, 0], [0, 0, 0]], 2)
    >>> class Data:  # what a torch_geometric.data.Data offers
    ...     edge_index = np.array([[0, 1], [1, 0]]); x = np.eye(2); y = np.array([0, 1])
    >>> from_pyg(Data(), name="pair").describe().stored_edges
    2
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import UserError
from .graphs import Graph, from_edges


def _array(value, what: str, where: str) -> np.ndarray:
    """A numpy array from a numpy array, list or torch tensor (dense)."""
    if hasattr(value, "detach"):  # torch
        value = value.detach().cpu()
        if getattr(value, "is_sparse", False):
            value = value.to_dense()
        value = value.numpy()
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise UserError(f"{what} has dtype {array.dtype}; it must hold real numbers", where)
    return array


def _labels(y, n: int, where: str) -> np.ndarray:
    if y is None:
        return np.zeros(n, dtype=np.int64)
    labels = _array(y, "y", where)
    if labels.ndim == 2 and labels.shape[0] == n:  # one-hot rows
        labels = labels.argmax(axis=1)
    if labels.shape != (n,):
        raise UserError(f"y has shape {labels.shape}, expected ({n},) labels", where)
    if labels.dtype.kind == "f" and not np.array_equal(labels, np.round(labels)):
        raise UserError("y holds fractional labels", where, "give integer class labels")
    if n and labels.min() < 0:
        raise UserError(f"y has a negative label ({int(labels.min())})", where)
    return labels.astype(np.int64)


def _features(x, n: int, where: str) -> np.ndarray:
    features = x.toarray() if sp.issparse(x) else _array(x, "x", where)
    if features.ndim != 2 or features.shape[0] != n:
        raise UserError(f"x has shape {features.shape}, expected ({n}, F)", where)
    if not np.isfinite(features).all():
        raise UserError("x holds NaN or infinite values", where, "replace them before loading")
    return features


def from_scipy(adjacency, x, y=None, *, name: str = "graph") -> Graph:
    """A Graph named `name` from a square scipy sparse (or dense numpy) `adjacency` (N x N), `x`
    the N x F features and `y` the N labels (default: all 0). Stored entries become edges of
    weight 1.0; self loops are dropped."""
    where = f"from_scipy({name!r})"
    adj = sp.coo_matrix(adjacency) if not sp.issparse(adjacency) else adjacency.tocoo()
    if adj.ndim != 2 or adj.shape[0] != adj.shape[1]:
        raise UserError(f"adjacency has shape {adj.shape}, it must be square", where)
    n = adj.shape[0]
    stored = adj.data != 0
    return from_edges(name, adj.row[stored], adj.col[stored], n, _features(x, n, where), _labels(y, n, where))


def from_pyg(data, *, name: str | None = None, symmetrize: bool = False) -> Graph:
    """A Graph from `data`, a PyG `Data`-like object: `edge_index` (2 x E), `x` (N x F),
    optional `y` and `num_nodes` (torch tensors or numpy arrays); `name` defaults to the
    data's own name or "pyg". PyG already stores both directions of an undirected edge; pass
    `symmetrize=True` for a directed edge list that should be made undirected."""
    name = name or str(getattr(data, "name", None) or "pyg")
    where = f"from_pyg({name!r})"
    for needed in ("edge_index", "x"):
        if getattr(data, needed, None) is None:
            raise UserError(f"the object has no {needed}", where, "pass a torch_geometric.data.Data")
    edges = _array(data.edge_index, "edge_index", where)
    if edges.ndim != 2 or edges.shape[0] != 2 or edges.dtype.kind not in "iu":
        raise UserError(f"edge_index must be a 2 x E integer array, got {edges.shape} {edges.dtype}", where)
    x = data.x
    n = int(getattr(data, "num_nodes", None) or (x.shape[0] if hasattr(x, "shape") else len(x)))
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        raise UserError(f"edge_index names a node outside 0..{n - 1}", where)
    return from_edges(name, edges[0], edges[1], n, _features(x, n, where),
                      _labels(getattr(data, "y", None), n, where), symmetrize=symmetrize)
