"""Fast-engine kernels and drivers of the sparse accumulators spacc (order 1) and spacc2 (order 2).

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

from . import fast_tiles
from .fast_core import _NAN, _check, _counters, _ints, _Node, _Res
from .fast_reduce import _combine, _identity, _red_code
from .fast_stream import DONE, STOP, VAL, _is_elem

_TABLE_LIMIT = 1 << 22  # spacc keys 0.._TABLE_LIMIT-1 accumulate in a dense table, others are sorted


@njit(cache=True)
def _drain1(touched, nt, tbl, present, xk, xv, m, red, nan, dk, dx):
    """The spacc map in coordinate order into dk/dx: the table's keys and the sorted outside keys
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
            acc = _identity(red)
            while q < m and xk[order[q]] == kk:
                acc = _combine(red, acc, xv[order[q]], nan)
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
def _k_spacc(ko, do, o_s, ol, ki, di, i_s, il, kv, dv, v_s, vl, red, nanv, ii):
    """Order-1 sparse accumulator. The map of the oracle (coordinate -> value, combined in stream
    order) is a dense table for keys in 0.._TABLE_LIMIT-1 plus a list of (key, value) pairs for
    the others, sorted (stably) and merged at the drain."""
    nan = nanv[0]
    no = ko.shape[0]
    ni = ki.shape[0]
    nv = kv.shape[0]
    cap = ni + no + 1
    ok = np.empty(cap, dtype=np.int8)
    oc = np.empty(cap, dtype=np.int64)
    ov = np.empty(cap, dtype=np.float64)
    ot = np.empty(cap, dtype=np.int64)
    co = np.empty(no, dtype=np.int64)
    civ = np.empty(max(ni, nv), dtype=np.int64)  # crd_inner and val are consumed together
    top = 0  # table size: up to the largest key below the limit
    for q in range(ni):
        if ki[q] == VAL and di[q] >= top and di[q] < _TABLE_LIMIT:
            top = di[q] + 1
    tbl = np.empty(top, dtype=np.float64)
    present = np.zeros(top, dtype=np.bool_)
    # (the buffers below are as long as the input but only touched up to one fiber's worth)
    touched = np.empty(ni, dtype=np.int64)
    nt = 0
    xk = np.empty(ni, dtype=np.int64)  # keys outside the table, and their values
    xv = np.empty(ni, dtype=np.float64)
    m = 0
    dk = np.empty(ni, dtype=np.int64)  # drained entries
    dx = np.empty(ni, dtype=np.float64)
    dn = 0
    dpos = 0
    draining = False
    po = 0
    pi = 0
    pv = 0
    t = -ii
    j = 0
    steps = 0
    flops = 0
    err = 0
    while True:
        if po >= no:
            err = 1
            break
        o = ko[po]
        rt = max(o_s[po] + ol, 0)
        if o == VAL:
            if pi >= ni:
                err = 1
                break
            ik = ki[pi]
            rt = max(rt, i_s[pi] + il)
            if ik == VAL:
                if pv >= nv:
                    err = 1
                    break
                vk = kv[pv]
                rt = max(rt, v_s[pv] + vl)
                if not _is_elem(vk):
                    err = 2
                    break
                key = di[pi]
                x = float(dv[pv]) if vk == VAL else 0.0
                if 0 <= key < _TABLE_LIMIT:
                    if present[key]:
                        tbl[key] = _combine(red, tbl[key], x, nan)
                    else:
                        present[key] = True
                        tbl[key] = _combine(red, _identity(red), x, nan)
                        touched[nt] = key
                        nt += 1
                else:
                    xk[m] = key
                    xv[m] = x
                    m += 1
                flops += 1
                t = max(t + ii, rt)
                civ[pi] = t
                pi += 1
                pv += 1
            elif ik == STOP and di[pi] == 0:
                if pv >= nv:
                    err = 1
                    break
                rt = max(rt, v_s[pv] + vl)
                if not (kv[pv] == STOP and dv[pv] == 0):
                    err = 2
                    break
                t = max(t + ii, rt)
                civ[pi] = t
                co[po] = t
                pi += 1
                pv += 1
                po += 1
            else:
                err = 2
                break
            steps += 1
        elif o == STOP or o == DONE:
            on = do[po] if o == STOP else -1
            if (nt + m) > 0 and not (o == STOP and on == 0):
                err = 2
                break
            if pi >= ni or pv >= nv:
                err = 1
                break
            rt = max(rt, i_s[pi] + il)
            if not (ki[pi] == o and (o == DONE or di[pi] == on + 1)):
                err = 2
                break
            rt = max(rt, v_s[pv] + vl)
            if not (kv[pv] == o and (o == DONE or dv[pv] == on + 1)):
                err = 2
                break
            if o == STOP and on == 0 and not draining:
                dn = _drain1(touched, nt, tbl, present, xk, xv, m, red, nan, dk, dx)
                dpos = 0
                nt = 0
                m = 0
                draining = True
            t = max(t + ii, rt)
            steps += 1
            if draining and dpos < dn:
                ok[j] = VAL
                oc[j] = dk[dpos]
                ov[j] = dx[dpos]
                ot[j] = t
                j += 1
                dpos += 1
            else:
                draining = False
                co[po] = t
                civ[pi] = t
                po += 1
                pi += 1
                pv += 1
                ok[j] = o
                oc[j] = on if o == STOP else 0
                ov[j] = on if o == STOP else 0
                ot[j] = t
                j += 1
                if o == DONE:
                    break
        else:
            err = 3
            break
    return err, po, pi, pv, steps, t, flops, j, ok, oc, ov, ot, co, civ


