"""Kernel and runner of spacc2, the order-2 sparse accumulator (values per (mid, inner)
coordinate pair of each outer fiber), with its per-row drain. Mirrors `sim.oracle.spacc`.

The entries live in a grid of rows x inner coordinates while it stays small, else in a hash table
keyed by (mid, inner) (`spacc_tables`), so that each accumulation costs one indexed add or one
lookup. At an outer `S0` only the distinct entries are ordered: rows by a sort of their mid
coordinates and each row by a scan of its cells or a sort of its own entries.

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> run = apply("spacc2", {"crd_outer": "0 1 S0 D", "crd_mid": "3 S0 3 4 S0 S1 D",
    ...                        "crd_inner": "5 S0 S1 5 S0 6 S0 S1 S2 D", "val": "1 S0 S1 2 S0 4 S0 S1 S2 D"})
    >>> [format_tokens(run.outs[p]) for p in ("crd_mid", "crd", "val")]
    ['3 4 S0 D', '5 S0 6 S0 S1 D', '3 S0 4 S0 S1 D']
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from . import core, pool
from .reduce import combine, identity
from .spacc import Accumulator, log_event
from .spacc_tables import Drain, HashTable, clear, dense_fits, drain_order, rehash, relayout, slot, to_hash
from .stream import DONE as D_TOK
from .stream import STOP, VAL, _is_elem

_NR, _NE, _CW1, _CROW, _DR, _DE, _DPH, _DNR, _NEV2, _DRAIN2, _MODE, _W = range(core.FREE, core.FREE + 12)


class Map2(NamedTuple):
    """spacc2's state record: the reduction (red, nanv: `reduce.Reduction`'s), the rows' hash
    table (mid coordinate -> row) with each row's slot and mid coordinate (rslot, rw1), the dense
    table (dval, dpres: rows x S[_W] cells), the entries' hash table ((mid, inner) -> entry) with
    each entry's slot, row, inner coordinate and value (eslot, erow, ew2, ex), the drain order,
    and the event log for tiles (log: whether to keep it, ev). GROW asks for more."""
    red: int
    nanv: np.ndarray
    rows: HashTable
    rslot: np.ndarray
    rw1: np.ndarray
    dval: np.ndarray
    dpres: np.ndarray
    ents: HashTable
    eslot: np.ndarray
    erow: np.ndarray
    ew2: np.ndarray
    ex: np.ndarray
    drain: Drain
    log: bool
    ev: np.ndarray


@njit(cache=True)
def _k_spacc2(nd, outer, mid, inner, val, mid_o, crd_o, val_o, mp):
    """mp (`Map2`): the rows' hash table (mid coordinate -> row), rslot/rw1 per row; dval/dpres:
    the dense table (mode 0: rows x S[_W] cells); the entries' hash table (mode 1: (mid, inner) ->
    entry, values in ex); eslot/erow/ew2 per entry; the drain order (`spacc_tables`)."""
    S = nd.S
    ko, do, o_s, ocons = outer.kind, outer.data, outer.sent, outer.cons
    km, dm, m_s, mcons = mid.kind, mid.data, mid.sent, mid.cons
    ki, di, i_s, icons = inner.kind, inner.data, inner.sent, inner.cons
    kv, dv, v_s, vcons = val.kind, val.data, val.sent, val.cons
    mk_, md, mt, mg = mid_o.kind, mid_o.data, mid_o.sent, mid_o.gate
    ck, cd, ct, cg = crd_o.kind, crd_o.data, crd_o.sent, crd_o.gate
    vk_, vd, vt, vg = val_o.kind, val_o.data, val_o.sent, val_o.gate
    red, nanv, rows, rslot, rw1, dval, dpres, ents, eslot, erow, ew2, ex, drain, log, ev = mp
    (rk1, rk2, rv), (ek1, ek2, ev_tab), (d_w1, d_off, d_c, d_v) = rows, ents, drain
    nan = nanv[0]
    mode = S[_MODE]
    width = S[_W]
    cap = dpres.shape[0] // width
    po, eo, fo, ol = core.opened(nd, outer)
    pm, em, fm, ml = core.opened(nd, mid)
    pi, ei, fi, il = core.opened(nd, inner)
    pv, evv, fv, vl = core.opened(nd, val)
    jm, capm, dm_, bm = core.out_opened(nd, mid_o)
    jc, capc, dc, bc = core.out_opened(nd, crd_o)
    jv, capv, dv_, bv = core.out_opened(nd, val_o)
    nr = S[_NR]
    ne = S[_NE]
    nev = S[_NEV2]
    t, ii = S[core.T], S[core.II]
    flops = 0
    steps = status = 0
    while True:
        status = core.missing(po, eo, fo)
        if status:
            S[core.PORT] = 0
            break
        o = ko[po]
        rt = max(o_s[po] + ol, 0)
        if o == VAL:
            status = core.missing(pm, em, fm)
            if status:
                S[core.PORT] = 1
                break
            mk = km[pm]
            rt = max(rt, m_s[pm] + ml)
            status = core.missing(pi, ei, fi)
            if status:
                S[core.PORT] = 2
                break
            ik = ki[pi]
            rt = max(rt, i_s[pi] + il)
            status = core.missing(pv, evv, fv)
            if status:
                S[core.PORT] = 3
                break
            if mk == VAL:
                if not (ik == VAL or (ik == STOP and di[pi] == 0)):
                    status = core.FAIL
                    break
                vk = kv[pv]
                rt = max(rt, v_s[pv] + vl)
                if ik == VAL and not _is_elem(vk):
                    status = core.FAIL
                    break
                if ik == STOP and not (vk == STOP and dv[pv] == 0):
                    status = core.FAIL
                    break
                w1 = dm[pm]
                if 2 * (nr + 1) > rv.shape[0] or nr >= rw1.shape[0] or ne >= ew2.shape[0] or \
                        (mode == 1 and 2 * (ne + 1) > ev_tab.shape[0]):
                    status = core.GROW
                    break
                if mode == 0 and (nr >= cap or (ik == VAL and di[pi] >= width)):
                    S[core.NEED] = di[pi] if ik == VAL else 0
                    status = core.GROW
                    break
                if log and nev >= ev.shape[1]:
                    status = core.YIELD
                    break
                if S[_CROW] >= 0 and S[_CW1] == w1:
                    row = S[_CROW]
                else:
                    q = slot(rk1, rk2, rv, w1, 0)
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
                    if mode == 0:
                        cell = row * width + w2
                        if dpres[cell]:
                            dval[cell] = combine(red, dval[cell], x, nan)
                        else:
                            dpres[cell] = 1
                            dval[cell] = combine(red, identity(red), x, nan)
                            erow[ne] = row
                            ew2[ne] = w2
                            ne += 1
                    else:
                        q = slot(ek1, ek2, ev_tab, w1, w2)
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
                        nev = log_event(ev, nev, w1, w2, pv, core.ACC)
                    flops += 1
                else:  # the mid coordinate's fiber ends: its row exists even if empty
                    pm = core.timed(mcons, pm, t)
                pi += 1
                pv += 1
            elif mk == STOP and dm[pm] == 0:
                if not (ik == STOP and di[pi] == 1):
                    status = core.FAIL
                    break
                rt = max(rt, v_s[pv] + vl)
                if not (kv[pv] == STOP and dv[pv] == 1):
                    status = core.FAIL
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
                status = core.FAIL
                break
            steps += 1
        elif o == STOP or o == D_TOK:
            on = do[po] if o == STOP else -1
            if nr > 0 and not (o == STOP and on == 0) and not S[_DRAIN2]:
                status = core.FAIL
                break
            status = core.missing(pm, em, fm)
            if status:
                S[core.PORT] = 1
                break
            status = core.missing(pi, ei, fi)
            if status:
                S[core.PORT] = 2
                break
            status = core.missing(pv, evv, fv)
            if status:
                S[core.PORT] = 3
                break
            rt = max(rt, m_s[pm] + ml)
            if not (km[pm] == o and (o == D_TOK or dm[pm] == on + 1)):
                status = core.FAIL
                break
            rt = max(rt, i_s[pi] + il)
            if not (ki[pi] == o and (o == D_TOK or di[pi] == on + 2)):
                status = core.FAIL
                break
            rt = max(rt, v_s[pv] + vl)
            if not (kv[pv] == o and (o == D_TOK or dv[pv] == on + 2)):
                status = core.FAIL
                break
            if o == STOP and on == 0 and nr > 0 and not S[_DRAIN2]:
                if d_w1.shape[0] < nr or d_off.shape[0] < nr + 1 or d_c.shape[0] < ne:
                    S[core.NEED] = -1  # the drain order's arrays, sized once per drain
                    status = core.GROW
                    break
                drain_order(mp, mode, width, nr, ne)
                S[_DR] = 0
                S[_DE] = 0
                S[_DPH] = 0
                S[_DNR] = nr
                S[_DRAIN2] = 1
            if S[_DRAIN2]:  # a step per entry (a row's mid coordinate goes out with its first) and per row's S0
                r = S[_DR]
                ph = S[_DPH]
                if (ph == 0 and jm >= capm) or jc >= capc or jv >= capv:
                    status = core.WAIT_OUT
                    break
                if log and nev >= ev.shape[1]:
                    status = core.YIELD
                    break
                t = max(t + ii, rt)
                if ph == 0:
                    t = core.gated(t, mg, jm, dm_, bm)
                t = core.gated(core.gated(t, cg, jc, dc, bc), vg, jv, dv_, bv)
                if ph == 0:
                    mk_[jm] = VAL
                    md[jm] = d_w1[r]
                    jm = core.timed(mt, jm, t)
                    S[_DE] = d_off[r]
                    S[_DPH] = 1
                e = S[_DE]
                if e < d_off[r + 1]:
                    ck[jc] = VAL
                    cd[jc] = d_c[e]
                    vk_[jv] = VAL
                    vd[jv] = d_v[e]
                    if log:
                        nev = log_event(ev, nev, d_w1[r], d_c[e], jv, core.EMIT)
                    S[_DE] = e + 1
                else:
                    ck[jc] = STOP
                    cd[jc] = 0
                    vk_[jv] = STOP
                    vd[jv] = 0.0
                    S[_DR] = r + 1
                    S[_DPH] = 0
                jc = core.timed(ct, jc, t)
                jv = core.timed(vt, jv, t)
                steps += 1
                if S[_DR] == S[_DNR]:  # drained: empty the tables
                    clear(rv, rslot, nr)
                    if mode == 1:
                        clear(ev_tab, eslot, ne)
                    nr = 0
                    ne = 0
                    S[_CROW] = -1
                    S[_DRAIN2] = 0
                continue
            if jm >= capm or jc >= capc or jv >= capv:
                status = core.WAIT_OUT
                break
            t = core.gated(core.gated(core.gated(max(t + ii, rt), mg, jm, dm_, bm), cg, jc, dc, bc), vg, jv, dv_, bv)
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
            jm = core.timed(mt, jm, t)
            ck[jc] = o
            cd[jc] = on + 1 if o == STOP else 0
            jc = core.timed(ct, jc, t)
            vk_[jv] = o
            vd[jv] = on + 1 if o == STOP else 0
            jv = core.timed(vt, jv, t)
            if o == D_TOK:
                status = core.DONE
                break
        else:
            status = core.FAIL
            break
    S[_NR] = nr
    S[_NE] = ne
    S[_NEV2] = nev
    core.settle(S, t, steps)
    S[core.FLOPS] += flops
    core.out_closed(nd, mid_o.ch, jm)
    core.out_closed(nd, crd_o.ch, jc)
    core.out_closed(nd, val_o.ch, jv)
    core.closed(nd, outer, po)
    core.closed(nd, mid, pm)
    core.closed(nd, inner, pi)
    core.closed(nd, val, pv)
    return status




class Spacc2(Accumulator):
    kernel = staticmethod(_k_spacc2)
    backpressure = True
    ins, outs = ("crd_outer", "crd_mid", "crd_inner", "val"), ("crd_mid", "crd", "val")

    def check(self):
        super().check()
        self.rows = HashTable.empty(64)
        self.rslot = np.empty(32, dtype=np.int64)
        self.rw1 = np.empty(32, dtype=np.int64)
        self.S[_MODE], self.S[_W] = 0, 256
        self.dval, self.dpres = relayout(None, None, 0, 0, 64, 256)
        self.ents = HashTable.empty(0)
        self.eslot = np.empty(0, dtype=np.int64)
        self.erow = np.empty(512, dtype=np.int64)
        self.ew2 = np.empty(512, dtype=np.int64)
        self.ex = np.empty(0, dtype=np.float64)
        self.drain = Drain(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64),
                           np.empty(0, dtype=np.float64))
        self.S[_CROW] = -1
        self._log(_NEV2)

    def pending(self):
        """Every step reads the four heads but the drain's after its first; the drain emits
        (crd, val) entries and S0 per row, a row's mid coordinate with its first step; the
        closing step all three."""
        S = self.S
        outer = self.head("crd_outer")
        if S[_DRAIN2]:
            first = S[_DR] == 0 and S[_DPH] == 0
            return (list(self.ins) if first else []), (list(self.outs) if S[_DPH] == 0 else ["crd", "val"])
        if outer is None:
            return list(self.ins), self.unsure(self.outs)
        if outer[0] == VAL:
            return list(self.ins), []
        if outer[0] == STOP and int(outer[1]) == 0 and S[_NR] > 0:
            return list(self.ins), list(self.outs)  # the drain's first step
        return list(self.ins), list(self.outs)

    def state(self):
        return Map2(self.red, core.NANV, self.rows, self.rslot, self.rw1, self.dval, self.dpres, self.ents, self.eslot,
                    self.erow, self.ew2, self.ex, self.drain, self.logging, self.ev)

    def _rehashed(self, table, slots):
        size = 2 * table.v.shape[0]
        self.engine.reserve(24 * size, self)
        new = HashTable.empty(size)
        rehash(table, new, slots)
        return new

    def _grow_dense(self, nr: int, ne: int) -> None:
        """A larger grid for the dense table, or its entries moved to the hash table."""
        S, e = self.S, self.engine
        width, rows = int(S[_W]), self.dpres.shape[0] // int(S[_W])
        new_width, new_rows = width, rows
        while new_width <= S[core.NEED]:  # at least twice as wide or as tall: a few re-layouts per run
            new_width *= 2
        while new_rows <= nr:
            new_rows *= 2
        if dense_fits(new_rows, new_width, ne):
            e.reserve(9 * (new_rows * new_width - rows * width), self)
            self.dval, self.dpres = relayout(self.dval, self.dpres, rows, width, new_rows, new_width)
            S[_W] = new_width
            return
        size = 1 << max(10, (2 * ne + 2).bit_length())
        e.reserve(24 * size + 16 * self.ew2.shape[0], self)
        self.ents = HashTable.empty(size)
        self.eslot = np.empty(self.ew2.shape[0], dtype=np.int64)
        self.ex = np.empty(self.ew2.shape[0], dtype=np.float64)
        to_hash(self.state(), ne, width)
        self.dval, self.dpres = relayout(None, None, 0, 0, 1, 1)
        S[_MODE], S[_W] = 1, 1

    def release(self):
        pool.give(self.dval, self.dpres)
        self.dval = self.dpres = None

    def grow(self):
        S, e = self.S, self.engine
        nr, ne = int(S[_NR]), int(S[_NE])
        if nr >= self.rw1.shape[0]:
            self.rslot, self.rw1 = e.enlarge(self.rslot, self), e.enlarge(self.rw1, self)
        if 2 * (nr + 1) > self.rows.v.shape[0]:
            self.rows = self._rehashed(self.rows, self.rslot)
        if ne >= self.ew2.shape[0]:
            self.erow, self.ew2 = e.enlarge(self.erow, self), e.enlarge(self.ew2, self)
            if S[_MODE] == 1:  # per entry, the hash table's slot and value
                self.eslot, self.ex = (e.enlarge(a, self, self.ew2.shape[0]) for a in (self.eslot, self.ex))
        if S[core.NEED] == -1:  # a drain: its order's arrays
            e.reserve(16 * ne + 16 * nr, self)
            self.drain = Drain(np.empty(nr, dtype=np.int64), np.empty(nr + 1, dtype=np.int64),
                               np.empty(ne, dtype=np.int64), np.empty(ne, dtype=np.float64))
        elif S[_MODE] == 0 and (nr >= self.dpres.shape[0] // S[_W] or S[core.NEED] >= S[_W]):
            self._grow_dense(nr, ne)
        if S[_MODE] == 1 and 2 * (ne + 1) > self.ents.v.shape[0]:
            self.ents = self._rehashed(self.ents, self.eslot)
        S[core.NEED] = 0
        self.invalidate()
