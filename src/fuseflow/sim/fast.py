"""The fast engine: the oracle's semantics and cycle model on token *arrays*, with numba kernels.

`run_graph` returns exactly what `oracle.run_graph` returns (written tensors, cycles, node steps,
stream lengths, counters, channel occupancy and, with `keep_streams`, every token and visible
time); the oracle's module docstring is the specification and every kernel below mirrors the
oracle's step loop of its primitive, read for read.

A stream is an `Arr` of three arrays of equal length: `kind` (int8: `VAL`, `STOP`, `EMPTY`,
`DONE`, `REPEAT`), `data` (int64 for coordinates, references and repeat signals, float64 for
values; the level of a `Stop`, 0 otherwise) and `time` (int64 visible times). Nodes run in id
order (the graph is a DAG, channels are unbounded); each kernel walks its inputs once and
records the step time at which it consumes every input token, which gives the channel
occupancy. Arrays are never modified once built, so outputs with identical tokens or times
share them.

Malformed inputs: a kernel that meets anything the oracle would reject stops with an error code
and the node is re-run by the oracle, which raises its exact exception. Inputs of an unexpected
type (a float stream where coordinates are expected, odd storage) are also handed to the oracle
for that node.

    >>> from fuseflow.sim import oracle
    >>> run = apply("reduce", {"val": "1 2 S0 S0 4 S0 S1 D"})
    >>> oracle.format_tokens(run.outs["val"]), run.steps, run.last_step
    ('3 0 4 S0 D', 8, 7)
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..sam.graph import GraphError, SamGraph, Stream
from ..sam.primitives import PRIMITIVES
from . import oracle
from .hw import HwConfig
from .oracle import GraphRun, NodeRun
from .storage import Level, StoredTensor, WrittenTensor
from .tokens import Done, Empty, Repeat, Stop, Val, as_tokens

__all__ = ["run_graph", "apply", "Arr", "from_tokens", "to_tokens", "VAL", "STOP", "EMPTY", "DONE",
           "REPEAT"]

VAL, STOP, EMPTY, DONE, REPEAT = 0, 1, 2, 3, 4
_INF = math.inf

ALU_CODES = {"neg": 0, "exp": 1, "sqrt": 2, "rsqrt": 3, "tanh": 4, "erf": 5, "abs": 6, "const": 7,
             "add": 8, "sub": 9, "mul": 10, "div": 11, "max": 12, "min": 13, "gt": 14, "ge": 15,
             "lt": 16, "le": 17, "eq": 18, "ne": 19, "select": 20}
REDUCE_CODES = {"sum": 0, "max": 1, "min": 2}
assert set(ALU_CODES) == set(oracle.ALU_OPS) and set(REDUCE_CODES) == set(oracle.REDUCERS)

# The oracle's NaN constant, passed to kernels in an array: a NaN literal would let LLVM fold
# `x >= 0 ? sqrt(x) : NaN` into `sqrt(x)`, whose NaN has another sign bit.
_NAN = np.array([oracle.NAN], dtype=np.float64)


class Arr:
    """One stream: token kinds, payloads (Val data or Stop levels) and visible times."""

    __slots__ = ("kind", "data", "time")

    def __init__(self, kind, data, time):
        self.kind, self.data, self.time = kind, data, time

    def __len__(self) -> int:
        return self.kind.shape[0]

    @property
    def is_float(self) -> bool:
        return self.data.dtype == np.float64


# -- conversions ------------------------------------------------------------------------------------
def from_tokens(tokens, times=None, dtype=None) -> Arr:
    """An `Arr` of a token list (or text); float data if any `Val` holds a float (or `dtype`)."""
    toks = as_tokens(tokens)
    n = len(toks)
    kind = np.empty(n, dtype=np.int8)
    xs = [0] * n
    is_float = False
    for i, tok in enumerate(toks):
        if isinstance(tok, Val):
            kind[i] = VAL
            xs[i] = tok.x
            if isinstance(tok.x, float):
                is_float = True
        elif isinstance(tok, Stop):
            kind[i] = STOP
            xs[i] = tok.n
        elif tok is Empty:
            kind[i] = EMPTY
        elif tok is Done:
            kind[i] = DONE
        elif tok is Repeat:
            kind[i] = REPEAT
        else:
            raise TypeError(f"not a token: {tok!r}")
    if dtype is None:
        dtype = np.float64 if is_float else np.int64
    data = np.array(xs, dtype=dtype) if n else np.zeros(0, dtype=dtype)
    time = np.zeros(n, dtype=np.int64) if times is None else np.asarray(list(times), dtype=np.int64)
    if time.shape[0] != n:
        raise ValueError(f"{n} tokens, {time.shape[0]} times")
    return Arr(kind, data, time)


_SINGLE = {EMPTY: Empty, DONE: Done, REPEAT: Repeat}


def to_tokens(arr: Arr) -> list:
    """The oracle's tokens of a stream (ints for int data, floats for float data)."""
    out = []
    append = out.append
    for k, x in zip(arr.kind.tolist(), arr.data.tolist()):
        if k == VAL:
            append(Val(x))
        elif k == STOP:
            append(Stop(int(x)))
        else:
            append(_SINGLE[k])
    return out


# -- small numba helpers ---------------------------------------------------------------------------
@njit(cache=True)
def _is_elem(k):
    return k == VAL or k == EMPTY


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
def _occupancy(vis, lat, consumed):
    """oracle.channel_occupancy with sent = vis - lat."""
    best = 0
    j = 0
    n = consumed.shape[0]
    for k in range(vis.shape[0]):
        t = vis[k] - lat
        while j < n and consumed[j] <= t:
            j += 1
        if k + 1 - j > best:
            best = k + 1 - j
    return best


