"""Single-head masked attention with a BigBird mask: the block-size benchmark's kernel.

`softmax((Q·Kᵀ)/√d masked by M) · V` with Q, K, V dense (seq x d) and M the BigBird mask of block
size b stored `compressed,compressed`, as in the reference's MHA block-size experiment.

    >>> program, inputs = bigbird_attention(64, 16, 16)
    >>> sorted(inputs), inputs["M"].shape, program.outputs
    (['M', 'k', 'q', 'v'], (64, 64), ['t21'])
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import torch

from ..frontend import from_torch
from ..ir.canonicalize import prepare
from .gpt3 import bigbird_mask


def bigbird_attention(seq: int, d: int, block: int, seed: int = 0):
    """(canonical program, inputs) of one attention head over a BigBird mask of block `block`."""
    scale = 1.0 / math.sqrt(d)

    class Attention(torch.nn.Module):
        def forward(self, q, k, v, M):
            scores = (q @ k.transpose(-1, -2)) * scale
            return torch.softmax(scores.masked_fill(M == 0, float("-inf")), dim=-1) @ v

    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(seq, d)) for _ in range(3))
    M = bigbird_mask(seq, block, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = prepare(from_torch(Attention(), *(torch.tensor(x, dtype=torch.float32) for x in (q, k, v)),
                                     torch.tensor(M, dtype=torch.float32).to_sparse_csr(),
                                     formats={"M": "compressed,compressed"}))
    return program, {"q": q, "k": k, "v": v, "M": M}
