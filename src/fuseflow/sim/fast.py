"""The fast engine: the oracle's semantics and cycle model on token *arrays*, with numba kernels.

`run_graph` returns exactly what `oracle.run_graph` returns (written tensors, cycles, node steps,
stream lengths, counters, channel occupancy and, with `keep_streams`, every token and visible
time); the oracle's module docstring is the specification and every kernel below mirrors the
oracle's step loop of its primitive, read for read.

A stream is an `Arr`: three arrays of equal length, `kind` (int8: `VAL`, `STOP`, `EMPTY`,
`DONE`, `REPEAT`), `data` (int64 for coordinates, references and repeat signals, float64 for
values; the level of a `Stop`; anything for `N`, `D`, `R`) and `sent` (int64 step time at which
the producer emitted the token), plus the producer's latency `lat` (visible time = sent + lat).
Nodes run in id order (the graph is a DAG, channels are unbounded); each kernel walks its
inputs once and records the step time at which it consumes every input token, which gives the
channel occupancy. Arrays are never modified once built, so streams share them wherever they
coincide: a node that consumes one token and emits one per step sends at the times it
consumes, a broadcast's outputs are its input's tokens, a scanner's crd and ref share times.

The memory model (`HwConfig.hbm`) is mirrored step for step. Malformed inputs: a kernel that
meets anything the oracle would reject stops with an error code and the node is re-run by the
oracle, which raises its exact exception (if it does not, the engine raises AssertionError: a
bug here). Inputs of an unexpected type (a float stream where coordinates are expected, odd
storage), an ALU op, reduction or primitive without a kernel, and `record_steps` (the per-step
log of bounded channels) run on the oracle too. `apply` reads a token list as float data if any
`Val` holds a float, so a hand-written stream mixing ints and floats comes back with floats.

Tile-valued streams (blocked graphs) carry tile ids into a per-stream table (`Arr.tiles`); the
kernels move the ids and `sim.fast_tiles` computes the values of tile nodes (see there).
Pass-through nodes (repeat, joiners, broadcast, fork) hand their input's table on; join
concatenates its lanes' tables.

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
from .hw import MEMORY_KINDS, HwConfig
from .oracle import GraphRun, NodeRun
from .storage import Level, StoredTensor, WrittenTensor
from .tiles import Tile, TileSpec
from .tokens import Done, Empty, Repeat, Stop, Val, as_tokens

__all__ = ["run_graph", "apply", "Arr", "from_tokens", "to_tokens", "VAL", "STOP", "EMPTY", "DONE",
           "REPEAT"]

VAL, STOP, EMPTY, DONE, REPEAT = 0, 1, 2, 3, 4
_INF = math.inf

ALU_CODES = {"neg": 0, "exp": 1, "sqrt": 2, "rsqrt": 3, "tanh": 4, "erf": 5, "abs": 6, "const": 7,
             "add": 8, "sub": 9, "mul": 10, "div": 11, "max": 12, "min": 13, "gt": 14, "ge": 15,
             "lt": 16, "le": 17, "eq": 18, "ne": 19, "select": 20, "coalesce": 21}
REDUCE_CODES = {"sum": 0, "max": 1, "min": 2}
# an op, reduction or primitive the oracle knows and these tables do not runs on the oracle

# The oracle's NaN constant, passed to kernels in an array: a NaN literal would let LLVM fold
# `x >= 0 ? sqrt(x) : NaN` into `sqrt(x)`, whose NaN has another sign bit.
_NAN = np.array([oracle.NAN], dtype=np.float64)
_NO_MEM = np.zeros(4, dtype=np.int64)  # memory model off


class Arr:
    """One stream: token kinds, payloads (Val data or Stop levels; don't-care for `N`, `D`, `R`),
    the step time at which the producer sent each token, and the producer's latency (a token is
    visible at sent + lat); `tiles`: the table that tile ids (Val data) index, if any."""

    __slots__ = ("kind", "data", "sent", "lat", "tiles")

    def __init__(self, kind, data, sent, lat=0, tiles=None):
        self.kind, self.data, self.sent, self.lat, self.tiles = kind, data, sent, int(lat), tiles

    def __len__(self) -> int:
        return self.kind.shape[0]

    @property
    def time(self) -> np.ndarray:
        """Visible times."""
        return self.sent + self.lat if self.lat else self.sent


# -- conversions ------------------------------------------------------------------------------------
def from_tokens(tokens, times=None, dtype=None, lat: int = 0) -> Arr:
    """An `Arr` of a token list (or text) and its visible times; float data if any `Val` holds a
    float (or `dtype`)."""
    toks = as_tokens(tokens)
    n = len(toks)
    kind = np.empty(n, dtype=np.int8)
    xs = [0] * n
    is_float = False
    tiles = []
    for i, tok in enumerate(toks):
        if isinstance(tok, Val) and isinstance(tok.x, Tile):
            kind[i] = VAL
            xs[i] = float(len(tiles))
            tiles.append(tok.x.a)
            is_float = True
        elif isinstance(tok, Val):
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
    return Arr(kind, data, time - lat if lat else time, lat, np.stack(tiles) if tiles else None)


_SINGLE = {EMPTY: Empty, DONE: Done, REPEAT: Repeat}


def to_tokens(arr: Arr) -> list:
    """The oracle's tokens of a stream (ints for int data, floats for float data)."""
    out = []
    append = out.append
    for k, x in zip(arr.kind.tolist(), arr.data.tolist()):
        if k == VAL and arr.tiles is not None:
            append(Val(Tile(arr.tiles[int(x)])))
        elif k == VAL:
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
def _occupancy(sent, consumed):
    """oracle.channel_occupancy."""
    best = 0
    j = 0
    n = consumed.shape[0]
    for k in range(sent.shape[0]):
        t = sent[k]
        while j < n and consumed[j] <= t:
            j += 1
        if k + 1 - j > best:
            best = k + 1 - j
    return best


