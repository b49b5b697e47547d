"""Graph datasets: unweighted adjacency (no self loops, no normalisation) + features.

    >>> g = karate()
    >>> g.num_nodes, g.adjacency.nnz, g.features.shape
    (34, 156, (34, 34))
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass
class Graph:
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


def karate() -> Graph:
    """Zachary's karate club (34 members, 78 friendships, 2 factions); one-hot features."""
    import networkx as nx

    g = nx.karate_club_graph()
    n = g.number_of_nodes()
    rows, cols = zip(*[(u, v) for u, v in g.edges()] + [(v, u) for u, v in g.edges()])
    adj = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    labels = np.array([0 if g.nodes[v]["club"] == "Mr. Hi" else 1 for v in range(n)])
    return Graph("karate", adj, np.eye(n), labels)
