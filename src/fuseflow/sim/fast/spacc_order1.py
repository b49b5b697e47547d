"""Kernel and runner of spacc, the order-1 sparse accumulator (a value per inner coordinate of
each outer fiber). Mirrors `sim.oracle.spacc`.

Keys 0..`TABLE_LIMIT`-1 accumulate in a dense table (others in a list, sorted at the drain), so
that each accumulation costs one indexed add; at an outer `S0` the table's touched keys, sorted,
and the list's merge into coordinate order.

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> run = apply("spacc", {"crd_outer": "0 S0 D", "crd_inner": "3 1 3 S0 S1 D", "val": "1 2 4 S0 S1 D"},
    ...             {"kind": "max"})
    >>> format_tokens(run.outs["crd"]), format_tokens(run.outs["val"])
    ('1 3 S0 D', '2 4 S0 D')
"""
from __future__ import annotations

import numpy as np
from numba import njit

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
    T,
    enter,
    gated,
    leave,
    missing,
    out_at,
    out_depth,
    out_leave,
    out_room,
)
from .reduce import combine, identity
from .spacc import Accumulator, log_event
from .stream import DONE as D_TOK
from .stream import STOP, VAL, _is_elem

TABLE_LIMIT = 1 << 22  # spacc keys 0..TABLE_LIMIT-1 accumulate in a dense table, others are sorted
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
def _k_spacc(S, F, CH, RD, io, ko, do, o_s, ocons, ki, di, i_s, icons, kv, dv, v_s, vcons, ck, cd, ct, cg, vk_, vd,
             vt, vg, red, nanv, tbl, present, touched, xk, xv, dk, dx, log, ev):
    nan = nanv[0]
    po, eo, fo, ol = enter(CH, RD, io, 0)
    pi, ei, fi, il = enter(CH, RD, io, 1)
    pv, ev_, fv, vl = enter(CH, RD, io, 2)
    jc = out_at(CH, io, 3, 0)
    jv = out_at(CH, io, 3, 1)
    capc = out_room(CH, RD, io, 3, 0, ck.shape[0])
    capv = out_room(CH, RD, io, 3, 1, vk_.shape[0])
    dc, bc = out_depth(CH, io, 3, 0)
    dv_, bv = out_depth(CH, io, 3, 1)
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
                    nev = log_event(ev, nev, 0, key, pv, ACC)
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
            if jc >= capc or jv >= capv:
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
            t = gated(gated(max(t + ii, rt), cg, jc, dc, bc), vg, jv, dv_, bv)
            steps += 1
            if S[_DRAINING] and S[_DPOS] < S[_DN]:
                q = S[_DPOS]
                ck[jc] = VAL
                cd[jc] = dk[q]
                vk_[jv] = VAL
                vd[jv] = dx[q]
                if log:
                    nev = log_event(ev, nev, 0, dk[q], jv, EMIT)
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


class Spacc(Accumulator):
    kernel = staticmethod(_k_spacc)
    backpressure = True
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

    def pending(self):
        """Every step reads the three heads; those at an outer stop or D emit on both outputs."""
        outer = self.head("crd_outer")
        if outer is None:
            return list(self.ins), self.unsure(self.outs)
        return list(self.ins), ([] if outer[0] == VAL else list(self.outs))

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
