"""Kernels and runners of the nodes that read a stored tensor: root, scan (level scanners),
locate and array (value reads). Mirrors `sim.oracle.read`.

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> format_tokens(apply("locate", {"crd": "1 3 S0 D", "ref": "2 0 S0 D"}, {"dim": 4}).outs["ref"])
    '9 3 S0 D'
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from . import core, tiles
from .core import NeedOracle, Runner
from .stream import DONE as D_TOK
from .stream import EMPTY, STOP, VAL, _is_elem


@njit(cache=True)
def _k_root(nd, out):
    S = nd.S
    ok, od, ot, og, j, cap, d, b = core.outlet(nd, out)
    status = 0
    while True:
        if S[core.FREE] == 2:
            status = core.DONE
            break
        if j >= cap:
            status = core.WAIT_OUT
            break
        t = core.gated(max(S[core.T] + S[core.II], 0), og, j, d, b)
        ok[j] = VAL if S[core.FREE] == 0 else D_TOK
        od[j] = 0
        j = core.timed(ot, j, t)
        S[core.T] = t
        S[core.STEPS] += 1
        S[core.FREE] += 1
    core.out_closed(nd, out.ch, j)
    return status


# scan state (_WIX, _FS, _FE: the window range being scanned and the fiber's positions)
_FIB, _P, _PEND, _FIRST, _RT, _BASE, _EMP, _STRIDE, _WIX, _FS, _FE = range(core.FREE, core.FREE + 11)


class ScanLevel(NamedTuple):
    """Scan's state record: the level read (compressed: its seg and crd arrays; dense: its dim),
    the memory model (`Runner.mem`), a strided dense level's stride (0: none) and a partitioned
    run's window ranges [wlo, whi) (none: empty arrays)."""
    compressed: bool
    dim: int
    seg: np.ndarray
    crd: np.ndarray
    mem: np.ndarray
    stride: int
    wlo: np.ndarray
    whi: np.ndarray


@njit(cache=True)
def _window_range(S, level):
    """Narrow the fiber's positions [_FS, _FE) to window range _WIX: coordinates in
    [wlo, whi) (a binary search in a compressed fiber's sorted coordinates)."""
    w = S[_WIX]
    fs, fe = S[_FS], S[_FE]
    if level.compressed:
        S[_P] = fs + np.searchsorted(level.crd[fs:fe], level.wlo[w])
        S[_PEND] = fs + np.searchsorted(level.crd[fs:fe], level.whi[w])
    else:
        S[_P] = min(max(level.wlo[w], fs), fe)
        S[_PEND] = max(min(level.whi[w], fe), S[_P])


