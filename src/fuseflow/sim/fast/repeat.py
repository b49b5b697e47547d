"""Kernels and runners of repetition: repsig (a repeat signal per coordinate) and repeat (an input
element per signal). Mirrors `sim.oracle.repeat`.

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> format_tokens(apply("repeat", {"in": "5 6 S0 D", "sig": "R R S0 R S0 S1 D"}).outs["out"])
    '5 5 S0 6 S0 S1 D'
"""
from __future__ import annotations

from numba import njit

from . import tiles
from .core import (
    DONE,
    FAIL,
    II,
    PORT,
    WAIT_OUT,
    NeedOracle,
    Runner,
    T,
    closed,
    gated,
    missing,
    opened,
    out_closed,
    out_opened,
    settle,
)
from .stream import DONE as D_TOK
from .stream import REPEAT, STOP, VAL, _is_elem


@njit(cache=True)
def _k_repsig(nd, crd, out):
    S = nd.S
    ik, idat, isent, icons = crd.kind, crd.data, crd.sent, crd.cons
    ok, od, ot, og = out.kind, out.data, out.sent, out.gate
    pi, ei, fi, lat = opened(nd, crd)
    j, cap, d, b = out_opened(nd, out)
    t, ii = S[T], S[II]
    steps = status = 0
    while True:
        status = missing(pi, ei, fi)
        if status:
            S[PORT] = 0
            break
        if j >= cap:
            status = WAIT_OUT
            break
        k = ik[pi]
        if k == VAL or k == 2:  # an element (Val or N)
            ok[j] = REPEAT
            od[j] = 0
        elif k == STOP or k == D_TOK:
            ok[j] = k
            od[j] = int(idat[pi]) if k == STOP else 0
        else:
            status = FAIL
            break
        t = gated(max(t + ii, max(isent[pi] + lat, 0)), og, j, d, b)
        ot[j] = t
        j += 1
        icons[pi] = t
        pi += 1
        steps += 1
        if k == D_TOK:
            status = DONE
            break
    settle(S, t, steps)
    out_closed(nd, out.ch, j)
    closed(nd, crd, pi)
    return status


@njit(cache=True)
def _k_repeat(nd, x, sig, out):
    S = nd.S
    ik, idat, isent, icons = x.kind, x.data, x.sent, x.cons
    sk, sd, s_s, scons = sig.kind, sig.data, sig.sent, sig.cons
    ok, od, ot, og = out.kind, out.data, out.sent, out.gate
    pi, ei, fi, il = opened(nd, x)
    ps, es, fs, sl = opened(nd, sig)
    j, cap, d, b = out_opened(nd, out)
    t, ii = S[T], S[II]
    steps = status = 0
    while True:
        status = missing(ps, es, fs)
        if status:
            S[PORT] = 1
            break
        status = missing(pi, ei, fi)
        if status:
            S[PORT] = 0
            break
        if j >= cap:
            status = WAIT_OUT
            break
        s = sk[ps]
        h = ik[pi]
        tn = gated(max(t + ii, max(s_s[ps] + sl, isent[pi] + il, 0)), og, j, d, b)
        if s == REPEAT:
            if not _is_elem(h):
                status = FAIL
                break
            ok[j] = h
            od[j] = idat[pi]
        elif s == STOP:
            lv = sd[ps]
            if lv == 0:
                if not _is_elem(h):
                    status = FAIL
                    break
            elif not (h == STOP and idat[pi] == lv - 1):
                status = FAIL
                break
            icons[pi] = tn
            pi += 1
            ok[j] = STOP
            od[j] = lv
        elif s == D_TOK:
            if h != D_TOK:
                status = FAIL
                break
            icons[pi] = tn
            pi += 1
            ok[j] = D_TOK
            od[j] = 0
        else:
            status = FAIL
            break
        t = tn
        ot[j] = t
        j += 1
        scons[ps] = t
        ps += 1
        steps += 1
        if s == D_TOK:
            status = DONE
            break
    settle(S, t, steps)
    out_closed(nd, out.ch, j)
    closed(nd, x, pi)
    closed(nd, sig, ps)
    return status


class Repsig(Runner):
    kernel = staticmethod(_k_repsig)
    backpressure = True
    ins, outs = ("crd",), ("repsig",)


class Repeat(Runner):
    kernel = staticmethod(_k_repeat)
    backpressure = True
    ins, outs = ("in", "sig"), ("out",)

    def check_bound(self):
        if self.in_ch[1].dtype.kind != "i":
            raise NeedOracle()

    def out_dtype(self, port):
        return self.in_ch[0].dtype

    def out_tile(self, port):
        return self.in_ch[0].tile_shape

    def after(self, before_in, before_out):
        if self.out_ch[0].tile_shape is not None:
            tiles.pass_through(self.in_ch[0], self.out_ch[0], before_out[0])
