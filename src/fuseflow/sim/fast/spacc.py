"""Kernels and runners of the sparse accumulators spacc (order 1) and spacc2 (order 2). Mirrors
`sim.oracle.spacc`.

The live state is one outer fiber's worth of entries. spacc keeps them in a dense table for
keys 0..`TABLE_LIMIT`-1 (and a list, sorted at the drain, for others); spacc2 in hash tables
keyed by (mid, inner) coordinate, so that each accumulation costs one lookup. At an outer `S0`
the entries drain in coordinate order: spacc2 orders only the distinct entries, rows by a sort
of their mid coordinates and each row's inner coordinates on their own.

With tiles, a kernel logs what it accumulated and drained (`tiles.accumulate` replays the log on
the tiles, as the oracle combines them, in stream order per key).

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> run = apply("spacc", {"crd_outer": "0 1 S0 D", "crd_inner": "0 2 S0 2 S0 S1 D",
    ...                       "val": "1 2 S0 3 S0 S1 D"})
    >>> format_tokens(run.outs["crd"]), format_tokens(run.outs["val"])
    ('0 2 S0 D', '1 5 S0 D')
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import tiles
from .core import (
    ACC,
    DONE,
    EMIT,
    FAIL,
    FLOPS,
    FREE,
    GROW,
    II,
    NANV,
    NEED,
    PORT,
    STEPS,
    WAIT_OUT,
    YIELD,
    NeedOracle,
    T,
    enter,
    leave,
    missing,
    out_at,
    out_leave,
)
from .reduce import Reducer, combine, identity
from .stream import DONE as D_TOK
from .stream import STOP, VAL, _is_elem

TABLE_LIMIT = 1 << 22  # spacc keys 0..TABLE_LIMIT-1 accumulate in a dense table, others are sorted

# -- order 1 --------------------------------------------------------------------------------------------
_NT, _M, _DN, _DPOS, _DRAINING, _NEV = range(FREE, FREE + 6)


@njit(cache=True)
def _drain1(touched, nt, tbl, present, xk, xv, m, red, nan, dk, dx):
    """The map in coordinate order into dk/dx: the table's keys and the sorted outside keys
    (combined in stream order), merged; clears the table's marks. Returns the entry count."""
    keys = np.sort(touched[:nt])
    okeys = np.empty(m, dtype=np.int64)
    ovals = np.empty(m, dtype=np.float64)
    no_ = 0
    if m > 0:
        order = np.argsort(xk[:m], kind="mergesort")
        q = 0
        while q < m:
            kk = xk[order[q]]
            acc = identity(red)
            while q < m and xk[order[q]] == kk:
                acc = combine(red, acc, xv[order[q]], nan)
                q += 1
            okeys[no_] = kk
            ovals[no_] = acc
            no_ += 1
    a = 0
    b = 0
    dn = 0
    while a < nt or b < no_:
        if b >= no_ or (a < nt and keys[a] < okeys[b]):
            dk[dn] = keys[a]
            dx[dn] = tbl[keys[a]]
            present[keys[a]] = False
            a += 1
        else:
            dk[dn] = okeys[b]
            dx[dn] = ovals[b]
            b += 1
        dn += 1
    return dn


