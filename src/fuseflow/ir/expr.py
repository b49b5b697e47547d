"""Scalar expression trees: the body of an index-notation op.

Leaves are `In(k)` (the k-th input access of the op) and `Const(v)`; inner nodes
are `Unary`, `Binary`, `Compare` and `Select`.

    >>> e = Binary("max", Binary("mul", In(0), In(1)), Const(0.0))
    >>> e.to_text(["A(i,k)", "X(k,j)"])
    'max(A(i,k) * X(k,j), 0)'
    >>> import numpy as np
    >>> e.evaluate([np.array([2.0, -1.0]), np.array([3.0, 3.0])]).tolist()
    [6.0, 0.0]
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..scalar_ops import numpy_functions

UNARY: dict[str, Callable] = numpy_functions("unary")
BINARY: dict[str, Callable] = numpy_functions("binary")
INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
PRECEDENCE = {"add": 1, "sub": 1, "mul": 2, "div": 2}
COMPARE: dict[str, Callable] = numpy_functions("compare")
COMPARE_TEXT = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "eq": "==", "ne": "!="}


class Expr:
    """Base class; subclasses are frozen dataclasses so trees compare by value."""

    def children(self) -> tuple["Expr", ...]:
        return ()

    def inputs_used(self) -> set[int]:
        found = {self.index} if isinstance(self, In) else set()
        for child in self.children():
            found |= child.inputs_used()
        return found

    def to_text(self, names: Sequence[str]) -> str:
        return _text(self, names, 0)

    def evaluate(self, values: Sequence[np.ndarray], dtype=np.float64):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return _eval(self, values, dtype)

    def to_json(self):
        raise NotImplementedError


@dataclass(frozen=True)
class In(Expr):
    index: int

    def to_json(self):
        return {"in": self.index}


@dataclass(frozen=True)
class Const(Expr):
    value: float

    def to_json(self):
        return {"const": _json_float(self.value)}


@dataclass(frozen=True)
class Unary(Expr):
    op: str
    arg: Expr

    def __post_init__(self):
        assert self.op in UNARY, self.op

    def children(self):
        return (self.arg,)

    def to_json(self):
        return {"unary": self.op, "arg": self.arg.to_json()}


@dataclass(frozen=True)
class Binary(Expr):
    op: str
    lhs: Expr
    rhs: Expr

    def __post_init__(self):
        assert self.op in BINARY, self.op

    def children(self):
        return (self.lhs, self.rhs)

    def to_json(self):
        return {"binary": self.op, "lhs": self.lhs.to_json(), "rhs": self.rhs.to_json()}


@dataclass(frozen=True)
class Compare(Expr):
    pred: str
    lhs: Expr
    rhs: Expr

    def __post_init__(self):
        assert self.pred in COMPARE, self.pred

    def children(self):
        return (self.lhs, self.rhs)

    def to_json(self):
        return {"compare": self.pred, "lhs": self.lhs.to_json(), "rhs": self.rhs.to_json()}


@dataclass(frozen=True)
class Select(Expr):
    cond: Expr
    if_true: Expr
    if_false: Expr

    def children(self):
        return (self.cond, self.if_true, self.if_false)

    def to_json(self):
        return {"select": [c.to_json() for c in self.children()]}


def _json_float(v: float):
    if math.isinf(v) or math.isnan(v):
        return str(v)
    return v


def from_json(data) -> Expr:
    """Inverse of `Expr.to_json`."""
    if "in" in data:
        return In(int(data["in"]))
    if "const" in data:
        return Const(float(data["const"]))
    if "unary" in data:
        return Unary(data["unary"], from_json(data["arg"]))
    if "binary" in data:
        return Binary(data["binary"], from_json(data["lhs"]), from_json(data["rhs"]))
    if "compare" in data:
        return Compare(data["compare"], from_json(data["lhs"]), from_json(data["rhs"]))
    if "select" in data:
        return Select(*(from_json(c) for c in data["select"]))
    raise ValueError(f"not an expression: {data!r}")


def _num(v: float) -> str:
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


def _text(e: Expr, names: Sequence[str], parent_prec: int) -> str:
    if isinstance(e, In):
        return names[e.index]
    if isinstance(e, Const):
        return _num(e.value) if math.isfinite(e.value) else ("-inf" if e.value < 0 else "inf")
    if isinstance(e, Unary):
        if e.op == "neg":
            return "-" + _text(e.arg, names, 3)
        return f"{e.op}({_text(e.arg, names, 0)})"
    if isinstance(e, Binary):
        if e.op in INFIX:
            prec = PRECEDENCE[e.op]
            # right operand of - and / needs parentheses at equal precedence
            rhs_prec = prec + 1 if e.op in ("sub", "div") else prec
            text = f"{_text(e.lhs, names, prec)} {INFIX[e.op]} {_text(e.rhs, names, rhs_prec)}"
            return f"({text})" if prec < parent_prec else text
        return f"{e.op}({_text(e.lhs, names, 0)}, {_text(e.rhs, names, 0)})"
    if isinstance(e, Compare):
        return f"{_text(e.lhs, names, 3)} {COMPARE_TEXT[e.pred]} {_text(e.rhs, names, 3)}"
    if isinstance(e, Select):
        return f"select({_text(e.cond, names, 0)}, {_text(e.if_true, names, 0)}, {_text(e.if_false, names, 0)})"
    raise TypeError(e)


def _eval(e: Expr, values: Sequence[np.ndarray], dtype):
    if isinstance(e, In):
        return values[e.index]
    if isinstance(e, Const):
        return dtype(e.value)
    if isinstance(e, Unary):
        return UNARY[e.op](_eval(e.arg, values, dtype))
    if isinstance(e, Binary):
        return BINARY[e.op](_eval(e.lhs, values, dtype), _eval(e.rhs, values, dtype))
    if isinstance(e, Compare):
        return COMPARE[e.pred](_eval(e.lhs, values, dtype), _eval(e.rhs, values, dtype))
    if isinstance(e, Select):
        return np.where(_eval(e.cond, values, dtype), _eval(e.if_true, values, dtype),
                        _eval(e.if_false, values, dtype))
    raise TypeError(e)


def with_children(e: Expr, kids: tuple) -> Expr:
    """`e` with its children (in `children()` order) replaced by `kids`.

        >>> with_children(Binary("add", In(0), In(1)), (In(1), Const(2.0))).to_text(["a", "b"])
        'b + 2'
    """
    if isinstance(e, Unary):
        return Unary(e.op, *kids)
    if isinstance(e, Binary):
        return Binary(e.op, *kids)
    if isinstance(e, Compare):
        return Compare(e.pred, *kids)
    if isinstance(e, Select):
        return Select(*kids)
    return e


def simplify(e: Expr) -> Expr:
    """Canonicalize: `select(x > c, x, c)` (ReLU as imported) becomes `max(x, c)`."""
    e = with_children(e, tuple(simplify(c) for c in e.children()))
    if isinstance(e, Select) and isinstance(e.cond, Compare) and (e.cond.lhs, e.cond.rhs) == (e.if_true, e.if_false):
        if e.cond.pred in ("gt", "ge"):
            return Binary("max", e.if_true, e.if_false)
        if e.cond.pred in ("lt", "le"):
            return Binary("min", e.if_true, e.if_false)
    return e


def product_factors(e: Expr) -> list[Expr] | None:
    """Factors of a pure product of inputs and constants, else None (used for einsum)."""
    if isinstance(e, (In, Const)):
        return [e]
    if isinstance(e, Binary) and e.op == "mul":
        left, right = product_factors(e.lhs), product_factors(e.rhs)
        if left is not None and right is not None:
            return left + right
    return None


def map_inputs(e: Expr, leaf: Callable[[In], Expr]) -> Expr:
    """`e` with every `In` leaf replaced by `leaf(it)`."""
    if isinstance(e, In):
        return leaf(e)
    if isinstance(e, Unary):
        return Unary(e.op, map_inputs(e.arg, leaf))
    if isinstance(e, Binary):
        return Binary(e.op, map_inputs(e.lhs, leaf), map_inputs(e.rhs, leaf))
    if isinstance(e, Compare):
        return Compare(e.pred, map_inputs(e.lhs, leaf), map_inputs(e.rhs, leaf))
    if isinstance(e, Select):
        return Select(*(map_inputs(c, leaf) for c in e.children()))
    return e


def renumber_inputs(e: Expr, mapping: dict[int, int]) -> Expr:
    """Rename `In(k)` leaves to `In(mapping[k])`."""
    return map_inputs(e, lambda leaf: In(mapping[leaf.index]))
