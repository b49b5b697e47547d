"""Kernel and runner of the ALU: elementwise ops on aligned value streams, with the oracle's IEEE
float64 arithmetic. Mirrors `sim.oracle.alu`.

    >>> from fuseflow.sim.fast import apply
    >>> from fuseflow.sim.tokens import format_tokens
    >>> format_tokens(apply("alu", {"a": "1.0 N S0 D", "b": "2.0 3.0 S0 D"}, {"op": "div"}).outs["val"])
    '0.5 0 S0 D'
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from ...scalar_ops import OPS
from ..oracle.alu import _alu_signature
from . import core, tiles
from .core import NeedOracle, Runner
from .stream import DONE as D_TOK
from .stream import EMPTY, REPEAT, STOP, VAL, _is_elem

ALU_CODES = {name: op.code for name, op in OPS.items()}  # every op of the table runs here
# the kernels compare with these (numba freezes them into its cache of this file)
_NEG = OPS["neg"].code
_EXP = OPS["exp"].code
_SQRT = OPS["sqrt"].code
_RSQRT = OPS["rsqrt"].code
_TANH = OPS["tanh"].code
_ERF = OPS["erf"].code
_ABS = OPS["abs"].code
_CONST = OPS["const"].code
_ADD = OPS["add"].code
_SUB = OPS["sub"].code
_MUL = OPS["mul"].code
_DIV = OPS["div"].code
_MAX = OPS["max"].code
_MIN = OPS["min"].code
_GT = OPS["gt"].code
_GE = OPS["ge"].code
_LT = OPS["lt"].code
_LE = OPS["le"].code
_EQ = OPS["eq"].code
_NE = OPS["ne"].code
_SELECT = OPS["select"].code
_COALESCE = OPS["coalesce"].code


@njit(cache=True)
def _div(a, b, nan):
    if b == 0.0:
        if a != a or a == 0.0:
            return nan
        return math.copysign(core.INF, a) * math.copysign(1.0, b)
    return a / b


@njit(cache=True)
def _sqrt(a, nan):
    if a >= 0:
        return math.sqrt(a)
    return nan


@njit(cache=True)
def alu_op(op, x0, x1, x2, nan):
    """One ALU result, as `oracle.arith.ALU_OPS` computes it."""
    if op == _NEG:
        return -x0
    if op == _EXP:
        return math.exp(x0)
    if op == _SQRT:
        return _sqrt(x0, nan)
    if op == _RSQRT:
        return _div(1.0, _sqrt(x0, nan), nan)
    if op == _TANH:
        return math.tanh(x0)
    if op == _ERF:
        return math.erf(x0)
    if op == _ABS:
        return abs(x0)
    if op == _ADD:
        return x0 + x1
    if op == _SUB:
        return x0 - x1
    if op == _MUL:
        return x0 * x1
    if op == _DIV:
        return _div(x0, x1, nan)
    if op == _MAX:
        if x0 != x0 or x1 != x1:
            return nan
        return x0 if x0 >= x1 else x1
    if op == _MIN:
        if x0 != x0 or x1 != x1:
            return nan
        return x0 if x0 <= x1 else x1
    if op == _GT:
        return 1.0 if x0 > x1 else 0.0
    if op == _GE:
        return 1.0 if x0 >= x1 else 0.0
    if op == _LT:
        return 1.0 if x0 < x1 else 0.0
    if op == _LE:
        return 1.0 if x0 <= x1 else 0.0
    if op == _EQ:
        return 1.0 if x0 == x1 else 0.0
    if op == _NE:
        return 1.0 if x0 != x1 else 0.0
    if op == _SELECT:
        return x1 if x0 != 0 else x2
    return nan  # const and coalesce never get here


class AluOp(NamedTuple):
    """The ALU's state record: how many inputs it has (the kernel's b and c repeat a where there
    are fewer), the op's code, the scalar operand if any (has_scalar, scalar, its position spos)
    and the oracle's NaN (`core.NANV`)."""
    nin: int
    op: int
    has_scalar: bool
    scalar: float
    spos: int
    nanv: np.ndarray


