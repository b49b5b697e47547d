"""Kernels and runners of the nodes that copy, deal and merge streams: broadcast (copies), fork
(deals elements round-robin to lanes) and join (merges lanes back). Mirrors `sim.oracle.lanes`.

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> run = apply("fork", {"in": "1 2 3 S0 D"}, {"lanes": 2}, arity=2)
    >>> format_tokens(run.outs["out0"]), format_tokens(run.outs["out1"])
    ('1 3 S0 D', '2 S0 D')
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import tiles
from .core import (
    DONE,
    FAIL,
    FREE,
    II,
    PORT,
    STEPS,
    WAIT_IN,
    WAIT_OUT,
    NeedOracle,
    Runner,
    T,
    enter,
    gated,
    leave,
    missing,
    out_depth,
    out_room,
)
from .stream import DONE as D_TOK
from .stream import EMPTY, REPEAT, STOP, VAL, _is_elem

_LANE = FREE  # fork: the lane of the next element; join: the lane read now


@njit(cache=True)
def _k_copy(S, F, CH, RD, io, ik, idat, isent, icons, k, deal, ok, od, ot, og):
    """broadcast (deal False: every token to every output) and fork (deal True: elements
    round-robin, stops and D to every lane); ok/od/ot/og are tuples of the k outputs' arrays."""
    pi, ei, fi, lat = enter(CH, RD, io, 0)
    jo = np.empty(k, dtype=np.int64)
    cap = np.empty(k, dtype=np.int64)
    dep = np.empty(k, dtype=np.int64)
    bas = np.empty(k, dtype=np.int64)
    bounded = False
    for o in range(k):
        jo[o] = CH[io[3 + o], 1]
        cap[o] = out_room(CH, RD, io, 1, o, ok[o].shape[0])
        dep[o], bas[o] = out_depth(CH, io, 1, o)
        bounded |= dep[o] != 0
    t = S[T]
    ii = S[II]
    lane = S[_LANE]
    steps = 0
    status = 0
    if not deal:  # broadcast: the times once (into icons), then every output copies the block
        n = ei - pi
        for o in range(k):
            n = min(n, cap[o] - jo[o])
        for x in range(pi, pi + n):
            t = max(t + ii, max(isent[x] + lat, 0))
            if bounded:
                for o in range(k):
                    t = gated(t, og[o], jo[o] + x - pi, dep[o], bas[o])
            icons[x] = t
            if ik[x] == D_TOK:
                n = x + 1 - pi
                status = DONE
                break
        for o in range(k):
            j = jo[o]
            ok[o][j:j + n] = ik[pi:pi + n]
            od[o][j:j + n] = idat[pi:pi + n]
            ot[o][j:j + n] = icons[pi:pi + n]
            jo[o] = j + n
        pi += n
        steps += n
    while status == 0:
        status = missing(pi, ei, fi)
        if status:
            S[PORT] = 0
            break
        h = ik[pi]
        if deal and h == REPEAT:
            status = FAIL
            break
        one = deal and _is_elem(h)
        full = False
        for o in range(k):
            if (not one or o == lane) and jo[o] >= cap[o]:
                full = True
        if full:
            status = WAIT_OUT
            break
        t = max(t + ii, max(isent[pi] + lat, 0))
        for o in range(k):
            if not one or o == lane:
                t = gated(t, og[o], jo[o], dep[o], bas[o])
        for o in range(k):
            if not one or o == lane:
                j = jo[o]
                ok[o][j] = h
                od[o][j] = idat[pi]
                ot[o][j] = t
                jo[o] = j + 1
        if one:
            lane = (lane + 1) % k
        icons[pi] = t
        pi += 1
        steps += 1
        if h == D_TOK:
            status = DONE
            break
    S[T] = t
    S[STEPS] += steps
    S[_LANE] = lane
    for o in range(k):
        CH[io[3 + o], 1] = jo[o]
    leave(CH, RD, io, 0, pi)
    return status


