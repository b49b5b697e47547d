"""Background values: the value a tensor holds at the positions it does not store.

Inputs have background 0. An op's background is its body evaluated on its operands'
backgrounds; an operand broadcast along one of the op's output variables counts as unknown
there, and a result that is unknown has no background (it may be nonzero anywhere: dense).
`masked_fill(M == 0, -inf)` thus gives scores with background -inf, `exp` of those has
background 0 again, and a softmax over them visits only the entries M stores -- exactly
PyTorch's masked softmax, while a plain 0/1 mask product keeps background 0 and its zeros.

Unknown operands are taken to be finite and nonzero (`0 * x = 0`, `0 / x = 0`). The one place
this differs from PyTorch: a softmax row whose entries are all masked gives 0 here and NaN
(0/0) in PyTorch and the reference; the program's result is undefined there, and `simulate`
says so in one line naming the row (`pipeline.undefined_error`), not as a mismatch.

    >>> from fuseflow.ir.expr import Binary, In, Const, Unary
    >>> evaluate(Unary("exp", In(0)), [float("-inf")])
    0.0
    >>> evaluate(Binary("sub", In(0), In(1)), [float("-inf"), None]), evaluate(Binary("add", In(0), In(1)), [0.0, None])
    (-inf, None)
"""
from __future__ import annotations

import math

import numpy as np

from ..scalar_ops import REDUCTIONS
from .expr import BINARY, COMPARE, UNARY, Binary, Compare, Const, Expr, In, Select, Unary
from .program import IndexOp, Program, op_output, remembered

IDENTITY = {kind: r.identity for kind, r in REDUCTIONS.items()}


def _same(a, b) -> bool:
    return a is not None and b is not None and (a == b or (math.isnan(a) and math.isnan(b)))


def evaluate(e: Expr, values: list) -> float | None:
    """Value of `e` when operand k is the constant values[k] (None: unknown), or None if unknown."""
    with np.errstate(all="ignore"):
        return _eval(e, values)


def _eval(e: Expr, values: list):
    if isinstance(e, In):
        return values[e.index]
    if isinstance(e, Const):
        return float(e.value)
    if isinstance(e, Unary):
        a = _eval(e.arg, values)
        return None if a is None else float(UNARY[e.op](np.float64(a)))
    if isinstance(e, Binary):
        a, b = _eval(e.lhs, values), _eval(e.rhs, values)
        if a is not None and b is not None:
            return float(BINARY[e.op](np.float64(a), np.float64(b)))
        known = a if a is not None else b
        if e.op == "mul" and known == 0.0:
            return 0.0  # unknown operands are taken to be finite
        if e.op == "div" and a == 0.0:
            return 0.0
        if e.op in ("add", "sub") and known is not None and math.isinf(known):
            return known if (e.op == "add" or a is not None) else -known
        if e.op == "max" and known == math.inf or e.op == "min" and known == -math.inf:
            return known
        return None
    if isinstance(e, Compare):
        a, b = _eval(e.lhs, values), _eval(e.rhs, values)
        return None if a is None or b is None else float(COMPARE[e.pred](a, b))
    if isinstance(e, Select):
        c = _eval(e.cond, values)
        a, b = _eval(e.if_true, values), _eval(e.if_false, values)
        if c is not None:
            return a if c != 0 else b
        return a if _same(a, b) else None
    raise TypeError(e)


def op_background(op: IndexOp, operand_bg: list[float | None]) -> float | None:
    """Background of an op's output from its operands' backgrounds.

    A reduction's is its identity (positions whose terms are all the identity add nothing).
    Otherwise the body's value with the operands that span every output variable at their
    backgrounds and the others unknown, or failing that with every operand that has an output
    variable at its background. Any choice is correct: the merges (fusion.patterns) visit every
    position whose value may differ from it; the choice only decides how sparse the result is."""
    if op.reduce_vars:
        return IDENTITY[op.reduce_kind]
    out_vars = set(op.output.vars)
    for spans in (lambda a: out_vars <= set(a.vars), lambda a: bool(out_vars & set(a.vars))):
        value = evaluate(op.body, [bg if spans(a) else None for a, bg in zip(op.inputs, operand_bg)])
        if value is not None and not math.isnan(value):
            return value
    return None


def backgrounds(program: Program) -> dict[str, float | None]:
    """Background of every tensor of `program` (inputs 0); computed once while its ops and inputs
    stay the same (`program.remembered`: a compile builds a region per group and variant)."""
    return dict(remembered(program, "backgrounds", _computed_backgrounds))


def _computed_backgrounds(program: Program) -> dict[str, float | None]:
    bg: dict[str, float | None] = {name: 0.0 for name in program.inputs}
    for op in program.ops:
        if isinstance(op, IndexOp):
            bg[op_output(op)] = op_background(op, [bg[a.tensor] for a in op.inputs])
        else:
            bg[op_output(op)] = bg[op.input]
    return bg