@njit(cache=True)
def _k_spacc(S, F, CH, RD, io, ko, do, o_s, ocons, ki, di, i_s, icons, kv, dv, v_s, vcons, ck, cd, ct, vk_, vd,
             vt, red, nanv, tbl, present, touched, xk, xv, dk, dx, log, ev):
    nan = nanv[0]
    po, eo, fo, ol = enter(CH, RD, io, 0)
    pi, ei, fi, il = enter(CH, RD, io, 1)
    pv, ev_, fv, vl = enter(CH, RD, io, 2)
    jc = out_at(CH, io, 3, 0)
    jv = out_at(CH, io, 3, 1)
    nt = S[_NT]
    m = S[_M]
    nev = S[_NEV]
    t = S[T]
    ii = S[II]
    flops = 0
    steps = 0
    status = 0
    while True:
        status = missing(po, eo, fo)
        if status:
            S[PORT] = 0
            break
        o = ko[po]
        rt = max(o_s[po] + ol, 0)
        if o == VAL:
            status = missing(pi, ei, fi)
            if status:
                S[PORT] = 1
                break
            ik = ki[pi]
            rt = max(rt, i_s[pi] + il)
            status = missing(pv, ev_, fv)
            if status:
                S[PORT] = 2
                break
            if ik == VAL:
                vk = kv[pv]
                rt = max(rt, v_s[pv] + vl)
                if not _is_elem(vk):
                    status = FAIL
                    break
                key = di[pi]
                inside = 0 <= key < TABLE_LIMIT
                if inside and key >= tbl.shape[0]:
                    status = GROW
                    S[NEED] = key + 1
                    break
                if (inside and not present[key] and nt >= touched.shape[0]) or (not inside and m >= xk.shape[0]):
                    status = GROW
                    S[NEED] = 0
                    break
                if log and nev >= ev.shape[1]:
                    status = YIELD
                    break
                x = float(dv[pv]) if vk == VAL else 0.0
                if inside:
                    if present[key]:
                        tbl[key] = combine(red, tbl[key], x, nan)
                    else:
                        present[key] = True
                        tbl[key] = combine(red, identity(red), x, nan)
                        touched[nt] = key
                        nt += 1
                else:
                    xk[m] = key
                    xv[m] = x
                    m += 1
                if log:
                    ev[0, nev] = 0
                    ev[1, nev] = key
                    ev[2, nev] = pv
                    ev[3, nev] = ACC
                    nev += 1
                flops += 1
                t = max(t + ii, rt)
                icons[pi] = t
                vcons[pv] = t
                pi += 1
                pv += 1
            elif ik == STOP and di[pi] == 0:
                rt = max(rt, v_s[pv] + vl)
                if not (kv[pv] == STOP and dv[pv] == 0):
                    status = FAIL
                    break
                t = max(t + ii, rt)
                icons[pi] = t
                vcons[pv] = t
                ocons[po] = t
                pi += 1
                pv += 1
                po += 1
            else:
                status = FAIL
                break
            steps += 1
        elif o == STOP or o == D_TOK:
            on = do[po] if o == STOP else -1
            if (nt + m) > 0 and not (o == STOP and on == 0):
                status = FAIL
                break
            status = missing(pi, ei, fi)
            if status:
                S[PORT] = 1
                break
            status = missing(pv, ev_, fv)
            if status:
                S[PORT] = 2
                break
            rt = max(rt, i_s[pi] + il)
            if not (ki[pi] == o and (o == D_TOK or di[pi] == on + 1)):
                status = FAIL
                break
            rt = max(rt, v_s[pv] + vl)
            if not (kv[pv] == o and (o == D_TOK or dv[pv] == on + 1)):
                status = FAIL
                break
            if jc >= ck.shape[0] or jv >= vk_.shape[0]:
                status = WAIT_OUT
                break
            if log and nev >= ev.shape[1]:
                status = YIELD
                break
            if o == STOP and on == 0 and not S[_DRAINING]:
                if dk.shape[0] < nt + m:
                    status = GROW
                    S[NEED] = 0
                    break
                S[_DN] = _drain1(touched, nt, tbl, present, xk, xv, m, red, nan, dk, dx)
                S[_DPOS] = 0
                nt = 0
                m = 0
                S[_DRAINING] = 1
            t = max(t + ii, rt)
            steps += 1
            if S[_DRAINING] and S[_DPOS] < S[_DN]:
                q = S[_DPOS]
                ck[jc] = VAL
                cd[jc] = dk[q]
                vk_[jv] = VAL
                vd[jv] = dx[q]
                if log:
                    ev[0, nev] = 0
                    ev[1, nev] = dk[q]
                    ev[2, nev] = jv
                    ev[3, nev] = EMIT
                    nev += 1
                S[_DPOS] = q + 1
            else:
                S[_DRAINING] = 0
                ocons[po] = t
                icons[pi] = t
                vcons[pv] = t
                po += 1
                pi += 1
                pv += 1
                ck[jc] = o
                cd[jc] = on if o == STOP else 0
                vk_[jv] = o
                vd[jv] = on if o == STOP else 0
            ct[jc] = t
            vt[jv] = t
            jc += 1
            jv += 1
            if o == D_TOK and not S[_DRAINING]:
                status = DONE
                break
        else:
            status = FAIL
            break
    S[_NT] = nt
    S[_M] = m
    S[_NEV] = nev
    S[T] = t
    S[STEPS] += steps
    S[FLOPS] += flops
    out_leave(CH, io, 3, 0, jc)
    out_leave(CH, io, 3, 1, jv)
    leave(CH, RD, io, 0, po)
    leave(CH, RD, io, 1, pi)
    leave(CH, RD, io, 2, pv)
    return status