@njit(cache=True)
def _k_join(S, F, CH, RD, io, lanes, depth, ik, idat, isent, icons, ok, od, ot, og, src):
    """join over the lanes' arrays (tuples ik/idat/isent/icons); src[:, e] = (lane, position) of
    the e-th token emitted by this call."""
    pos = np.empty(lanes, dtype=np.int64)
    end = np.empty(lanes, dtype=np.int64)
    fin = np.empty(lanes, dtype=np.bool_)
    lat = np.empty(lanes, dtype=np.int64)
    for q in range(lanes):
        pos[q], end[q], fin[q], lat[q] = enter(CH, RD, io, q)
    j = CH[io[3 * lanes], 1]
    cap = min(out_room(CH, RD, io, lanes, 0, ok.shape[0]), j + src.shape[1])
    d, b = out_depth(CH, io, lanes, 0)
    idx = S[_LANE]
    t = S[T]
    ii = S[II]
    steps = 0
    ne = 0
    status = 0
    while True:
        q = pos[idx]
        status = missing(q, end[idx], fin[idx])
        if status:
            S[PORT] = idx
            break
        if j >= cap:
            status = WAIT_OUT
            break
        h = ik[idx][q]
        if h == REPEAT:
            status = FAIL
            break
        lv = int(idat[idx][q]) if h == STOP else 0
        rt = max(isent[idx][q] + lat[idx], 0)
        if _is_elem(h) or (h == STOP and lv < depth):
            t = gated(max(t + ii, rt), og, j, d, b)
            icons[idx][q] = t
            ok[j] = h
            od[j] = idat[idx][q]
            ot[j] = t
            src[0, ne] = idx
            src[1, ne] = q
            j += 1
            ne += 1
            pos[idx] = q + 1
            if depth == 0 or (h == STOP and lv == depth - 1):
                idx = (idx + 1) % lanes
        else:
            for lane in range(lanes):
                p = pos[lane]
                if p >= end[lane]:
                    status = FAIL if fin[lane] else WAIT_IN
                    S[PORT] = lane
                    break
                if ik[lane][p] != h or (h == STOP and int(idat[lane][p]) != lv):
                    status = FAIL
                    break
                rt = max(rt, isent[lane][p] + lat[lane])
            if status != 0:
                break
            t = gated(max(t + ii, rt), og, j, d, b)
            ok[j] = h
            od[j] = idat[idx][q]
            ot[j] = t
            src[0, ne] = idx
            src[1, ne] = q
            j += 1
            ne += 1
            for lane in range(lanes):
                icons[lane][pos[lane]] = t
                pos[lane] += 1
            if h == D_TOK:
                steps += 1
                status = DONE
                break
        steps += 1
    S[T] = t
    S[STEPS] += steps
    S[_LANE] = idx
    CH[io[3 * lanes], 1] = j
    for q in range(lanes):
        leave(CH, RD, io, q, pos[q])
    return status


def _lane_count(runner: Runner) -> int:
    lanes = runner.params.get("lanes", runner.arity)
    if lanes != runner.arity or runner.arity < 1 or not isinstance(lanes, (int, np.integer)):
        raise NeedOracle()
    return int(lanes)


class Copy(Runner):
    """broadcast and fork."""

    kernel = staticmethod(_k_copy)
    backpressure = True
    ins = ("in",)

    def check(self):
        self.deal = self.kind == "fork"
        k = _lane_count(self) if self.deal else self.arity
        if k < 1:
            raise NeedOracle()
        self.outs = tuple(f"out{o}" for o in range(k))

    def out_dtype(self, port):
        return self.in_ch[0].dtype

    def out_tile(self, port):
        return self.in_ch[0].tile_shape

    def pending(self):
        head = self.head("in")
        if not self.deal:
            return ["in"], list(self.outs)
        if head is None:
            return ["in"], self.unsure(self.outs)
        return ["in"], ([f"out{self.S[_LANE]}"] if head[0] in (VAL, EMPTY) else list(self.outs))

    def args(self):
        if self._args is None:
            a = self.in_ch[0]
            cons = self.cons_of(a, self.readers[0])
            outs = self.out_ch
            self._args = (self.S, self.F, a.tables.CH, a.tables.RD, self.io, a.kind, a.data, a.sent, cons,
                          len(outs), self.deal, tuple(o.kind for o in outs), tuple(o.data for o in outs),
                          tuple(o.sent for o in outs), tuple(self.gate_of(o) for o in outs))
        return self._args

    def after(self, before_in, before_out):
        if self.in_ch[0].tile_shape is not None:
            for out, start in zip(self.out_ch, before_out):
                tiles.pass_through(self.in_ch[0], out, start)


class Join(Runner):
    kernel = staticmethod(_k_join)
    backpressure = True
    outs = ("out",)

    def check(self):
        self.lanes = _lane_count(self)
        depth = self.params.get("depth", 0)
        if not isinstance(depth, (int, np.integer)) or len(self.node.inputs) != self.lanes:
            raise NeedOracle()
        self.depth = int(depth)
        self.ins = tuple(f"in{q}" for q in range(self.lanes))
        self.src = np.empty((2, 0), dtype=np.int64)

    def check_bound(self):
        if len({ch.dtype for ch in self.in_ch}) != 1 or len({ch.tile_shape for ch in self.in_ch}) != 1:
            raise NeedOracle()

    def out_dtype(self, port):
        return self.in_ch[0].dtype

    def out_tile(self, port):
        return self.in_ch[0].tile_shape

    def pending(self):
        """Lane idx's head, and every lane's when it is a stop at or above depth, or D."""
        lane = f"in{self.S[_LANE]}"
        head = self.head(lane)
        if head is None:  # the other lanes matter only if they have no head either
            return ([lane] if all(self.head(p) is not None for p in self.ins if p != lane) else None), ["out"]
        if head[0] in (VAL, EMPTY) or (head[0] == STOP and int(head[1]) < self.depth):
            return [lane], ["out"]
        return list(self.ins), ["out"]

    def args(self):
        if self._args is None:
            out = self.out_ch[0]
            if self.src.shape[1] < out.capacity:
                self.src = np.empty((2, out.capacity), dtype=np.int64)
            ins = self.in_ch
            cons = tuple(self.cons_of(ch, r) for ch, r in zip(ins, self.readers))
            self._args = (self.S, self.F, out.tables.CH, out.tables.RD, self.io, self.lanes, self.depth,
                          tuple(c.kind for c in ins), tuple(c.data for c in ins), tuple(c.sent for c in ins), cons,
                          out.kind, out.data, out.sent, self.gate_of(out), self.src)
        return self._args

    def after(self, before_in, before_out):
        if self.out_ch[0].tile_shape is not None:
            tiles.join(self, before_out[0])