@njit(cache=True)
def _order2(e1, e2, m):
    """Indices of the first m entries sorted by (e1, e2), ties in entry order."""
    by2 = np.argsort(e2[:m], kind="mergesort")
    return by2[np.argsort(e1[by2], kind="mergesort")]


@njit(cache=True)
def _drain2(e1, e2, ex, emark, m, red, nan, t, rt, ii, steps, omk, omd, omt, jm, ok, oc, ov, ot, j):
    """spacc2 at an outer S0: per mid coordinate in order, a step emitting it (the first one
    reads the heads: rt), a step per inner entry in order, a step closing the inner fiber."""
    order = _order2(e1, e2, m)
    drt = rt
    i = 0
    while i < m:
        w1 = e1[order[i]]
        t = max(t + ii, drt)
        drt = 0
        steps += 1
        omk[jm] = VAL
        omd[jm] = w1
        omt[jm] = t
        jm += 1
        while i < m and e1[order[i]] == w1:
            q = order[i]
            if emark[q]:
                i += 1
                continue
            w2 = e2[q]
            acc = _identity(red)
            while i < m and e1[order[i]] == w1 and (emark[order[i]] or e2[order[i]] == w2):
                if not emark[order[i]]:
                    acc = _combine(red, acc, ex[order[i]], nan)
                i += 1
            t = max(t + ii, 0)
            steps += 1
            ok[j] = VAL
            oc[j] = w2
            ov[j] = acc
            ot[j] = t
            j += 1
        t = max(t + ii, 0)
        steps += 1
        ok[j] = STOP
        oc[j] = 0
        ov[j] = 0.0
        ot[j] = t
        j += 1
    return t, steps, jm, j


@njit(cache=True)
def _k_spacc2(ko, do, o_s, ol, km, dm, m_s, ml, ki, di, i_s, il, kv, dv, v_s, vl, red, nanv, ii):
    nan = nanv[0]
    no = ko.shape[0]
    nm = km.shape[0]
    ni = ki.shape[0]
    nv = kv.shape[0]
    capm = nm + no + 1
    cap = ni + nm + no + 1
    omk = np.empty(capm, dtype=np.int8)
    omd = np.empty(capm, dtype=np.int64)
    omt = np.empty(capm, dtype=np.int64)
    ok = np.empty(cap, dtype=np.int8)
    oc = np.empty(cap, dtype=np.int64)
    ov = np.empty(cap, dtype=np.float64)
    ot = np.empty(cap, dtype=np.int64)
    co = np.empty(no, dtype=np.int64)
    cm = np.empty(nm, dtype=np.int64)
    civ = np.empty(max(ni, nv), dtype=np.int64)  # crd_inner and val are consumed together
    # accumulated entries (w1, w2, value, or a mark that w1 is in the map): as long as the
    # input, touched only up to one outer fiber's worth
    ecap = ni + 1
    e1 = np.empty(ecap, dtype=np.int64)
    e2 = np.empty(ecap, dtype=np.int64)
    ex = np.empty(ecap, dtype=np.float64)
    emark = np.empty(ecap, dtype=np.bool_)
    m = 0
    po = 0
    pm = 0
    pi = 0
    pv = 0
    t = -ii
    jm = 0
    j = 0
    steps = 0
    flops = 0
    err = 0
    while True:
        if po >= no:
            err = 1
            break
        o = ko[po]
        rt = max(o_s[po] + ol, 0)
        if o == VAL:
            if pm >= nm:
                err = 1
                break
            mk = km[pm]
            rt = max(rt, m_s[pm] + ml)
            if mk == VAL:
                if pi >= ni:
                    err = 1
                    break
                ik = ki[pi]
                rt = max(rt, i_s[pi] + il)
                if ik == VAL or (ik == STOP and di[pi] == 0):
                    if pv >= nv:
                        err = 1
                        break
                    vk = kv[pv]
                    rt = max(rt, v_s[pv] + vl)
                    if ik == VAL and not _is_elem(vk):
                        err = 2
                        break
                    if ik == STOP and not (vk == STOP and dv[pv] == 0):
                        err = 2
                        break
                    e1[m] = dm[pm]
                    t = max(t + ii, rt)
                    civ[pi] = t
                    if ik == VAL:
                        e2[m] = di[pi]
                        ex[m] = float(dv[pv]) if vk == VAL else 0.0
                        emark[m] = False
                        flops += 1
                    else:  # the mid coordinate's fiber ends: it is in the map even if empty
                        e2[m] = 0
                        ex[m] = 0.0
                        emark[m] = True
                        cm[pm] = t
                        pm += 1
                    m += 1
                    pi += 1
                    pv += 1
                else:
                    err = 2
                    break
            elif mk == STOP and dm[pm] == 0:
                if pi >= ni:
                    err = 1
                    break
                rt = max(rt, i_s[pi] + il)
                if not (ki[pi] == STOP and di[pi] == 1):
                    err = 2
                    break
                if pv >= nv:
                    err = 1
                    break
                rt = max(rt, v_s[pv] + vl)
                if not (kv[pv] == STOP and dv[pv] == 1):
                    err = 2
                    break
                t = max(t + ii, rt)
                civ[pi] = t
                cm[pm] = t
                co[po] = t
                pi += 1
                pv += 1
                pm += 1
                po += 1
            else:
                err = 2
                break
            steps += 1
        elif o == STOP or o == DONE:
            on = do[po] if o == STOP else -1
            if m > 0 and not (o == STOP and on == 0):
                err = 2
                break
            if pm >= nm:
                err = 1
                break
            rt = max(rt, m_s[pm] + ml)
            if not (km[pm] == o and (o == DONE or dm[pm] == on + 1)):
                err = 2
                break
            if pi >= ni:
                err = 1
                break
            rt = max(rt, i_s[pi] + il)
            if not (ki[pi] == o and (o == DONE or di[pi] == on + 2)):
                err = 2
                break
            if pv >= nv:
                err = 1
                break
            rt = max(rt, v_s[pv] + vl)
            if not (kv[pv] == o and (o == DONE or dv[pv] == on + 2)):
                err = 2
                break
            if o == STOP and on == 0 and m > 0:
                t, steps, jm, j = _drain2(e1, e2, ex, emark, m, red, nan, t, rt, ii, steps,
                                          omk, omd, omt, jm, ok, oc, ov, ot, j)
                m = 0
            t = max(t + ii, rt)
            steps += 1
            co[po] = t
            cm[pm] = t
            civ[pi] = t
            po += 1
            pm += 1
            pi += 1
            pv += 1
            omk[jm] = o
            omd[jm] = on if o == STOP else 0
            omt[jm] = t
            jm += 1
            ok[j] = o
            oc[j] = on + 1 if o == STOP else 0
            ov[j] = on + 1 if o == STOP else 0
            ot[j] = t
            j += 1
            if o == DONE:
                break
        else:
            err = 3
            break
    return (err, po, pm, pi, pv, steps, t, flops, jm, omk, omd, omt, j, ok, oc, ov, ot, co, cm, civ)


