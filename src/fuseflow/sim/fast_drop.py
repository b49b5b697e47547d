"""Fast-engine kernel and driver of crd_drop: outer coordinates whose inner fiber is empty go.

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> run = apply("crd_drop", {"outer": "0 1 S0 D", "inner": "3 S0 S0 S1 D"})
    >>> format_tokens(run.outs["outer"]), format_tokens(run.outs["inner"])
    ('0 S0 D', '3 S0 S1 D')
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .fast_core import _check, _counters, _ints, _Node, _Res
from .fast_stream import DONE, STOP, VAL


@njit(cache=True)
def _k_crd_drop(ko, do, o_s, ol, ki, di, i_s, il, ii):
    no = ko.shape[0]
    ni = ki.shape[0]
    ook = np.empty(no, dtype=np.int8)
    ood = np.empty(no, dtype=np.int64)
    oot = np.empty(no, dtype=np.int64)
    oik = np.empty(ni, dtype=np.int8)
    oid = np.empty(ni, dtype=np.int64)
    oit = np.empty(ni, dtype=np.int64)
    co = np.empty(no, dtype=np.int64)
    ci = np.empty(ni, dtype=np.int64)
    started = False
    po = 0
    pi = 0
    jo = 0
    ji = 0
    t = -ii
    steps = 0
    err = 0
    while True:
        if pi >= ni or po >= no:
            err = 1
            break
        ik = ki[pi]
        o = ko[po]
        t = max(t + ii, max(i_s[pi] + il, o_s[po] + ol, 0))
        if ik == VAL:
            if o != VAL:
                err = 2
                break
            if not started:
                ook[jo] = VAL
                ood[jo] = do[po]
                oot[jo] = t
                jo += 1
                started = True
            ci[pi] = t
            oik[ji] = VAL
            oid[ji] = di[pi]
            oit[ji] = t
            ji += 1
            pi += 1
        elif ik == STOP and di[pi] == 0:
            if o != VAL:
                err = 2
                break
            co[po] = t
            ci[pi] = t
            po += 1
            if started:
                oik[ji] = STOP
                oid[ji] = 0
                oit[ji] = t
                ji += 1
            pi += 1
            started = False
        elif ik == STOP or ik == DONE:
            if not (o == ik and (ik == DONE or do[po] == di[pi] - 1)):
                err = 2
                break
            co[po] = t
            ci[pi] = t
            ook[jo] = o
            ood[jo] = do[po]
            oot[jo] = t
            jo += 1
            oik[ji] = ik
            oid[ji] = di[pi]
            oit[ji] = t
            ji += 1
            po += 1
            pi += 1
            if ik == DONE:
                steps += 1
                break
        else:
            err = 3
            break
        steps += 1
    return err, po, pi, steps, t, jo, ook, ood, oot, ji, oik, oid, oit, co, ci


def _crd_drop(n: _Node) -> _Res:
    outer, inner = n.only("outer", "inner")
    _ints(outer, inner)
    (err, po, pi, steps, t, jo, ook, ood, oot, ji, oik, oid, oit, co, ci) = _k_crd_drop(
        outer.kind, outer.data, outer.sent, outer.lat, inner.kind, inner.data, inner.sent, inner.lat, n.ii)
    _check(err, (po, len(outer)), (pi, len(inner)))
    return _Res({"outer": n.out(ook[:jo], ood[:jo], oot[:jo]), "inner": n.out(oik[:ji], oid[:ji], oit[:ji])},
                int(steps), int(t), _counters(), {"outer": co, "inner": ci})
