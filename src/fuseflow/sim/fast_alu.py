"""Fast-engine kernel and driver of the ALU: elementwise ops on aligned value streams, with the
oracle's IEEE float64 arithmetic.

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> format_tokens(apply("alu", {"a": "1.0 N S0 D", "b": "2.0 3.0 S0 D"}, {"op": "div"}).outs["val"])
    '0.5 0 S0 D'
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from . import fast_tiles
from .fast_core import _INF, _NAN, _check, _counters, _NeedOracle, _Node, _Res
from .fast_stream import DONE, EMPTY, REPEAT, STOP, VAL, _is_elem
from .oracle_alu import _alu_signature

ALU_CODES = {"neg": 0, "exp": 1, "sqrt": 2, "rsqrt": 3, "tanh": 4, "erf": 5, "abs": 6, "const": 7,
             "add": 8, "sub": 9, "mul": 10, "div": 11, "max": 12, "min": 13, "gt": 14, "ge": 15,
             "lt": 16, "le": 17, "eq": 18, "ne": 19, "select": 20, "coalesce": 21}


@njit(cache=True)
def _div(a, b, nan):
    if b == 0.0:
        if a != a or a == 0.0:
            return nan
        return math.copysign(_INF, a) * math.copysign(1.0, b)
    return a / b


@njit(cache=True)
def _sqrt(a, nan):
    if a >= 0:
        return math.sqrt(a)
    return nan


@njit(cache=True)
def _alu_op(op, x0, x1, x2, nan):
    if op == 0:
        return -x0
    if op == 1:
        return math.exp(x0)
    if op == 2:
        return _sqrt(x0, nan)
    if op == 3:
        return _div(1.0, _sqrt(x0, nan), nan)
    if op == 4:
        return math.tanh(x0)
    if op == 5:
        return math.erf(x0)
    if op == 6:
        return abs(x0)
    if op == 8:
        return x0 + x1
    if op == 9:
        return x0 - x1
    if op == 10:
        return x0 * x1
    if op == 11:
        return _div(x0, x1, nan)
    if op == 12:
        if x0 != x0 or x1 != x1:
            return nan
        return x0 if x0 >= x1 else x1
    if op == 13:
        if x0 != x0 or x1 != x1:
            return nan
        return x0 if x0 <= x1 else x1
    if op == 14:
        return 1.0 if x0 > x1 else 0.0
    if op == 15:
        return 1.0 if x0 >= x1 else 0.0
    if op == 16:
        return 1.0 if x0 < x1 else 0.0
    if op == 17:
        return 1.0 if x0 <= x1 else 0.0
    if op == 18:
        return 1.0 if x0 == x1 else 0.0
    if op == 19:
        return 1.0 if x0 != x1 else 0.0
    # select
    return x1 if x0 != 0 else x2


@njit(cache=True)
def _k_alu(nin, ak, ad, a_s, al, bk, bd, b_s, bl, ck_, cd, c_s, cl, op, has_scalar, scalar, spos, nanv, ii):
    nan = nanv[0]
    na = ak.shape[0]
    nb = bk.shape[0] if nin >= 2 else na
    nc = ck_.shape[0] if nin >= 3 else na
    n = min(na, nb, nc)
    ok = np.empty(n, dtype=np.int8)
    od = np.empty(n, dtype=np.float64)
    cons = np.empty(n, dtype=np.int64)
    t = -ii
    j = 0
    flops = 0
    err = 0
    while True:
        if j >= na or j >= nb or j >= nc:
            err = 1
            break
        rt = max(a_s[j] + al, 0)
        a = ak[j]
        b = VAL
        c = VAL
        if nin >= 2:
            b = bk[j]
            rt = max(rt, b_s[j] + bl)
        if nin >= 3:
            c = ck_[j]
            rt = max(rt, c_s[j] + cl)
        t = max(t + ii, rt)
        if op != 21 and _is_elem(a) and _is_elem(b) and _is_elem(c):
            if op == 7:
                res = scalar
            else:
                x0 = float(ad[j]) if a == VAL else 0.0
                x1 = 0.0
                x2 = 0.0
                if nin >= 2:
                    x1 = float(bd[j]) if b == VAL else 0.0
                if nin >= 3:
                    x2 = float(cd[j]) if c == VAL else 0.0
                if has_scalar:
                    if spos == 0:
                        x2 = x1
                        x1 = x0
                        x0 = scalar
                    elif spos == 1:
                        x2 = x1
                        x1 = scalar
                    else:
                        x2 = scalar
                res = _alu_op(op, x0, x1, x2, nan)
            flops += 1
            ok[j] = VAL
            od[j] = res
        elif op == 21 and _is_elem(a):  # coalesce: N -> the scalar, values pass (no flop)
            ok[j] = VAL
            od[j] = scalar if a == EMPTY else float(ad[j])
        else:
            if a == REPEAT:
                err = 2
                break
            lv = ad[j]
            if nin >= 2 and not (b == a and (a != STOP or bd[j] == lv) and a != VAL):
                err = 3
                break
            if nin >= 3 and not (c == a and (a != STOP or cd[j] == lv) and a != VAL):
                err = 3
                break
            ok[j] = a
            od[j] = lv if a == STOP else 0.0
        cons[j] = t
        j += 1
        if a == DONE:
            break
    return err, j, t, flops, ok, od, cons


def _alu(n: _Node) -> _Res:
    try:
        op, ports, _fn, scalar, pos = _alu_signature(
            f"n{n.id} alu", n.params, [p for p in "abc" if p in n.ins])
    except Exception:
        raise _NeedOracle(False) from None
    if op not in ALU_CODES:
        raise _NeedOracle(False)
    ins = n.only(*ports)
    nin = len(ins)
    if not 1 <= nin <= 3:
        raise _NeedOracle(False)
    a = ins[0]
    b = ins[1] if nin >= 2 else a
    c = ins[2] if nin >= 3 else a
    err, j, t, flops, ok, od, cons = _k_alu(
        nin, a.kind, a.data, a.sent, a.lat, b.kind, b.data, b.sent, b.lat, c.kind, c.data, c.sent, c.lat,
        ALU_CODES[op], scalar is not None, 0.0 if scalar is None else scalar,
        int(pos) if scalar is not None else 0, _NAN, n.ii)
    _check(err, *[(j, len(x)) for x in ins])
    kind, data, table = ok[:j], od[:j], None
    if n.tile is not None:
        data, table = fast_tiles.alu(n.tile, op, ins, kind, data, scalar, pos)
        flops *= n.tile.flops_per_token
    return _Res({"val": n.out(kind, data, cons, table)}, j, int(t), _counters(flops=flops),
                {p: cons for p in ports})
