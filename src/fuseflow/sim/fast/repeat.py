"""Kernels and runners of repetition: repsig (a repeat signal per coordinate) and repeat (an input
element per signal). Mirrors `sim.oracle.repeat`.

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> format_tokens(apply("repeat", {"in": "5 6 S0 D", "sig": "R R S0 R S0 S1 D"}).outs["out"])
    '5 5 S0 6 S0 S1 D'
"""
from __future__ import annotations

from numba import njit

from . import core, tiles
from .core import NeedOracle, Runner
from .stream import DONE as D_TOK
from .stream import REPEAT, STOP, VAL, _is_elem


@njit(cache=True)
def _k_repsig(nd, crd, out):
    S = nd.S
    ik, idat, isent, icons, pi, ei, fi, lat = core.inlet(nd, crd)
    ok, od, ot, og, j, cap, d, b = core.outlet(nd, out)
    t, ii, steps, status = core.resumed(S)
    while status == 0:
        status = core.missing(pi, ei, fi) or core.full(j, cap)
        if status:
            break
        k = ik[pi]
        if k == VAL or k == 2:  # an element (Val or N)
            ok[j] = REPEAT
            od[j] = 0
        elif k == STOP or k == D_TOK:
            ok[j] = k
            od[j] = int(idat[pi]) if k == STOP else 0
        else:
            status = core.FAIL
            break
        t = core.gated(max(t + ii, max(isent[pi] + lat, 0)), og, j, d, b)
        j = core.timed(ot, j, t)
        pi, steps, status = core.stepped(icons, pi, t, steps, k == D_TOK)
    core.closed(nd, crd, pi)
    return core.left(nd, t, steps, status, out, j)


@njit(cache=True)
def _k_repeat(nd, x, sig, out):
    S = nd.S
    ik, idat, isent, icons, pi, ei, fi, il = core.inlet(nd, x)
    sk, sd, s_s, scons, ps, es, fs, sl = core.inlet(nd, sig)
    ok, od, ot, og, j, cap, d, b = core.outlet(nd, out)
    t, ii, steps, status = core.resumed(S)
    while status == 0:
        status = core.missing(ps, es, fs)
        if status:
            S[core.PORT] = 1
            break
        status = core.missing(pi, ei, fi) or core.full(j, cap)
        if status:
            break
        s = sk[ps]
        h = ik[pi]
        tn = core.gated(max(t + ii, max(s_s[ps] + sl, isent[pi] + il, 0)), og, j, d, b)
        if s == REPEAT:
            if not _is_elem(h):
                status = core.FAIL
                break
            ok[j] = h
            od[j] = idat[pi]
        elif s == STOP:
            lv = sd[ps]
            if lv == 0:
                if not _is_elem(h):
                    status = core.FAIL
                    break
            elif not (h == STOP and idat[pi] == lv - 1):
                status = core.FAIL
                break
            pi = core.timed(icons, pi, tn)
            ok[j] = STOP
            od[j] = lv
        elif s == D_TOK:
            if h != D_TOK:
                status = core.FAIL
                break
            pi = core.timed(icons, pi, tn)
            ok[j] = D_TOK
            od[j] = 0
        else:
            status = core.FAIL
            break
        t = tn
        j = core.timed(ot, j, t)
        ps, steps, status = core.stepped(scons, ps, t, steps, s == D_TOK)
    core.closed(nd, x, pi)
    core.closed(nd, sig, ps)
    return core.left(nd, t, steps, status, out, j)


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
