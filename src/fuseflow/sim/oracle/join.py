"""The oracle's joiners: intersect and union of (crd, payload) inputs.

    >>> from fuseflow.sim.oracle import format_tokens, union
    >>> crd, pays = union(("0 2 S0 D", "10 12 S0 D"), ("2 3 S0 D", "7 8 S0 D"))
    >>> format_tokens(crd), [format_tokens(p) for p in pays]
    ('0 2 3 S0 D', ['10 12 N S0 D', 'N 7 8 S0 D'])
"""
from __future__ import annotations

from ..tokens import Done, Empty, Stop, Val, is_elem
from .context import _Ctx


def _joiner(c: _Ctx, is_union: bool) -> None:
    k = c.arity

    def pop_pay(i, crd_tok):
        pay = c.pop(f"pay{i}")
        ok = is_elem(pay) if isinstance(crd_tok, Val) else pay == crd_tok
        if not ok:
            c.fail(f"payload {i} is not aligned with its crd", crd_tok, pay)
        return pay

    while True:
        heads = [c.peek(f"crd{i}") for i in range(k)]
        for h in heads:
            if not (isinstance(h, (Val, Stop)) or h is Done):
                c.fail("a crd stream holds", h)
        if any(h is Done for h in heads):
            for h in heads:
                if h is not Done:
                    c.fail("inputs are not aligned", Done, h)
            for i in range(k):
                c.pop(f"crd{i}")
                pop_pay(i, Done)
            c.emit_all(Done)
            c.step()
            return
        stops = [h for h in heads if isinstance(h, Stop)]
        for s in stops[1:]:
            if s != stops[0]:
                c.fail("inputs are not aligned", stops[0], s)
        vals = [h.x for h in heads if isinstance(h, Val)]
        if not vals:  # every head is the same stop
            for i in range(k):
                c.pop(f"crd{i}")
                pop_pay(i, stops[0])
            c.emit_all(stops[0])
        elif is_union:
            m = min(vals)
            c.emit("crd", Val(m))
            for i, h in enumerate(heads):
                if isinstance(h, Val) and h.x == m:
                    c.pop(f"crd{i}")
                    c.emit(f"pay{i}", pop_pay(i, h))
                else:
                    c.emit(f"pay{i}", Empty)
        elif not stops and all(x == vals[0] for x in vals):
            c.emit("crd", heads[0])
            for i, h in enumerate(heads):
                c.pop(f"crd{i}")
                c.emit(f"pay{i}", pop_pay(i, h))
        else:  # skip: every coordinate if some input waits at a stop, else the smallest ones
            m = min(vals)
            for i, h in enumerate(heads):
                if isinstance(h, Val) and (stops or h.x == m):
                    c.pop(f"crd{i}")
                    pop_pay(i, h)
        c.step()
