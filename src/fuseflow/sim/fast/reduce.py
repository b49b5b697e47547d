"""Kernel and runner of reduce (a value per innermost fiber), and the reductions' arithmetic that
the sparse accumulators share. Mirrors `sim.oracle.reduce`.

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> format_tokens(apply("reduce", {"val": "1 2 S0 S0 4 S0 S1 D"}, {"kind": "max"}).outs["val"])
    '2 -inf 4 S0 D'
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ...scalar_ops import REDUCTIONS
from . import core, tiles
from .core import NeedOracle, Runner
from .stream import DONE as D_TOK
from .stream import EMPTY, STOP, VAL

REDUCE_CODES = {name: r.code for name, r in REDUCTIONS.items()}
# the kernels compare with these (numba freezes them into its cache of this file)
_SUM, _MAX, _MIN = (REDUCTIONS[k].code for k in ("sum", "max", "min"))
_IDENTITY_SUM, _IDENTITY_MAX, _IDENTITY_MIN = (REDUCTIONS[k].identity for k in ("sum", "max", "min"))


@njit(cache=True)
def combine(red, a, b, nan):
    if red == _SUM:
        return a + b
    if a != a or b != b:
        return nan
    if red == _MAX:
        return a if a >= b else b
    return a if a <= b else b


@njit(cache=True)
def identity(red):
    if red == _SUM:
        return _IDENTITY_SUM
    if red == _MAX:
        return _IDENTITY_MAX
    return _IDENTITY_MIN


_OPEN = core.FREE  # a fiber has elements so far


class Reduction(NamedTuple):
    """The state record of a reducer's kernel: the reduction's code and the oracle's NaN (`core.NANV`).

        >>> Reduction(red_code({"kind": "max"}), core.NANV).red == REDUCE_CODES["max"]
        True
    """
    red: int
    nanv: np.ndarray


@njit(cache=True)
def _k_reduce(nd, val, out, how):
    """F[0] holds the open fiber's accumulator; a step emits only on a stop or D."""
    S = nd.S
    F = nd.F
    ik, idat, isent, icons, pi, ei, fi, lat = core.inlet(nd, val)
    ok, od, ot, og, j, cap, d, b = core.outlet(nd, out)
    red, nanv = how
    nan = nanv[0]
    t, ii, steps, status = core.resumed(S)
    acc = F[0]
    fiber_open = S[_OPEN]
    flops = 0
    while True:
        status = core.missing(pi, ei, fi)
        if status:
            break
        k = ik[pi]
        tn = max(t + ii, max(isent[pi] + lat, 0))
        if k == STOP or k == D_TOK:
            if j >= cap:
                status = core.WAIT_OUT
                break
            tn = core.gated(tn, og, j, d, b)
        if k == VAL or k == EMPTY:
            x = float(idat[pi]) if k == VAL else 0.0
            acc = combine(red, acc, x, nan)
            fiber_open = 1
            flops += 1
        elif k == STOP and idat[pi] == 0:
            ok[j] = VAL
            od[j] = acc
            j = core.timed(ot, j, tn)
            acc = identity(red)
            fiber_open = 0
        elif k == STOP or k == D_TOK:
            if fiber_open:
                status = core.FAIL
                break
            ok[j] = k
            od[j] = idat[pi] - 1 if k == STOP else 0.0
            j = core.timed(ot, j, tn)
        else:
            status = core.FAIL
            break
        t = tn
        pi = core.timed(icons, pi, t)
        steps += 1
        if k == D_TOK:
            status = core.DONE
            break
    F[0] = acc
    S[_OPEN] = fiber_open
    S[core.FLOPS] += flops
    core.closed(nd, val, pi)
    return core.left(nd, t, steps, status, out, j)


def red_code(params: dict) -> int:
    kind = params.get("kind", "sum")
    if not isinstance(kind, str) or kind not in REDUCE_CODES:
        raise NeedOracle()
    return REDUCE_CODES[kind]


class Reducer(Runner):
    """What reduce, spacc and spacc2 share: the reduction, float values, tile counts."""

    def check(self):
        self.red = red_code(self.params)
        self.F[0] = identity(self.red)

    def out_dtype(self, port):
        return np.float64 if port == "val" else np.int64

    def out_tile(self, port):
        return None if self.tile is None or port != "val" else self.tile.shape(self.tile.out)

    def flops_scale(self):
        return self.tile.in_elements


class Reduce(Reducer):
    kernel = staticmethod(_k_reduce)
    backpressure = True
    ins, outs = ("val",), ("val",)

    def state(self):
        return Reduction(self.red, core.NANV)

    def pending(self):
        head = self.head("val")
        if head is None:
            return ["val"], self.unsure(["val"])
        return ["val"], (["val"] if head[0] in (STOP, D_TOK) else [])

    def after(self, before_in, before_out):
        if self.tile is not None:
            tiles.reduce(self, before_in, before_out)
