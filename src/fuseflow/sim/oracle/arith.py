"""The oracle's scalar arithmetic: ALU ops and reductions as IEEE float64 does them (x/0 is
+-inf, sqrt of a negative is nan, max/min propagate nan).

    >>> nargs, div = ALU_OPS["div"]
    >>> nargs, div(-1.0, 0.0), div(0.0, 0.0)
    (2, -inf, nan)
    >>> combine, identity = REDUCERS["max"]
    >>> identity, combine(identity, 3.0)
    (-inf, 3.0)
"""
from __future__ import annotations

import math

from ..tokens import Empty

INF = float("inf")
NAN = float("nan")


def _div(a: float, b: float) -> float:
    try:
        return a / b
    except ZeroDivisionError:
        if a != a or a == 0:
            return NAN
        return math.copysign(INF, a) * math.copysign(1.0, b)


def _exp(a: float) -> float:
    try:
        return math.exp(a)
    except OverflowError:
        return INF


def _sqrt(a: float) -> float:
    return math.sqrt(a) if a >= 0 else NAN


def _max(a: float, b: float) -> float:
    if a != a or b != b:
        return NAN
    return a if a >= b else b


def _min(a: float, b: float) -> float:
    if a != a or b != b:
        return NAN
    return a if a <= b else b


def _bool(x: bool) -> float:
    return 1.0 if x else 0.0


ALU_OPS: dict[str, tuple[int, object]] = {  # op -> (number of operands, function)
    "neg": (1, lambda a: -a),
    "exp": (1, _exp),
    "sqrt": (1, _sqrt),
    "rsqrt": (1, lambda a: _div(1.0, _sqrt(a))),
    "tanh": (1, math.tanh),
    "erf": (1, math.erf),
    "abs": (1, abs),
    "const": (0, None),
    "coalesce": (0, None),  # N -> the scalar (a background other than 0), values pass
    "add": (2, lambda a, b: a + b),
    "sub": (2, lambda a, b: a - b),
    "mul": (2, lambda a, b: a * b),
    "div": (2, _div),
    "max": (2, _max),
    "min": (2, _min),
    "gt": (2, lambda a, b: _bool(a > b)),
    "ge": (2, lambda a, b: _bool(a >= b)),
    "lt": (2, lambda a, b: _bool(a < b)),
    "le": (2, lambda a, b: _bool(a <= b)),
    "eq": (2, lambda a, b: _bool(a == b)),
    "ne": (2, lambda a, b: _bool(a != b)),
    "select": (3, lambda a, b, c: b if a != 0 else c),
}


REDUCERS: dict[str, tuple[object, float]] = {  # kind -> (combine, identity)
    "sum": (lambda a, b: a + b, 0.0),
    "max": (_max, -INF),
    "min": (_min, INF),
}


def _num(tok) -> float:
    """The value of an element token (`N` counts as 0.0)."""
    return 0.0 if tok is Empty else float(tok.x)
