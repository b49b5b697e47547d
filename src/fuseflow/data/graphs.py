"""Graph datasets: unweighted adjacency (no self loops, no normalisation) + features.

    >>> g = karate()
    >>> g.num_nodes, g.adjacency.nnz, g.features.shape
    (34, 156, (34, 34))
    >>> s = g.describe()
    >>> s.stored_edges, s.max_degree, round(s.mean_degree, 2)
    (156, 17, 4.59)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class GraphStats:
    """What `Graph.describe()` reports. Degrees are out-degrees (stored entries per row); for an
    undirected graph, stored symmetrically, that is the ordinary degree."""

    name: str
    nodes: int
    stored_edges: int
    density: float  # stored_edges / nodes²
    feature_dim: int
    feature_density: float  # fraction of nonzero feature entries
    classes: int
    max_degree: int
    mean_degree: float
    isolated_nodes: int
    symmetric: bool

    def __str__(self) -> str:
        kind = "symmetric" if self.symmetric else "directed"
        return (f"{self.name}: {self.nodes:,} nodes, {self.stored_edges:,} stored edges ({kind}), "
                f"density {self.density:.3g}, {self.feature_dim:,} features "
                f"(density {self.feature_density:.3g}), {self.classes} classes, degree max "
                f"{self.max_degree:,} mean {self.mean_degree:.2f}, {self.isolated_nodes:,} isolated")


@dataclass
class Graph:
    """A graph dataset: unweighted adjacency (scipy CSR, entries 1.0), dense `N x F` features
    and `N` integer labels."""

    name: str
    adjacency: sp.csr_matrix  # directed edges as stored; symmetric for undirected graphs
    features: np.ndarray
    labels: np.ndarray

    @property
    def num_nodes(self) -> int:
        return self.adjacency.shape[0]

    @property
    def num_classes(self) -> int:
        return int(self.labels.max()) + 1 if self.labels.size else 0

    def describe(self) -> GraphStats:
        """Statistics of the graph as stored (edges counted as stored entries, both directions)."""
        adj = self.adjacency.tocsr()
        n, nnz = self.num_nodes, int(adj.nnz)
        out_degree = np.diff(adj.indptr)
        in_degree = np.bincount(adj.indices, minlength=n) if n else out_degree
        feats = np.asarray(self.features)
        return GraphStats(
            name=self.name, nodes=n, stored_edges=nnz,
            density=nnz / (n * n) if n else 0.0,
            feature_dim=int(feats.shape[1]) if feats.ndim == 2 else 0,
            feature_density=float(np.count_nonzero(feats)) / feats.size if feats.size else 0.0,
            classes=self.num_classes,
            max_degree=int(out_degree.max()) if n else 0,
            mean_degree=nnz / n if n else 0.0,
            isolated_nodes=int(np.count_nonzero((out_degree == 0) & (in_degree == 0))),
            symmetric=bool((adj != adj.T).nnz == 0),
        )


def from_edges(name: str, rows, cols, num_nodes: int, features, labels, *,
               symmetrize: bool = False) -> Graph:
    """A Graph from edge lists (e.g. a PyG/OGB `edge_index`): self loops and duplicate edges are
    dropped, entries are 1.0; with `symmetrize` every edge is also stored in the other direction.

    >>> g = from_edges("t", [0, 1, 1, 2], [1, 0, 1, 0], 3, np.zeros((3, 2)), [0, 1, 0], symmetrize=True)
    >>> g.adjacency.toarray().astype(int).tolist()
    [[0, 1, 1], [1, 0, 0], [1, 0, 0]]
    """
    rows = np.asarray(rows, dtype=np.int64).ravel()
    cols = np.asarray(cols, dtype=np.int64).ravel()
    if symmetrize:
        rows, cols = np.concatenate([rows, cols]), np.concatenate([cols, rows])
    keep = rows != cols
    adj = sp.csr_matrix((np.ones(int(keep.sum())), (rows[keep], cols[keep])),
                        shape=(num_nodes, num_nodes))
    adj.sum_duplicates()
    adj.sort_indices()
    adj.data[:] = 1.0
    return Graph(name, adj, np.asarray(features), np.asarray(labels, dtype=np.int64))


def karate() -> Graph:
    """Zachary's karate club (34 members, 78 friendships, 2 factions); one-hot features."""
    import networkx as nx  # noqa: PLC0415 - networkx is slow to import and only builds the karate club

    g = nx.karate_club_graph()
    n = g.number_of_nodes()
    rows, cols = zip(*[(u, v) for u, v in g.edges()] + [(v, u) for u, v in g.edges()])
    adj = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    labels = np.array([0 if g.nodes[v]["club"] == "Mr. Hi" else 1 for v in range(n)])
    return Graph("karate", adj, np.eye(n), labels)
