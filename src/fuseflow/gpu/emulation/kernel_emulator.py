"""A numpy run of the generated kernel's data movement, block by block, from its :class:`KernelLayout`.

It follows the kernel step for step -- the cluster id decoded into grid coordinates, the loops,
every bulk copy delivered into the blocks of its multicast mask, each block's barrier byte count
checked against what the kernel expects (a mismatch would hang the GPU), the all-exchange, the
shuffle ring, the reduce-scatter and the inter-cluster reduction -- so a wrong index in the layout
shows up as a wrong output here, on the CPU.

    >>> import numpy as np
    >>> from fuseflow.gpu.problem.chains import Chain
    >>> from fuseflow.gpu.planning.planner import plan_chain
    >>> from fuseflow.gpu.kernels.kernel_layout import kernel_layout
    >>> chain = Chain("t", "ffn", 40, 64, 32, 32)
    >>> lay = kernel_layout(chain, plan_chain(chain, topk=1).plans[0])
    >>> inputs = random_inputs(chain, seed=0)
    >>> run = emulate(lay, *inputs)
    >>> bool(np.abs(run.E - reference(chain, *inputs, lay.dtype)).max() < 1e-2)
    True
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from ..kernels.kernel_layout import KernelLayout
from ..problem.chains import Chain


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """Round float32 values to FP16 or BF16 (nearest even) and back to float32."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "fp16":
        return x.astype(np.float16).astype(np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def activate(x: np.ndarray, act: str) -> np.ndarray:
    """The kernel's activations in float32 (GELU in its tanh form)."""
    if act == "relu":
        return np.maximum(x, 0)
    if act == "silu":
        return x / (1 + np.exp(-x))
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def random_inputs(chain: Chain, seed: int = 0, dtype: str = "fp16"):
    """A, B0, B1, D scaled so every product stays near 1 (B1 is None for ungated chains)."""
    rng = np.random.default_rng(seed)
    M, N, K, L = chain.dims
    A = round_to(rng.uniform(-1, 1, (M, K)), dtype)
    B0 = round_to(rng.standard_normal((K, N)) / np.sqrt(K), dtype)
    B1 = round_to(rng.standard_normal((K, N)) / np.sqrt(K), dtype) if chain.gated else None
    D = round_to(rng.standard_normal((N, L)) / np.sqrt(N), dtype)
    return A, B0, B1, D


def reference(chain: Chain, A, B0, B1, D, dtype: str = "fp16") -> np.ndarray:
    """The chain in float32 with C' rounded to the element type, as the kernel stores it."""
    if chain.gated:
        c = activate(A @ B0, "silu") * (A @ B1)
    else:
        c = activate(A @ B0, chain.act)
    return round_to(c, dtype) @ D


@dataclass
class EmulatedRun:
    E: np.ndarray
    writes: np.ndarray                    # how often each E element was stored or reduced into
    copies: int = 0                       # bulk copies issued
    dsm_elems: int = 0                    # elements read from peer blocks
    checked_barriers: int = 0
    notes: list = field(default_factory=list)


class _Cluster:
    """Per-block buffers of one cluster."""

    def __init__(self, lay: KernelLayout):
        bm, bn, _, bl = lay.blk
        self.acc = np.zeros((lay.blocks, lay.nacc, bm, bn), np.float32)
        self.cw = np.zeros((lay.blocks, bm, bn), np.float32)
        self.ring = np.zeros((lay.blocks, 2, bm, bn), np.float32)
        self.acc_e = np.zeros((lay.blocks, bm, bl), np.float32)


def _deliver(lay, copies, buffers, base_of, run, group, m):
    """Write every copy into each block of its mask; check each block got what its barrier expects."""
    got = np.zeros(lay.blocks, np.int64)
    for cp in copies:
        run.copies += 1
        for rank in range(lay.blocks):
            if cp.mask >> rank & 1:
                rows = np.asarray(cp.rows, np.int64)
                local = rows - base_of(cp, rank)
                buffers[cp.tensor][rank][local, :] = run.src[cp.tensor][rows, cp.col0:cp.col0 + cp.row_elems]
                got[rank] += cp.bytes_to_each()
    for rank in range(lay.blocks):
        want = lay.expected_bytes(group, m, lay.role(rank).im)
        if got[rank] != want:
            raise AssertionError(f"block {rank} receives {got[rank]} bytes in a {group} step, expects {want}")
        run.checked_barriers += 1


def _gemm0(lay, cl, run, m, n):
    bm, bn, bk, _ = lay.blk
    cl.acc[:] = 0
    a_base = lambda cp, rank: m * lay.tiles[0] + lay.role(rank).im * bm  # noqa: E731
    for k in range(lay.trips["K"]):
        bufs = {"A": np.zeros((lay.blocks, bm, bk), np.float32)}
        for t in ("B0", "B1"):
            bufs[t] = np.zeros((lay.blocks, bk, bn), np.float32)
        copies = lay.a_copies(m, k) + lay.b_copies(n, k)
        _deliver(lay, copies, bufs, lambda cp, rank: a_base(cp, rank) if cp.tensor == "A" else cp.rows[0],
                 run, "AB", m)
        for rank in range(lay.blocks):
            ik = lay.role(rank).ik
            for i, t in enumerate(lay.b_tensors(ik)):
                slot = i if lay.strategy == "sequential" else 0
                cl.acc[rank, slot] += bufs["A"][rank] @ bufs[t][rank]


def _exchange(lay, cl, run):
    """The all-exchange: gated spatial swaps branch results; otherwise reduce-scatter the FP32
    partials over cls_k, activate, and all-gather the FP16 slices."""
    bn, ck = lay.blk[1], lay.cls[2]
    if lay.strategy == "spatial":
        for rank in range(lay.blocks):
            g, u = cl.acc[rank - lay.role(rank).ik, 0], cl.acc[rank - lay.role(rank).ik + 1, 0]
            cl.cw[rank] = round_to(activate(g, "silu") * u, lay.dtype)
            run.dsm_elems += g.size
        return
    w = bn // ck
    part = np.zeros_like(cl.cw)
    for rank in range(lay.blocks):
        ik = lay.role(rank).ik
        cols = slice(ik * w, (ik + 1) * w)
        peers = [rank - ik + p for p in range(ck)]
        g = sum(cl.acc[p, 0][:, cols] for p in peers)
        run.dsm_elems += (ck - 1) * g.size * lay.nacc
        if lay.strategy == "sequential":
            u = sum(cl.acc[p, 1][:, cols] for p in peers)
            part[rank][:, cols] = round_to(activate(g, "silu") * u, lay.dtype)
        else:
            part[rank][:, cols] = round_to(activate(g, lay.chain.act), lay.dtype)
    for rank in range(lay.blocks):
        ik = lay.role(rank).ik
        for q in range(ck):
            cols = slice(q * w, (q + 1) * w)
            cl.cw[rank][:, cols] = part[rank - ik + q][:, cols]
            run.dsm_elems += 0 if q == ik else part[rank][:, cols].size


def _gemm1(lay, cl, run, n, lt, m):
    bn, bl = lay.blk[1], lay.blk[3]
    cl.ring[:, 0] = cl.cw
    for s in range(lay.sh):
        for chunk in range(bn // lay.bk1):
            bufs = {"D": np.zeros((lay.blocks, lay.bk1, bl), np.float32)}
            _deliver(lay, lay.d_copies(n, lt, s, chunk), bufs, lambda cp, rank: cp.rows[0], run, "D", m)
            cols = slice(chunk * lay.bk1, (chunk + 1) * lay.bk1)
            for rank in range(lay.blocks):
                cl.acc_e[rank] += cl.ring[rank, s & 1][:, cols] @ bufs["D"][rank]
        if s + 1 < lay.sh:
            nxt = cl.ring[:, s & 1].copy()
            for rank in range(lay.blocks):
                r = lay.role(rank)
                cl.ring[rank, (s + 1) & 1] = nxt[lay.rank_of(r.im, r.ir * lay.sh + (r.j + 1) % lay.sh, r.ik)]
                run.dsm_elems += nxt[rank].size


def _reduce_store(lay, cl, run, m, lt):
    """dsm_reduce_scatter over the cr blocks that share L columns, then store or reduce into E."""
    bm, bl = lay.blk[0], lay.blk[3]
    w = bl // lay.cr
    M, L = lay.chain.M, lay.chain.L
    for rank in range(lay.blocks):
        r = lay.role(rank)
        cols = slice(r.ir * w, (r.ir + 1) * w)
        total = sum(cl.acc_e[lay.rank_of(r.im, p * lay.sh + r.j, r.ik)][:, cols] for p in range(lay.cr))
        run.dsm_elems += (lay.cr - 1) * total.size
        rows = m * lay.tiles[0] + r.im * bm + np.arange(bm)
        gl = lt * lay.tiles[3] + r.il * bl + r.ir * w + np.arange(w)
        keep = rows < M
        rows, total = rows[keep], round_to(total[keep], lay.dtype)
        assert gl.max() < L, "an E column beyond L"
        sel = np.ix_(rows, gl)
        run.E[sel] = round_to(run.E[sel] + total, lay.dtype) if lay.reduce_e else total
        run.writes[sel] += 1


def _cluster_coords(lay, cid):
    coords, div = {}, cid
    for d in lay.spatial:
        coords[d] = div % lay.trips[d]
        div //= lay.trips[d]
    return coords


def emulate(lay: KernelLayout, A, B0, B1, D) -> EmulatedRun:
    """Run the kernel's schedule over all clusters; E and how often each element was written."""
    chain = lay.chain
    run = EmulatedRun(E=np.zeros((chain.M, chain.L), np.float32), writes=np.zeros((chain.M, chain.L), np.int64))
    run.src = {"A": A, "B0": B0, "B1": B1 if B1 is not None else B0, "D": D}
    for cid in range(lay.clusters):
        coords = _cluster_coords(lay, cid)
        cl, prev = _Cluster(lay), None
        for values in itertools.product(*(range(lay.trips[d]) for d in lay.temporal)):
            pos = {**{d: 0 for d in "MNL"}, **coords, **dict(zip(lay.temporal, values))}
            m, n, lt = pos["M"], pos["N"], pos["L"]
            if (m, n) != prev:
                _gemm0(lay, cl, run, m, n)
                _exchange(lay, cl, run)
                prev = (m, n)
            n_first = "N" in lay.spatial or n == 0
            n_last = "N" in lay.spatial or n == lay.trips["N"] - 1
            if n_first:
                cl.acc_e[:] = 0
            _gemm1(lay, cl, run, n, lt, m)
            if n_last:
                _reduce_store(lay, cl, run, m, lt)
    want = lay.trips["N"] if lay.reduce_e else 1
    if not (run.writes == want).all():
        raise AssertionError(f"E elements written {run.writes.min()}..{run.writes.max()} times, expected {want}")
    return run
