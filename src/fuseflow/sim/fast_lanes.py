"""Fast-engine kernels and drivers of the nodes that copy, deal and merge streams: broadcast
(copies), fork (deals elements round-robin to lanes) and join (merges lanes back).

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> run = apply("fork", {"in": "1 2 3 S0 D"}, {"lanes": 2}, arity=2)
    >>> format_tokens(run.outs["out0"]), format_tokens(run.outs["out1"])
    ('1 3 S0 D', '2 S0 D')
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .fast_core import _check, _counters, _NeedOracle, _Node, _Res
from .fast_stream import DONE, REPEAT, STOP, VAL, _is_elem


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