def _spacc(n: _Node) -> _Res:
    red = _red_code(n)
    inner, outer, v = n.only("crd_inner", "crd_outer", "val")
    _ints(inner, outer)
    (err, po, pi, pv, steps, t, flops, j, ok, oc, ov, ot, co, civ) = _k_spacc(
        outer.kind, outer.data, outer.sent, outer.lat, inner.kind, inner.data, inner.sent, inner.lat,
        v.kind, v.data, v.sent, v.lat, red, _NAN, n.ii)
    _check(err, (po, len(outer)), (pi, len(inner)), (pv, len(v)))
    kind, time, data, table = ok[:j], ot[:j], ov[:j], None
    if n.tile is not None:
        data, table = fast_tiles.spacc(n.tile, n.params.get("kind", "sum"), inner, v, kind, data)
        flops *= n.tile.in_elements
    return _Res({"crd": n.out(kind, oc[:j], time), "val": n.out(kind, data, time, table)}, int(steps), int(t),
                _counters(flops=flops), {"crd_inner": civ, "crd_outer": co, "val": civ})


def _spacc2(n: _Node) -> _Res:
    red = _red_code(n)
    inner, mid, outer, v = n.only("crd_inner", "crd_mid", "crd_outer", "val")
    _ints(inner, mid, outer)
    (err, po, pm, pi, pv, steps, t, flops, jm, omk, omd, omt, j, ok, oc, ov, ot, co, cm, civ) = _k_spacc2(
        outer.kind, outer.data, outer.sent, outer.lat, mid.kind, mid.data, mid.sent, mid.lat,
        inner.kind, inner.data, inner.sent, inner.lat, v.kind, v.data, v.sent, v.lat, red, _NAN, n.ii)
    _check(err, (po, len(outer)), (pm, len(mid)), (pi, len(inner)), (pv, len(v)))
    kind, time, data, table = ok[:j], ot[:j], ov[:j], None
    if n.tile is not None:
        data, table = fast_tiles.spacc2(n.tile, n.params.get("kind", "sum"), mid, inner, v, kind, data)
        flops *= n.tile.in_elements
    return _Res({"crd_mid": n.out(omk[:jm], omd[:jm], omt[:jm]), "crd": n.out(kind, oc[:j], time),
                 "val": n.out(kind, data, time, table)}, int(steps), int(t), _counters(flops=flops),
                {"crd_inner": civ, "crd_mid": cm, "crd_outer": co, "val": civ})
