"""Fast-engine kernel and driver of reduce (a value per innermost fiber), and the reductions'
arithmetic that the sparse accumulators share.

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> format_tokens(apply("reduce", {"val": "1 2 S0 S0 4 S0 S1 D"}, {"kind": "max"}).outs["val"])
    '2 -inf 4 S0 D'
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import fast_tiles
from .fast_core import _INF, _NAN, _check, _counters, _NeedOracle, _Node, _Res
from .fast_stream import DONE, EMPTY, STOP, VAL

REDUCE_CODES = {"sum": 0, "max": 1, "min": 2}


@njit(cache=True)
def _combine(red, a, b, nan):
    if red == 0:
        return a + b
    if a != a or b != b:
        return nan
    if red == 1:
        return a if a >= b else b
    return a if a <= b else b


@njit(cache=True)
def _identity(red):
    if red == 0:
        return 0.0
    if red == 1:
        return -_INF
    return _INF


@njit(cache=True)
def _k_reduce(kind, data, xs, xl, red, nanv, ii):
    nan = nanv[0]
    n = kind.shape[0]
    ok = np.empty(n, dtype=np.int8)
    od = np.empty(n, dtype=np.float64)
    ot = np.empty(n, dtype=np.int64)
    cons = np.empty(n, dtype=np.int64)
    ident = _identity(red)
    acc = ident
    open_fiber = False
    t = -ii
    i = 0
    j = 0
    flops = 0
    err = 0
    while True:
        if i >= n:
            err = 1
            break
        k = kind[i]
        t = max(t + ii, max(xs[i] + xl, 0))
        if k == VAL or k == EMPTY:
            x = float(data[i]) if k == VAL else 0.0
            acc = _combine(red, acc, x, nan)
            open_fiber = True
            flops += 1
        elif k == STOP and data[i] == 0:
            ok[j] = VAL
            od[j] = acc
            ot[j] = t
            j += 1
            acc = ident
            open_fiber = False
        elif k == STOP or k == DONE:
            if open_fiber:
                err = 2
                break
            ok[j] = k
            od[j] = data[i] - 1 if k == STOP else 0.0
            ot[j] = t
            j += 1
        else:
            err = 3
            break
        cons[i] = t
        i += 1
        if k == DONE:
            break
    return err, i, t, flops, j, ok, od, ot, cons


def _red_code(n: _Node) -> int:
    kind = n.params.get("kind", "sum")
    if not isinstance(kind, str) or kind not in REDUCE_CODES:
        raise _NeedOracle(False)
    return REDUCE_CODES[kind]


def _reduce(n: _Node) -> _Res:
    red = _red_code(n)
    (v,) = n.only("val")
    err, i, t, flops, j, ok, od, ot, cons = _k_reduce(v.kind, v.data, v.sent, v.lat, red, _NAN, n.ii)
    _check(err, (i, len(v)))
    kind, data, table = ok[:j], od[:j], None
    if n.tile is not None:
        data, table = fast_tiles.reduce(n.tile, n.params.get("kind", "sum"), v, kind, data)
        flops *= n.tile.in_elements
    return _Res({"val": n.out(kind, data, ot[:j], table)}, i, int(t), _counters(flops=flops), {"val": cons})
