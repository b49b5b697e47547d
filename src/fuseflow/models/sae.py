"""Sparse autoencoder with sparse weights: `Y = ReLU(X·W_encᵀ + b_enc)·W_decᵀ + b_dec`.

Sizes from the reference (batch 32): ImageNet 50176→256, NIH-CXR 1048576→512, LUNA16
262144→512; weights keep `density` of their entries (default 0.1, i.e. 90% zeros) and are stored
compressed,compressed.

    >>> import torch
    >>> m = SparseAutoencoder(features=64, hidden=8, density=0.1, seed=0)
    >>> round(float((m.enc.weight != 0).float().mean()), 2), m(torch.ones(2, 64)).shape
    (0.1, torch.Size([2, 64]))
"""
from __future__ import annotations

import torch

SAE_SIZES = {"small": (1024, 64), "imagenet": (50176, 256), "nih-cxr": (1048576, 512), "luna16": (262144, 512)}
BATCH = 32


class SparseAutoencoder(torch.nn.Module):
    def __init__(self, features: int, hidden: int, density: float = 0.1, seed: int = 0):
        super().__init__()
        self.enc = torch.nn.Linear(features, hidden)
        self.dec = torch.nn.Linear(hidden, features)
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for layer in (self.enc, self.dec):
                keep = torch.rand(layer.weight.shape, generator=generator) < density
                layer.weight.mul_(keep)

    def forward(self, X):
        h = torch.relu(self.enc(X))
        return self.dec(h)