# -- kernels: each returns (err, ...); err != 0 means the oracle must be asked --------------------
@njit(cache=True)
def _k_scan(kind, data, tv, compressed, dim, seg, crd, ii, lat):
    n = kind.shape[0]
    nseg = seg.shape[0] - 1
    total = 0
    for i in range(n):  # output length (up to the first bad token)
        k = kind[i]
        if k == VAL:
            if compressed:
                r = data[i]
                if r < 0 or r >= nseg:
                    break
                m = seg[r + 1] - seg[r]
                total += (m if m > 0 else 0) + 1
            else:
                total += dim + 1
        elif k == EMPTY and not compressed:
            total += dim + 1
        else:
            total += 1
        if k == DONE:
            break
    ck = np.empty(total, dtype=np.int8)
    rk = np.empty(total, dtype=np.int8)
    cd = np.empty(total, dtype=np.int64)
    rd = np.empty(total, dtype=np.int64)
    ot = np.empty(total, dtype=np.int64)
    cons = np.empty(n, dtype=np.int64)
    t = -ii
    j = 0
    pos = 0
    reads = 0
    err = 0
    while True:
        if pos >= n:
            err = 1
            break
        k = kind[pos]
        rt = tv[pos]
        if rt < 0:
            rt = 0
        if k == VAL:
            r = data[pos]
            first = -1
            if compressed:
                if r < 0 or r >= nseg:
                    err = 2
                    break
                reads += 2
                for p in range(seg[r], seg[r + 1]):
                    reads += 1
                    t = max(t + ii, rt)
                    rt = 0
                    if first < 0:
                        first = t
                    ck[j] = VAL
                    rk[j] = VAL
                    cd[j] = crd[p]
                    rd[j] = p
                    ot[j] = t + lat
                    j += 1
            else:
                for c in range(dim):
                    t = max(t + ii, rt)
                    rt = 0
                    if first < 0:
                        first = t
                    ck[j] = VAL
                    rk[j] = VAL
                    cd[j] = c
                    rd[j] = r * dim + c
                    ot[j] = t + lat
                    j += 1
            t = max(t + ii, rt)
            if first < 0:
                first = t
            ck[j] = STOP
            rk[j] = STOP
            cd[j] = 0
            rd[j] = 0
            ot[j] = t + lat
            j += 1
            cons[pos] = first
        elif k == EMPTY:
            first = -1
            if not compressed:
                for c in range(dim):
                    t = max(t + ii, rt)
                    rt = 0
                    if first < 0:
                        first = t
                    ck[j] = VAL
                    rk[j] = EMPTY
                    cd[j] = c
                    rd[j] = 0
                    ot[j] = t + lat
                    j += 1
            t = max(t + ii, rt)
            if first < 0:
                first = t
            ck[j] = STOP
            rk[j] = STOP
            cd[j] = 0
            rd[j] = 0
            ot[j] = t + lat
            j += 1
            cons[pos] = first
        elif k == STOP or k == DONE:
            t = max(t + ii, rt)
            ck[j] = k
            rk[j] = k
            lv = data[pos] + 1 if k == STOP else 0
            cd[j] = lv
            rd[j] = lv
            ot[j] = t + lat
            j += 1
            cons[pos] = t
        else:
            err = 3
            break
        pos += 1
        if k == DONE:
            break
    return err, pos, j, t, reads, ck, rk, cd, rd, ot, cons


@njit(cache=True)
def _k_locate(ak, ad, at, bk, bd, bt, dim, ii, lat):
    na = ak.shape[0]
    nb = bk.shape[0]
    n = min(na, nb)
    ok = np.empty(n, dtype=np.int8)
    od = np.empty(n, dtype=np.int64)
    ot = np.empty(n, dtype=np.int64)
    cons = np.empty(n, dtype=np.int64)
    t = -ii
    j = 0
    err = 0
    while True:
        if j >= na or j >= nb:
            err = 1
            break
        a = ak[j]
        b = bk[j]
        t = max(t + ii, max(at[j], bt[j], 0))
        if a == VAL and b == VAL:
            x = ad[j]
            if x < 0 or x >= dim:
                err = 2
                break
            ok[j] = VAL
            od[j] = bd[j] * dim + x
        elif _is_elem(a) and _is_elem(b):
            ok[j] = EMPTY
            od[j] = 0
        elif a == STOP and b == STOP and ad[j] == bd[j]:
            ok[j] = STOP
            od[j] = ad[j]
        elif a == DONE and b == DONE:
            ok[j] = DONE
            od[j] = 0
        else:
            err = 3
            break
        ot[j] = t + lat
        cons[j] = t
        j += 1
        if a == DONE:
            break
    return err, j, t, ok, od, ot, cons


@njit(cache=True)
def _k_repsig(kind, data, tv, ii, lat):
    n = kind.shape[0]
    ok = np.empty(n, dtype=np.int8)
    od = np.empty(n, dtype=np.int64)
    ot = np.empty(n, dtype=np.int64)
    cons = np.empty(n, dtype=np.int64)
    t = -ii
    j = 0
    err = 0
    while True:
        if j >= n:
            err = 1
            break
        k = kind[j]
        t = max(t + ii, max(tv[j], 0))
        if k == VAL or k == EMPTY:
            ok[j] = REPEAT
            od[j] = 0
        elif k == STOP or k == DONE:
            ok[j] = k
            od[j] = int(data[j]) if k == STOP else 0
        else:
            err = 2
            break
        ot[j] = t + lat
        cons[j] = t
        j += 1
        if k == DONE:
            break
    return err, j, t, ok, od, ot, cons


@njit(cache=True)
def _k_repeat(sk, sd, st, ik, idata, it, ii, lat):
    ns = sk.shape[0]
    ni = ik.shape[0]
    ok = np.empty(ns, dtype=np.int8)
    od = np.empty(ns, dtype=idata.dtype)
    ot = np.empty(ns, dtype=np.int64)
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
        t = max(t + ii, max(st[j], it[p], 0))
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
        ot[j] = t + lat
        cs[j] = t
        j += 1
        if s == DONE:
            break
    return err, j, p, t, ok, od, ot, cs, ci


@njit(cache=True)
def _k_joiner(is_union, k, ck, cd, ct, coff, pk, pl, pt, poff, ii, lat):
    """Intersect/union over k (crd, pay) inputs concatenated in ck/cd/ct and pk/pl/pt (pl: the
    stop level of payload stops). Output payload i, token j = payload token src[i, j] or `N`."""
    cap = coff[k] - coff[0] + 1
    ok = np.empty(cap, dtype=np.int8)
    od = np.empty(cap, dtype=np.int64)
    ot = np.empty(cap, dtype=np.int64)
    src = np.empty((k, cap), dtype=np.int64)
    ccons = np.empty(coff[k], dtype=np.int64)
    pcons = np.empty(poff[k], dtype=np.int64)
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
            if ct[q] > rt:
                rt = ct[q]
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
        # which inputs advance (pop crd and payload), and the emission
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
        # payload checks and reads
        for i in range(k):
            if not adv[i]:
                continue
            q = ppos[i]
            if q >= poff[i + 1]:
                err = 1
                break
            h = ck[cpos[i]]
            p = pk[q]
            if h == VAL:
                if not (p == VAL or p == EMPTY):
                    err = 4
                    break
            elif h == STOP:
                if not (p == STOP and pl[q] == cd[cpos[i]]):
                    err = 4
                    break
            elif p != DONE:
                err = 4
                break
            if pt[q] > rt:
                rt = pt[q]
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
            ot[j] = t + lat
            for i in range(k):
                src[i, j] = ppos[i] - poff[i] if adv[i] else -1
            j += 1
        for i in range(k):
            if adv[i]:
                ccons[cpos[i]] = t
                pcons[ppos[i]] = t
                cpos[i] += 1
                ppos[i] += 1
        if n_done == k:
            break
    return err, steps, t, j, ok, od, ot, src, cpos, ppos, ccons, pcons