@njit(cache=True)
def _k_scan(nd, ref, crd_o, ref_o, level):
    """The reference is consumed at the fiber's first step (its consume time S[_FIRST]). The scan
    state lives in locals during the loop and in S between calls."""
    S = nd.S
    ik, idat, isent, icons = ref.kind, ref.data, ref.sent, ref.cons
    ck, cd, ct, cg = crd_o.kind, crd_o.data, crd_o.sent, crd_o.gate
    rk, rd, rt_, rg = ref_o.kind, ref_o.data, ref_o.sent, ref_o.gate
    compressed, dim, seg, crd, mem, stride, wlo, whi = level
    pi, ei, fi, lat = core.opened(nd, ref)
    jc, capc, dc, bc = core.out_opened(nd, crd_o)
    jr, capr, dr, br = core.out_opened(nd, ref_o)
    nseg = seg.shape[0] - 1
    windows = wlo.shape[0]
    hbm = mem[0] != 0
    t, ii = S[core.T], S[core.II]
    reads = S[core.READS]
    words = S[core.WORDS]
    fib, p, pend, first = S[_FIB], S[_P], S[_PEND], S[_FIRST]
    rt, base, emp, step = S[_RT], S[_BASE], S[_EMP], S[_STRIDE]
    steps = status = 0
    while True:
        if fib == 0:  # the next reference
            status = core.missing(pi, ei, fi)
            if status:
                S[core.PORT] = 0
                break
            k = ik[pi]
            if k == VAL:
                r = idat[pi]
                if compressed:
                    if r < 0 or r >= nseg:
                        status = core.FAIL
                        break
                    reads += 2
                    p = seg[r]
                    pend = seg[r + 1]
                else:
                    base = r * dim if stride == 0 else r
                    step = 1 if stride == 0 else stride
                    p = 0
                    pend = dim
                emp = 0
            elif k == EMPTY:
                p = 0
                pend = 0 if compressed else dim
                emp = 1
            elif k == STOP or k == D_TOK:
                if jc >= capc or jr >= capr:
                    status = core.WAIT_OUT
                    break
                t = core.gated(core.gated(max(t + ii, max(isent[pi] + lat, 0)), cg, jc, dc, bc), rg, jr, dr, br)
                if hbm:
                    t += core.stall(mem, words, 0, k == D_TOK)
                lv = idat[pi] + 1 if k == STOP else 0
                ck[jc] = k
                rk[jr] = k
                cd[jc] = lv
                rd[jr] = lv
                jc = core.timed(ct, jc, t)
                jr = core.timed(rt_, jr, t)
                pi = core.timed(icons, pi, t)
                steps += 1
                if k == D_TOK:
                    status = core.DONE
                    break
                continue
            else:
                status = core.FAIL
                break
            fib = 1
            first = -1
            rt = max(isent[pi] + lat, 0)
            if windows and k == VAL:  # a partitioned run: the window's first range
                S[_WIX], S[_FS], S[_FE] = 0, p, pend
                _window_range(S, level)
                p, pend = S[_P], S[_PEND]
        if jc >= capc or jr >= capr:
            status = core.WAIT_OUT
            break
        if p >= pend and windows and emp == 0 and S[_WIX] + 1 < windows:
            S[_WIX] += 1  # the window's next range
            _window_range(S, level)
            p, pend = S[_P], S[_PEND]
            continue
        if p < pend:  # a coordinate
            if compressed:
                reads += 1
                t = core.gated(core.gated(max(t + ii, rt), cg, jc, dc, bc), rg, jr, dr, br)
                if hbm:
                    t += core.stall(mem, words, reads - words, False)
                    words = reads
                ck[jc] = VAL
                cd[jc] = crd[p]
                rk[jr] = VAL
                rd[jr] = p
            else:
                t = core.gated(core.gated(max(t + ii, rt), cg, jc, dc, bc), rg, jr, dr, br)
                ck[jc] = VAL
                cd[jc] = p
                if emp:
                    rk[jr] = EMPTY
                    rd[jr] = 0
                else:
                    rk[jr] = VAL
                    rd[jr] = base + p * step
            rt = 0
            if first < 0:  # the fiber's first step consumes its reference
                first = t
                pi = core.timed(icons, pi, t)
            jc = core.timed(ct, jc, t)
            jr = core.timed(rt_, jr, t)
            p += 1
            steps += 1
        else:  # the fiber's S0
            t = core.gated(core.gated(max(t + ii, rt), cg, jc, dc, bc), rg, jr, dr, br)
            if hbm:
                t += core.stall(mem, words, reads - words, False)
                words = reads
            if first < 0:
                first = t
                pi = core.timed(icons, pi, t)
            ck[jc] = STOP
            rk[jr] = STOP
            cd[jc] = 0
            rd[jr] = 0
            jc = core.timed(ct, jc, t)
            jr = core.timed(rt_, jr, t)
            fib = 0
            steps += 1
    S[_FIB], S[_P], S[_PEND], S[_FIRST] = fib, p, pend, first
    S[_RT], S[_BASE], S[_EMP], S[_STRIDE] = rt, base, emp, step
    core.settle(S, t, steps)
    S[core.READS] = reads
    S[core.WORDS] = words
    core.out_closed(nd, crd_o.ch, jc)
    core.out_closed(nd, ref_o.ch, jr)
    core.closed(nd, ref, pi)
    return status


class Locating(NamedTuple):
    """Locate's state record: the located level's dimension and a strided level's stride (0: none)."""
    dim: int
    stride: int


