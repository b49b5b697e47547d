"""The tiling, block roles, copy lists and shared-memory map of the generated kernel for one plan.

This is the single description that :mod:`fuseflow.gpu.kernels.codegen` turns into CUDA constants and
that :mod:`fuseflow.gpu.emulation.kernel_emulator` executes in numpy, so the kernel's index arithmetic is checked on
the CPU: which block issues each bulk copy (TMA), which blocks a multicast reaches, how many bytes
each block's barrier expects, and which rows and columns every block reads and writes.

    >>> from fuseflow.gpu.problem.benchmarks import BENCHMARKS
    >>> from fuseflow.gpu.planning.planner import plan_chain
    >>> lay = kernel_layout(BENCHMARKS["G1"], plan_chain(BENCHMARKS["G1"], topk=1).plans[0])
    >>> lay.blocks, lay.smem_bytes <= 227 * 1024, lay.features()["multicast_a"]
    (16, True, True)
"""
from __future__ import annotations

from dataclasses import dataclass

from fuseflow.errors import NotSupported

from ..problem.chains import Chain
from ..problem.device import Device

THREADS = 256             # 8 warps per block
WARPS = THREADS // 32
MMA = 16                  # 16x16x16 tensor-core fragment
PAD = 8                   # halfs of padding per shared-memory row (16 bytes: keeps bulk-copy rows aligned)
DTYPES = ("fp16", "bf16")
ALIGN = 32                # bytes: every shared-memory region starts on this boundary (tensor-core loads)


@dataclass(frozen=True)
class Role:
    """A block's place in its cluster: (im, in_, ik) in GEMM0 and (im, il, ir, j) in GEMM1."""

    rank: int
    im: int
    in_: int
    ik: int
    j: int
    ir: int
    il: int


@dataclass(frozen=True)
class Copy:
    """One bulk copy of ``rows`` rows of ``row_elems`` elements into the blocks of ``mask``."""

    tensor: str
    issuer: int
    mask: int
    rows: tuple[int, ...]   # global row indices (the source row of each copied row)
    col0: int               # first global column
    row_elems: int

    def bytes_to_each(self, elem_bytes: int = 2) -> int:
        return len(self.rows) * self.row_elems * elem_bytes


