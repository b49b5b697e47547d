"""Two-layer graph convolutional network, as in the FuseFlow evaluation.

`softmax(A · relu(A · X · W1ᵀ + b1) · W2ᵀ + b2)` with an unweighted, unnormalised
adjacency A (the reference's setting), hidden size 16.

    >>> import torch
    >>> model = GCN(features=5, classes=3, hidden=4)
    >>> model(torch.eye(6), torch.ones(6, 5)).shape
    torch.Size([6, 3])
"""
from __future__ import annotations

import torch


class GCN(torch.nn.Module):
    def __init__(self, features: int, classes: int, hidden: int = 16):
        super().__init__()
        self.layer1 = torch.nn.Linear(features, hidden)
        self.layer2 = torch.nn.Linear(hidden, classes)

    def forward(self, A, X):
        h = torch.relu(self.layer1(A @ X))
        return torch.softmax(self.layer2(A @ h), dim=1)
