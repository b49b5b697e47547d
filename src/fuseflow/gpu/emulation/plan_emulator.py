"""Functional checker: run a plan tile by tile in numpy and count the bytes it moves.

Clusters run one after another; inside a cluster every block has its own buffers. Global loads
are TMA multicasts (one L2 read per cluster tile, one SMEM write per receiving block); DSM
primitives are explicit copies between per-block buffers; the loop order is the plan's schedule.
The result must equal the unfused computation, and the byte counts must equal the analyzer's.
The checker derives what must be cached (and for how long) from the loop order itself; it takes
only the placement tier of a cached tensor from the plan.

    >>> from fuseflow.gpu.problem.chains import Chain
    >>> from fuseflow.gpu.planning.planner import make_plan
    >>> from fuseflow.gpu.planning.loop_schedules import parse_schedule
    >>> ch = Chain("t", "ffn", 40, 64, 32, 32, act="gelu")
    >>> p = make_plan(ch, Device(), parse_schedule("[M] L,N,K"), "standard", (1, 2, 2, 2), (16, 16, 16, 16))
    >>> r = run_plan(ch, p)
    >>> r.max_error < 1e-9, r.volumes == p.volumes
    (True, True)
"""
from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from ..problem.chains import Chain
from ..problem.device import LEVELS, Device

PARTS = ("l2_A", "l2_B", "l2_D", "l2_E", "l2_C", "dsm_exchange", "dsm_shuffle", "dsm_reduce_scatter",
         "dsm_c_cache")


class CheckError(AssertionError):
    """The plan cannot run as described (e.g. a tensor must be cached but the plan has no place)."""


@dataclass
class CheckResult:
    output: np.ndarray
    reference: np.ndarray
    max_error: float
    volumes: dict
    parts: dict


def activation(name: str, x: np.ndarray) -> np.ndarray:
    """relu, gelu (tanh form) or silu.

    >>> activation("relu", np.array([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """
    if name == "relu":
        return np.maximum(x, 0.0)
    if name == "silu":
        return x / (1.0 + np.exp(-x))
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def reference(chain: Chain, A, Bs, D) -> np.ndarray:
    """The unfused computation."""
    if chain.gated:
        C = activation("silu", A @ Bs[0]) * (A @ Bs[1])
    else:
        C = activation(chain.act, A @ Bs[0])
    return C @ D


class _Memory:
    """Byte counters per level and per breakdown part, plus the elements of each global tensor
    touched (to count DRAM traffic when re-reads hit in L2)."""

    def __init__(self, chain: Chain, device: Device):
        self.level = defaultdict(int)
        self.part = defaultdict(int)
        self.requests = defaultdict(int)
        M, N, K, L = chain.dims
        shapes = {"A": (M, K), "B0": (K, N), "B1": (K, N), "D": (N, L), "E": (M, L), "C": (M, N)}
        self.touched = {k: np.zeros(v, dtype=bool) for k, v in shapes.items()}
        self.accesses = {k: np.zeros(v, dtype=np.int64) for k, v in shapes.items()}  # this cluster's
        self.most = {k: np.zeros(v, dtype=np.int64) for k, v in shapes.items()}      # max over clusters
        self.e = device.in_bytes
        self.fit = device.l2_bytes * device.l2_reuse_fraction

    def end_cluster(self):
        """Clusters run together: an element costs DRAM traffic as often as the busiest cluster
        touches it (when the tensor is larger than the L2 share)."""
        for k, acc in self.accesses.items():
            np.maximum(self.most[k], acc, out=self.most[k])
            acc[...] = 0

    def count(self, level: str, nbytes: int, part: str | None = None):
        self.level[level] += int(nbytes)
        if part:
            self.part[part] += int(nbytes)

    def global_access(self, tensor: str, rows: slice, cols: slice, part: str):
        region = self.touched[tensor][rows, cols]
        nbytes = region.size * self.e
        region[...] = True
        self.accesses[tensor][rows, cols] += 1
        self.requests[tensor] += nbytes
        self.count("l2", nbytes, part)

    def dram(self) -> int:
        total = 0
        for tensor, mask in self.touched.items():
            size = mask.size * self.e
            total += int(mask.sum()) * self.e if size <= self.fit else int(self.most[tensor].sum()) * self.e
        return total


def run_plan(chain: Chain, plan, device: Device | None = None, seed: int = 0) -> CheckResult:
    """Execute ``plan`` (a planner.Plan) on random inputs; return output, error and byte counts."""
    device = device or Device()
    rng = np.random.default_rng(seed)
    M, N, K, L = chain.dims
    A = rng.standard_normal((M, K)) / np.sqrt(K)
    Bs = [rng.standard_normal((K, N)) for _ in range(2 if chain.gated else 1)]
    D = rng.standard_normal((N, L)) / np.sqrt(N)
    return _Run(chain, plan, device, A, Bs, D).result()