# -- order 2 --------------------------------------------------------------------------------------------
_NR, _NE, _CW1, _CROW, _DR, _DE, _DPH, _DNR, _NEV2, _DRAIN2 = range(FREE, FREE + 10)


@njit(cache=True)
def _slot(hk1, hk2, hv, a, b):
    """The slot of key (a, b) in an open-addressing table (linear probing): where it is, or the
    empty slot where it goes."""
    mask = hv.shape[0] - 1
    h = (a * -7046029254386353131) ^ (b * -4417276706812531889)
    q = (h ^ (h >> 29)) & mask
    while hv[q] >= 0 and (hk1[q] != a or hk2[q] != b):
        q = (q + 1) & mask
    return q


@njit(cache=True)
def rehash(hk1, hk2, hv, nk1, nk2, nv, slots):
    """Move every key of one table into a larger, empty one; slots[id] follows each key."""
    for q in range(hv.shape[0]):
        if hv[q] >= 0:
            s = _slot(nk1, nk2, nv, hk1[q], hk2[q])
            nk1[s] = hk1[q]
            nk2[s] = hk2[q]
            nv[s] = hv[q]
            slots[hv[q]] = s


@njit(cache=True)
def _order(rw1, nr, erow, ew2, ne, d_w1, d_off, d_ent):
    """Drain order: rows by mid coordinate (d_w1, entry offsets d_off) and each row's entries by
    inner coordinate (d_ent: entry numbers)."""
    rows = np.argsort(rw1[:nr])
    rank = np.empty(nr, dtype=np.int64)
    for q in range(nr):
        rank[rows[q]] = q
        d_w1[q] = rw1[rows[q]]
    counts = np.zeros(nr + 1, dtype=np.int64)
    for e in range(ne):
        counts[rank[erow[e]] + 1] += 1
    for q in range(nr):
        counts[q + 1] += counts[q]
    d_off[:nr + 1] = counts[:nr + 1]
    fill = counts[:nr].copy()
    for e in range(ne):
        r = rank[erow[e]]
        d_ent[fill[r]] = e
        fill[r] += 1
    for q in range(nr):
        lo = d_off[q]
        hi = d_off[q + 1]
        if hi - lo > 1:
            seg = d_ent[lo:hi].copy()
            keys = np.empty(hi - lo, dtype=np.int64)
            for x in range(hi - lo):
                keys[x] = ew2[seg[x]]
            by = np.argsort(keys)
            for x in range(hi - lo):
                d_ent[lo + x] = seg[by[x]]


@njit(cache=True)
def _clear(hv, slots, n):
    for q in range(n):
        hv[slots[q]] = -1


