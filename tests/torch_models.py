"""Small PyTorch models imported by tests/test_torch_frontend.py."""
from __future__ import annotations

import torch
from torch import nn


class GCN(nn.Module):
    """softmax(A · ReLU(A · X · W1ᵀ + b1) · W2ᵀ + b2), A a (sparse) adjacency."""

    def __init__(self, features: int, hidden: int, classes: int):
        super().__init__()
        self.l1 = nn.Linear(features, hidden)
        self.l2 = nn.Linear(hidden, classes)

    def forward(self, A, X):
        h = torch.relu(self.l1(A @ X))
        return torch.softmax(self.l2(A @ h), dim=-1)


class SAGELayer(nn.Module):
    """ReLU(X · W_selfᵀ + b_self + (A · X) · W_neighᵀ + b_neigh), sum aggregation."""

    def __init__(self, inp: int, out: int):
        super().__init__()
        self.self_lin = nn.Linear(inp, out)
        self.neigh_lin = nn.Linear(inp, out)

    def forward(self, A, X):
        return torch.relu(self.self_lin(X) + self.neigh_lin(A @ X))


class GraphSAGE(nn.Module):
    def __init__(self, features: int, hidden: int, out: int):
        super().__init__()
        self.layer1 = SAGELayer(features, hidden)
        self.layer2 = SAGELayer(hidden, out)

    def forward(self, A, X):
        return self.layer2(A, self.layer1(A, X))


class SparseAutoencoder(nn.Module):
    """Y = ReLU(X · W_encᵀ + b_enc) · W_decᵀ + b_dec with mostly-zero weights."""

    def __init__(self, features: int, code: int, zero_fraction: float = 0.9):
        super().__init__()
        self.enc = nn.Linear(features, code)
        self.dec = nn.Linear(code, features)
        with torch.no_grad():
            for lin in (self.enc, self.dec):
                lin.weight.mul_((torch.rand_like(lin.weight) >= zero_fraction).float())

    def forward(self, X):
        return self.dec(torch.relu(self.enc(X)))


class MaskedAttention(nn.Module):
    """softmax((M * (Q @ Kᵀ)) * scale) @ V; with (h, n, d) inputs M broadcasts over heads."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, M, Q, K, V):
        scores = (M * (Q @ K.transpose(-2, -1))) * self.scale
        return torch.softmax(scores, dim=-1) @ V


class LayerNormModel(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        with torch.no_grad():  # non-trivial affine parameters
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.norm(x)


class FeedForward(nn.Module):
    """Linear → GELU → Linear; approximate is "none" (erf) or "tanh"."""

    def __init__(self, d: int, hidden: int, approximate: str = "none"):
        super().__init__()
        self.up = nn.Linear(d, hidden)
        self.act = nn.GELU(approximate=approximate)
        self.down = nn.Linear(hidden, d)

    def forward(self, x):
        return self.down(self.act(self.up(x)))


class DataDependent(nn.Module):
    """Python control flow on a tensor value: torch.export cannot trace it."""

    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


class Scale(nn.Module):
    def forward(self, x, factor):
        return x * factor


class LinearRelu(nn.Module):
    """ReLU(Linear(A · X)): the model the command-line tests load from this file."""

    def __init__(self, features: int = 4, out: int = 3):
        super().__init__()
        self.lin = nn.Linear(features, out)

    def forward(self, A, X):
        return torch.relu(self.lin(A @ X))
