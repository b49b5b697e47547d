"""The oracle's crd_drop: outer coordinates whose inner fiber is empty go.

    >>> from fuseflow.sim.oracle import crd_drop, format_tokens
    >>> outer, inner = crd_drop("0 1 S0 D", "3 S0 S0 S1 D")
    >>> format_tokens(outer), format_tokens(inner)
    ('0 S0 D', '3 S0 S1 D')
"""
from __future__ import annotations

from ..tokens import Done, Stop, Val
from .context import _Ctx


def _crd_drop(c: _Ctx) -> None:
    started = False
    while True:
        inner, outer = c.peek("inner"), c.peek("outer")
        if isinstance(inner, Val):
            if not isinstance(outer, Val):
                c.fail("an inner coordinate needs an outer coordinate", outer, inner)
            if not started:
                c.emit("outer", outer)
                started = True
            c.pop("inner")
            c.emit("inner", inner)
        elif inner == Stop(0):
            if not isinstance(outer, Val):
                c.fail("an inner fiber needs an outer coordinate", outer, inner)
            c.pop("outer")
            c.pop("inner")
            if started:
                c.emit("inner", inner)
            started = False
        elif isinstance(inner, Stop) or inner is Done:
            want = Stop(inner.n - 1) if isinstance(inner, Stop) else Done
            if outer != want:
                c.fail("outer is not aligned with inner", outer, inner)
            c.pop("outer")
            c.pop("inner")
            c.emit("outer", outer)
            c.emit("inner", inner)
            if inner is Done:
                c.step()
                return
        else:
            c.fail("a crd stream holds", inner)
        c.step()
