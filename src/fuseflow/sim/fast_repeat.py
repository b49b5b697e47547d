"""Fast-engine kernels and drivers of repetition: repsig (a repeat signal per coordinate) and
repeat (an input element per signal).

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> format_tokens(apply("repeat", {"in": "5 6 S0 D", "sig": "R R S0 R S0 S1 D"}).outs["out"])
    '5 5 S0 6 S0 S1 D'
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .fast_core import _check, _counters, _Node, _Res, _stop_levels
from .fast_stream import DONE, EMPTY, REPEAT, STOP, VAL, _is_elem


@njit(cache=True)
def _k_repsig(kind, xs, xl, ii):
    n = kind.shape[0]
    ok = np.empty(n, dtype=np.int8)
    cons = np.empty(n, dtype=np.int64)
    t = -ii
    j = 0
    err = 0
    while True:
        if j >= n:
            err = 1
            break
        k = kind[j]
        t = max(t + ii, max(xs[j] + xl, 0))
        if k == VAL or k == EMPTY:
            ok[j] = REPEAT
        elif k == STOP or k == DONE:
            ok[j] = k
        else:
            err = 2
            break
        cons[j] = t
        j += 1
        if k == DONE:
            break
    return err, j, t, ok, cons


@njit(cache=True)
def _k_repeat(sk, sd, s_s, sl, ik, idata, i_s, il, ii):
    ns = sk.shape[0]
    ni = ik.shape[0]
    ok = np.empty(ns, dtype=np.int8)
    od = np.empty(ns, dtype=idata.dtype)
    cs = np.empty(ns, dtype=np.int64)
    ci = np.empty(ni, dtype=np.int64)
    t = -ii
    j = 0
    p = 0
    err = 0
    while True:
        if j >= ns or p >= ni:
            err = 1
            break
        s = sk[j]
        h = ik[p]
        t = max(t + ii, max(s_s[j] + sl, i_s[p] + il, 0))
        if s == REPEAT:
            if not _is_elem(h):
                err = 2
                break
            ok[j] = h
            od[j] = idata[p]
        elif s == STOP:
            lv = int(sd[j])
            if lv == 0:
                if not _is_elem(h):
                    err = 2
                    break
            elif not (h == STOP and idata[p] == lv - 1):
                err = 2
                break
            ci[p] = t
            p += 1
            ok[j] = STOP
            od[j] = lv
        elif s == DONE:
            if h != DONE:
                err = 2
                break
            ci[p] = t
            p += 1
            ok[j] = DONE
            od[j] = 0
        else:
            err = 3
            break
        cs[j] = t
        j += 1
        if s == DONE:
            break
    return err, j, p, t, ok, od, cs, ci


def _repsig(n: _Node) -> _Res:
    (a,) = n.only("crd")
    err, j, t, ok, cons = _k_repsig(a.kind, a.sent, a.lat, n.ii)
    _check(err, (j, len(a)))
    # R carries no data and stops keep their level: the input's data serves as is
    return _Res({"repsig": n.out(ok, _stop_levels(a), cons)}, j, int(t), _counters(), {"crd": cons})


def _repeat(n: _Node) -> _Res:
    inp, sig = n.only("in", "sig")
    err, j, p, t, ok, od, cs, ci = _k_repeat(sig.kind, sig.data, sig.sent, sig.lat, inp.kind, inp.data,
                                             inp.sent, inp.lat, n.ii)
    _check(err, (j, len(sig)), (p, len(inp)))
    return _Res({"out": n.out(ok, od, cs)}, j, int(t), _counters(), {"in": ci, "sig": cs})