@njit(cache=True)
def _stall(mem, before, words, done):
    """HwConfig.memory_stall (+ final_stall on a step emitting D) of a memory node's step;
    mem = (hbm, channels, latency, startup)."""
    if mem[0] == 0:
        return 0
    extra = 0
    if words > 0:
        c = mem[1]
        extra = ((before + words) // c - before // c) * mem[2]
        if before == 0:
            extra += mem[3]
    if done and (before + words) % mem[1] != 0:
        extra += mem[2]
    return extra


# -- kernels ------------------------------------------------------------------------------------------
# Conventions: an input X arrives as (X kind, X data, X sent, X lat); a token is visible at
# sent + lat. A kernel returns err first (0: fine; otherwise the oracle must look at the node),
# then how far it read each input, then its outputs as sent times (step times). `cons` arrays
# hold the step time at which each input token was consumed; where a node consumes one input
# token per step and emits one token per step, the output's sent times *are* those times.

@njit(cache=True)
def _k_scan(kind, data, xs, xl, compressed, dim, seg, crd, mem, ii):
    n = kind.shape[0]
    nseg = seg.shape[0] - 1
    total = 0
    any_empty = False
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
            any_empty = True
        else:
            total += 1
        if k == DONE:
            break
    ck = np.empty(total, dtype=np.int8)
    rk = np.empty(total, dtype=np.int8) if any_empty else ck
    cd = np.empty(total, dtype=np.int64)
    rd = np.empty(total, dtype=np.int64)
    ot = np.empty(total, dtype=np.int64)
    cons = np.empty(n, dtype=np.int64)
    t = -ii
    j = 0
    pos = 0
    reads = 0
    words = 0
    err = 0
    while True:
        if pos >= n:
            err = 1
            break
        k = kind[pos]
        rt = xs[pos] + xl
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
                    if mem[0]:
                        t += _stall(mem, words, reads - words, False)
                        words = reads
                    rt = 0
                    if first < 0:
                        first = t
                    ck[j] = VAL
                    cd[j] = crd[p]
                    rd[j] = p
                    ot[j] = t
                    j += 1
            else:
                base = r * dim
                for c in range(dim):
                    t = max(t + ii, rt)
                    rt = 0
                    if first < 0:
                        first = t
                    ck[j] = VAL
                    cd[j] = c
                    rd[j] = base + c
                    ot[j] = t
                    j += 1
                if any_empty:
                    for q in range(j - dim, j):
                        rk[q] = VAL
            t = max(t + ii, rt)
            if mem[0]:
                t += _stall(mem, words, reads - words, False)
                words = reads
            if first < 0:
                first = t
            ck[j] = STOP
            rk[j] = STOP
            cd[j] = 0
            rd[j] = 0
            ot[j] = t
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
                    ot[j] = t
                    j += 1
            t = max(t + ii, rt)
            if first < 0:
                first = t
            ck[j] = STOP
            rk[j] = STOP
            cd[j] = 0
            rd[j] = 0
            ot[j] = t
            j += 1
            cons[pos] = first
        elif k == STOP or k == DONE:
            t = max(t + ii, rt)
            if mem[0]:
                t += _stall(mem, words, 0, k == DONE)
            ck[j] = k
            rk[j] = k
            lv = data[pos] + 1 if k == STOP else 0
            cd[j] = lv
            rd[j] = lv
            ot[j] = t
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
def _k_locate(ak, ad, a_s, al, bk, bd, b_s, bl, dim, ii):
    na = ak.shape[0]
    nb = bk.shape[0]
    n = min(na, nb)
    ok = np.empty(n, dtype=np.int8)
    od = np.empty(n, dtype=np.int64)
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
        t = max(t + ii, max(a_s[j] + al, b_s[j] + bl, 0))
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
        cons[j] = t
        j += 1
        if a == DONE:
            break
    return err, j, t, ok, od, cons


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


@njit(cache=True)
def _k_array(kind, data, xs, xl, vals, fill, mem, w, ii):
    n = kind.shape[0]
    nv = vals.shape[0]
    ok = np.empty(n, dtype=np.int8)
    od = np.empty(n, dtype=np.float64)
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
        t = max(t + ii, max(xs[j] + xl, 0))
        if k == VAL:
            r = data[j]
            if r < 0 or r >= nv:
                err = 2
                break
            reads += w
            if mem[0]:
                t += _stall(mem, reads - w, w, False)
            ok[j] = VAL
            od[j] = vals[r]
        elif k == EMPTY:
            ok[j] = VAL
            od[j] = fill
        elif k == STOP or k == DONE:
            if mem[0]:
                t += _stall(mem, reads, 0, k == DONE)
            ok[j] = k
            od[j] = data[j]
        else:
            err = 3
            break
        cons[j] = t
        j += 1
        if k == DONE:
            break
    return err, j, t, reads, ok, od, cons


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


@njit(cache=True)
def _k_level_write(kind, data, xs, xl, compressed, has_dim, dim, mem, ii):
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
        t = max(t + ii, max(xs[j] + xl, 0))
        if k == VAL:
            x = data[j]
            if compressed:
                if (has_dim and not (0 <= x and x < dim)) or (count > 0 and x <= crd[nc - 1]):
                    err = 2
                    break
                crd[nc] = x
                nc += 1
                writes += 1
                if mem[0]:
                    t += _stall(mem, writes - 1, 1, False)
            elif x != count:
                err = 2
                break
            count += 1
        elif k == STOP and data[j] == 0:
            if compressed:
                seg[ns] = nc
                ns += 1
                writes += 1
                if mem[0]:
                    t += _stall(mem, writes - 1, 1, False)
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
def _k_value_write(kind, data, xs, xl, mem, w, ii):
    n = kind.shape[0]
    vals = np.empty(n, dtype=np.float64)
    nv = 0
    words = 0
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
            vals[nv] = float(data[j]) if k == VAL else 0.0
            nv += 1
            words += w
            if mem[0]:
                t += _stall(mem, words - w, w, False)
        elif not (k == STOP or k == DONE):
            err = 3
            break
        cons[j] = t
        j += 1
        if k == DONE:
            break
    return err, j, t, vals[:nv], cons


@njit(cache=True)
def _k_per_token(kind, xs, xl, check_payload, ii):
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
        t = max(t + ii, max(xs[j] + xl, 0))
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
def _k_join(kc, dc, sc, lc, off, lanes, depth, ii):
    """join over lanes concatenated in kc/dc/sc (dc: stop levels; lc: per-lane latencies)."""
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
        rt = max(sc[q] + lc[idx], 0)
        if _is_elem(h) or (h == STOP and dc[q] < depth):
            t = max(t + ii, rt)
            cons[q] = t
            src[j] = q
            ot[j] = t
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
                rt = max(rt, sc[p] + lc[lane])
            if err != 0:
                break
            t = max(t + ii, rt)
            src[j] = q
            ot[j] = t
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


def _stop_levels(a: Arr) -> np.ndarray:
    """int64 data of a stream: the stop levels (Val data of a float stream is dropped)."""
    if a.data.dtype == np.int64:
        return a.data
    return np.where(a.kind == STOP, a.data, 0).astype(np.int64)


class _Node:
    """What a per-node driver gets: the node, its input streams, tensors and timing."""

    __slots__ = ("id", "kind", "params", "arity", "ins", "tensors", "hw", "lat", "ii", "cache", "tile")

    def __init__(self, node_id, kind, params, arity, ins, tensors, hw, cache):
        self.id, self.kind, self.params, self.arity, self.ins = node_id, kind, params, arity, ins
        self.tensors, self.hw, self.cache = tensors, hw, cache
        self.tile = TileSpec.of(kind, params)
        lat, ii = hw.timing(kind, params)
        self.lat, self.ii = int(lat), int(ii)

    def ctx(self):
        """An oracle context (no inputs) to evaluate parameters exactly as the oracle does."""
        return oracle._Ctx(self.id, self.kind, self.params, self.arity, {}, self.tensors, self.hw)

    def mem(self) -> np.ndarray:
        """(hbm, channels, latency, startup) of the memory model for this node's kind."""
        hw = self.hw
        if not getattr(hw, "hbm", False) or self.kind not in MEMORY_KINDS:
            return _NO_MEM
        values = (hw.hbm_channels, hw.hbm_latency, hw.hbm_startup)
        if (not all(isinstance(v, int) for v in values) or hw.hbm_channels <= 0
                or type(hw).memory_stall is not HwConfig.memory_stall
                or type(hw).final_stall is not HwConfig.final_stall):
            raise _NeedOracle(False)
        return np.array((1,) + values, dtype=np.int64)

    def inp(self, port) -> Arr:
        if port not in self.ins:
            raise _NeedOracle(False)
        return self.ins[port]

    def only(self, *ports):
        if set(self.ins) != set(ports):
            raise _NeedOracle(False)
        return [self.ins[p] for p in ports]

    def array(self, values, dtype):
        """`values` (a list or array of a stored tensor) as a numpy array, converted once per run."""
        key = (id(values), dtype)
        hit = self.cache.get(key)
        if hit is None or hit[0] is not values:
            hit = (values, np.asarray(values, dtype=dtype))
            self.cache[key] = hit
        return hit[1]

    def out(self, kind, data, sent, tiles=None) -> Arr:
        return Arr(kind, data, sent, self.lat, tiles)


def _root(n: _Node) -> _Res:
    if n.ins:
        raise _NeedOracle(False)
    t1 = max(n.ii, 0)
    out = n.out(np.array([VAL, DONE], dtype=np.int8), np.zeros(2, dtype=np.int64),
                np.array([0, t1], dtype=np.int64))
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
        if (seg.ndim != 1 or crd.ndim != 1 or seg.shape[0] < 1
                or (seg.shape[0] > 1 and (seg.min() < 0 or seg.max() > crd.shape[0]))):
            raise _NeedOracle(False)
        ldim = 0
    else:
        if not isinstance(level.dim, (int, np.integer)) or level.dim < 0:
            raise _NeedOracle(False)
        seg = crd = np.zeros(1, dtype=np.int64)
        ldim = int(level.dim)
    err, pos, j, t, reads, ck, rk, cd, rd, ot, cons = _k_scan(
        ref.kind, ref.data, ref.sent, ref.lat, level.is_compressed, ldim, seg, crd, n.mem(), n.ii)
    _check(err, (pos, len(ref)))
    return _Res({"crd": n.out(ck, cd, ot), "ref": n.out(rk, rd, ot)}, j, int(t), _counters(reads=reads),
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
    if not isinstance(dim, (int, np.integer)):
        raise _NeedOracle(False)
    err, j, t, ok, od, cons = _k_locate(a.kind, a.data, a.sent, a.lat, b.kind, b.data, b.sent, b.lat,
                                        int(dim), n.ii)
    _check(err, (j, len(a)), (j, len(b)))
    return _Res({"ref": n.out(ok[:j], od[:j], cons)}, j, int(t), _counters(), {"crd": cons, "ref": cons})


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


def _array(n: _Node) -> _Res:
    (ref,) = n.only("ref")
    _ints(ref)
    try:
        tensor = n.ctx().tensor()
        vals = n.array(tensor.vals, np.float64)
        if n.tile is not None and vals.ndim == 1:
            vals = vals.reshape(-1, 1)
        fill = float(n.params.get("fill", getattr(tensor, "fill", 0.0)))
    except Exception:
        raise _NeedOracle(False) from None
    spec, table = n.tile, None
    if spec is not None:
        key = ("tiles", id(tensor.vals), spec, fill)
        hit = n.cache.get(key)
        if hit is None or hit[0] is not tensor.vals:
            hit = (tensor.vals, fast_tiles().array_table(spec, vals, fill))
            n.cache[key] = hit
        table = hit[1]
        ids = np.arange(vals.shape[0], dtype=np.float64)
        err, j, t, reads, ok, od, cons = _k_array(ref.kind, ref.data, ref.sent, ref.lat, ids,
                                                  float(vals.shape[0]), n.mem(), spec.out_elements, n.ii)
    elif vals.ndim != 1:
        raise _NeedOracle(False)
    else:
        err, j, t, reads, ok, od, cons = _k_array(ref.kind, ref.data, ref.sent, ref.lat, vals, fill, n.mem(), 1,
                                                  n.ii)
    _check(err, (j, len(ref)))
    return _Res({"val": n.out(ok, od, cons, table)}, j, int(t), _counters(reads=reads), {"ref": cons})


def _alu(n: _Node) -> _Res:
    try:
        op, ports, _fn, scalar, pos = oracle._alu_signature(
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
        data, table = fast_tiles().alu(n.tile, op, ins, kind, data, scalar, pos)
        flops *= n.tile.flops_per_token
    return _Res({"val": n.out(kind, data, cons, table)}, j, int(t), _counters(flops=flops),
                {p: cons for p in ports})


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
        data, table = fast_tiles().reduce(n.tile, n.params.get("kind", "sum"), v, kind, data)
        flops *= n.tile.in_elements
    return _Res({"val": n.out(kind, data, ot[:j], table)}, i, int(t), _counters(flops=flops), {"val": cons})


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
        data, table = fast_tiles().spacc(n.tile, n.params.get("kind", "sum"), inner, v, kind, data)
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
        data, table = fast_tiles().spacc2(n.tile, n.params.get("kind", "sum"), mid, inner, v, kind, data)
        flops *= n.tile.in_elements
    return _Res({"crd_mid": n.out(omk[:jm], omd[:jm], omt[:jm]), "crd": n.out(kind, oc[:j], time),
                 "val": n.out(kind, data, time, table)}, int(steps), int(t), _counters(flops=flops),
                {"crd_inner": civ, "crd_mid": cm, "crd_outer": co, "val": civ})


def _crd_drop(n: _Node) -> _Res:
    outer, inner = n.only("outer", "inner")
    _ints(outer, inner)
    (err, po, pi, steps, t, jo, ook, ood, oot, ji, oik, oid, oit, co, ci) = _k_crd_drop(
        outer.kind, outer.data, outer.sent, outer.lat, inner.kind, inner.data, inner.sent, inner.lat, n.ii)
    _check(err, (po, len(outer)), (pi, len(inner)))
    return _Res({"outer": n.out(ook[:jo], ood[:jo], oot[:jo]), "inner": n.out(oik[:ji], oid[:ji], oit[:ji])},
                int(steps), int(t), _counters(), {"outer": co, "inner": ci})


def _level_write(n: _Node) -> _Res:
    fmt, dim = n.params.get("format", "compressed"), n.params.get("dim")
    compressed = fmt == "compressed"
    if not compressed and (fmt != "dense" or dim is None):
        raise _NeedOracle(False)
    if dim is not None and not isinstance(dim, (int, np.integer)):
        raise _NeedOracle(False)
    (a,) = n.only("crd")
    _ints(a)
    err, j, t, writes, seg, crd, cons = _k_level_write(a.kind, a.data, a.sent, a.lat, compressed,
                                                      dim is not None, 0 if dim is None else int(dim),
                                                      n.mem(), n.ii)
    _check(err, (j, len(a)))
    level = Level("compressed", dim, seg.tolist(), crd.tolist()) if compressed else Level("dense", dim)
    return _Res({}, j, int(t), _counters(writes=writes), {"crd": cons}, level=level)


def _value_write(n: _Node) -> _Res:
    (a,) = n.only("val")
    w = n.tile.out_elements if n.tile is not None else 1
    err, j, t, vals, cons = _k_value_write(a.kind, a.data, a.sent, a.lat, n.mem(), w, n.ii)
    _check(err, (j, len(a)))
    written = vals.tolist() if n.tile is None else fast_tiles().written(n.tile, a)
    return _Res({}, j, int(t), _counters(writes=vals.shape[0] * w), {"val": cons}, vals=written)


def _broadcast(n: _Node) -> _Res:
    (a,) = n.only("in")
    err, j, t, cons = _k_per_token(a.kind, a.sent, a.lat, False, n.ii)
    _check(err, (j, len(a)))
    out = n.out(a.kind, a.data, cons)
    return _Res({f"out{k}": out for k in range(n.arity)}, j, int(t), _counters(), {"in": cons})


def _lanes(n: _Node) -> int:
    lanes = n.params.get("lanes", n.arity)
    if lanes != n.arity or n.arity < 1 or not isinstance(lanes, (int, np.integer)):
        raise _NeedOracle(False)
    return int(lanes)


def _fork(n: _Node) -> _Res:
    lanes = _lanes(n)
    (a,) = n.only("in")
    err, j, t, cons = _k_per_token(a.kind, a.sent, a.lat, True, n.ii)
    _check(err, (j, len(a)))
    lane = _k_fork_lanes(a.kind, j, lanes)
    ctrl = lane < 0
    outs = {}
    for k in range(lanes):
        sel = ctrl | (lane == k)
        outs[f"out{k}"] = n.out(a.kind[sel], a.data[sel], cons[sel])
    return _Res(outs, j, int(t), _counters(), {"in": cons})


def _join(n: _Node) -> _Res:
    lanes = _lanes(n)
    depth = n.params.get("depth", 0)
    if not isinstance(depth, (int, np.integer)):
        raise _NeedOracle(False)
    ins = [n.inp(f"in{k}") for k in range(lanes)]
    if len(n.ins) != lanes:
        raise _NeedOracle(False)
    kc = np.concatenate([a.kind for a in ins])
    dc = np.concatenate([a.data for a in ins])
    sc = np.concatenate([a.sent for a in ins])
    off = np.zeros(lanes + 1, dtype=np.int64)
    off[1:] = np.cumsum([len(a) for a in ins])
    lc = np.array([a.lat for a in ins], dtype=np.int64)
    dl = np.where(kc == STOP, dc, 0).astype(np.int64)
    tables = None
    if any(a.tiles is not None for a in ins):  # one table: lane k's ids move past the earlier lanes'
        sizes = [0 if a.tiles is None else len(a.tiles) for a in ins]
        shift = np.repeat(np.cumsum([0] + sizes[:-1]), [len(a) for a in ins])
        dc = np.where(kc == VAL, dc + shift, dc)
        tables = np.concatenate([a.tiles for a in ins if a.tiles is not None])
    err, steps, t, j, src, ot, pos, cons = _k_join(kc, dl, sc, lc, off, lanes, int(depth), n.ii)
    _check(err, *[(pos[k], off[k + 1]) for k in range(lanes)])
    s = src[:j]
    return _Res({"out": n.out(kc[s], dc[s], ot[:j], tables)}, int(steps), int(t), _counters(),
                {f"in{k}": cons[off[k]:off[k + 1]] for k in range(lanes)})


DRIVERS = {
    "root": _root, "scan": _scan, "locate": _locate, "repsig": _repsig, "repeat": _repeat,
    "intersect": lambda n: _joiner(n, False), "union": lambda n: _joiner(n, True),
    "array": _array, "alu": _alu, "reduce": _reduce, "spacc": _spacc, "spacc2": _spacc2,
    "crd_drop": _crd_drop, "level_write": _level_write, "value_write": _value_write,
    "broadcast": _broadcast, "fork": _fork, "join": _join,
}


def _by_oracle(n: _Node, names: dict, strict: bool) -> _Res:
    """Run the node with the oracle on token lists (raises what the oracle raises)."""
    inputs = {p: (to_tokens(a), a.time.tolist()) for p, a in n.ins.items()}
    run = oracle._run_node(n.id, n.kind, n.params, n.arity, inputs, n.tensors, n.hw, names)
    if strict:
        raise AssertionError(f"fast engine: n{n.id} {n.kind} found malformed input the oracle accepts "
                             "(a bug in fuseflow.sim.fast)")
    outs = {p: from_tokens(toks, run.times[p], lat=n.lat) for p, toks in run.outs.items()}
    cons = {p: np.asarray(v, dtype=np.int64) for p, v in run.consumed.items()}
    return _Res(outs, run.steps, run.last_step, dict(run.counters), cons, run.written_level, run.written_vals)


def fast_tiles():
    from . import fast_tiles as module  # imported late: it builds on this module

    return module


def _tables_passed(n: _Node, res: _Res) -> None:
    """Outputs of pass-through nodes carry their input's tile table."""
    if n.kind in ("repeat", "broadcast", "fork"):
        source = n.ins.get("in")
        for arr in res.outs.values():
            arr.tiles = source.tiles if source is not None else None
    elif n.kind in ("intersect", "union"):
        for port, arr in res.outs.items():
            if port.startswith("pay") and port in n.ins:
                arr.tiles = n.ins[port].tiles


def _run_node(n: _Node, names: dict) -> _Res:
    try:
        if n.kind not in DRIVERS:
            raise _NeedOracle(False)
        res = DRIVERS[n.kind](n)
        _tables_passed(n, res)
        return res
    except _NeedOracle as need:
        return _by_oracle(n, names, need.strict)


# -- public API --------------------------------------------------------------------------------------
def run_graph(graph: SamGraph, tensors: dict[str, StoredTensor], hw: HwConfig | None = None,
              keep_streams: bool = False, record_steps: bool = False) -> GraphRun:
    """Simulate `graph` exactly as `oracle.run_graph` does, on token arrays. A per-step log
    (`record_steps`, for bounded channels) is the oracle's business: it runs the oracle."""
    if record_steps:
        return oracle.run_graph(graph, tensors, hw, keep_streams, record_steps=True)
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
        if node.kind not in oracle.IMPLS:
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
            occupancy[stream] = int(_occupancy(produced[stream].sent, res.cons[port]))
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
        del res
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
    """`oracle.apply` on the fast engine: one primitive on token lists, text or (tokens, visible
    times), or `Arr`s."""
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
                   {p: np.asarray(c)[:len(ins[p])].tolist() for p, c in res.cons.items()})