@njit(cache=True)
def _k_array(kind, data, tv, vals, ii, lat):
    n = kind.shape[0]
    nv = vals.shape[0]
    ok = np.empty(n, dtype=np.int8)
    od = np.empty(n, dtype=np.float64)
    ot = np.empty(n, dtype=np.int64)
    cons = np.empty(n, dtype=np.int64)
    t = -ii
    j = 0
    reads = 0
    err = 0
    while True:
        if j >= n:
            err = 1
            break
        k = kind[j]
        t = max(t + ii, max(tv[j], 0))
        if k == VAL:
            r = data[j]
            if r < 0 or r >= nv:
                err = 2
                break
            reads += 1
            ok[j] = VAL
            od[j] = vals[r]
        elif k == EMPTY:
            ok[j] = VAL
            od[j] = 0.0
        elif k == STOP or k == DONE:
            ok[j] = k
            od[j] = data[j]
        else:
            err = 3
            break
        ot[j] = t + lat
        cons[j] = t
        j += 1
        if k == DONE:
            break
    return err, j, t, reads, ok, od, ot, cons


@njit(cache=True)
def _k_alu(nin, ak, ad, at, bk, bd, bt, ck_, cd, ct, op, has_scalar, scalar, spos, nanv, ii, lat):
    nan = nanv[0]
    na = ak.shape[0]
    nb = bk.shape[0] if nin >= 2 else na
    nc = ck_.shape[0] if nin >= 3 else na
    n = min(na, nb, nc)
    ok = np.empty(n, dtype=np.int8)
    od = np.empty(n, dtype=np.float64)
    ot = np.empty(n, dtype=np.int64)
    cons = np.empty(n, dtype=np.int64)
    t = -ii
    j = 0
    flops = 0
    err = 0
    while True:
        if j >= na or j >= nb or j >= nc:
            err = 1
            break
        rt = max(at[j], 0)
        a = ak[j]
        b = VAL
        c = VAL
        if nin >= 2:
            b = bk[j]
            rt = max(rt, bt[j])
        if nin >= 3:
            c = ck_[j]
            rt = max(rt, ct[j])
        t = max(t + ii, rt)
        if _is_elem(a) and _is_elem(b) and _is_elem(c):
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
        ot[j] = t + lat
        cons[j] = t
        j += 1
        if a == DONE:
            break
    return err, j, t, flops, ok, od, ot, cons


@njit(cache=True)
def _k_reduce(kind, data, tv, red, nanv, ii, lat):
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
        t = max(t + ii, max(tv[i], 0))
        if k == VAL or k == EMPTY:
            x = float(data[i]) if k == VAL else 0.0
            acc = _combine(red, acc, x, nan)
            open_fiber = True
            flops += 1
        elif k == STOP and data[i] == 0:
            ok[j] = VAL
            od[j] = acc
            ot[j] = t + lat
            j += 1
            acc = ident
            open_fiber = False
        elif k == STOP or k == DONE:
            if open_fiber:
                err = 2
                break
            ok[j] = k
            od[j] = data[i] - 1 if k == STOP else 0.0
            ot[j] = t + lat
            j += 1
        else:
            err = 3
            break
        cons[i] = t
        i += 1
        if k == DONE:
            break
    return err, i, t, flops, j, ok, od, ot, cons


@njit(cache=True)
def _drain1(ck, cx, m, red, nan, dk, dx):
    """Sorted (coordinate, combined value) entries of a spacc chunk, combined in stream order."""
    order = np.argsort(ck[:m], kind="mergesort")
    dn = 0
    i = 0
    while i < m:
        key = ck[order[i]]
        acc = _identity(red)
        while i < m and ck[order[i]] == key:
            acc = _combine(red, acc, cx[order[i]], nan)
            i += 1
        dk[dn] = key
        dx[dn] = acc
        dn += 1
    return dn


@njit(cache=True)
def _k_spacc(ko, do, to, ki, di, ti, kv, dv, tvv, red, nanv, ii, lat):
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
    ci = np.empty(ni, dtype=np.int64)
    cv = np.empty(nv, dtype=np.int64)
    ck = np.empty(ni, dtype=np.int64)
    cx = np.empty(ni, dtype=np.float64)
    m = 0
    dk = np.empty(ni, dtype=np.int64)
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
        rt = max(to[po], 0)
        if o == VAL:
            if pi >= ni:
                err = 1
                break
            ik = ki[pi]
            rt = max(rt, ti[pi])
            if ik == VAL:
                if pv >= nv:
                    err = 1
                    break
                vk = kv[pv]
                rt = max(rt, tvv[pv])
                if not _is_elem(vk):
                    err = 2
                    break
                ck[m] = di[pi]
                cx[m] = float(dv[pv]) if vk == VAL else 0.0
                m += 1
                flops += 1
                t = max(t + ii, rt)
                ci[pi] = t
                cv[pv] = t
                pi += 1
                pv += 1
            elif ik == STOP and di[pi] == 0:
                if pv >= nv:
                    err = 1
                    break
                rt = max(rt, tvv[pv])
                if not (kv[pv] == STOP and dv[pv] == 0):
                    err = 2
                    break
                t = max(t + ii, rt)
                ci[pi] = t
                cv[pv] = t
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
            if m > 0 and not (o == STOP and on == 0):
                err = 2
                break
            if pi >= ni or pv >= nv:
                err = 1
                break
            rt = max(rt, ti[pi])
            if not (ki[pi] == o and (o == DONE or di[pi] == on + 1)):
                err = 2
                break
            rt = max(rt, tvv[pv])
            if not (kv[pv] == o and (o == DONE or dv[pv] == on + 1)):
                err = 2
                break
            if o == STOP and on == 0 and not draining:
                dn = _drain1(ck, cx, m, red, nan, dk, dx)
                dpos = 0
                m = 0
                draining = True
            t = max(t + ii, rt)
            steps += 1
            if draining and dpos < dn:
                ok[j] = VAL
                oc[j] = dk[dpos]
                ov[j] = dx[dpos]
                ot[j] = t + lat
                j += 1
                dpos += 1
            else:
                draining = False
                co[po] = t
                ci[pi] = t
                cv[pv] = t
                po += 1
                pi += 1
                pv += 1
                ok[j] = o
                oc[j] = on if o == STOP else 0
                ov[j] = on if o == STOP else 0
                ot[j] = t + lat
                j += 1
                if o == DONE:
                    break
        else:
            err = 3
            break
    return err, po, pi, pv, steps, t, flops, j, ok, oc, ov, ot, co, ci, cv