@njit(cache=True)
def _k_locate(nd, crd, ref, out, at):
    S = nd.S
    ak, ad, a_s, acons, pa, ea, fa, al = core.inlet(nd, crd)
    bk, bd, b_s, bcons, pb, eb, fb, bl = core.inlet(nd, ref)
    ok, od, ot, og, j, cap, d, b0 = core.outlet(nd, out)
    dim, stride = at
    t, ii, steps, status = core.resumed(S)
    while True:
        status = core.missing(pa, ea, fa)
        if status:
            break
        status = core.missing(pb, eb, fb)
        if status:
            S[core.PORT] = 1
            break
        status = core.full(j, cap)
        if status:
            break
        a = ak[pa]
        b = bk[pb]
        tn = core.gated(max(t + ii, max(a_s[pa] + al, b_s[pb] + bl, 0)), og, j, d, b0)
        if a == VAL and b == VAL:
            x = ad[pa]
            if x < 0 or x >= dim:
                status = core.FAIL
                break
            ok[j] = VAL
            od[j] = bd[pb] * dim + x if stride == 0 else bd[pb] + x * stride
        elif _is_elem(a) and _is_elem(b):
            ok[j] = EMPTY
            od[j] = 0
        elif a == STOP and b == STOP and ad[pa] == bd[pb]:
            ok[j] = STOP
            od[j] = ad[pa]
        elif a == D_TOK and b == D_TOK:
            ok[j] = D_TOK
            od[j] = 0
        else:
            status = core.FAIL
            break
        t = tn
        j = core.timed(ot, j, t)
        pa = core.timed(acons, pa, t)
        pb = core.timed(bcons, pb, t)
        steps += 1
        if a == D_TOK:
            status = core.DONE
            break
    core.closed(nd, crd, pa)
    core.closed(nd, ref, pb)
    return core.left(nd, t, steps, status, out, j)


class Values(NamedTuple):
    """Array's state record: the stored values (with tiles, the stored tiles' numbers), the fill
    of an empty reference, the memory model (`Runner.mem`) and the words a value read takes."""
    vals: np.ndarray
    fill: float
    mem: np.ndarray
    words: int


@njit(cache=True)
def _k_array(nd, ref, out, v):
    """Value reads; with tiles `vals` are the stored tiles' numbers (the runner fills the tiles)."""
    S = nd.S
    ik, idat, isent, icons, pi, ei, fi, lat = core.inlet(nd, ref)
    ok, od, ot, og, j, cap, d, b = core.outlet(nd, out)
    vals, fill, mem, w = v
    nv = vals.shape[0]
    hbm = mem[0] != 0
    t, ii = S[core.T], S[core.II]
    steps = status = 0
    reads = S[core.READS]
    while True:
        status = core.missing(pi, ei, fi)
        if status:
            S[core.PORT] = 0
            break
        if j >= cap:
            status = core.WAIT_OUT
            break
        k = ik[pi]
        tn = core.gated(max(t + ii, max(isent[pi] + lat, 0)), og, j, d, b)
        if k == VAL:
            r = idat[pi]
            if r < 0 or r >= nv:
                status = core.FAIL
                break
            reads += w
            if hbm:
                tn += core.stall(mem, reads - w, w, False)
            ok[j] = VAL
            od[j] = vals[r]
        elif k == EMPTY:
            ok[j] = VAL
            od[j] = fill
        elif k == STOP or k == D_TOK:
            if hbm:
                tn += core.stall(mem, reads, 0, k == D_TOK)
            ok[j] = k
            od[j] = idat[pi]
        else:
            status = core.FAIL
            break
        t = tn
        j = core.timed(ot, j, t)
        pi = core.timed(icons, pi, t)
        steps += 1
        if k == D_TOK:
            status = core.DONE
            break
    S[core.READS] = reads
    core.closed(nd, ref, pi)
    return core.left(nd, t, steps, status, out, j)


class Root(Runner):
    kernel = staticmethod(_k_root)
    backpressure = True
    outs = ("ref",)

    def check(self):
        if self.node.inputs:
            raise NeedOracle()


