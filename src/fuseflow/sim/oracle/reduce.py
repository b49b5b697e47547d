"""The oracle's reduce (a value per innermost fiber) and the reductions its accumulators share.

    >>> from fuseflow.sim.oracle import format_tokens, reduce
    >>> format_tokens(reduce("1 2 S0 S0 4 S0 S1 D", "max"))
    '2 -inf 4 S0 D'
"""
from __future__ import annotations

from ...sam.graph import GraphError
from ..tiles import Tile
from ..tokens import Done, Empty, Stop, Val, is_elem
from .arith import REDUCERS, _num
from .context import _Ctx


def _reducer(c: _Ctx):
    """(combine, identity, value of an element token, FLOPs per element, wrap a result)."""
    kind = c.params.get("kind", "sum")
    if kind not in REDUCERS:
        raise GraphError(f"{c.where()}: unknown reduction {kind!r}")
    spec = c.tile
    if spec is None:
        return REDUCERS[kind] + (_num, 1, float)

    def element(tok):
        return spec.full(1, 0.0)[0] if tok is Empty else spec.inner(tok.x.a[None], kind)[0]

    return (lambda a, b: spec.combine(kind, a, b)), spec.identity(kind), element, spec.in_elements, Tile


def _reduce(c: _Ctx) -> None:
    combine, identity, element, flops, wrap = _reducer(c)
    acc, open_fiber = identity, False
    while True:
        tok = c.pop("val")
        if is_elem(tok):
            acc = combine(acc, element(tok))
            open_fiber = True
            c.counters["flops"] += flops
        elif isinstance(tok, Stop) and tok.n == 0:
            c.emit("val", Val(wrap(acc)))
            acc, open_fiber = identity, False
        elif isinstance(tok, Stop) or tok is Done:
            if open_fiber:
                c.fail("elements not closed by S0 before", tok)
            c.emit("val", Stop(tok.n - 1) if isinstance(tok, Stop) else Done)
        else:
            c.fail("a val stream holds", tok)
        c.step()
        if tok is Done:
            return