@njit(cache=True)
def _k_spacc2(ko, do, to, km, dm, tm, ki, di, ti, kv, dv, tvv, red, nanv, ii, lat):
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
    ci = np.empty(ni, dtype=np.int64)
    cv = np.empty(nv, dtype=np.int64)
    ecap = ni + nm + 1
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
        rt = max(to[po], 0)
        if o == VAL:
            if pm >= nm:
                err = 1
                break
            mk = km[pm]
            rt = max(rt, tm[pm])
            if mk == VAL:
                if pi >= ni:
                    err = 1
                    break
                ik = ki[pi]
                rt = max(rt, ti[pi])
                if ik == VAL:
                    if pv >= nv:
                        err = 1
                        break
                    vk = kv[pv]
                    rt = max(rt, tvv[pv])
                    if not _is_elem(vk):
                        err = 2
                        break
                    e1[m] = dm[pm]
                    e2[m] = di[pi]
                    ex[m] = float(dv[pv]) if vk == VAL else 0.0
                    emark[m] = False
                    m += 1
                    flops += 1
                    t = max(t + ii, rt)
                    ci[pi] = t
                    cv[pv] = t
                    pi += 1
                    pv += 1
                elif ik == STOP and di[pi] == 0:
                    if pv >= nv:
                        err = 1
                        break
                    rt = max(rt, tvv[pv])
                    if not (kv[pv] == STOP and dv[pv] == 0):
                        err = 2
                        break
                    e1[m] = dm[pm]
                    e2[m] = 0
                    ex[m] = 0.0
                    emark[m] = True
                    m += 1
                    t = max(t + ii, rt)
                    ci[pi] = t
                    cv[pv] = t
                    cm[pm] = t
                    pi += 1
                    pv += 1
                    pm += 1
                else:
                    err = 2
                    break
            elif mk == STOP and dm[pm] == 0:
                if pi >= ni:
                    err = 1
                    break
                rt = max(rt, ti[pi])
                if not (ki[pi] == STOP and di[pi] == 1):
                    err = 2
                    break
                if pv >= nv:
                    err = 1
                    break
                rt = max(rt, tvv[pv])
                if not (kv[pv] == STOP and dv[pv] == 1):
                    err = 2
                    break
                t = max(t + ii, rt)
                ci[pi] = t
                cv[pv] = t
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
            rt = max(rt, tm[pm])
            if not (km[pm] == o and (o == DONE or dm[pm] == on + 1)):
                err = 2
                break
            if pi >= ni:
                err = 1
                break
            rt = max(rt, ti[pi])
            if not (ki[pi] == o and (o == DONE or di[pi] == on + 2)):
                err = 2
                break
            if pv >= nv:
                err = 1
                break
            rt = max(rt, tvv[pv])
            if not (kv[pv] == o and (o == DONE or dv[pv] == on + 2)):
                err = 2
                break
            if o == STOP and on == 0 and m > 0:
                order = np.argsort(e2[:m], kind="mergesort")
                order = order[np.argsort(e1[order], kind="mergesort")]
                drt = rt
                i = 0
                while i < m:
                    w1 = e1[order[i]]
                    t = max(t + ii, drt)
                    drt = drt
                    steps += 1
                    omk[jm] = VAL
                    omd[jm] = w1
                    omt[jm] = t + lat
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
                        ot[j] = t + lat
                        j += 1
                    t = max(t + ii, 0)
                    steps += 1
                    ok[j] = STOP
                    oc[j] = 0
                    ov[j] = 0.0
                    ot[j] = t + lat
                    j += 1
                m = 0
            t = max(t + ii, rt)
            steps += 1
            co[po] = t
            cm[pm] = t
            ci[pi] = t
            cv[pv] = t
            po += 1
            pm += 1
            pi += 1
            pv += 1
            omk[jm] = o
            omd[jm] = on if o == STOP else 0
            omt[jm] = t + lat
            jm += 1
            ok[j] = o
            oc[j] = on + 1 if o == STOP else 0
            ov[j] = on + 1 if o == STOP else 0
            ot[j] = t + lat
            j += 1
            if o == DONE:
                break
        else:
            err = 3
            break
    return (err, po, pm, pi, pv, steps, t, flops, jm, omk, omd, omt, j, ok, oc, ov, ot,
            co, cm, ci, cv)


@njit(cache=True)
def _k_crd_drop(ko, do, to, ki, di, ti, ii, lat):
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
        t = max(t + ii, max(ti[pi], to[po], 0))
        if ik == VAL:
            if o != VAL:
                err = 2
                break
            if not started:
                ook[jo] = VAL
                ood[jo] = do[po]
                oot[jo] = t + lat
                jo += 1
                started = True
            ci[pi] = t
            oik[ji] = VAL
            oid[ji] = di[pi]
            oit[ji] = t + lat
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
                oit[ji] = t + lat
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
            oot[jo] = t + lat
            jo += 1
            oik[ji] = ik
            oid[ji] = di[pi]
            oit[ji] = t + lat
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


@njit(cache=True)
def _k_level_write(kind, data, tv, compressed, has_dim, dim, ii):
    n = kind.shape[0]
    crd = np.empty(n, dtype=np.int64)
    seg = np.empty(n + 1, dtype=np.int64)
    seg[0] = 0
    nc = 0
    ns = 1
    count = 0
    writes = 0
    cons = np.empty(n, dtype=np.int64)
    t = -ii
    j = 0
    err = 0
    while True:
        if j >= n:
            err = 1
            break
        k = kind[j]
        t = max(t + ii, max(tv[j], 0))
        if k == VAL:
            x = data[j]
            if compressed:
                if (has_dim and not (0 <= x and x < dim)) or (count > 0 and x <= crd[nc - 1]):
                    err = 2
                    break
                crd[nc] = x
                nc += 1
                writes += 1
            elif x != count:
                err = 2
                break
            count += 1
        elif k == STOP and data[j] == 0:
            if compressed:
                seg[ns] = nc
                ns += 1
                writes += 1
            elif count != dim:
                err = 2
                break
            count = 0
        elif k == STOP or k == DONE:
            if count > 0:
                err = 2
                break
        else:
            err = 3
            break
        cons[j] = t
        j += 1
        if k == DONE:
            break
    return err, j, t, writes, seg[:ns], crd[:nc], cons


