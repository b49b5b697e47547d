"""The oracle's scalar arithmetic: ALU ops and reductions as IEEE float64 does them (x/0 is
+-inf, sqrt of a negative is nan, max/min propagate nan), as `fuseflow.scalar_ops` tables them.

    >>> nargs, div = ALU_OPS["div"]
    >>> nargs, div(-1.0, 0.0), div(0.0, 0.0)
    (2, -inf, nan)
    >>> combine, identity = REDUCERS["max"]
    >>> identity, combine(identity, 3.0)
    (-inf, 3.0)
"""
from __future__ import annotations

from ...scalar_ops import INF, NAN, OPS, REDUCTIONS  # noqa: F401 - INF, NAN: re-exported
from ..tokens import Empty

# op -> (number of operands, function); const and coalesce (no operands) have no function
ALU_OPS: dict[str, tuple[int, object]] = {name: (op.arity, op.scalar) for name, op in OPS.items()}
REDUCERS: dict[str, tuple[object, float]] = {  # kind -> (combine, identity)
    name: (r.scalar, r.identity) for name, r in REDUCTIONS.items()}


def _num(tok) -> float:
    """The value of an element token (`N` counts as 0.0)."""
    return 0.0 if tok is Empty else float(tok.x)
