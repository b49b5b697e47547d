"""Fast-engine kernels and driver of the joiners: intersect and union of (crd, payload) inputs.

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> run = apply("intersect", {"crd0": "0 2 S0 D", "pay0": "10 12 S0 D",
    ...                           "crd1": "2 3 S0 D", "pay1": "7 8 S0 D"}, arity=2)
    >>> [format_tokens(run.outs[p]) for p in ("crd", "pay0", "pay1")]
    ['2 S0 D', '12 S0 D', '7 S0 D']
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .fast_core import _check, _counters, _ints, _NeedOracle, _Node, _Res, _stop_levels
from .fast_stream import DONE, EMPTY, STOP, VAL


@njit(cache=True)
def _pay_ok(h, hlevel, p, plevel):
    """A payload head aligned with its crd head (element with coordinate, same stop, D with D)."""
    if h == VAL:
        return p == VAL or p == EMPTY
    if h == STOP:
        return p == STOP and plevel == hlevel
    return p == DONE


@njit(cache=True)
def _k_joiner2(is_union, ak, ad, a_s, al, pak, pad, pas, pal, bk, bd, b_s, bl, pbk, pbd, pbs, pbl, ii):
    """Intersect/union of two (crd, payload) inputs: the oracle's `_joiner` with k = 2."""
    na = ak.shape[0]
    nb = bk.shape[0]
    npa = pak.shape[0]
    npb = pbk.shape[0]
    cap = na + nb + 1
    ok = np.empty(cap, dtype=np.int8)
    od = np.empty(cap, dtype=np.int64)
    ot = np.empty(cap, dtype=np.int64)
    oak = np.empty(cap, dtype=np.int8)
    oad = np.empty(cap, dtype=pad.dtype)
    obk = np.empty(cap, dtype=np.int8)
    obd = np.empty(cap, dtype=pbd.dtype)
    ca = np.empty(na, dtype=np.int64)
    cb = np.empty(nb, dtype=np.int64)
    pa = 0
    pb = 0
    t = -ii
    j = 0
    steps = 0
    err = 0
    while True:
        if pa >= na or pb >= nb:
            err = 1
            break
        ha = ak[pa]
        hb = bk[pb]
        if not (ha == VAL or ha == STOP or ha == DONE) or not (hb == VAL or hb == STOP or hb == DONE):
            err = 3
            break
        rt = max(a_s[pa] + al, b_s[pb] + bl, 0)
        xa = ad[pa]
        xb = bd[pb]
        adv_a = False
        adv_b = False
        emit = 0  # 0 nothing, 1 the control token of both heads, 2 coordinate x
        x = 0
        if ha == DONE or hb == DONE:
            if ha != hb:
                err = 2
                break
            adv_a = True
            adv_b = True
            emit = 1
        elif ha == STOP and hb == STOP:
            if xa != xb:
                err = 2
                break
            adv_a = True
            adv_b = True
            emit = 1
        elif ha == STOP or hb == STOP:  # one input waits at a stop
            if ha == VAL:
                adv_a = True
                x = xa
            else:
                adv_b = True
                x = xb
            if is_union:
                emit = 2
        elif xa == xb:
            adv_a = True
            adv_b = True
            x = xa
            emit = 2
        elif is_union:
            x = xa if xa < xb else xb
            adv_a = xa == x
            adv_b = xb == x
            emit = 2
        elif xa < xb:
            adv_a = True
        else:
            adv_b = True
        if adv_a:
            if pa >= npa:
                err = 1
                break
            if not _pay_ok(ha, xa, pak[pa], pad[pa]):
                err = 4
                break
            rt = max(rt, pas[pa] + pal)
        if adv_b:
            if pb >= npb:
                err = 1
                break
            if not _pay_ok(hb, xb, pbk[pb], pbd[pb]):
                err = 4
                break
            rt = max(rt, pbs[pb] + pbl)
        t = max(t + ii, rt)
        steps += 1
        if emit != 0:
            if emit == 1:
                ok[j] = ha
                od[j] = xa
            else:
                ok[j] = VAL
                od[j] = x
            ot[j] = t
            if adv_a:
                oak[j] = pak[pa]
                oad[j] = pad[pa]
            else:
                oak[j] = EMPTY
                oad[j] = 0
            if adv_b:
                obk[j] = pbk[pb]
                obd[j] = pbd[pb]
            else:
                obk[j] = EMPTY
                obd[j] = 0
            j += 1
        if adv_a:
            ca[pa] = t
            pa += 1
        if adv_b:
            cb[pb] = t
            pb += 1
        if ha == DONE:
            break
    return err, pa, pb, steps, t, j, ok, od, ot, oak, oad, obk, obd, ca, cb