class Scan(Runner):
    kernel = staticmethod(_k_scan)
    backpressure = True
    ins, outs = ("ref",), ("crd", "ref")

    def check(self):
        try:
            level = self.ctx().level()
        except Exception:  # noqa: BLE001 - whatever fails here, the oracle reports it exactly
            raise NeedOracle() from None
        fmt, dim = self.params.get("format", level.format), self.params.get("dim")
        stride = self.params.get("stride") or 0
        if fmt != level.format or (not level.is_compressed and dim is not None and dim != level.dim) or \
                not isinstance(stride, (int, np.integer)) or stride < 0 or (stride and level.is_compressed):
            raise NeedOracle()
        if level.is_compressed:
            try:
                seg, crd = self.array(level.seg, np.int64), self.array(level.crd, np.int64)
            except (TypeError, ValueError, OverflowError):
                raise NeedOracle() from None
            if (seg.ndim != 1 or crd.ndim != 1 or seg.shape[0] < 1
                    or (seg.shape[0] > 1 and (seg.min() < 0 or seg.max() > crd.shape[0]))):
                raise NeedOracle()
            self.level_args = (True, 0, seg, crd)
        else:
            if not isinstance(level.dim, (int, np.integer)) or level.dim < 0:
                raise NeedOracle()
            zero = np.zeros(1, dtype=np.int64)
            self.level_args = (False, int(level.dim), zero, zero)
        self.stride = int(stride)
        ranges = np.array(self.params.get("window") or np.zeros((0, 2)), dtype=np.int64).reshape(-1, 2)
        self.window = (np.ascontiguousarray(ranges[:, 0]), np.ascontiguousarray(ranges[:, 1]))

    def check_bound(self):
        if self.in_ch[0].dtype != np.int64:
            raise NeedOracle()

    def state(self):
        return ScanLevel(*self.level_args, self.mem(), self.stride, *self.window)

    def pending(self):
        return (["ref"] if self.S[_FIB] == 0 else []), ["crd", "ref"]  # a fiber's later steps read nothing


class Locate(Runner):
    kernel = staticmethod(_k_locate)
    backpressure = True
    ins, outs = ("crd", "ref"), ("ref",)

    def check(self):
        dim = self.params.get("dim")
        if dim is None:
            try:
                dim = self.ctx().level().dim
            except Exception:  # noqa: BLE001 - whatever fails here, the oracle reports it exactly
                raise NeedOracle() from None
        stride = self.params.get("stride") or 0
        if not isinstance(dim, (int, np.integer)) or not isinstance(stride, (int, np.integer)) or stride < 0:
            raise NeedOracle()
        self.dim, self.stride = int(dim), int(stride)

    def check_bound(self):
        if any(ch.dtype != np.int64 for ch in self.in_ch):
            raise NeedOracle()

    def state(self):
        return Locating(self.dim, self.stride)


class Array(Runner):
    kernel = staticmethod(_k_array)
    backpressure = True
    ins, outs = ("ref",), ("val",)

    def check(self):
        try:
            tensor = self.ctx().tensor()
            vals = self.array(tensor.vals, np.float64)
            if self.tile is not None and vals.ndim == 1:
                vals = vals.reshape(-1, 1)
            fill = float(self.params.get("fill", getattr(tensor, "fill", 0.0)))
        except Exception:  # noqa: BLE001 - whatever fails here, the oracle reports it exactly
            raise NeedOracle() from None
        if self.tile is None:
            if vals.ndim != 1:
                raise NeedOracle()
            self.vals, self.fill, self.words = vals, fill, 1
            return
        key = ("tiles", id(tensor.vals), self.tile, fill)
        hit = self.cache.get(key)
        if hit is None or hit[0] is not tensor.vals:
            hit = (tensor.vals, tiles.array_table(self.tile, vals, fill))
            self.cache[key] = hit
        self.table = hit[1]  # every stored tile, then the fill tile
        self.vals = np.arange(vals.shape[0], dtype=np.float64)
        self.fill, self.words = float(vals.shape[0]), self.tile.out_elements

    def check_bound(self):
        if self.in_ch[0].dtype != np.int64:
            raise NeedOracle()

    def out_dtype(self, port):
        return np.float64

    def out_tile(self, port):
        return None if self.tile is None else self.tile.shape(self.tile.out)

    def state(self):
        return Values(self.vals, self.fill, self.mem(), self.words)

    def after(self, before_in, before_out):
        if self.tile is not None:
            tiles.from_table(self.out_ch[0], before_out[0], self.table)
