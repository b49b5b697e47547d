"""Kernels and runners of the nodes that copy, deal and merge streams: broadcast (copies), fork
(deals elements round-robin to lanes) and join (merges lanes back). Mirrors `sim.oracle.lanes`.

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> run = apply("fork", {"in": "1 2 3 S0 D"}, {"lanes": 2}, arity=2)
    >>> format_tokens(run.outs["out0"]), format_tokens(run.outs["out1"])
    ('1 3 S0 D', '2 S0 D')
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from . import core, tiles
from .core import NeedOracle, Runner
from .stream import DONE as D_TOK
from .stream import EMPTY, REPEAT, STOP, VAL, _is_elem

_LANE = core.FREE  # fork: the lane of the next element; join: the lane read now


@njit(cache=True)
def _k_copy(nd, x, outs, deal):
    """broadcast (deal False: every token to every output) and fork (deal True: elements
    round-robin, stops and D to every lane); outs: the k outputs (`Outs`)."""
    S = nd.S
    xk, xd, xs, xc, pi, ei, fi, xl = core.inlet(nd, x)
    ok, od, ot, og = outs.kind, outs.data, outs.sent, outs.gate
    k = len(ok)
    jo = np.empty(k, dtype=np.int64)
    cap = np.empty(k, dtype=np.int64)
    dep = np.empty(k, dtype=np.int64)
    bas = np.empty(k, dtype=np.int64)
    bounded = False
    for o in range(k):
        jo[o], cap[o], dep[o], bas[o] = core.out_opened_lane(nd, outs, o)
        bounded |= dep[o] != 0
    t, ii, steps, status = core.resumed(S)
    lane = S[_LANE]
    if not deal:  # broadcast: the times once (into xc), then every output copies the block
        n = ei - pi
        for o in range(k):
            n = min(n, cap[o] - jo[o])
        for q in range(pi, pi + n):
            t = core.step_time(t, ii, xs[q] + xl)
            if bounded:
                for o in range(k):
                    t = core.gated(t, og[o], jo[o] + q - pi, dep[o], bas[o])
            xc[q] = t
            if xk[q] == D_TOK:
                n = q + 1 - pi
                status = core.DONE
                break
        for o in range(k):
            j = jo[o]
            ok[o][j:j + n] = xk[pi:pi + n]
            od[o][j:j + n] = xd[pi:pi + n]
            ot[o][j:j + n] = xc[pi:pi + n]
            jo[o] = j + n
        pi += n
        steps += n
    while status == 0:
        status = core.missing(pi, ei, fi)
        if status:
            break
        h = xk[pi]
        if deal and h == REPEAT:
            status = core.FAIL
            break
        one = deal and _is_elem(h)
        full = False
        for o in range(k):
            if (not one or o == lane) and jo[o] >= cap[o]:
                full = True
        if full:
            status = core.WAIT_OUT
            break
        t = core.step_time(t, ii, xs[pi] + xl)
        for o in range(k):
            if not one or o == lane:
                t = core.gated(t, og[o], jo[o], dep[o], bas[o])
        for o in range(k):
            if not one or o == lane:
                ok[o][jo[o]] = h
                od[o][jo[o]] = xd[pi]
                ot[o][jo[o]] = t
                jo[o] += 1
        if one:
            lane = (lane + 1) % k
        pi, steps, status = core.stepped(xc, pi, t, steps, h == D_TOK)
    core.settle(S, t, steps)
    S[_LANE] = lane
    for o in range(k):
        core.out_closed(nd, outs.ch[o], jo[o])
    core.closed(nd, x, pi)
    return status


class Merging(NamedTuple):
    """join's state record: the level of stops below which lanes take turns (0: after every
    token), and src, where a call writes (lane, position) of each token it emits."""
    depth: int
    src: np.ndarray


@njit(cache=True)
def _k_join(nd, ins, out, how):
    """join over the lanes `ins` (`Ins`); src[:, e] = (lane, position) of the e-th token emitted
    by this call."""
    S = nd.S
    ik, idat, isent, icons, lat = ins.kind, ins.data, ins.sent, ins.cons, ins.lat
    ok, od, ot, og, j, cap, d, b = core.outlet(nd, out)
    depth, src = how.depth, how.src
    lanes = len(ik)
    pos = np.empty(lanes, dtype=np.int64)
    end = np.empty(lanes, dtype=np.int64)
    fin = np.empty(lanes, dtype=np.bool_)
    for q in range(lanes):
        pos[q], end[q], fin[q] = core.opened_lane(nd, ins, q)
    cap = min(cap, j + src.shape[1])
    idx = S[_LANE]
    t, ii = S[core.T], S[core.II]
    steps = 0
    ne = 0
    status = 0
    while True:
        q = pos[idx]
        status = core.missing(q, end[idx], fin[idx])
        if status:
            S[core.PORT] = idx
            break
        if j >= cap:
            status = core.WAIT_OUT
            break
        h = ik[idx][q]
        if h == REPEAT:
            status = core.FAIL
            break
        lv = int(idat[idx][q]) if h == STOP else 0
        rt = isent[idx][q] + lat[idx]
        if _is_elem(h) or (h == STOP and lv < depth):  # this lane's token
            t = core.gated(core.step_time(t, ii, rt), og, j, d, b)
            icons[idx][q] = t
            pos[idx] = q + 1
            turn = depth == 0 or (h == STOP and lv == depth - 1)
        else:  # a stop at or above depth, or D: every lane's head
            turn = False
            for lane in range(lanes):
                p = pos[lane]
                status = core.missing(p, end[lane], fin[lane])
                if status:
                    S[core.PORT] = lane
                    break
                if ik[lane][p] != h or (h == STOP and int(idat[lane][p]) != lv):
                    status = core.FAIL
                    break
                rt = max(rt, isent[lane][p] + lat[lane])
            if status != 0:
                break
            t = core.gated(core.step_time(t, ii, rt), og, j, d, b)
            for lane in range(lanes):
                icons[lane][pos[lane]] = t
                pos[lane] += 1
        ok[j] = h
        od[j] = idat[idx][q]
        j = core.timed(ot, j, t)
        src[0, ne] = idx
        src[1, ne] = q
        ne += 1
        steps += 1
        if h == D_TOK:
            status = core.DONE
            break
        if turn:
            idx = (idx + 1) % lanes
    S[_LANE] = idx
    for q in range(lanes):
        core.store(nd, ins.ch[q], ins.rd[q], pos[q])
    return core.left(nd, t, steps, status, out, j)


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

    def port_args(self):
        return (*self.in_records(), core.Outs.of(self.out_records()))

    def state(self):
        return self.deal

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

    def port_args(self):
        return (core.Ins.of(self.in_records()), *self.out_records())

    def state(self):
        capacity = self.out_ch[0].capacity
        if self.src.shape[1] < capacity:
            self.src = np.empty((2, capacity), dtype=np.int64)
        return Merging(self.depth, self.src)

    def after(self, before_in, before_out):
        if self.out_ch[0].tile_shape is not None:
            tiles.join(self, before_out[0])