@njit(cache=True)
def _k_joiner(is_union, k, ck, cd, cs, cl, coff, pk, pl, ps, pll, poff, ii):
    """Intersect/union over k (crd, payload) inputs concatenated in ck/cd/cs and pk/pl/ps (pl:
    payload stop levels; cl, pll: per-input latencies). Output payload i, token j = payload token
    src[i, j] or `N` (src -1)."""
    cap = coff[k] - coff[0] + 1
    ok = np.empty(cap, dtype=np.int8)
    od = np.empty(cap, dtype=np.int64)
    ot = np.empty(cap, dtype=np.int64)
    src = np.empty((k, cap), dtype=np.int64)
    ccons = np.empty(coff[k], dtype=np.int64)
    cpos = coff[:k].copy()
    ppos = poff[:k].copy()
    adv = np.zeros(k, dtype=np.bool_)
    t = -ii
    j = 0
    steps = 0
    err = 0
    while True:
        rt = 0
        n_done = 0
        n_stop = 0
        stop_lv = -1
        n_val = 0
        vmin = 0
        vall_eq = True
        v0 = 0
        for i in range(k):
            q = cpos[i]
            if q >= coff[i + 1]:
                err = 1
                break
            h = ck[q]
            if cs[q] + cl[i] > rt:
                rt = cs[q] + cl[i]
            if h == DONE:
                n_done += 1
            elif h == STOP:
                if n_stop == 0:
                    stop_lv = cd[q]
                elif cd[q] != stop_lv:
                    err = 2
                n_stop += 1
            elif h == VAL:
                x = cd[q]
                if n_val == 0:
                    vmin = x
                    v0 = x
                else:
                    if x < vmin:
                        vmin = x
                    if x != v0:
                        vall_eq = False
                n_val += 1
            else:
                err = 3
                break
        if err != 0:
            break
        if n_done > 0 and n_done < k:
            err = 2
            break
        emit = 0  # 0 nothing, 1 control token (all), 2 coordinate
        for i in range(k):
            adv[i] = False
        if n_done == k or n_val == 0:
            for i in range(k):
                adv[i] = True
            emit = 1
        elif is_union:
            for i in range(k):
                q = cpos[i]
                if ck[q] == VAL and cd[q] == vmin:
                    adv[i] = True
            emit = 2
        elif n_stop == 0 and vall_eq:
            for i in range(k):
                adv[i] = True
            emit = 2
        else:
            for i in range(k):
                q = cpos[i]
                if ck[q] == VAL and (n_stop > 0 or cd[q] == vmin):
                    adv[i] = True
        for i in range(k):
            if not adv[i]:
                continue
            q = ppos[i]
            if q >= poff[i + 1]:
                err = 1
                break
            if not _pay_ok(ck[cpos[i]], cd[cpos[i]], pk[q], pl[q]):
                err = 4
                break
            if ps[q] + pll[i] > rt:
                rt = ps[q] + pll[i]
        if err != 0:
            break
        t = max(t + ii, rt)
        steps += 1
        if emit == 1:
            q = cpos[0]
            ok[j] = ck[q]
            od[j] = cd[q]
        elif emit == 2:
            ok[j] = VAL
            od[j] = v0 if not is_union else vmin
        if emit != 0:
            ot[j] = t
            for i in range(k):
                src[i, j] = ppos[i] - poff[i] if adv[i] else -1
            j += 1
        for i in range(k):
            if adv[i]:
                ccons[cpos[i]] = t
                cpos[i] += 1
                ppos[i] += 1
        if n_done == k:
            break
    return err, steps, t, j, ok, od, ot, src, cpos, ppos, ccons


