"""The oracle's nodes that copy, deal and merge streams: broadcast (copies), fork (deals elements
round-robin to lanes) and join (merges lanes back; fork then join is the identity).

    >>> from fuseflow.sim.oracle import fork, format_tokens, join
    >>> lanes = fork("1 2 3 S0 D", 2)
    >>> [format_tokens(lane) for lane in lanes], format_tokens(join(lanes))
    (['1 3 S0 D', '2 S0 D'], '1 2 3 S0 D')
"""
from __future__ import annotations

from ...sam.graph import GraphError
from ..tokens import Done, Stop, is_elem
from .context import _Ctx


def _check_payload(c: _Ctx, tok) -> None:
    if not (is_elem(tok) or isinstance(tok, Stop) or tok is Done):
        c.fail("a ref/val stream holds", tok)


def _broadcast(c: _Ctx) -> None:
    while True:
        tok = c.pop("in")
        c.emit_all(tok)
        c.step()
        if tok is Done:
            return


def _lanes(c: _Ctx) -> int:
    lanes = c.params.get("lanes", c.arity)
    if lanes != c.arity or c.arity < 1:
        raise GraphError(f"{c.where()}: lanes={lanes} but arity={c.arity}")
    return lanes


def _fork(c: _Ctx) -> None:
    lanes, idx = _lanes(c), 0
    while True:
        tok = c.pop("in")
        _check_payload(c, tok)
        if is_elem(tok):
            c.emit(f"out{idx}", tok)
            idx = (idx + 1) % lanes
        else:
            c.emit_all(tok)
        c.step()
        if tok is Done:
            return


def _join(c: _Ctx) -> None:
    lanes, idx, depth = _lanes(c), 0, c.params.get("depth", 0)
    while True:
        head = c.peek(f"in{idx}")
        _check_payload(c, head)
        if is_elem(head) or (isinstance(head, Stop) and head.n < depth):
            c.pop(f"in{idx}")
            c.emit("out", head)
            if (depth == 0) or head == Stop(depth - 1):
                idx = (idx + 1) % lanes
        else:
            for lane in range(lanes):
                other = c.peek(f"in{lane}")
                if other != head:
                    c.fail(f"lane {lane} is not at the stop of lane {idx}", head, other)
            for lane in range(lanes):
                c.pop(f"in{lane}")
            c.emit("out", head)
            if head is Done:
                c.step()
                return
        c.step()