@njit(cache=True)
def _k_alu(nd, a_in, b_in, c_in, out, how):
    S = nd.S
    ak, ad, a_s, acons = a_in.kind, a_in.data, a_in.sent, a_in.cons
    bk, bd, b_s, bcons = b_in.kind, b_in.data, b_in.sent, b_in.cons
    ck_, cd, c_s, ccons = c_in.kind, c_in.data, c_in.sent, c_in.cons
    ok, od, ot, og = out.kind, out.data, out.sent, out.gate
    nin, op, has_scalar, scalar, spos, nanv = how
    nan = nanv[0]
    pa, ea, fa, al = core.opened(nd, a_in)
    pb, eb, fb, bl = pa, ea, fa, al
    pc, ec, fc, cl = pa, ea, fa, al
    if nin >= 2:
        pb, eb, fb, bl = core.opened(nd, b_in)
    if nin >= 3:
        pc, ec, fc, cl = core.opened(nd, c_in)
    j, cap, d, base = core.out_opened(nd, out)
    t, ii = S[core.T], S[core.II]
    flops = 0
    steps = status = 0
    while True:
        status = core.missing(pa, ea, fa)
        if status:
            S[core.PORT] = 0
            break
        if nin >= 2:
            status = core.missing(pb, eb, fb)
            if status:
                S[core.PORT] = 1
                break
        if nin >= 3:
            status = core.missing(pc, ec, fc)
            if status:
                S[core.PORT] = 2
                break
        if j >= cap:
            status = core.WAIT_OUT
            break
        rt = max(a_s[pa] + al, 0)
        a = ak[pa]
        b = VAL
        c = VAL
        if nin >= 2:
            b = bk[pb]
            rt = max(rt, b_s[pb] + bl)
        if nin >= 3:
            c = ck_[pc]
            rt = max(rt, c_s[pc] + cl)
        if op != _COALESCE and _is_elem(a) and _is_elem(b) and _is_elem(c):
            if op == _CONST:
                res = scalar
            else:
                x0 = float(ad[pa]) if a == VAL else 0.0
                x1 = 0.0
                x2 = 0.0
                if nin >= 2:
                    x1 = float(bd[pb]) if b == VAL else 0.0
                if nin >= 3:
                    x2 = float(cd[pc]) if c == VAL else 0.0
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
                res = alu_op(op, x0, x1, x2, nan)
            flops += 1
            ok[j] = VAL
            od[j] = res
        elif op == _COALESCE and _is_elem(a):  # coalesce: N -> the scalar, values pass (no flop)
            ok[j] = VAL
            od[j] = scalar if a == EMPTY else float(ad[pa])
        else:
            if a == REPEAT:
                status = core.FAIL
                break
            lv = ad[pa]
            if nin >= 2 and not (b == a and (a != STOP or bd[pb] == lv) and a != VAL):
                status = core.FAIL
                break
            if nin >= 3 and not (c == a and (a != STOP or cd[pc] == lv) and a != VAL):
                status = core.FAIL
                break
            ok[j] = a
            od[j] = lv if a == STOP else 0.0
        t = core.gated(max(t + ii, rt), og, j, d, base)
        ot[j] = t
        j += 1
        acons[pa] = t
        pa += 1
        if nin >= 2:
            bcons[pb] = t
            pb += 1
        if nin >= 3:
            ccons[pc] = t
            pc += 1
        steps += 1
        if a == D_TOK:
            status = core.DONE
            break
    core.settle(S, t, steps)
    S[core.FLOPS] += flops
    core.out_closed(nd, out.ch, j)
    core.closed(nd, a_in, pa)
    if nin >= 2:
        core.closed(nd, b_in, pb)
    if nin >= 3:
        core.closed(nd, c_in, pc)
    return status


class Alu(Runner):
    kernel = staticmethod(_k_alu)
    backpressure = True

    def check(self):
        try:
            op, ports, _fn, scalar, pos = _alu_signature(
                f"n{self.id} alu", self.params, [p for p in "abc" if p in self.node.inputs])
        except Exception:  # noqa: BLE001 - whatever fails here, the oracle reports it exactly
            raise NeedOracle() from None
        if op not in ALU_CODES or set(self.node.inputs) != set(ports) or not 1 <= len(ports) <= 3:
            raise NeedOracle()
        self.ins, self.outs = tuple(ports), ("val",)
        self.op, self.scalar, self.pos = op, scalar, pos

    def out_dtype(self, port):
        return np.float64

    def out_tile(self, port):
        return None if self.tile is None else self.tile.shape(self.tile.out)

    def flops_scale(self):
        return self.tile.flops_per_token

    def port_args(self):
        ports = self.in_records()
        return (*ports, *[ports[0]] * (3 - len(ports)), *self.out_records())  # b, c: a again where absent

    def state(self):
        has = self.scalar is not None
        return AluOp(len(self.in_ch), ALU_CODES[self.op], has, self.scalar if has else 0.0,
                     int(self.pos) if has else 0, core.NANV)

    def after(self, before_in, before_out):
        if self.tile is not None:
            tiles.alu(self, before_in, before_out)
