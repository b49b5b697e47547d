"""A GCN written with torch.sparse ops, the adjacency built in forward() from edge_index."""
from __future__ import annotations

import torch
from torch import nn


class SparseMM(nn.Module):
    """softmax(A · ReLU(A · X · W1ᵀ + b1) · W2ᵀ + b2) with torch.sparse.mm, torch.spmm and
    torch.sparse.addmm; A given as a sparse tensor."""

    def __init__(self, features: int = 16, hidden: int = 8, classes: int = 4):
        super().__init__()
        self.l1 = nn.Linear(features, hidden)
        self.l2 = nn.Linear(hidden, classes)

    def forward(self, A, X):
        h = torch.relu(self.l1(torch.sparse.mm(A, X)))
        h = torch.sparse.addmm(h, A, h, beta=0.5)
        return torch.softmax(self.l2(torch.spmm(A, h)), dim=-1)


class EdgeIndexMM(nn.Module):
    """A · X · Wᵀ with A = torch.sparse_coo_tensor(edge_index, ones) built in forward()."""

    def __init__(self, features: int = 16, classes: int = 4):
        super().__init__()
        self.lin = nn.Linear(features, classes)

    def forward(self, X, edge_index):
        n = X.shape[0]
        A = torch.sparse_coo_tensor(edge_index, torch.ones(edge_index.shape[1]), (n, n))
        return self.lin(torch.sparse.mm(A, X))


def example_inputs():
    """EdgeIndexMM's inputs: 24 nodes in a ring with chords, 16 features."""
    n = 24
    source = torch.arange(n).repeat(2)
    target = torch.cat([(torch.arange(n) + 1) % n, (torch.arange(n) * 7) % n])
    return torch.randn(n, 16, generator=torch.Generator().manual_seed(0)), torch.stack([source, target])