@njit(cache=True)
def _k_value_write(kind, data, tv, ii):
    n = kind.shape[0]
    vals = np.empty(n, dtype=np.float64)
    nv = 0
    cons = np.empty(n, dtype=np.int64)
    t = -ii
    j = 0
    err = 0
    while True:
        if j >= n:
            err = 1
            break
        k = kind[j]
        t = max(t + ii, max(tv[j], 0))
        if k == VAL or k == EMPTY:
            vals[nv] = float(data[j]) if k == VAL else 0.0
            nv += 1
        elif not (k == STOP or k == DONE):
            err = 3
            break
        cons[j] = t
        j += 1
        if k == DONE:
            break
    return err, j, t, vals[:nv], cons


@njit(cache=True)
def _k_per_token(kind, tv, check_payload, ii):
    """Step times of a node with one step per input token (broadcast, fork), up to the first D."""
    n = kind.shape[0]
    cons = np.empty(n, dtype=np.int64)
    t = -ii
    j = 0
    err = 0
    while True:
        if j >= n:
            err = 1
            break
        k = kind[j]
        if check_payload and k == REPEAT:
            err = 3
            break
        t = max(t + ii, max(tv[j], 0))
        cons[j] = t
        j += 1
        if k == DONE:
            break
    return err, j, t, cons


@njit(cache=True)
def _k_fork_lanes(kind, n, lanes):
    lane = np.empty(n, dtype=np.int64)
    idx = 0
    for j in range(n):
        if _is_elem(kind[j]):
            lane[j] = idx
            idx = (idx + 1) % lanes
        else:
            lane[j] = -1
    return lane


@njit(cache=True)
def _k_join(kc, dc, tc, off, lanes, depth, ii, lat):
    total = off[lanes]
    src = np.empty(total + 1, dtype=np.int64)
    ot = np.empty(total + 1, dtype=np.int64)
    cons = np.empty(total, dtype=np.int64)
    pos = off[:lanes].copy()
    idx = 0
    t = -ii
    j = 0
    steps = 0
    err = 0
    while True:
        q = pos[idx]
        if q >= off[idx + 1]:
            err = 1
            break
        h = kc[q]
        if h == REPEAT:
            err = 3
            break
        rt = max(tc[q], 0)
        if _is_elem(h) or (h == STOP and dc[q] < depth):
            t = max(t + ii, rt)
            cons[q] = t
            src[j] = q
            ot[j] = t + lat
            j += 1
            pos[idx] += 1
            if depth == 0 or (h == STOP and dc[q] == depth - 1):
                idx = (idx + 1) % lanes
        else:
            for lane in range(lanes):
                p = pos[lane]
                if p >= off[lane + 1]:
                    err = 1
                    break
                if kc[p] != h or (h == STOP and dc[p] != dc[q]):
                    err = 2
                    break
                rt = max(rt, tc[p])
            if err != 0:
                break
            t = max(t + ii, rt)
            src[j] = q
            ot[j] = t + lat
            j += 1
            for lane in range(lanes):
                cons[pos[lane]] = t
                pos[lane] += 1
            if h == DONE:
                steps += 1
                break
        steps += 1
    return err, steps, t, j, src, ot, pos, cons


# -- per-node drivers --------------------------------------------------------------------------------
class _NeedOracle(Exception):
    """The node is outside what the kernels handle (or its inputs are malformed): ask the oracle."""

    def __init__(self, strict: bool):
        super().__init__()
        self.strict = strict  # True: a kernel found malformed input, so the oracle must fail too


class _Res:
    __slots__ = ("outs", "steps", "last", "counters", "cons", "level", "vals")

    def __init__(self, outs, steps, last, counters, cons, level=None, vals=None):
        self.outs, self.steps, self.last, self.counters = outs, steps, last, counters
        self.cons, self.level, self.vals = cons, level, vals


def _counters(flops=0, reads=0, writes=0):
    return {"flops": int(flops), "mem_reads": int(reads), "mem_writes": int(writes)}


def _check(err, *pairs):
    """Raise _NeedOracle unless err == 0 and every input (consumed count, length) was used up."""
    if err:
        raise _NeedOracle(True)
    for used, n in pairs:
        if used != n:
            raise _NeedOracle(True)


def _ints(*arrs):
    for a in arrs:
        if a.data.dtype != np.int64:
            raise _NeedOracle(False)


class _Node:
    """What a per-node driver gets: the node, its input streams, tensors and timing."""

    __slots__ = ("id", "kind", "params", "arity", "ins", "tensors", "hw", "lat", "ii", "cache")

    def __init__(self, node_id, kind, params, arity, ins, tensors, hw, cache):
        self.id, self.kind, self.params, self.arity, self.ins = node_id, kind, params, arity, ins
        self.tensors, self.hw, self.cache = tensors, hw, cache
        self.lat, self.ii = int(hw.latency_of(kind)), int(hw.initiation_interval)

    def ctx(self):
        """An oracle context (no inputs) to evaluate parameters exactly as the oracle does."""
        return oracle._Ctx(self.id, self.kind, self.params, self.arity, {}, self.tensors, self.hw)

    def inp(self, port) -> Arr:
        if port not in self.ins:
            raise _NeedOracle(False)
        return self.ins[port]

    def only(self, *ports):
        if set(self.ins) != set(ports):
            raise _NeedOracle(False)
        return [self.ins[p] for p in ports]

    def array(self, values, dtype):
        key = (id(values), dtype)
        hit = self.cache.get(key)
        if hit is None or hit[0] is not values:
            hit = (values, np.asarray(values, dtype=dtype))
            self.cache[key] = hit
        return hit[1]


