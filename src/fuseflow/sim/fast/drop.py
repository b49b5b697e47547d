"""Kernel and runner of crd_drop: outer coordinates whose inner fiber is empty go. Mirrors
`sim.oracle.drop`.

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> run = apply("crd_drop", {"outer": "0 1 S0 D", "inner": "3 S0 S0 S1 D"})
    >>> format_tokens(run.outs["outer"]), format_tokens(run.outs["inner"])
    ('0 S0 D', '3 S0 S1 D')
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import core
from .core import NeedOracle, Runner
from .stream import DONE as D_TOK
from .stream import STOP, VAL

_STARTED = core.FREE  # the current inner fiber emitted its outer coordinate


@njit(cache=True)
def _k_crd_drop(nd, outer, inner, outer_o, inner_o):
    """A step needs room only on the outputs it emits on."""
    S = nd.S
    ko, do, o_s, ocons, po, eo, fo, ol = core.inlet(nd, outer)
    ki, di, i_s, icons, pi, ei, fi, il = core.inlet(nd, inner)
    ook, ood, oot, oog, jo, capo, do_, bo = core.outlet(nd, outer_o)
    oik, oid, oit, oig, ji, capi, di_, bi = core.outlet(nd, inner_o)
    t, ii, steps, status = core.resumed(S)
    started = S[_STARTED]
    while True:
        status = core.missing(pi, ei, fi)
        if status:
            S[core.PORT] = 1
            break
        status = core.missing(po, eo, fo)
        if status:
            break
        ik = ki[pi]
        o = ko[po]
        inner_s0 = ik == STOP and di[pi] == 0
        emit_o = not inner_s0 and (ik != VAL or not started)
        emit_i = not inner_s0 or started
        if (emit_o and jo >= capo) or (emit_i and ji >= capi):
            status = core.WAIT_OUT
            break
        tn = max(t + ii, max(i_s[pi] + il, o_s[po] + ol, 0))
        if emit_o:
            tn = core.gated(tn, oog, jo, do_, bo)
        if emit_i:
            tn = core.gated(tn, oig, ji, di_, bi)
        if ik == VAL:
            if o != VAL:
                status = core.FAIL
                break
            if not started:
                ook[jo] = VAL
                ood[jo] = do[po]
                jo = core.timed(oot, jo, tn)
                started = 1
            icons[pi] = tn
            oik[ji] = VAL
            oid[ji] = di[pi]
            ji = core.timed(oit, ji, tn)
            pi += 1
        elif ik == STOP and di[pi] == 0:
            if o != VAL:
                status = core.FAIL
                break
            ocons[po] = tn
            icons[pi] = tn
            po += 1
            if started:
                oik[ji] = STOP
                oid[ji] = 0
                ji = core.timed(oit, ji, tn)
            pi += 1
            started = 0
        elif ik == STOP or ik == D_TOK:
            if not (o == ik and (ik == D_TOK or do[po] == di[pi] - 1)):
                status = core.FAIL
                break
            ocons[po] = tn
            icons[pi] = tn
            ook[jo] = o
            ood[jo] = do[po]
            jo = core.timed(oot, jo, tn)
            oik[ji] = ik
            oid[ji] = di[pi]
            ji = core.timed(oit, ji, tn)
            po += 1
            pi += 1
        else:
            status = core.FAIL
            break
        t = tn
        steps += 1
        if ik == D_TOK:
            status = core.DONE
            break
    S[_STARTED] = started
    core.settle(S, t, steps)
    core.out_closed(nd, outer_o.ch, jo)
    core.out_closed(nd, inner_o.ch, ji)
    core.closed(nd, outer, po)
    core.closed(nd, inner, pi)
    return status


class CrdDrop(Runner):
    kernel = staticmethod(_k_crd_drop)
    backpressure = True
    ins, outs = ("outer", "inner"), ("outer", "inner")

    def check_bound(self):
        if any(ch.dtype != np.int64 for ch in self.in_ch):
            raise NeedOracle()

    def pending(self):
        inner, started = self.head("inner"), bool(self.S[_STARTED])
        if inner is None:
            return ["inner", "outer"], self.unsure(["outer", "inner"])
        if inner[0] == VAL:
            return ["inner", "outer"], ([] if started else ["outer"]) + ["inner"]
        if inner[0] == STOP and int(inner[1]) == 0:
            return ["inner", "outer"], (["inner"] if started else [])
        return ["inner", "outer"], ["outer", "inner"]