@njit(cache=True)
def _k_spacc2(S, F, CH, RD, io, ko, do, o_s, ocons, km, dm, m_s, mcons, ki, di, i_s, icons, kv, dv, v_s, vcons,
              mk_, md, mt, ck, cd, ct, vk_, vd, vt, red, nanv, rk1, rk2, rv, rslot, rw1, ek1, ek2, ev_tab, eslot, erow,
              ew2, ex, d_w1, d_off, d_ent, log, ev):
    """rk1/rk2/rv: the rows' hash table (mid coordinate -> row), rslot/rw1 per row; ek1/ek2/ev_tab:
    the entries' table ((mid, inner) -> entry), eslot/erow/ew2/ex per entry; d_*: drain order."""
    nan = nanv[0]
    po, eo, fo, ol = enter(CH, RD, io, 0)
    pm, em, fm, ml = enter(CH, RD, io, 1)
    pi, ei, fi, il = enter(CH, RD, io, 2)
    pv, evv, fv, vl = enter(CH, RD, io, 3)
    jm = out_at(CH, io, 4, 0)
    jc = out_at(CH, io, 4, 1)
    jv = out_at(CH, io, 4, 2)
    nr = S[_NR]
    ne = S[_NE]
    nev = S[_NEV2]
    t = S[T]
    ii = S[II]
    flops = 0
    steps = 0
    status = 0
    while True:
        status = missing(po, eo, fo)
        if status:
            S[PORT] = 0
            break
        o = ko[po]
        rt = max(o_s[po] + ol, 0)
        if o == VAL:
            status = missing(pm, em, fm)
            if status:
                S[PORT] = 1
                break
            mk = km[pm]
            rt = max(rt, m_s[pm] + ml)
            status = missing(pi, ei, fi)
            if status:
                S[PORT] = 2
                break
            ik = ki[pi]
            rt = max(rt, i_s[pi] + il)
            status = missing(pv, evv, fv)
            if status:
                S[PORT] = 3
                break
            if mk == VAL:
                if not (ik == VAL or (ik == STOP and di[pi] == 0)):
                    status = FAIL
                    break
                vk = kv[pv]
                rt = max(rt, v_s[pv] + vl)
                if ik == VAL and not _is_elem(vk):
                    status = FAIL
                    break
                if ik == STOP and not (vk == STOP and dv[pv] == 0):
                    status = FAIL
                    break
                w1 = dm[pm]
                if 2 * (nr + 1) > rv.shape[0] or nr >= rw1.shape[0] or 2 * (ne + 1) > ev_tab.shape[0] or \
                        ne >= ew2.shape[0]:
                    status = GROW
                    break
                if log and nev >= ev.shape[1]:
                    status = YIELD
                    break
                if S[_CROW] >= 0 and S[_CW1] == w1:
                    row = S[_CROW]
                else:
                    q = _slot(rk1, rk2, rv, w1, 0)
                    if rv[q] < 0:
                        rk1[q] = w1
                        rk2[q] = 0
                        rv[q] = nr
                        rslot[nr] = q
                        rw1[nr] = w1
                        nr += 1
                    row = rv[q]
                    S[_CW1] = w1
                    S[_CROW] = row
                t = max(t + ii, rt)
                icons[pi] = t
                vcons[pv] = t
                if ik == VAL:
                    w2 = di[pi]
                    x = float(dv[pv]) if vk == VAL else 0.0
                    q = _slot(ek1, ek2, ev_tab, w1, w2)
                    if ev_tab[q] < 0:
                        ek1[q] = w1
                        ek2[q] = w2
                        ev_tab[q] = ne
                        eslot[ne] = q
                        erow[ne] = row
                        ew2[ne] = w2
                        ex[ne] = combine(red, identity(red), x, nan)
                        ne += 1
                    else:
                        e = ev_tab[q]
                        ex[e] = combine(red, ex[e], x, nan)
                    if log:
                        ev[0, nev] = w1
                        ev[1, nev] = w2
                        ev[2, nev] = pv
                        ev[3, nev] = ACC
                        nev += 1
                    flops += 1
                else:  # the mid coordinate's fiber ends: its row exists even if empty
                    mcons[pm] = t
                    pm += 1
                pi += 1
                pv += 1
            elif mk == STOP and dm[pm] == 0:
                if not (ik == STOP and di[pi] == 1):
                    status = FAIL
                    break
                rt = max(rt, v_s[pv] + vl)
                if not (kv[pv] == STOP and dv[pv] == 1):
                    status = FAIL
                    break
                t = max(t + ii, rt)
                icons[pi] = t
                vcons[pv] = t
                mcons[pm] = t
                ocons[po] = t
                pi += 1
                pv += 1
                pm += 1
                po += 1
            else:
                status = FAIL
                break
            steps += 1
        elif o == STOP or o == D_TOK:
            on = do[po] if o == STOP else -1
            if nr > 0 and not (o == STOP and on == 0) and not S[_DRAIN2]:
                status = FAIL
                break
            status = missing(pm, em, fm)
            if status:
                S[PORT] = 1
                break
            status = missing(pi, ei, fi)
            if status:
                S[PORT] = 2
                break
            status = missing(pv, evv, fv)
            if status:
                S[PORT] = 3
                break
            rt = max(rt, m_s[pm] + ml)
            if not (km[pm] == o and (o == D_TOK or dm[pm] == on + 1)):
                status = FAIL
                break
            rt = max(rt, i_s[pi] + il)
            if not (ki[pi] == o and (o == D_TOK or di[pi] == on + 2)):
                status = FAIL
                break
            rt = max(rt, v_s[pv] + vl)
            if not (kv[pv] == o and (o == D_TOK or dv[pv] == on + 2)):
                status = FAIL
                break
            if o == STOP and on == 0 and nr > 0 and not S[_DRAIN2]:
                if d_w1.shape[0] < nr or d_off.shape[0] < nr + 1 or d_ent.shape[0] < ne:
                    status = GROW
                    break
                _order(rw1, nr, erow, ew2, ne, d_w1, d_off, d_ent)
                S[_DR] = 0
                S[_DE] = 0
                S[_DPH] = 0
                S[_DNR] = nr
                S[_DRAIN2] = 1
            if S[_DRAIN2]:  # one token per step: a row's mid coordinate, its entries, its S0
                r = S[_DR]
                ph = S[_DPH]
                if ph == 0:
                    if jm >= mk_.shape[0]:
                        status = WAIT_OUT
                        break
                    t = max(t + ii, rt)
                    mk_[jm] = VAL
                    md[jm] = d_w1[r]
                    mt[jm] = t
                    jm += 1
                    S[_DE] = d_off[r]
                    S[_DPH] = 1
                else:
                    if jc >= ck.shape[0] or jv >= vk_.shape[0]:
                        status = WAIT_OUT
                        break
                    if log and nev >= ev.shape[1]:
                        status = YIELD
                        break
                    t = max(t + ii, rt)
                    e = S[_DE]
                    if e < d_off[r + 1]:
                        q = d_ent[e]
                        ck[jc] = VAL
                        cd[jc] = ew2[q]
                        vk_[jv] = VAL
                        vd[jv] = ex[q]
                        if log:
                            ev[0, nev] = d_w1[r]
                            ev[1, nev] = ew2[q]
                            ev[2, nev] = jv
                            ev[3, nev] = EMIT
                            nev += 1
                        S[_DE] = e + 1
                    else:
                        ck[jc] = STOP
                        cd[jc] = 0
                        vk_[jv] = STOP
                        vd[jv] = 0.0
                        S[_DR] = r + 1
                        S[_DPH] = 0
                    ct[jc] = t
                    vt[jv] = t
                    jc += 1
                    jv += 1
                steps += 1
                if S[_DR] == S[_DNR]:  # drained: empty the tables
                    _clear(rv, rslot, nr)
                    _clear(ev_tab, eslot, ne)
                    nr = 0
                    ne = 0
                    S[_CROW] = -1
                    S[_DRAIN2] = 0
                continue
            if jm >= mk_.shape[0] or jc >= ck.shape[0] or jv >= vk_.shape[0]:
                status = WAIT_OUT
                break
            t = max(t + ii, rt)
            steps += 1
            ocons[po] = t
            mcons[pm] = t
            icons[pi] = t
            vcons[pv] = t
            po += 1
            pm += 1
            pi += 1
            pv += 1
            mk_[jm] = o
            md[jm] = on if o == STOP else 0
            mt[jm] = t
            jm += 1
            ck[jc] = o
            cd[jc] = on + 1 if o == STOP else 0
            ct[jc] = t
            jc += 1
            vk_[jv] = o
            vd[jv] = on + 1 if o == STOP else 0
            vt[jv] = t
            jv += 1
            if o == D_TOK:
                status = DONE
                break
        else:
            status = FAIL
            break
    S[_NR] = nr
    S[_NE] = ne
    S[_NEV2] = nev
    S[T] = t
    S[STEPS] += steps
    S[FLOPS] += flops
    out_leave(CH, io, 4, 0, jm)
    out_leave(CH, io, 4, 1, jc)
    out_leave(CH, io, 4, 2, jv)
    leave(CH, RD, io, 0, po)
    leave(CH, RD, io, 1, pm)
    leave(CH, RD, io, 2, pi)
    leave(CH, RD, io, 3, pv)
    return status


