"""Sparse autoencoder with sparse weights: `Y = ReLU(X·W_encᵀ + b_enc)·W_decᵀ + b_dec`.

Sizes from the reference (batch 32): ImageNet 50176→256, NIH-CXR 1048576→512, LUNA16
262144→512; weights keep `density` of their entries (default 0.1, i.e. 90% zeros) and are stored
compressed,compressed. They are generated sparse (`sparse_weight`) and held as sparse CSR
tensors, so a model of a million features takes memory in proportion to its nonzeros.

    >>> import torch
    >>> m = SparseAutoencoder(features=64, hidden=8, density=0.1, seed=0)
    >>> m.enc.weight.layout, round(m.enc.weight.values().numel() / (8 * 64), 1), m(torch.ones(2, 64)).shape
    (torch.sparse_csr, 0.1, torch.Size([2, 64]))
"""
from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
import torch

SAE_SIZES = {"small": (1024, 64), "imagenet": (50176, 256), "nih-cxr": (1048576, 512), "luna16": (262144, 512)}
BATCH = 32
DRAWS = 1 << 22  # positions drawn per step of `sparse_weight` (bounds its temporaries)


def sparse_weight(rows: int, cols: int, density: float, rng: np.random.Generator) -> sp.csr_array:
    """A `rows x cols` float32 weight keeping each entry with probability `density` (as a
    Bernoulli mask of a dense weight would), values uniform in ±1/√cols without zeros (torch's
    Linear initialisation), built from the gaps between kept positions, never as a dense array.

    >>> W = sparse_weight(100, 200, 0.1, np.random.default_rng(0))
    >>> W.shape, round(W.nnz / 20000, 2), bool(abs(W.data).max() <= 200 ** -0.5), bool((W.data != 0).all())
    ((100, 200), 0.1, True, True)
    """
    if not 0.0 < density <= 1.0:
        raise ValueError(f"density {density} is outside (0, 1]")
    size = rows * cols
    index = np.int32 if max(cols, size) < np.iinfo(np.int32).max else np.int64
    columns, counts, last = [], np.zeros(rows, dtype=np.int64), -1
    while last < size - 1:
        kept = last + np.cumsum(rng.geometric(density, size=DRAWS))  # next kept flat positions
        kept = kept[kept < size]
        if not kept.size:
            break
        last = int(kept[-1])
        counts += np.bincount(kept // cols, minlength=rows)
        columns.append((kept % cols).astype(index))
    indices = np.concatenate(columns) if columns else np.zeros(0, dtype=index)
    indptr = np.zeros(rows + 1, dtype=index)
    np.cumsum(counts, out=indptr[1:])
    bound = np.float32(cols ** -0.5)
    values = (1 - rng.random(indices.size, dtype=np.float32)) * bound  # in (0, bound]
    values[rng.random(indices.size, dtype=np.float32) < 0.5] *= -1
    return sp.csr_array((values, indices, indptr), shape=(rows, cols))


class SparseLinear(torch.nn.Module):
    """`x·Wᵀ + b` with W a sparse CSR tensor (a parameter without gradient) and b dense."""

    def __init__(self, weight: sp.csr_array, bias: np.ndarray):
        super().__init__()
        with warnings.catch_warnings():  # torch: sparse CSR support is in beta
            warnings.simplefilter("ignore")
            csr = torch.sparse_csr_tensor(torch.from_numpy(weight.indptr), torch.from_numpy(weight.indices),
                                          torch.from_numpy(weight.data), size=weight.shape)
        self.weight = torch.nn.Parameter(csr, requires_grad=False)
        self.bias = torch.nn.Parameter(torch.from_numpy(np.asarray(bias, dtype=np.float32)), requires_grad=False)

    def forward(self, x):
        return torch.nn.functional.linear(x, self.weight, self.bias)


def _layer(inputs: int, outputs: int, density: float, rng: np.random.Generator) -> SparseLinear:
    weight = sparse_weight(outputs, inputs, density, rng)
    bias = rng.uniform(-inputs ** -0.5, inputs ** -0.5, size=outputs).astype(np.float32)
    return SparseLinear(weight, bias)


class SparseAutoencoder(torch.nn.Module):
    def __init__(self, features: int, hidden: int, density: float = 0.1, seed: int = 0):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.enc = _layer(features, hidden, density, rng)
        self.dec = _layer(hidden, features, density, rng)

    def forward(self, X):
        h = torch.relu(self.enc(X))
        return self.dec(h)
