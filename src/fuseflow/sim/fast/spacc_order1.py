"""Kernel and runner of spacc, the order-1 sparse accumulator (a value per inner coordinate of
each outer fiber). Mirrors `sim.oracle.spacc`.

Keys 0..`TABLE_LIMIT`-1 accumulate in a dense table (others in a list, sorted at the drain), so
that each accumulation costs one indexed add; at an outer `S0` the table's touched keys, sorted,
and the list's merge into coordinate order at the end of a queue of finished output, of which
every step emits one token (the fiber drains while the next one accumulates).

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> run = apply("spacc", {"crd_outer": "0 S0 D", "crd_inner": "3 1 3 S0 S1 D", "val": "1 2 4 S0 S1 D"},
    ...             {"kind": "max"})
    >>> format_tokens(run.outs["crd"]), format_tokens(run.outs["val"])
    ('1 3 S0 D', '2 4 S0 D')
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from . import core
from .reduce import combine, identity
from .spacc import Accumulator, log_event
from .stream import DONE as D_TOK
from .stream import STOP, VAL, _is_elem

TABLE_LIMIT = 1 << 22  # spacc keys 0..TABLE_LIMIT-1 accumulate in a dense table, others are sorted
FIRST_KEYS = 1024  # the table's and the queue's first size
_NT, _M, _QH, _QN, _ENDED, _NEV = range(core.FREE, core.FREE + 6)


class Map1(NamedTuple):
    """spacc's state record: the reduction (red, nanv: `reduce.Reduction`'s), the dense table of
    keys below `TABLE_LIMIT` (tbl, present, the keys touched in order), the other keys and their
    values in stream order (xk, xv), the queue of finished output (kinds qk, coordinates qd,
    values qx), and the event log for tiles (log: whether to keep it, ev). GROW asks for more."""
    red: int
    nanv: np.ndarray
    tbl: np.ndarray
    present: np.ndarray
    touched: np.ndarray
    xk: np.ndarray
    xv: np.ndarray
    qk: np.ndarray
    qd: np.ndarray
    qx: np.ndarray
    log: bool
    ev: np.ndarray


@njit(cache=True)
def _drain1(mp, nt, m, at):
    """The map in coordinate order into the queue from position `at`: the table's keys and the
    sorted outside keys (combined in stream order), merged; clears the table's marks. Returns
    the queue's new length."""
    red, nan, tbl, xk, xv, qk, qd, qx = mp.red, mp.nanv[0], mp.tbl, mp.xk, mp.xv, mp.qk, mp.qd, mp.qx
    keys = np.sort(mp.touched[:nt])
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
    dn = at
    while a < nt or b < no_:
        qk[dn] = VAL
        if b >= no_ or (a < nt and keys[a] < okeys[b]):
            qd[dn] = keys[a]
            qx[dn] = tbl[keys[a]]
            mp.present[keys[a]] = False
            a += 1
        else:
            qd[dn] = okeys[b]
            qx[dn] = ovals[b]
            b += 1
        dn += 1
    return dn


