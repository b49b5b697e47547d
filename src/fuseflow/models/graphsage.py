"""Two-layer GraphSAGE with sum aggregation, as in the FuseFlow evaluation.

Each layer is `ReLU(X·W_selfᵀ + b_self + (A·X)·W_neighᵀ + b_neigh)` with an unweighted,
unnormalised adjacency A; hidden size 16; no softmax.

    >>> import torch
    >>> GraphSAGE(features=5, classes=3, hidden=4)(torch.eye(6), torch.ones(6, 5)).shape
    torch.Size([6, 3])
"""
from __future__ import annotations

import torch


class SAGELayer(torch.nn.Module):
    def __init__(self, features: int, out: int):
        super().__init__()
        self.self_lin = torch.nn.Linear(features, out)
        self.neigh_lin = torch.nn.Linear(features, out)

    def forward(self, A, X):
        return torch.relu(self.self_lin(X) + self.neigh_lin(A @ X))


class GraphSAGE(torch.nn.Module):
    def __init__(self, features: int, classes: int, hidden: int = 16):
        super().__init__()
        self.layer1 = SAGELayer(features, hidden)
        self.layer2 = SAGELayer(hidden, classes)

    def forward(self, A, X):
        h = self.layer1(A, X)
        return self.layer2(A, h)