# -- runners --------------------------------------------------------------------------------------------
class _Accumulator(Reducer):
    """What spacc and spacc2 share: the event log for tiles, growing state."""

    def check_bound(self):
        if any(ch.dtype != np.int64 for ch in self.in_ch[:-1]):
            raise NeedOracle()

    def _log(self, nev_slot: int):
        self.logging = self.tile is not None
        self.nev_slot = nev_slot  # state slot of the event count
        self.ev = np.empty((4, 1024 if self.logging else 0), dtype=np.int64)

    def after(self, before_in, before_out):
        if self.logging:
            tiles.accumulate(self, before_out)


class Spacc(_Accumulator):
    kernel = staticmethod(_k_spacc)
    ins, outs = ("crd_outer", "crd_inner", "val"), ("crd", "val")

    def check(self):
        super().check()
        self.tbl = np.empty(0, dtype=np.float64)
        self.present = np.zeros(0, dtype=np.bool_)
        self.touched = np.empty(256, dtype=np.int64)
        self.xk = np.empty(16, dtype=np.int64)
        self.xv = np.empty(16, dtype=np.float64)
        self.dk = np.empty(256, dtype=np.int64)
        self.dx = np.empty(256, dtype=np.float64)
        self._log(_NEV)

    def extra(self):
        return (self.red, NANV, self.tbl, self.present, self.touched, self.xk, self.xv, self.dk, self.dx,
                self.logging, self.ev)

    def grow(self):
        S, e = self.S, self.engine
        need = int(S[NEED])
        if need > self.tbl.shape[0]:
            size = min(max(need, 2 * self.tbl.shape[0], 1024), TABLE_LIMIT)
            e.reserve(9 * (size - self.tbl.shape[0]), self)
            tbl = np.empty(size, dtype=np.float64)
            present = np.zeros(size, dtype=np.bool_)
            tbl[:self.tbl.shape[0]] = self.tbl
            present[:self.present.shape[0]] = self.present
            self.tbl, self.present = tbl, present
        if S[_NT] >= self.touched.shape[0]:
            self.touched = e.enlarge(self.touched, self)
        if S[_M] >= self.xk.shape[0]:
            self.xk, self.xv = e.enlarge(self.xk, self), e.enlarge(self.xv, self)
        if self.dk.shape[0] < S[_NT] + S[_M]:
            size = int(S[_NT] + S[_M])
            self.dk, self.dx = e.enlarge(self.dk, self, size), e.enlarge(self.dx, self, size)
        self.invalidate()


