"""GPT-3-style decoder blocks with BigBird block-sparse attention.

Each block: `q,k,v = LN(x)·W` (component 1); per head `softmax(masked(q·kᵀ/√d))·v` where masked
positions are excluded as `masked_fill(M == 0, -inf)` does (component 2); output projection,
residual, LN, GELU feed-forward, residual (component 3). Heads are kept as a leading dimension of
the weights, so no reshape splits the model into separate kernels.

The BigBird mask of block size b: per block row, 2 random block columns, the diagonal band (the
block and its two neighbours) and global blocks (the first two block rows and columns).

    >>> m = bigbird_mask(64, 16, seed=0)
    >>> m.shape, bool(m[:32].all()), bool(m[:, :32].all())
    ((64, 64), True, True)
"""
from __future__ import annotations

import math

import numpy as np
import torch

GPT3_SMALL = {"seq": 1024, "d_model": 768, "heads": 12, "ffn": 3072, "layers": 12}  # the reference's decoder
GPT3_TINY = {"seq": 64, "d_model": 32, "heads": 2, "ffn": 64, "layers": 2}  # simulates in seconds
GPT3_MINI = {"seq": 256, "d_model": 32, "heads": 2, "ffn": 64, "layers": 2}  # room for 16/32/64 blocks
GPT3_WIDE = {"seq": 256, "d_model": 128, "heads": 2, "ffn": 256, "layers": 2}  # several 32/64 blocks per row
GPT3_DEEP = {**GPT3_WIDE, "layers": 6}  # cross-layer fusion joins 5 of 6 tails to the next block
# two of the reference's decoders: every kernel the 12-decoder model has (a first LN+QKV, an
# attention, a tail fused with the next LN+QKV, a last tail), whose cycles `cycles.model_cycles` scales
GPT3_SMALL2 = {**GPT3_SMALL, "layers": 2}


def bigbird_mask(seq: int, block: int, seed: int = 0, random_blocks: int = 2, global_blocks: int = 2) -> np.ndarray:
    """0/1 mask (seq x seq) at block granularity."""
    if seq % block:
        raise ValueError(f"sequence {seq} is not a multiple of block {block}")
    n = seq // block
    rng = np.random.default_rng(seed)
    blocks = np.zeros((n, n), dtype=bool)
    for i in range(n):
        blocks[i, rng.choice(n, size=min(random_blocks, n), replace=False)] = True
        blocks[i, max(0, i - 1):min(n, i + 2)] = True
    blocks[:global_blocks, :] = True
    blocks[:, :global_blocks] = True
    return np.kron(blocks, np.ones((block, block), dtype=bool)).astype(np.float64)


class DecoderBlock(torch.nn.Module):
    def __init__(self, d_model: int, heads: int, ffn: int):
        super().__init__()
        dk = d_model // heads
        self.scale = 1.0 / math.sqrt(dk)
        self.ln1 = torch.nn.LayerNorm(d_model)
        self.wq = torch.nn.Parameter(torch.randn(heads, d_model, dk) / math.sqrt(d_model))
        self.wk = torch.nn.Parameter(torch.randn(heads, d_model, dk) / math.sqrt(d_model))
        self.wv = torch.nn.Parameter(torch.randn(heads, d_model, dk) / math.sqrt(d_model))
        self.wo = torch.nn.Parameter(torch.randn(heads, dk, d_model) / math.sqrt(d_model))
        self.ln2 = torch.nn.LayerNorm(d_model)
        self.up = torch.nn.Linear(d_model, ffn)
        self.down = torch.nn.Linear(ffn, d_model)

    def qkv(self, x):
        h = self.ln1(x)
        return h @ self.wq, h @ self.wk, h @ self.wv

    def attention(self, q, k, v, M):
        scores = (q @ k.transpose(-1, -2)) * self.scale
        return torch.softmax(scores.masked_fill(M == 0, float("-inf")), dim=-1) @ v

    def tail(self, x, a):
        x = x + (a @ self.wo).sum(0)
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln2(x))))

    def forward(self, x, M):
        q, k, v = self.qkv(x)
        a = self.attention(q, k, v, M)
        return self.tail(x, a)


class GPT3BigBird(torch.nn.Module):
    """`layers` decoder blocks sharing one attention mask."""

    def __init__(self, d_model: int, heads: int, ffn: int, layers: int, seed: int = 0, **_):
        super().__init__()
        torch.manual_seed(seed)
        self.blocks = torch.nn.ModuleList(DecoderBlock(d_model, heads, ffn) for _ in range(layers))

    def forward(self, x, M):
        for block in self.blocks:
            q, k, v = block.qkv(x)
            a = block.attention(q, k, v, M)
            x = block.tail(x, a)
        return x