def _root(n: _Node) -> _Res:
    if n.ins:
        raise _NeedOracle(False)
    t0 = 0
    t1 = max(t0 + n.ii, 0)
    out = Arr(np.array([VAL, DONE], dtype=np.int8), np.zeros(2, dtype=np.int64),
              np.array([t0 + n.lat, t1 + n.lat], dtype=np.int64))
    return _Res({"ref": out}, 2, t1, _counters(), {})


def _scan(n: _Node) -> _Res:
    (ref,) = n.only("ref")
    _ints(ref)
    try:
        level = n.ctx().level()
    except Exception:
        raise _NeedOracle(False) from None
    fmt, dim = n.params.get("format", level.format), n.params.get("dim")
    if fmt != level.format or (not level.is_compressed and dim is not None and dim != level.dim):
        raise _NeedOracle(False)
    if level.is_compressed:
        try:
            seg, crd = n.array(level.seg, np.int64), n.array(level.crd, np.int64)
        except (TypeError, ValueError, OverflowError):
            raise _NeedOracle(False) from None
        if (seg.ndim != 1 or crd.ndim != 1 or seg.shape[0] < 1 or
                (seg.shape[0] > 1 and (seg.min() < 0 or seg.max() > crd.shape[0]))):
            raise _NeedOracle(False)
        ldim = 0
    else:
        if not isinstance(level.dim, int) or level.dim < 0:
            raise _NeedOracle(False)
        seg = crd = np.zeros(1, dtype=np.int64)
        ldim = level.dim
    err, pos, j, t, reads, ck, rk, cd, rd, ot, cons = _k_scan(
        ref.kind, ref.data, ref.time, level.is_compressed, ldim, seg, crd, n.ii, n.lat)
    _check(err, (pos, len(ref)))
    return _Res({"crd": Arr(ck, cd, ot), "ref": Arr(rk, rd, ot)}, j, int(t), _counters(reads=reads),
                {"ref": cons})


def _locate(n: _Node) -> _Res:
    a, b = n.only("crd", "ref")
    _ints(a, b)
    dim = n.params.get("dim")
    if dim is None:
        try:
            dim = n.ctx().level().dim
        except Exception:
            raise _NeedOracle(False) from None
    if not isinstance(dim, int):
        raise _NeedOracle(False)
    err, j, t, ok, od, ot, cons = _k_locate(a.kind, a.data, a.time, b.kind, b.data, b.time, dim, n.ii, n.lat)
    _check(err, (j, len(a)), (j, len(b)))
    return _Res({"ref": Arr(ok[:j], od[:j], ot[:j])}, j, int(t), _counters(), {"crd": cons, "ref": cons})


def _repsig(n: _Node) -> _Res:
    (a,) = n.only("crd")
    err, j, t, ok, od, ot, cons = _k_repsig(a.kind, a.data, a.time, n.ii, n.lat)
    _check(err, (j, len(a)))
    return _Res({"repsig": Arr(ok, od, ot)}, j, int(t), _counters(), {"crd": cons})


def _repeat(n: _Node) -> _Res:
    inp, sig = n.only("in", "sig")
    err, j, p, t, ok, od, ot, cs, ci = _k_repeat(sig.kind, sig.data, sig.time, inp.kind, inp.data, inp.time,
                                                 n.ii, n.lat)
    _check(err, (j, len(sig)), (p, len(inp)))
    return _Res({"out": Arr(ok, od, ot)}, j, int(t), _counters(), {"in": ci, "sig": cs})


def _concat(arrs):
    kinds = np.concatenate([a.kind for a in arrs])
    times = np.concatenate([a.time for a in arrs])
    off = np.zeros(len(arrs) + 1, dtype=np.int64)
    off[1:] = np.cumsum([len(a) for a in arrs])
    return kinds, times, off


def _stop_levels(a: Arr) -> np.ndarray:
    if a.data.dtype == np.int64:
        return a.data
    return np.where(a.kind == STOP, a.data, 0).astype(np.int64)


def _joiner(n: _Node, is_union: bool) -> _Res:
    k = n.arity
    if k < 1:
        raise _NeedOracle(False)
    crds = [n.inp(f"crd{i}") for i in range(k)]
    pays = [n.inp(f"pay{i}") for i in range(k)]
    if len(n.ins) != 2 * k:
        raise _NeedOracle(False)
    _ints(*crds)
    ck, ct, coff = _concat(crds)
    cd = np.concatenate([a.data for a in crds])
    pk, pt, poff = _concat(pays)
    pl = np.concatenate([_stop_levels(a) for a in pays])
    err, steps, t, j, ok, od, ot, src, cpos, ppos, ccons, pcons = _k_joiner(
        is_union, k, ck, cd, ct, coff, pk, pl, pt, poff, n.ii, n.lat)
    _check(err, *[(cpos[i], coff[i + 1]) for i in range(k)], *[(ppos[i], poff[i + 1]) for i in range(k)])
    time = ot[:j]
    outs = {"crd": Arr(ok[:j], od[:j], time)}
    cons = {}
    for i, pay in enumerate(pays):
        s = src[i, :j]
        have = s >= 0
        kind = np.full(j, EMPTY, dtype=np.int8)
        data = np.zeros(j, dtype=pay.data.dtype)
        kind[have] = pay.kind[s[have]]
        data[have] = pay.data[s[have]]
        outs[f"pay{i}"] = Arr(kind, data, time)
        cons[f"crd{i}"] = ccons[coff[i]:coff[i + 1]]
        cons[f"pay{i}"] = pcons[poff[i]:poff[i + 1]]
    return _Res(outs, int(steps), int(t), _counters(), cons)


def _array(n: _Node) -> _Res:
    (ref,) = n.only("ref")
    _ints(ref)
    try:
        vals = n.array(n.ctx().tensor().vals, np.float64)
    except Exception:
        raise _NeedOracle(False) from None
    if vals.ndim != 1:
        raise _NeedOracle(False)
    err, j, t, reads, ok, od, ot, cons = _k_array(ref.kind, ref.data, ref.time, vals, n.ii, n.lat)
    _check(err, (j, len(ref)))
    return _Res({"val": Arr(ok, od, ot)}, j, int(t), _counters(reads=reads), {"ref": cons})


