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
    STEPS,
    WAIT_OUT,
    NeedOracle,
    Runner,
    T,
    enter,
    gated,
    leave,
    missing,
    out_at,
    out_depth,
    out_leave,
    out_room,
)
from .stream import DONE as D_TOK
from .stream import REPEAT, STOP, VAL, _is_elem


@njit(cache=True)
def _k_repsig(S, F, CH, RD, io, ik, idat, isent, icons, ok, od, ot, og):
    pi, ei, fi, lat = enter(CH, RD, io, 0)
    j = out_at(CH, io, 1, 0)
    cap = out_room(CH, RD, io, 1, 0, ok.shape[0])
    d, b = out_depth(CH, io, 1, 0)
    t = S[T]
    ii = S[II]
    steps = 0
    status = 0
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
    S[T] = t
    S[STEPS] += steps
    out_leave(CH, io, 1, 0, j)
    leave(CH, RD, io, 0, pi)
    return status


@njit(cache=True)
def _k_repeat(S, F, CH, RD, io, ik, idat, isent, icons, sk, sd, s_s, scons, ok, od, ot, og):
    pi, ei, fi, il = enter(CH, RD, io, 0)
    ps, es, fs, sl = enter(CH, RD, io, 1)
    j = out_at(CH, io, 2, 0)
    cap = out_room(CH, RD, io, 2, 0, ok.shape[0])
    d, b = out_depth(CH, io, 2, 0)
    t = S[T]
    ii = S[II]
    steps = 0
    status = 0
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
    S[T] = t
    S[STEPS] += steps
    out_leave(CH, io, 2, 0, j)
    leave(CH, RD, io, 0, pi)
    leave(CH, RD, io, 1, ps)
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