class Spacc2(_Accumulator):
    kernel = staticmethod(_k_spacc2)
    ins, outs = ("crd_outer", "crd_mid", "crd_inner", "val"), ("crd_mid", "crd", "val")

    def check(self):
        super().check()
        self.rows = self._table(64)
        self.rslot = np.empty(32, dtype=np.int64)
        self.rw1 = np.empty(32, dtype=np.int64)
        self.ents = self._table(1024)
        self.eslot = np.empty(512, dtype=np.int64)
        self.erow = np.empty(512, dtype=np.int64)
        self.ew2 = np.empty(512, dtype=np.int64)
        self.ex = np.empty(512, dtype=np.float64)
        self.d_w1 = np.empty(32, dtype=np.int64)
        self.d_off = np.empty(33, dtype=np.int64)
        self.d_ent = np.empty(512, dtype=np.int64)
        self.S[_CROW] = -1
        self._log(_NEV2)

    @staticmethod
    def _table(size: int):
        return (np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64), np.full(size, -1, dtype=np.int64))

    def extra(self):
        return (self.red, NANV, *self.rows, self.rslot, self.rw1, *self.ents, self.eslot, self.erow, self.ew2,
                self.ex, self.d_w1, self.d_off, self.d_ent, self.logging, self.ev)

    def _rehashed(self, table, slots):
        size = 2 * table[2].shape[0]
        self.engine.reserve(24 * size, self)
        new = self._table(size)
        rehash(*table, *new, slots)
        return new

    def grow(self):
        S, e = self.S, self.engine
        nr, ne = int(S[_NR]), int(S[_NE])
        if nr >= self.rw1.shape[0]:
            self.rslot, self.rw1 = e.enlarge(self.rslot, self), e.enlarge(self.rw1, self)
        if 2 * (nr + 1) > self.rows[2].shape[0]:
            self.rows = self._rehashed(self.rows, self.rslot)
        if ne >= self.ew2.shape[0]:
            self.eslot, self.erow = e.enlarge(self.eslot, self), e.enlarge(self.erow, self)
            self.ew2, self.ex = e.enlarge(self.ew2, self), e.enlarge(self.ex, self)
        if 2 * (ne + 1) > self.ents[2].shape[0]:
            self.ents = self._rehashed(self.ents, self.eslot)
        if self.d_w1.shape[0] < nr or self.d_off.shape[0] < nr + 1 or self.d_ent.shape[0] < ne:
            self.d_w1 = e.enlarge(self.d_w1, self, nr)
            self.d_off = e.enlarge(self.d_off, self, nr + 1)
            self.d_ent = e.enlarge(self.d_ent, self, ne)
        self.invalidate()
