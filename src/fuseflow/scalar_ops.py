"""The scalar operations, tabled once: for every op its arity, what it computes on numpy arrays
(the reference, the tile values), what it computes on one float64 (the oracle: IEEE arithmetic,
x/0 is +-inf, sqrt of a negative is nan, max/min propagate nan) and the fast engine's op code;
for every reduction its binary op, numpy ufunc, identity and engine code.

The fast engine's numba kernels compare op codes with constants taken from here; numba caches
compiled kernels by their own file's date, so after changing a code here touch `sim/fast/alu.py`
and `sim/fast/reduce.py` (or clear their `__pycache__`).

    >>> OPS["div"].arity, OPS["div"].scalar(-1.0, 0.0), OPS["div"].code
    (2, -inf, 11)
    >>> OPS["gt"].numpy(np.array([2.0, 0.0]), 1.0).tolist(), OPS["gt"].scalar(2.0, 1.0)
    ([True, False], 1.0)
    >>> REDUCTIONS["max"].identity, REDUCTIONS["max"].scalar(-math.inf, 3.0), REDUCTIONS["max"].op
    (-inf, 3.0, 'max')
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

INF = math.inf
NAN = math.nan


def _erf(x):
    from scipy.special import erf  # noqa: PLC0415 - scipy.special is slow to import; only erf needs it
    return erf(x)


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


@dataclass(frozen=True)
class ScalarOp:
    """One ALU op. `family`: "unary", "binary", "compare" (numpy gives booleans, the scalar
    1.0/0.0), "select" (cond, if true, if false) or "stream" (no operand from the expression:
    `const` emits the node's scalar, `coalesce` turns an empty token into it); `numpy` is None
    for the stream ops."""

    name: str
    family: str
    arity: int
    numpy: Callable | None
    scalar: Callable | None
    code: int


@dataclass(frozen=True)
class Reduction:
    """A reduction: `op` is the binary op it folds with, `numpy` its ufunc (`.reduce` along
    axes), `scalar` its combine on two floats, `identity` the value that changes nothing."""

    name: str
    op: str
    numpy: np.ufunc
    scalar: Callable
    identity: float
    code: int


_ROWS = (
    ScalarOp("neg", "unary", 1, np.negative, lambda a: -a, 0),
    ScalarOp("exp", "unary", 1, np.exp, _exp, 1),
    ScalarOp("sqrt", "unary", 1, np.sqrt, _sqrt, 2),
    ScalarOp("rsqrt", "unary", 1, lambda x: 1.0 / np.sqrt(x), lambda a: _div(1.0, _sqrt(a)), 3),
    ScalarOp("tanh", "unary", 1, np.tanh, math.tanh, 4),
    ScalarOp("erf", "unary", 1, _erf, math.erf, 5),
    ScalarOp("abs", "unary", 1, np.abs, abs, 6),
    ScalarOp("const", "stream", 0, None, None, 7),
    ScalarOp("add", "binary", 2, np.add, lambda a, b: a + b, 8),
    ScalarOp("sub", "binary", 2, np.subtract, lambda a, b: a - b, 9),
    ScalarOp("mul", "binary", 2, np.multiply, lambda a, b: a * b, 10),
    ScalarOp("div", "binary", 2, np.divide, _div, 11),
    ScalarOp("max", "binary", 2, np.maximum, _max, 12),
    ScalarOp("min", "binary", 2, np.minimum, _min, 13),
    ScalarOp("gt", "compare", 2, np.greater, lambda a, b: _bool(a > b), 14),
    ScalarOp("ge", "compare", 2, np.greater_equal, lambda a, b: _bool(a >= b), 15),
    ScalarOp("lt", "compare", 2, np.less, lambda a, b: _bool(a < b), 16),
    ScalarOp("le", "compare", 2, np.less_equal, lambda a, b: _bool(a <= b), 17),
    ScalarOp("eq", "compare", 2, np.equal, lambda a, b: _bool(a == b), 18),
    ScalarOp("ne", "compare", 2, np.not_equal, lambda a, b: _bool(a != b), 19),
    ScalarOp("select", "select", 3, lambda c, a, b: np.where(c != 0, a, b), lambda c, a, b: a if c != 0 else b, 20),
    ScalarOp("coalesce", "stream", 0, None, None, 21),
)
OPS: dict[str, ScalarOp] = {row.name: row for row in _ROWS}

REDUCTIONS: dict[str, Reduction] = {row.name: row for row in (
    Reduction("sum", "add", np.add, OPS["add"].scalar, 0.0, 0),
    Reduction("max", "max", np.maximum, _max, -INF, 1),
    Reduction("min", "min", np.minimum, _min, INF, 2),
)}


def numpy_functions(*families: str) -> dict[str, Callable]:
    """Name -> numpy function of the ops of these families.

    >>> sorted(numpy_functions("compare"))
    ['eq', 'ge', 'gt', 'le', 'lt', 'ne']
    """
    return {op.name: op.numpy for op in _ROWS if op.family in families}


def identity(kind: str | None) -> float:
    """The identity of a reduction (`None`, no reduction kind given, is a sum).

    >>> identity("min"), identity(None)
    (inf, 0.0)
    """
    return REDUCTIONS[kind or "sum"].identity


def is_identity(init, kind: str | None) -> bool:
    """Whether a reduction's starting value changes nothing: none, or its identity (a named
    tensor never does).

    >>> is_identity(-math.inf, "max"), is_identity(0.0, "max"), is_identity("C", "sum"), is_identity(None, "min")
    (True, False, False, True)
    """
    return init is None or (not isinstance(init, str) and init == identity(kind))