class _Run:
    def __init__(self, chain, plan, device, A, Bs, D):
        self.chain, self.plan, self.dev = chain, plan, device
        self.A, self.Bs, self.D = A, Bs, D
        self.mem = _Memory(chain, device)
        self.e, self.ea = device.in_bytes, device.acc_bytes
        self.X = dict(zip("MNKL", chain.dims))
        P = dict(zip("MNKL", chain.padded))
        cm, cn, ck, cl = plan.cls
        self.cm, self.cn, self.ck, self.cl = cm, cn, ck, cl
        self.bm, self.bn, self.bk, self.bl = plan.blk
        self.spat = plan.strategy == "spatial"
        self.seq = plan.strategy == "sequential"
        kk = 1 if self.spat else ck
        self.T = {"M": cm * self.bm, "N": cn * self.bn, "K": kk * self.bk, "L": cl * self.bl}
        self.t = {d: P[d] // self.T[d] for d in "MNKL"}
        self.sh = cl // ck
        self.cr = cn // self.sh
        self.c_tier, self.e_tier = plan.placement["C"], plan.placement["E_acc"]
        self.E = np.zeros((self.X["M"], self.X["L"]))
        self.n_spatial = "N" in plan.schedule.spatial
        self.reduced = (self.n_spatial and self.t["N"] > 1) or self.e_tier == "global"

    # ---- index helpers: absolute slices clipped to the real extents -------------------------
    def sl(self, d: str, tile: int, start: int = 0, size: int | None = None) -> slice:
        lo = tile * self.T[d] + start
        hi = lo + (self.T[d] if size is None else size)
        return slice(min(lo, self.X[d]), min(hi, self.X[d]))

    @staticmethod
    def n(s: slice) -> int:
        return s.stop - s.start

    def rows(self, m, im):
        return self.sl("M", m, im * self.bm, self.bm)

    def ncols(self, n, i_n, q=None, parts=1):
        w = self.bn // parts
        return self.sl("N", n, i_n * self.bn + (q or 0) * w, w if q is not None else self.bn)

    def lcols(self, l, il, q=None, parts=1):
        w = self.bl // parts
        return self.sl("L", l, il * self.bl + (q or 0) * w, w if q is not None else self.bl)

    def kcols(self, k, ik):
        return self.sl("K", k, ik * self.bk, self.bk)

    # ---- the run ----------------------------------------------------------------------------
    def result(self) -> CheckResult:
        mem = self.mem
        if self.reduced:  # zero E before the atomic reductions (a pass of its own)
            mem.global_access("E", slice(None), slice(None), "l2_E")
            self.memset = mem.accesses["E"].copy()
            mem.accesses["E"][...] = 0
        sched = self.plan.schedule
        spatial = [d for d in "MN" if d in sched.spatial]
        order = [d for d in sched.temporal if d != "K"]
        for idx in itertools.product(*(range(self.t[d]) for d in spatial)):
            fixed = dict(zip(spatial, idx))
            steps = [{**fixed, **dict(zip(order, v))} for v in itertools.product(*(range(self.t[d]) for d in order))]
            for d in "MNL":
                for st in steps:
                    st.setdefault(d, 0)
            self.cluster(steps)
            mem.end_cluster()
        if self.reduced:
            mem.most["E"] += self.memset
        ref = reference(self.chain, self.A, self.Bs, self.D)
        vol = {lv: int(mem.level[lv]) for lv in LEVELS}
        vol["global"] = mem.dram()
        return CheckResult(self.E, ref, float(np.max(np.abs(self.E - ref))), vol,
                           {p: int(mem.part[p]) for p in PARTS})

    def blocks0(self):
        return itertools.product(range(self.cm), range(self.cn), range(self.ck))

    def cluster(self, steps):
        self.cur = {"A": None, "B": None, "D": None}
        cvis = [(s["M"], s["N"]) for s in steps]
        evis = [(s["M"], s["L"]) for s in steps]
        working, computed, cache = None, set(), {}
        saved, acc, cur_ml = {}, None, None
        for i, st in enumerate(steps):
            m, n, l = st["M"], st["N"], st["L"]
            if (m, n) != working:
                if (m, n) in computed:
                    self.Cw = self.c_restore(m, n, cache[(m, n)])
                else:
                    self.Cw = self.gemm0(m, n)
                    computed.add((m, n))
                    if _revisited(cvis, i):
                        cache[(m, n)] = self.c_store(m, n)
                working = (m, n)
            if (m, l) != cur_ml:
                acc = self.e_restore(m, l, saved) if (m, l) in saved and self.e_tier in ("reg", "smem") else None
                if acc is None:
                    acc = {b: np.zeros((self.n(self.rows(m, b[0])), self.n(self.lcols(l, b[1])))) for b in
                           itertools.product(range(self.cm), range(self.cl), range(self.cr))}
                cur_ml = (m, l)
            self.gemm1(m, n, l, acc)
            if i + 1 < len(steps) and evis[i + 1] == (m, l):
                continue  # the next step accumulates into the same E tile in registers
            final = (m, l) not in evis[i + 1:]
            self.e_leave(m, l, acc, saved, final)
            cur_ml = None

    # ---- GEMM0 + all_exchange -----------------------------------------------------------------
    def load(self, key, tag, value, tensor, rows, cols, part):
        """TMA multicast of one cluster tile, unless the staging buffer already holds it."""
        if self.cur[key] == (tag, value):
            return False
        self.cur[key] = (tag, value)
        self.mem.global_access(tensor, rows, cols, part)
        return True

    def gemm0(self, m, n):
        mem, e = self.mem, self.e
        nb = 2 if self.chain.gated else 1
        acc = {}
        for b in self.blocks0():
            im, i_n, ik = b
            shape = (self.n(self.rows(m, im)), self.n(self.ncols(n, i_n)))
            acc[b] = [np.zeros(shape) for _ in range(nb if self.seq else 1)]
        for k in range(self.t["K"]):
            newA = self.load("A", "A", (m, k), "A", self.sl("M", m), self.sl("K", k), "l2_A")
            newB = self.load("B", "B", (k, n), "B0", self.sl("K", k), self.sl("N", n), "l2_B")
            if newB and nb == 2:  # both branch weights share the staging step
                mem.global_access("B1", self.sl("K", k), self.sl("N", n), "l2_B")
            for b in self.blocks0():
                im, i_n, ik = b
                r = self.rows(m, im)
                kc = self.kcols(k, 0 if self.spat else ik)
                nc = self.ncols(n, i_n)
                a = self.A[r, kc]
                if newA:
                    mem.count("smem", a.size * e)
                branches = [ik] if self.spat else list(range(nb))
                for slot, br in enumerate(branches):
                    bt = self.Bs[br][kc, nc]
                    if newB:
                        mem.count("smem", bt.size * e)
                    mem.count("smem", (a.size + bt.size) * e)  # MMA operand reads
                    acc[b][slot] += a @ bt
        return self.exchange(m, n, acc)

    def exchange(self, m, n, acc):
        mem, e, ea, ck = self.mem, self.e, self.ea, self.ck
        out = {}
        for im, i_n in itertools.product(range(self.cm), range(self.cn)):
            group = [(im, i_n, p) for p in range(ck)]
            if self.spat:  # each branch block sends its accumulator to the other
                for b in group:
                    mem.count("dsm", acc[b][0].size * ea, "dsm_exchange")
                c0, c1 = acc[group[0]][0].copy(), acc[group[1]][0].copy()
                for b in group:
                    out[b] = activation("silu", c0) * c1
                continue
            w = self.bn // ck
            owned = {}
            for q in range(ck):  # reduce-scatter: block q receives chunk q of every partial (FP32)
                cs = slice(q * w, (q + 1) * w)
                received = []
                for p in range(ck):
                    part = [a[:, cs].copy() for a in acc[(im, i_n, p)]]
                    if p != q:
                        mem.count("dsm", sum(x.size for x in part) * ea, "dsm_exchange")
                    received.append(part)
                sums = [sum(r[s] for r in received) for s in range(len(received[0]))]
                owned[q] = activation("silu", sums[0]) * sums[1] if self.seq else activation(self.chain.act, sums[0])
            for b in group:  # all-gather: every block copies the activated FP16 chunks it does not own
                pieces = []
                for q in range(ck):
                    piece = owned[q].copy()
                    if q != b[2]:
                        mem.count("dsm", piece.size * e, "dsm_exchange")
                    pieces.append(piece)
                out[b] = np.concatenate(pieces, axis=1)
        return out

    # ---- the cached intermediate C ------------------------------------------------------------
    def _need(self, tier, what):
        if tier == "-":
            raise CheckError(f"{what} must be held across a loop but the plan keeps no copy of it")

    def c_store(self, m, n):
        self._need(self.c_tier, "C")
        mem, e, tier, w = self.mem, self.e, self.c_tier, self.bn // self.ck
        stored = {}
        for b, tile in self.Cw.items():
            im, i_n, ik = b
            if tier in ("reg", "smem"):
                mem.count(tier, tile.size * e)
                stored[b] = tile.copy()
            else:  # dsm and global keep one copy: block ik keeps (or writes) chunk ik
                chunk = tile[:, ik * w:(ik + 1) * w].copy()
                if tier == "dsm":
                    mem.count("smem", chunk.size * e)
                else:
                    cs = self.ncols(n, i_n)
                    cols = slice(cs.start + ik * w, cs.start + ik * w + chunk.shape[1])
                    mem.global_access("C", self.rows(m, im), cols, "l2_C")
                stored[b] = chunk
        return stored

    def c_restore(self, m, n, stored):
        mem, e, tier = self.mem, self.e, self.c_tier
        out = {}
        if tier == "global":  # one multicast load of the spilled cluster tile
            mem.global_access("C", self.sl("M", m), self.sl("N", n), "l2_C")
        for b in self.blocks0():
            im, i_n, ik = b
            if tier in ("reg", "smem"):
                mem.count(tier, stored[b].size * e)
                out[b] = stored[b].copy()
                continue
            pieces = [stored[(im, i_n, q)].copy() for q in range(self.ck)]
            if tier == "dsm":
                for q, piece in enumerate(pieces):
                    mem.count("smem" if q == ik else "dsm", piece.size * e, None if q == ik else "dsm_c_cache")
            out[b] = np.concatenate(pieces, axis=1)
            if tier == "global":
                mem.count("smem", out[b].size * e)
        return out

    # ---- GEMM1 with the shuffle ring -------------------------------------------------------------
    def gemm1(self, m, n, l, acc):
        mem, e, sh = self.mem, self.e, self.sh
        newD = self.load("D", "D", (n, l), "D", self.sl("N", n), self.sl("L", l), "l2_D")
        blocks = list(acc)
        ring = {}
        for b in blocks:
            im, il, ir = b
            j, ik = il % sh, il // sh
            ring[b] = (ir * sh + j, self.Cw[(im, ir * sh + j, ik)].copy())
        for s in range(sh):
            if s:
                ring = {b: self._from_neighbour(ring, b) for b in blocks}
            for b in blocks:
                im, il, ir = b
                i_n, tile = ring[b]
                assert i_n == ir * sh + (il % sh + s) % sh
                d = self.D[self.ncols(n, i_n), self.lcols(l, il)]
                if newD:
                    mem.count("smem", d.size * e)
                mem.count("smem", (tile.size + d.size) * e)
                acc[b] += tile @ d

    def _from_neighbour(self, ring, b):
        im, il, ir = b
        j, ik = il % self.sh, il // self.sh
        src = (im, ik * self.sh + (j + 1) % self.sh, ir)
        i_n, tile = ring[src]
        self.mem.count("dsm", tile.size * self.e, "dsm_shuffle")
        return i_n, tile.copy()

    # ---- E: save / restore / reduce-scatter / store ----------------------------------------------
    def e_restore(self, m, l, saved):
        out = {}
        for b, tile in saved.pop((m, l)).items():
            self.mem.count(self.e_tier, tile.size * self.ea)
            out[b] = tile.copy()
        return out

    def reduce_scatter(self, m, l, acc):
        """Block with ir = q receives chunk q of every other block's partial and sums them."""
        w = self.bl // self.cr
        slices = {}
        for im, il in itertools.product(range(self.cm), range(self.cl)):
            for q in range(self.cr):
                cs = slice(q * w, (q + 1) * w)
                total = np.zeros_like(acc[(im, il, q)][:, cs])
                for p in range(self.cr):
                    part = acc[(im, il, p)][:, cs].copy()
                    if p != q:
                        self.mem.count("dsm", part.size * self.ea, "dsm_reduce_scatter")
                    total += part
                slices[(im, il, q)] = total
        return slices

    def e_leave(self, m, l, acc, saved, final):
        """The E tile (m, l) leaves the registers: saved for a later N pass, or reduced and stored."""
        mem, tier = self.mem, self.e_tier
        if not final:
            self._need(tier, "the E accumulator")
            if tier in ("reg", "smem"):
                for tile in acc.values():
                    mem.count(tier, tile.size * self.ea)
                saved[(m, l)] = acc
                return
        slices = self.reduce_scatter(m, l, acc)
        if tier == "dsm":  # owners add the slice kept in their SMEM since the previous N pass
            old = saved.get((m, l), {})
            for b, sl in slices.items():
                if b in old:
                    mem.count("smem", old[b].size * self.ea)
                    sl += old[b]
                if not final:
                    mem.count("smem", sl.size * self.ea)
            if not final:
                saved[(m, l)] = slices
                return
            saved.pop((m, l), None)
        w = self.bl // self.cr
        for (im, il, q), sl in slices.items():
            cs = self.lcols(l, il)
            cols = slice(cs.start + q * w, cs.start + q * w + sl.shape[1])
            r = self.rows(m, im)
            mem.global_access("E", r, cols, "l2_E")
            if self.reduced:
                self.E[r, cols] += sl
            else:
                self.E[r, cols] = sl


def _revisited(visits: list, i: int) -> bool:
    """Does visits[i] come back after some other value has intervened?"""
    key, left = visits[i], False
    for v in visits[i + 1:]:
        if v != key:
            left = True
        elif left:
            return True
    return False