@dataclass(frozen=True)
class KernelLayout:
    """Everything the generated kernel fixes at compile time for one plan."""

    chain: Chain
    strategy: str
    dtype: str
    spatial: tuple[str, ...]        # grid dims, decoded in this order from the cluster id
    temporal: tuple[str, ...]       # loops outside K, outer to inner
    cls: tuple[int, int, int, int]
    blk: tuple[int, int, int, int]
    bk1: int                        # rows of D per GEMM1 pipeline step
    clusters: int
    smem: tuple[tuple[str, int, int], ...]   # (region, offset, bytes)

    @property
    def blocks(self) -> int:
        cm, cn, ck, _ = self.cls
        return cm * cn * ck

    @property
    def sh(self) -> int:
        return self.cls[3] // self.cls[2]

    @property
    def cr(self) -> int:
        return self.cls[1] // self.sh

    @property
    def tiles(self) -> tuple[int, int, int, int]:
        """Cluster tile (TM, TN, TK, TL); the gated spatial strategy does not split K (cls_k = branches)."""
        cm, cn, ck, cl = self.cls
        bm, bn, bk, bl = self.blk
        return cm * bm, cn * bn, (1 if self.strategy == "spatial" else ck) * bk, cl * bl

    @property
    def trips(self) -> dict[str, int]:
        return {d: p // t for d, p, t in zip("MNKL", self.chain.padded, self.tiles)}

    @property
    def nacc(self) -> int:
        return 2 if self.strategy == "sequential" else 1

    @property
    def reduce_e(self) -> bool:
        """E is summed over clusters (N spread over the grid): atomically in L2 after a memset."""
        return "N" in self.spatial and self.trips["N"] > 1

    @property
    def smem_bytes(self) -> int:
        return max(off + size for _, off, size in self.smem)

    def region(self, name: str) -> tuple[int, int]:
        for n, off, size in self.smem:
            if n == name:
                return off, size
        raise KeyError(name)

    def role(self, rank: int) -> Role:
        cn, ck = self.cls[1], self.cls[2]
        im, in_, ik = rank // (cn * ck), (rank // ck) % cn, rank % ck
        j, ir = in_ % self.sh, in_ // self.sh
        return Role(rank, im, in_, ik, j, ir, ik * self.sh + j)

    def rank_of(self, im: int, in_: int, ik: int) -> int:
        return im * self.cls[1] * self.cls[2] + in_ * self.cls[2] + ik

    def features(self) -> dict[str, object]:
        """The code paths a plan takes in the generated kernel (the compile test covers them all)."""
        w = self.blk[3] // self.cr
        return {"strategy": self.strategy, "dtype": self.dtype, "reduce_e": self.reduce_e,
                "bulk_reduce": self.reduce_e and w % 8 == 0, "atomic_reduce": self.reduce_e and w % 8 != 0,
                "shuffle": self.sh > 1, "reduce_scatter": self.cr > 1, "exchange": self.cls[2] > 1,
                "multicast_a": self.a_group_size() > 1, "multicast_b": self.cls[0] > 1,
                "ragged_m": self.chain.M % self.tiles[0] != 0, "cluster_size": self.blocks,
                "loops": tuple(d for d in self.temporal if self.trips[d] > 1)}

    def a_group_size(self) -> int:
        """Blocks that read the same A tile: every in_ (and, gated spatial, both branches)."""
        return self.cls[1] * (self.cls[2] if self.strategy == "spatial" else 1)

    def a_copies(self, m: int, k: int) -> list[Copy]:
        """Bulk copies of A for cluster M tile ``m`` and K step ``k``: one per (im, ik) A tile, issued
        by the block with in_ = 0 (and ik = 0 when both branches share the tile)."""
        cn, ck = self.cls[1], self.cls[2]
        bm, _, bk, _ = self.blk
        out = []
        for im in range(self.cls[0]):
            for ik in range(1 if self.strategy == "spatial" else ck):
                rows = tuple(r for r in range(m * self.tiles[0] + im * bm, m * self.tiles[0] + (im + 1) * bm)
                             if r < self.chain.M)
                dest = [self.rank_of(im, q, p) for q in range(cn)
                        for p in (range(ck) if self.strategy == "spatial" else (ik,))]
                col0 = k * self.tiles[2] + (0 if self.strategy == "spatial" else ik * bk)
                out.append(Copy("A", self.rank_of(im, 0, ik), _mask(dest), rows, col0, bk))
        return out

    def b_copies(self, n: int, k: int) -> list[Copy]:
        """Bulk copies of B0 (and B1) for cluster N tile ``n`` and K step ``k``, one per (in_, ik),
        issued by the block with im = 0 and multicast over im."""
        cm, cn, ck = self.cls[:3]
        _, bn, bk, _ = self.blk
        out = []
        for in_ in range(cn):
            for ik in range(ck):
                k0 = k * self.tiles[2] + (0 if self.strategy == "spatial" else ik * bk)
                rows = tuple(range(k0, k0 + bk))
                dest = _mask([self.rank_of(q, in_, ik) for q in range(cm)])
                col0 = n * self.tiles[1] + in_ * bn
                issuer = self.rank_of(0, in_, ik)
                for t in self.b_tensors(ik):
                    out.append(Copy(t, issuer, dest, rows, col0, bn))
        return out

    def b_tensors(self, ik: int) -> tuple[str, ...]:
        if self.strategy == "sequential":
            return ("B0", "B1")
        if self.strategy == "spatial":
            return ("B1",) if ik == 1 else ("B0",)
        return ("B0",)

    def d_copies(self, n: int, lt: int, step: int, chunk: int) -> list[Copy]:
        """Bulk copies of D for shuffle step ``step`` and chunk ``chunk`` of the C' tile's columns:
        block (im, in_, ik) reads rows of the N slice it holds at this step and its L columns; the
        block with im = 0 issues and multicasts over im."""
        cm, cn, ck = self.cls[:3]
        bn, bl = self.blk[1], self.blk[3]
        out = []
        for in_ in range(cn):
            for ik in range(ck):
                role = self.role(self.rank_of(0, in_, ik))
                src_n = role.ir * self.sh + (role.j + step) % self.sh
                r0 = n * self.tiles[1] + src_n * bn + chunk * self.bk1
                dest = _mask([self.rank_of(q, in_, ik) for q in range(cm)])
                out.append(Copy("D", role.rank, dest, tuple(range(r0, r0 + self.bk1)),
                                lt * self.tiles[3] + role.il * bl, bl))
        return out

    def expected_bytes(self, tensor_group: str, m: int, im: int, elem_bytes: int = 2) -> int:
        """Bytes block row ``im``'s barrier expects per pipeline step (the kernel's expect_tx): the
        A rows that exist plus the B tiles ("AB"), or one D chunk ("D")."""
        _, bn, bk, bl = self.blk
        if tensor_group == "AB":
            return elem_bytes * (self.valid_rows(m, im) * bk + self.nacc * bk * bn)
        return elem_bytes * self.bk1 * bl

    def valid_rows(self, m: int, im: int) -> int:
        return max(0, min(self.blk[0], self.chain.M - m * self.tiles[0] - im * self.blk[0]))


def _mask(ranks) -> int:
    mask = 0
    for r in ranks:
        mask |= 1 << r
    return mask


def unsupported_reason(chain: Chain, plan) -> str | None:
    """Why the kernel generator cannot build ``plan`` (None when it can)."""
    if plan.placement["C"] != "-" or plan.placement["E_acc"] != "-":
        return (f"the plan holds C in {plan.placement['C']} / the E accumulator in {plan.placement['E_acc']} "
                "across a loop; code generation covers plans that hold neither")
    for d, v in zip("NKL", chain.dims[1:]):
        if v % MMA:
            return f"extent {d}={v} is not a multiple of 16 (bulk copies move whole 16-element rows)"
    cn, ck = plan.cls[1], plan.cls[2]
    sh = plan.cls[3] // ck
    if plan.blk[1] % ck or plan.blk[3] % (cn // sh):
        return "the exchange or reduce-scatter slice is not a whole number of columns"
    return None


D_CHUNKS = (64, 48, 32, 16)   # rows of D per GEMM1 step, largest first; smaller ones save shared memory


def _smem_map(lay_blk, cls, strategy, bk1, spatial, tn) -> tuple[tuple[str, int, int], ...]:
    """Regions: 2 stages of A/B and D tiles, the FP32 accumulators (C partials and E
    partials share one region: C's is dead once the activated tile exists), the activated C' tile,
    two ring buffers when the shuffle has more than one step, the output rows staged for the bulk
    reduction into E, and the mbarriers."""
    bm, bn, bk, bl = lay_blk
    cm, cn, ck, cl = cls
    sh, nb = cl // ck, (2 if strategy == "sequential" else 1)
    cr = cn // sh
    rw = bl // cr
    bulk_reduce = "N" in spatial and tn > 1 and rw % 8 == 0
    sizes = [("a", 2 * bm * (bk + PAD) * 2),
             ("b", 2 * nb * bk * (bn + PAD) * 2),
             ("d", 2 * bk1 * (bl + PAD) * 2),
             ("acc", max(nb * bm * bn, bm * bl) * 4),
             ("cw", bm * (bn + PAD) * 2),
             ("ring", (2 * bm * (bn + PAD) * 2) if sh > 1 else 0),
             ("eout", bm * rw * 2 if bulk_reduce else 0),
             ("barriers", 64)]
    out, off = [], 0
    for name, size in sizes:
        if name == "eout" and 0 < size <= out[2][2]:   # the D stages are idle while E is written out
            out.append((name, out[2][1], size))
            continue
        out.append((name, off, size))
        off += -(-size // ALIGN) * ALIGN
    return tuple(out)


def kernel_layout(chain: Chain, plan, device: Device | None = None, dtype: str = "fp16") -> KernelLayout:
    """The generated kernel's layout for ``plan``; NotSupported with the reason if it cannot be built."""
    device = device or Device()
    if dtype not in DTYPES:
        raise NotSupported(f"element type {dtype!r} (use {' or '.join(DTYPES)})", "kernel")
    where = f"plan {plan.schedule.name} cls {plan.cls}"
    reason = unsupported_reason(chain, plan)
    if reason:
        raise NotSupported(reason, where)
    spatial = tuple(d for d in "MN" if d in plan.schedule.spatial)
    temporal = tuple(d for d in plan.schedule.temporal if d != "K")
    tn = chain.padded[1] // (plan.cls[1] * plan.blk[1])
    for blk in _k_steps(chain, plan):
        for bk1 in (c for c in D_CHUNKS if blk[1] % c == 0):
            lay = KernelLayout(chain, plan.strategy, dtype, spatial, temporal, tuple(plan.cls), blk, bk1,
                               plan.clusters, _smem_map(blk, plan.cls, plan.strategy, bk1, spatial, tn))
            if lay.smem_bytes <= device.smem_per_block:
                return lay
    raise NotSupported(f"the kernel's shared memory ({lay.smem_bytes} bytes with 16 rows of D a step) exceeds "
                       f"one block's {device.smem_per_block}", where)


K_STEP_MIN = 64   # elements of K a block loads per pipeline stage, at least, where K allows


def _k_steps(chain: Chain, plan):
    """Block tiles to try, widest K step first: the plan's blk_k changes no modelled volume (only staging
    space), so the kernel loads K_STEP_MIN or more of K a stage when that divides K, for fewer, larger
    bulk copies and fewer pipeline barriers; the plan's own tile is the last resort."""
    bm, bn, bk, bl = plan.blk
    per_cluster = 1 if plan.strategy == "spatial" else plan.cls[2]
    out = []
    for mult in (8, 4, 2):
        if bk * mult <= max(K_STEP_MIN, bk) * 2 and chain.padded[2] % (per_cluster * bk * mult) == 0:
            out.append((bm, bn, bk * mult, bl))
    return out + [tuple(plan.blk)]