def _alu(n: _Node) -> _Res:
    try:
        op, ports, _fn, scalar, pos = oracle._alu_signature(
            f"n{n.id} alu", n.params, [p for p in "abc" if p in n.ins])
    except Exception:
        raise _NeedOracle(False) from None
    ins = n.only(*ports)
    nin = len(ins)
    if not 1 <= nin <= 3:
        raise _NeedOracle(False)
    a = ins[0]
    b = ins[1] if nin >= 2 else a
    c = ins[2] if nin >= 3 else a
    err, j, t, flops, ok, od, ot, cons = _k_alu(
        nin, a.kind, a.data, a.time, b.kind, b.data, b.time, c.kind, c.data, c.time, ALU_CODES[op],
        scalar is not None, 0.0 if scalar is None else scalar, int(pos) if scalar is not None else 0,
        _NAN, n.ii, n.lat)
    _check(err, *[(j, len(x)) for x in ins])
    return _Res({"val": Arr(ok[:j], od[:j], ot[:j])}, j, int(t), _counters(flops=flops),
                {p: cons for p in ports})


def _red_code(n: _Node) -> int:
    kind = n.params.get("kind", "sum")
    if not isinstance(kind, str) or kind not in REDUCE_CODES:
        raise _NeedOracle(False)
    return REDUCE_CODES[kind]


def _reduce(n: _Node) -> _Res:
    red = _red_code(n)
    (v,) = n.only("val")
    err, i, t, flops, j, ok, od, ot, cons = _k_reduce(v.kind, v.data, v.time, red, _NAN, n.ii, n.lat)
    _check(err, (i, len(v)))
    return _Res({"val": Arr(ok[:j], od[:j], ot[:j])}, i, int(t), _counters(flops=flops), {"val": cons})


def _spacc(n: _Node) -> _Res:
    red = _red_code(n)
    inner, outer, v = n.only("crd_inner", "crd_outer", "val")
    _ints(inner, outer)
    (err, po, pi, pv, steps, t, flops, j, ok, oc, ov, ot, co, ci, cv) = _k_spacc(
        outer.kind, outer.data, outer.time, inner.kind, inner.data, inner.time, v.kind, v.data, v.time,
        red, _NAN, n.ii, n.lat)
    _check(err, (po, len(outer)), (pi, len(inner)), (pv, len(v)))
    kind, time = ok[:j], ot[:j]
    return _Res({"crd": Arr(kind, oc[:j], time), "val": Arr(kind, ov[:j], time)}, int(steps), int(t),
                _counters(flops=flops), {"crd_inner": ci, "crd_outer": co, "val": cv})


def _spacc2(n: _Node) -> _Res:
    red = _red_code(n)
    inner, mid, outer, v = n.only("crd_inner", "crd_mid", "crd_outer", "val")
    _ints(inner, mid, outer)
    (err, po, pm, pi, pv, steps, t, flops, jm, omk, omd, omt, j, ok, oc, ov, ot, co, cm, ci, cv) = _k_spacc2(
        outer.kind, outer.data, outer.time, mid.kind, mid.data, mid.time, inner.kind, inner.data, inner.time,
        v.kind, v.data, v.time, red, _NAN, n.ii, n.lat)
    _check(err, (po, len(outer)), (pm, len(mid)), (pi, len(inner)), (pv, len(v)))
    kind, time = ok[:j], ot[:j]
    return _Res({"crd_mid": Arr(omk[:jm], omd[:jm], omt[:jm]), "crd": Arr(kind, oc[:j], time),
                 "val": Arr(kind, ov[:j], time)}, int(steps), int(t), _counters(flops=flops),
                {"crd_inner": ci, "crd_mid": cm, "crd_outer": co, "val": cv})


def _crd_drop(n: _Node) -> _Res:
    outer, inner = n.only("outer", "inner")
    _ints(outer, inner)
    (err, po, pi, steps, t, jo, ook, ood, oot, ji, oik, oid, oit, co, ci) = _k_crd_drop(
        outer.kind, outer.data, outer.time, inner.kind, inner.data, inner.time, n.ii, n.lat)
    _check(err, (po, len(outer)), (pi, len(inner)))
    return _Res({"outer": Arr(ook[:jo], ood[:jo], oot[:jo]), "inner": Arr(oik[:ji], oid[:ji], oit[:ji])},
                int(steps), int(t), _counters(), {"outer": co, "inner": ci})


def _level_write(n: _Node) -> _Res:
    fmt, dim = n.params.get("format", "compressed"), n.params.get("dim")
    compressed = fmt == "compressed"
    if not compressed and (fmt != "dense" or dim is None):
        raise _NeedOracle(False)
    if dim is not None and not isinstance(dim, int):
        raise _NeedOracle(False)
    (a,) = n.only("crd")
    _ints(a)
    err, j, t, writes, seg, crd, cons = _k_level_write(a.kind, a.data, a.time, compressed, dim is not None,
                                                      0 if dim is None else dim, n.ii)
    _check(err, (j, len(a)))
    level = Level("compressed", dim, seg.tolist(), crd.tolist()) if compressed else Level("dense", dim)
    return _Res({}, j, int(t), _counters(writes=writes), {"crd": cons}, level=level)


def _value_write(n: _Node) -> _Res:
    (a,) = n.only("val")
    err, j, t, vals, cons = _k_value_write(a.kind, a.data, a.time, n.ii)
    _check(err, (j, len(a)))
    return _Res({}, j, int(t), _counters(writes=vals.shape[0]), {"val": cons}, vals=vals.tolist())


def _broadcast(n: _Node) -> _Res:
    (a,) = n.only("in")
    err, j, t, cons = _k_per_token(a.kind, a.time, False, n.ii)
    _check(err, (j, len(a)))
    out = Arr(a.kind, a.data, cons + n.lat)
    return _Res({f"out{k}": out for k in range(n.arity)}, j, int(t), _counters(), {"in": cons})


def _lanes(n: _Node) -> int:
    lanes = n.params.get("lanes", n.arity)
    if lanes != n.arity or n.arity < 1 or not isinstance(lanes, int):
        raise _NeedOracle(False)
    return lanes


def _fork(n: _Node) -> _Res:
    lanes = _lanes(n)
    (a,) = n.only("in")
    err, j, t, cons = _k_per_token(a.kind, a.time, True, n.ii)
    _check(err, (j, len(a)))
    lane = _k_fork_lanes(a.kind, j, lanes)
    ctrl = lane < 0
    outs = {}
    for k in range(lanes):
        sel = ctrl | (lane == k)
        outs[f"out{k}"] = Arr(a.kind[sel], a.data[sel], cons[sel] + n.lat)
    return _Res(outs, j, int(t), _counters(), {"in": cons})