@njit(cache=True)
def _gather(src, pk, pd):
    """Payload tokens pk/pd[src], `N` where src is -1."""
    n = src.shape[0]
    ok = np.empty(n, dtype=np.int8)
    od = np.empty(n, dtype=pd.dtype)
    for j in range(n):
        q = src[j]
        if q >= 0:
            ok[j] = pk[q]
            od[j] = pd[q]
        else:
            ok[j] = EMPTY
            od[j] = 0
    return ok, od


def _joiner(n: _Node, is_union: bool) -> _Res:
    k = n.arity
    if k < 1:
        raise _NeedOracle(False)
    crds = [n.inp(f"crd{i}") for i in range(k)]
    pays = [n.inp(f"pay{i}") for i in range(k)]
    if len(n.ins) != 2 * k:
        raise _NeedOracle(False)
    _ints(*crds)
    if k == 2:
        (a, b), (pa, pb) = crds, pays
        err, ia, ib, steps, t, j, ok, od, ot, oak, oad, obk, obd, ca, cb = _k_joiner2(
            is_union, a.kind, a.data, a.sent, a.lat, pa.kind, pa.data, pa.sent, pa.lat,
            b.kind, b.data, b.sent, b.lat, pb.kind, pb.data, pb.sent, pb.lat, n.ii)
        _check(err, (ia, len(a)), (ia, len(pa)), (ib, len(b)), (ib, len(pb)))
        time = ot[:j]
        outs = {"crd": n.out(ok[:j], od[:j], time), "pay0": n.out(oak[:j], oad[:j], time),
                "pay1": n.out(obk[:j], obd[:j], time)}
        return _Res(outs, int(steps), int(t), _counters(), {"crd0": ca, "pay0": ca, "crd1": cb, "pay1": cb})
    ck = np.concatenate([a.kind for a in crds])
    cd = np.concatenate([a.data for a in crds])
    cs = np.concatenate([a.sent for a in crds])
    coff = np.zeros(k + 1, dtype=np.int64)
    coff[1:] = np.cumsum([len(a) for a in crds])
    pk = np.concatenate([a.kind for a in pays])
    pl = np.concatenate([_stop_levels(a) for a in pays])
    ps = np.concatenate([a.sent for a in pays])
    poff = np.zeros(k + 1, dtype=np.int64)
    poff[1:] = np.cumsum([len(a) for a in pays])
    cl = np.array([a.lat for a in crds], dtype=np.int64)
    pll = np.array([a.lat for a in pays], dtype=np.int64)
    err, steps, t, j, ok, od, ot, src, cpos, ppos, ccons = _k_joiner(
        is_union, k, ck, cd, cs, cl, coff, pk, pl, ps, pll, poff, n.ii)
    _check(err, *[(cpos[i], coff[i + 1]) for i in range(k)], *[(ppos[i], poff[i + 1]) for i in range(k)])
    time = ot[:j]
    outs = {"crd": n.out(ok[:j], od[:j], time)}
    cons = {}
    for i, pay in enumerate(pays):
        kind, data = _gather(src[i, :j], pay.kind, pay.data)
        outs[f"pay{i}"] = n.out(kind, data, time)
        cons[f"crd{i}"] = cons[f"pay{i}"] = ccons[coff[i]:coff[i + 1]]
    return _Res(outs, int(steps), int(t), _counters(), cons)
