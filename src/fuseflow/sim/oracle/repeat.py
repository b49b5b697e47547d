"""The oracle's repetition nodes: repsig (a repeat signal per coordinate) and repeat (an input
element per signal).

    >>> from fuseflow.sim.oracle import format_tokens, repeat, repsig
    >>> format_tokens(repsig("4 7 S0 D"))
    'R R S0 D'
    >>> format_tokens(repeat("5 6 S0 D", "R R S0 R S0 S1 D"))
    '5 5 S0 6 S0 S1 D'
"""
from __future__ import annotations

from ..tokens import Done, Repeat, Stop, is_elem
from .context import _Ctx


def _repsig(c: _Ctx) -> None:
    while True:
        tok = c.pop("crd")
        if is_elem(tok):
            c.emit("repsig", Repeat)
        elif isinstance(tok, Stop) or tok is Done:
            c.emit("repsig", tok)
        else:
            c.fail("a crd stream holds", tok)
        c.step()
        if tok is Done:
            return


def _repeat(c: _Ctx) -> None:
    while True:
        sig, head = c.pop("sig"), c.peek("in")
        if sig is Repeat:
            if not is_elem(head):
                c.fail("signal R needs an element at the head of in", sig, head)
            c.emit("out", head)
        elif isinstance(sig, Stop) and sig.n == 0:
            if not is_elem(head):
                c.fail("signal S0 needs an element at the head of in", sig, head)
            c.pop("in")
            c.emit("out", sig)
        elif isinstance(sig, Stop):
            if head != Stop(sig.n - 1):
                c.fail(f"signal S{sig.n} needs S{sig.n - 1} at the head of in", sig, head)
            c.pop("in")
            c.emit("out", sig)
        elif sig is Done:
            if head is not Done:
                c.fail("signal D needs D at the head of in", sig, head)
            c.pop("in")
            c.emit("out", Done)
            c.step()
            return
        else:
            c.fail("a repsig stream holds", sig)
        c.step()