def _join(n: _Node) -> _Res:
    lanes = _lanes(n)
    depth = n.params.get("depth", 0)
    if not isinstance(depth, int):
        raise _NeedOracle(False)
    ins = [n.inp(f"in{k}") for k in range(lanes)]
    if len(n.ins) != lanes:
        raise _NeedOracle(False)
    kc, tc, off = _concat(ins)
    dc = np.concatenate([a.data for a in ins])
    dl = np.where(kc == STOP, dc, 0).astype(np.int64)
    err, steps, t, j, src, ot, pos, cons = _k_join(kc, dl, tc, off, lanes, depth, n.ii, n.lat)
    _check(err, *[(pos[k], off[k + 1]) for k in range(lanes)])
    s = src[:j]
    return _Res({"out": Arr(kc[s], dc[s], ot[:j])}, int(steps), int(t), _counters(),
                {f"in{k}": cons[off[k]:off[k + 1]] for k in range(lanes)})


DRIVERS = {
    "root": _root, "scan": _scan, "locate": _locate, "repsig": _repsig, "repeat": _repeat,
    "intersect": lambda n: _joiner(n, False), "union": lambda n: _joiner(n, True),
    "array": _array, "alu": _alu, "reduce": _reduce, "spacc": _spacc, "spacc2": _spacc2,
    "crd_drop": _crd_drop, "level_write": _level_write, "value_write": _value_write,
    "broadcast": _broadcast, "fork": _fork, "join": _join,
}
assert set(DRIVERS) == set(oracle.IMPLS)


def _by_oracle(n: _Node, names: dict, strict: bool) -> _Res:
    """Run the node with the oracle on token lists (raises what the oracle raises)."""
    inputs = {p: (to_tokens(a), a.time.tolist()) for p, a in n.ins.items()}
    run = oracle._run_node(n.id, n.kind, n.params, n.arity, inputs, n.tensors, n.hw, names)
    if strict:
        raise AssertionError(f"fast engine: n{n.id} {n.kind} found malformed input the oracle accepts "
                             "(a bug in fuseflow.sim.fast)")
    outs = {p: from_tokens(toks, run.times[p]) for p, toks in run.outs.items()}
    cons = {p: np.asarray(v, dtype=np.int64) for p, v in run.consumed.items()}
    return _Res(outs, run.steps, run.last_step, dict(run.counters), cons, run.written_level, run.written_vals)


def _run_node(n: _Node, names: dict) -> _Res:
    try:
        return DRIVERS[n.kind](n)
    except _NeedOracle as need:
        return _by_oracle(n, names, need.strict)


# -- public API --------------------------------------------------------------------------------------
def run_graph(graph: SamGraph, tensors: dict[str, StoredTensor], hw: HwConfig | None = None,
              keep_streams: bool = False) -> GraphRun:
    """Simulate `graph` exactly as `oracle.run_graph` does, on token arrays."""
    hw = hw or HwConfig()
    nodes = graph.nodes
    remaining: dict[Stream, int] = {}  # consumers still to run, to free streams early
    for node in nodes:
        for stream in node.inputs.values():
            remaining[stream] = remaining.get(stream, 0) + 1
    produced: dict[Stream, Arr] = {}
    lengths: dict[Stream, int] = {}
    written: dict[str, WrittenTensor] = {}
    node_steps: dict[int, int] = {}
    counters = {"flops": 0, "mem_reads": 0, "mem_writes": 0}
    occupancy: dict[Stream, int] = {}
    cache: dict = {}
    kept: dict[Stream, Arr] = {}
    cycles = 0
    for node in nodes:
        if node.kind not in DRIVERS:
            raise GraphError(f"n{node.id}: unknown primitive {node.kind!r}")
        ins, names = {}, {}
        for port, stream in node.inputs.items():
            if stream not in produced:
                raise GraphError(f"n{node.id} {node.kind}: input {port} reads {stream}, which is not "
                                 "an output of an earlier node")
            ins[port], names[port] = produced[stream], str(stream)
        res = _run_node(_Node(node.id, node.kind, node.params, node.arity, ins, tensors, hw, cache), names)
        for port in PRIMITIVES[node.kind].ports(node.arity)[1]:
            s = Stream(node.id, port)
            arr = res.outs[port]
            produced[s] = arr
            lengths[s] = len(arr)
            if keep_streams:
                kept[s] = arr
        node_steps[node.id] = int(res.steps)
        for port, stream in node.inputs.items():
            lat = hw.latency_of(nodes[stream.node].kind)
            occupancy[stream] = int(_occupancy(produced[stream].time, int(lat), res.cons[port]))
        for key, value in res.counters.items():
            counters[key] += value
        if node.kind in oracle.WRITERS:
            cycles = max(cycles, res.last)
            out = written.setdefault(node.params["tensor"], WrittenTensor())
            if node.kind == "level_write":
                k = node.params.get("level", 0)
                if k in out.levels:
                    raise GraphError(f"n{node.id}: level {k} of {node.params['tensor']} is written twice")
                out.levels[k] = res.level
            else:
                if out.vals is not None:
                    raise GraphError(f"n{node.id}: values of {node.params['tensor']} are written twice")
                out.vals = res.vals
        for stream in node.inputs.values():
            remaining[stream] -= 1
            if remaining[stream] == 0:
                del produced[stream]
    return GraphRun(
        written=written, cycles=int(cycles), node_steps=node_steps, stream_tokens=lengths, counters=counters,
        streams={s: to_tokens(a) for s, a in kept.items()} if keep_streams else None,
        stream_times={s: a.time.tolist() for s, a in kept.items()} if keep_streams else None,
        max_occupancy=occupancy)


def apply(kind: str, inputs: dict, params: dict | None = None, *, tensors: dict | None = None,
          arity: int = 0, hw: HwConfig | None = None) -> NodeRun:
    """`oracle.apply` on the fast engine: one primitive on token lists, text or (tokens, times)."""
    hw = hw or HwConfig()
    ins = {}
    for port, value in inputs.items():
        if isinstance(value, Arr):
            ins[port] = value
        elif isinstance(value, tuple):
            ins[port] = from_tokens(value[0], value[1])
        else:
            ins[port] = from_tokens(value)
    n = _Node(0, kind, dict(params or {}), arity, ins, tensors or {}, hw, {})
    res = _run_node(n, {p: p for p in ins})
    return NodeRun({p: to_tokens(a) for p, a in res.outs.items()},
                   {p: a.time.tolist() for p, a in res.outs.items()}, int(res.steps), res.last,
                   dict(res.counters), res.level, res.vals,
                   {p: np.asarray(c).tolist() for p, c in res.cons.items()})
