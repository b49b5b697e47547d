"""Kernel and runner of the joiners: intersect and union of k (crd, payload) inputs. Mirrors
`sim.oracle.join`.

The kernel decides every step from the crd heads and the payload heads' kinds; it records for
each emitting step which payload token each output takes (`src`, -1 for `N`), and `_gather`
copies the payloads' data (int references or float values, one call per payload) and checks that
their stops carry the crd stops' levels.

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> run = apply("intersect", {"crd0": "0 2 S0 D", "pay0": "10 12 S0 D",
    ...                           "crd1": "2 3 S0 D", "pay1": "7 8 S0 D"}, arity=2)
    >>> [format_tokens(run.outs[p]) for p in ("crd", "pay0", "pay1")]
    ['2 S0 D', '12 S0 D', '7 S0 D']
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from . import core, tiles
from .core import NeedOracle, Runner
from .stream import DONE as D_TOK
from .stream import EMPTY, STOP, VAL


class Joining(NamedTuple):
    """The joiner's state record: union or intersect, and src, where a call writes for each
    emitting step which payload token each output takes (-1 for `N`)."""
    is_union: bool
    src: np.ndarray


@njit(cache=True)
def _k_joiner(nd, crds, pays, crd_out, pay_outs, how):
    """One step per loop iteration, as the oracle's `_joiner`, over the k crd inputs `crds`, the
    payload inputs `pays` and outputs `pay_outs` (`Ins`, `Outs`; their data stay out of the
    kernel). A step that emits nothing (a skip) needs no room."""
    S = nd.S
    ck, cd, cs, ccons, clat = crds.kind, crds.data, crds.sent, crds.cons, crds.lat
    pk, ps, pcons, plat = pays.kind, pays.sent, pays.cons, pays.lat
    ok, od, ot, og = crd_out.kind, crd_out.data, crd_out.sent, crd_out.gate
    opk, opt, opg = pay_outs.kind, pay_outs.sent, pay_outs.gate
    is_union, src = how.is_union, how.src
    k = len(ck)
    cpos = np.empty(k, dtype=np.int64)
    cend = np.empty(k, dtype=np.int64)
    cfin = np.empty(k, dtype=np.bool_)
    ppos = np.empty(k, dtype=np.int64)
    pend = np.empty(k, dtype=np.int64)
    pfin = np.empty(k, dtype=np.bool_)
    jo = np.empty(k + 1, dtype=np.int64)
    for i in range(k):
        cpos[i], cend[i], cfin[i] = core.opened_lane(nd, crds, i)
        ppos[i], pend[i], pfin[i] = core.opened_lane(nd, pays, i)
    dep = np.empty(k + 1, dtype=np.int64)
    bas = np.empty(k + 1, dtype=np.int64)
    jo[0], cap, dep[0], bas[0] = core.out_opened(nd, crd_out)
    bounded = dep[0] != 0
    for i in range(k):
        jo[i + 1], free, dep[i + 1], bas[i + 1] = core.out_opened_lane(nd, pay_outs, i)
        cap = min(cap, free - jo[i + 1] + jo[0])
        bounded |= dep[i + 1] != 0
    cap = min(cap, src.shape[1] + jo[0])
    adv = np.zeros(k, dtype=np.bool_)
    t, ii = S[core.T], S[core.II]
    steps = 0
    ne = 0
    status = 0
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
            w = core.missing(q, cend[i], cfin[i])
            if w:
                S[core.PORT] = 2 * i
                status = w
                break
            h = ck[i][q]
            x = cs[i][q] + clat[i]
            if x > rt:
                rt = x
            if h == D_TOK:
                n_done += 1
            elif h == STOP:
                if n_stop == 0:
                    stop_lv = cd[i][q]
                elif cd[i][q] != stop_lv:
                    status = core.FAIL
                n_stop += 1
            elif h == VAL:
                x = cd[i][q]
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
                status = core.FAIL
                break
        if status != 0:
            break
        if n_done > 0 and n_done < k:
            status = core.FAIL
            break
        emits = 0  # 0 nothing, 1 the heads' control token, 2 a coordinate
        for i in range(k):
            adv[i] = False
        if n_done == k or n_val == 0:
            for i in range(k):
                adv[i] = True
            emits = 1
        elif is_union:
            for i in range(k):
                q = cpos[i]
                if ck[i][q] == VAL and cd[i][q] == vmin:
                    adv[i] = True
            emits = 2
        elif n_stop == 0 and vall_eq:
            for i in range(k):
                adv[i] = True
            emits = 2
        else:
            for i in range(k):
                q = cpos[i]
                if ck[i][q] == VAL and (n_stop > 0 or cd[i][q] == vmin):
                    adv[i] = True
        for i in range(k):
            if not adv[i]:
                continue
            q = ppos[i]
            status = core.missing(q, pend[i], pfin[i])
            if status:
                S[core.PORT] = 2 * i + 1
                break
            h = ck[i][cpos[i]]
            p = pk[i][q]
            if h == VAL:
                good = p == VAL or p == EMPTY
            else:
                good = p == h
            if not good:
                status = core.FAIL
                break
            x = ps[i][q] + plat[i]
            if x > rt:
                rt = x
        if status != 0:
            break
        if emits != 0 and jo[0] >= cap:
            status = core.WAIT_OUT
            break
        t = max(t + ii, rt)
        if emits != 0 and bounded:
            t = core.gated(t, og, jo[0], dep[0], bas[0])
            for i in range(k):
                t = core.gated(t, opg[i], jo[i + 1], dep[i + 1], bas[i + 1])
        steps += 1
        if emits != 0:
            if emits == 1:
                q = cpos[0]
                ok[jo[0]] = ck[0][q]
                od[jo[0]] = cd[0][q]
                ot[jo[0]] = t
                jo[0] += 1
            else:
                ok[jo[0]] = VAL
                od[jo[0]] = v0 if not is_union else vmin
                ot[jo[0]] = t
                jo[0] += 1
            for i in range(k):
                j = jo[i + 1]
                if adv[i]:
                    opk[i][j] = pk[i][ppos[i]]
                    src[i, ne] = ppos[i]
                else:
                    opk[i][j] = EMPTY
                    src[i, ne] = -1
                opt[i][j] = t
                jo[i + 1] = j + 1
            ne += 1
        for i in range(k):
            if adv[i]:
                ccons[i][cpos[i]] = t
                cpos[i] += 1
                pcons[i][ppos[i]] = t
                ppos[i] += 1
        if n_done == k:
            status = core.DONE
            break
    core.settle(S, t, steps)
    core.out_closed(nd, crd_out.ch, jo[0])
    for i in range(k):
        core.out_closed(nd, pay_outs.ch[i], jo[i + 1])
        core.store(nd, crds.ch[i], crds.rd[i], cpos[i])
        core.store(nd, pays.ch[i], pays.rd[i], ppos[i])
    return status


@njit(cache=True)
def _gather(src, n, crd_kind, crd_data, j0c, pdata, out, j0):
    """Payload data of the n tokens emitted from output positions j0 (crd from j0c): pdata[src]
    or 0 for `N`; False if a payload stop's level differs from its crd stop's."""
    for e in range(n):
        q = src[e]
        if q < 0:
            out[j0 + e] = 0
            continue
        x = pdata[q]
        if crd_kind[j0c + e] == STOP and x != crd_data[j0c + e]:
            return False
        out[j0 + e] = x
    return True


class Joiner(Runner):
    kernel = staticmethod(_k_joiner)
    backpressure = True

    def __init__(self, node, tensors, hw, cache, is_union: bool):
        super().__init__(node, tensors, hw, cache)
        self.is_union = is_union
        k = self.arity
        self.ins = tuple(p for i in range(k) for p in (f"crd{i}", f"pay{i}"))
        self.outs = ("crd",) + tuple(f"pay{i}" for i in range(k))
        self.src = np.empty((max(k, 1), 0), dtype=np.int64)

    def check(self):
        if self.arity < 1 or len(self.node.inputs) != 2 * self.arity:
            raise NeedOracle()

    def check_bound(self):
        if any(ch.dtype != np.int64 for ch in self.in_ch[0::2]):
            raise NeedOracle()

    def out_dtype(self, port):
        return np.int64 if port == "crd" else self.in_ch[2 * int(port[3:]) + 1].dtype

    def out_tile(self, port):
        return None if port == "crd" else self.in_ch[2 * int(port[3:]) + 1].tile_shape

    def port_args(self):
        ins, outs = self.in_records(), self.out_records()
        return core.Ins.of(ins[0::2]), core.Ins.of(ins[1::2], data=False), outs[0], core.Outs.of(outs[1:], data=False)

    def state(self):
        cap = max(ch.capacity for ch in self.out_ch)
        if self.src.shape[1] < cap:
            self.src = np.empty((self.arity, cap), dtype=np.int64)
        return Joining(self.is_union, self.src)

    def pending(self):
        """Every crd head; the payloads of the inputs the step advances; every output if it emits."""
        k = self.arity
        crds = [f"crd{i}" for i in range(k)]
        heads = [self.head(p) for p in crds]
        if any(h is None for h in heads):
            if any(self.head(f"pay{i}") is None for i in range(k)):
                return None
            return crds, self.unsure(self.outs)
        kinds = [h[0] for h in heads]
        vals = [int(h[1]) for h in heads if h[0] == VAL]
        stops = any(x == STOP for x in kinds)
        if not vals:  # every head the same stop, or D
            adv, emit = [True] * k, True
        elif self.is_union:
            adv, emit = [x == VAL and int(h[1]) == min(vals) for x, h in zip(kinds, heads)], True
        elif not stops and all(v == vals[0] for v in vals):
            adv, emit = [True] * k, True
        else:
            adv, emit = [x == VAL and (stops or int(h[1]) == min(vals)) for x, h in zip(kinds, heads)], False
        return crds + [f"pay{i}" for i in range(k) if adv[i]], (list(self.outs) if emit else [])

    def after(self, before_in, before_out):
        crd = self.out_ch[0]
        n = crd.count - before_out[0]
        if n <= 0:
            return
        for i, out in enumerate(self.out_ch[1:]):
            pay = self.in_ch[2 * i + 1]
            if not _gather(self.src[i], n, crd.kind, crd.data, before_out[0], pay.data, out.data,
                           before_out[i + 1]):
                self.failed = True
            if out.tile_shape is not None:
                tiles.pass_through(pay, out, before_out[i + 1])