@njit(cache=True)
def _k_spacc(nd, outer, inner, val, crd_o, val_o, mp):
    S = nd.S
    ko, do, o_s, ocons, po, eo, fo, ol = core.inlet(nd, outer)
    ki, di, i_s, icons, pi, ei, fi, il = core.inlet(nd, inner)
    kv, dv, v_s, vcons, pv, ev_, fv, vl = core.inlet(nd, val)
    ck, cd, ct, cg, jc, capc, dc, bc = core.outlet(nd, crd_o)
    vk_, vd, vt, vg, jv, capv, dv_, bv = core.outlet(nd, val_o)
    red, nanv, tbl, present, touched, xk, xv, qk, qd, qx, log, ev = mp
    nan = nanv[0]
    nt = S[_NT]
    m = S[_M]
    qh = S[_QH]
    qn = S[_QN]
    ended = S[_ENDED]
    nev = S[_NEV]
    t, ii, steps, status = core.resumed(S)
    flops = 0
    while True:
        # the step's input action: 0 none (input ended), 1 accumulate, 2 close an inner fiber,
        # 3 take an outer stop or D (queueing the fiber and the stop)
        action = 0
        rt = 0
        o = D_TOK
        on = -1
        key = 0
        inside = False
        if ended:
            if qh == qn:
                status = core.DONE
                break
        else:
            status = core.missing(po, eo, fo)
            if status:
                break
            o = ko[po]
            rt = max(o_s[po] + ol, 0)
            status = core.missing(pi, ei, fi)
            if status:
                S[core.PORT] = 1
                break
            rt = max(rt, i_s[pi] + il)
            status = core.missing(pv, ev_, fv)
            if status:
                S[core.PORT] = 2
                break
            rt = max(rt, v_s[pv] + vl)
            if o == VAL:
                ik = ki[pi]
                if ik == VAL:
                    if not _is_elem(kv[pv]):
                        status = core.FAIL
                        break
                    key = di[pi]
                    inside = 0 <= key < TABLE_LIMIT
                    if inside and key >= tbl.shape[0]:
                        status = core.GROW
                        S[core.NEED] = key + 1
                        break
                    if (inside and not present[key] and nt >= touched.shape[0]) or (not inside and m >= xk.shape[0]):
                        status = core.GROW
                        S[core.NEED] = 0
                        break
                    action = 1
                elif ik == STOP and di[pi] == 0:
                    if not (kv[pv] == STOP and dv[pv] == 0):
                        status = core.FAIL
                        break
                    action = 2
                else:
                    status = core.FAIL
                    break
            elif o == STOP or o == D_TOK:
                on = do[po] if o == STOP else -1
                if (nt + m) > 0 and not (o == STOP and on == 0):
                    status = core.FAIL
                    break
                if not (ki[pi] == o and (o == D_TOK or di[pi] == on + 1)):
                    status = core.FAIL
                    break
                if not (kv[pv] == o and (o == D_TOK or dv[pv] == on + 1)):
                    status = core.FAIL
                    break
                if qk.shape[0] < qn - qh + nt + m + 1:
                    status = core.GROW
                    S[core.NEED] = 0
                    break
                action = 3
            else:
                status = core.FAIL
                break
        emits = action == 3 or qh < qn
        if emits and (jc >= capc or jv >= capv):
            status = core.WAIT_OUT
            break
        if log and nev + 2 + (nt + m if action == 3 else 0) > ev.shape[1]:
            status = core.YIELD if nev > 0 else core.GROW  # GROW: the log cannot hold one fiber's seals
            S[core.NEED] = 0
            break
        t = max(t + ii, rt)
        if emits:
            t = core.gated(core.gated(t, cg, jc, dc, bc), vg, jv, dv_, bv)
        if action == 1:
            x = float(dv[pv]) if kv[pv] == VAL else 0.0
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
                nev = log_event(ev, nev, 0, key, pv, core.ACC)
            flops += 1
        elif action == 3:
            if qh > 0:  # move what is still queued to the front
                qk[:qn - qh] = qk[qh:qn]
                qd[:qn - qh] = qd[qh:qn]
                qx[:qn - qh] = qx[qh:qn]
                qn -= qh
                qh = 0
            first = qn
            if nt + m > 0:
                qn = _drain1(mp, nt, m, qn)
                if log:
                    for q in range(first, qn):
                        nev = log_event(ev, nev, 0, qd[q], q, core.SEAL)
            nt = 0
            m = 0
            qk[qn] = o
            qd[qn] = on if o == STOP else 0
            qx[qn] = 0.0
            qn += 1
            if o == D_TOK:
                ended = 1
        if action != 0:  # every input action takes the inner and value heads, all but 1 the outer
            pi = core.timed(icons, pi, t)
            pv = core.timed(vcons, pv, t)
            if action != 1:
                po = core.timed(ocons, po, t)
        if emits:
            head, coord = qk[qh], qd[qh]
            ck[jc] = head
            cd[jc] = coord
            vk_[jv] = head
            vd[jv] = qx[qh] if head == VAL else coord
            if log and head == VAL:
                nev = log_event(ev, nev, 0, 0, jv, core.EMIT_SEALED)
            jc = core.timed(ct, jc, t)
            jv = core.timed(vt, jv, t)
            qh += 1
        steps += 1
    S[_NT] = nt
    S[_M] = m
    S[_QH] = qh
    S[_QN] = qn
    S[_ENDED] = ended
    S[_NEV] = nev
    core.settle(S, t, steps)
    S[core.FLOPS] += flops
    core.out_closed(nd, crd_o.ch, jc)
    core.out_closed(nd, val_o.ch, jv)
    core.closed(nd, outer, po)
    core.closed(nd, inner, pi)
    core.closed(nd, val, pv)
    return status


class Spacc(Accumulator):
    kernel = staticmethod(_k_spacc)
    backpressure = True
    ins, outs = ("crd_outer", "crd_inner", "val"), ("crd", "val")

    def check(self):
        super().check()
        # sized for fibers of up to FIRST_KEYS keys (36 KB): smaller ones never ask to GROW
        self.tbl = np.empty(FIRST_KEYS, dtype=np.float64)
        self.present = np.zeros(FIRST_KEYS, dtype=np.bool_)
        self.touched = np.empty(FIRST_KEYS, dtype=np.int64)
        self.xk = np.empty(16, dtype=np.int64)
        self.xv = np.empty(16, dtype=np.float64)
        self.qk = np.empty(FIRST_KEYS, dtype=np.int64)
        self.qd = np.empty(FIRST_KEYS, dtype=np.int64)
        self.qx = np.empty(FIRST_KEYS, dtype=np.float64)
        self._log(_NEV)

    def pending(self):
        """Until D is taken every step reads the three heads; a step emits on both outputs when
        finished output is queued or the outer head is a stop or D."""
        queued = self.S[_QH] < self.S[_QN]
        if self.S[_ENDED]:
            return [], list(self.outs)
        outer = self.head("crd_outer")
        if outer is None:
            return list(self.ins), (list(self.outs) if queued else self.unsure(self.outs))
        return list(self.ins), (list(self.outs) if queued or outer[0] != VAL else [])

    def state(self):
        return Map1(self.red, core.NANV, self.tbl, self.present, self.touched, self.xk, self.xv, self.qk, self.qd,
                    self.qx, self.logging, self.ev)

    def grow(self):
        S, e = self.S, self.engine
        need = int(S[core.NEED])
        if need > self.tbl.shape[0]:
            size = min(max(need, 2 * self.tbl.shape[0], FIRST_KEYS), TABLE_LIMIT)
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
        queued = int(S[_QN] - S[_QH] + S[_NT] + S[_M] + 1)
        if self.qk.shape[0] < queued:
            self.qk, self.qd, self.qx = (e.enlarge(a, self, queued) for a in (self.qk, self.qd, self.qx))
        seals = int(S[_NT] + S[_M] + 2)
        if self.logging and self.ev.shape[1] < seals:
            ev = np.empty((4, max(seals, 2 * self.ev.shape[1])), dtype=np.int64)
            ev[:, :self.ev.shape[1]] = self.ev
            self.ev = ev
        self.invalidate()
