"""The oracle's sparse accumulators: spacc (order 1) and spacc2 (order 2).

    >>> from fuseflow.sim.oracle import format_tokens, spacc
    >>> crd, val = spacc("0 1 S0 D", "0 2 S0 2 S0 S1 D", "1 2 S0 3 S0 S1 D")
    >>> format_tokens(crd), format_tokens(val)
    ('0 2 S0 D', '1 5 S0 D')
"""
from __future__ import annotations

from collections import deque

from ..tokens import Done, Stop, Val, is_elem
from .context import _Ctx
from .reduce import _reducer


def _spacc(c: _Ctx) -> None:
    """Order-1 accumulator: (outer r, inner w, val) -> (w, val) with r reduced.

    Every step takes one input action (`_spacc_input`) and emits one token from a queue of
    finished output, so that a finished fiber drains while the next one accumulates. Once `D` is
    taken, the steps left only emit."""
    reducer = _reducer(c)
    acc: dict = {}
    queue: deque = deque()  # finished (crd, val) tokens, oldest first
    ended = False
    while not ended or queue:
        if not ended:
            ended = _spacc_input(c, reducer, acc, queue)
        if queue:
            crd, val = queue.popleft()
            c.emit("crd", crd)
            c.emit("val", val)
        c.step()


def _spacc_input(c: _Ctx, reducer, acc: dict, queue: deque) -> bool:
    """One input action of `_spacc`: accumulate a point, close an inner fiber, or take an outer
    stop or `D`; an outer `S0` queues the fiber's entries in coordinate order and then the stop,
    every other stop and `D` queue themselves. True once `D` is taken."""
    *_, wrap = reducer
    outer = c.peek("crd_outer")
    if isinstance(outer, Val):
        inner = c.peek("crd_inner")
        if isinstance(inner, Val):
            _accumulate(c, reducer, acc, inner)
        elif inner == Stop(0):
            c.pop("crd_inner")
            v = c.pop("val")
            if v != inner:
                c.fail("val is not aligned with crd_inner", inner, v)
            c.pop("crd_outer")
        else:
            c.fail("an outer coordinate needs an inner fiber", outer, inner)
        return False
    if not (isinstance(outer, Stop) or outer is Done):
        c.fail("a crd stream holds", outer)
    if acc and outer != Stop(0):
        c.fail("outer coordinates not closed by S0 before", outer)
    want = Stop(outer.n + 1) if isinstance(outer, Stop) else Done
    inner, v = c.peek("crd_inner"), c.peek("val")
    if inner != want:
        c.fail("crd_inner is not aligned with crd_outer", outer, inner)
    if v != want:
        c.fail("val is not aligned with crd_inner", inner, v)
    for port in ("crd_outer", "crd_inner", "val"):
        c.pop(port)
    queue.extend((Val(k), Val(wrap(x))) for k, x in sorted(acc.items(), key=lambda e: e[0]))
    acc.clear()
    queue.append((outer, outer))
    return outer is Done


def _accumulate(c: _Ctx, reducer, row: dict, inner: Val) -> None:
    """Take the point at `inner` (its crd_inner and val) into `row`, combined with what `row`
    holds at that coordinate: both accumulators' step for a point."""
    combine, identity, element, flops, _ = reducer
    c.pop("crd_inner")
    v = c.pop("val")
    if not is_elem(v):
        c.fail("val is not aligned with crd_inner", inner, v)
    row[inner.x] = combine(row.get(inner.x, identity), element(v))
    c.counters["flops"] += flops


def _spacc2(c: _Ctx) -> None:
    """Order-2 accumulator: (outer r, mid w1, inner w2, val) -> (w1, w2, val) with r reduced.

    Steps: one per inner (w2, val) pair accumulated; one per mid coordinate (consuming its
    inner `S0`); one per outer coordinate (consuming its mid `S0` and inner `S1`); at an outer
    `S0`, one step per emitted (w2, val) entry and one per closing `S0` of a w2 fiber, each w1
    coordinate going out with its fiber's first step; then one step per outer stop or `D`,
    consuming the aligned stops of all inputs and emitting `Sn` on crd_mid and `S(n+1)` on crd
    and val."""
    reducer = _reducer(c)
    *_, wrap = reducer
    acc: dict = {}
    while True:
        outer = c.peek("crd_outer")
        if isinstance(outer, Val):
            mid = c.peek("crd_mid")
            if isinstance(mid, Val):
                inner = c.peek("crd_inner")
                if isinstance(inner, Val):
                    _accumulate(c, reducer, acc.setdefault(mid.x, {}), inner)
                elif inner == Stop(0):
                    c.pop("crd_inner")
                    if c.pop("val") != inner:
                        c.fail("val is not aligned with crd_inner", inner)
                    acc.setdefault(mid.x, {})
                    c.pop("crd_mid")
                else:
                    c.fail("a mid coordinate needs an inner fiber", mid, inner)
            elif mid == Stop(0):
                inner = c.peek("crd_inner")
                if inner != Stop(1) or c.peek("val") != Stop(1):
                    c.fail("crd_inner is not aligned with crd_mid", mid, inner)
                for port in ("crd_inner", "val", "crd_mid", "crd_outer"):
                    c.pop(port)
            else:
                c.fail("an outer coordinate needs a mid fiber", outer, mid)
            c.step()
        elif isinstance(outer, Stop) or outer is Done:
            if acc and outer != Stop(0):
                c.fail("outer coordinates not closed by S0 before", outer)
            k = outer.n if isinstance(outer, Stop) else None
            wants = {"crd_mid": Stop(k + 1) if k is not None else Done,
                     "crd_inner": Stop(k + 2) if k is not None else Done,
                     "val": Stop(k + 2) if k is not None else Done}
            for port, want in wants.items():
                if c.peek(port) != want:
                    c.fail(f"{port} is not aligned with crd_outer", outer, c.peek(port))
            if outer == Stop(0):
                for w1 in sorted(acc):
                    c.emit("crd_mid", Val(w1))  # out with the row's first entry (or its S0)
                    for w2, value in sorted(acc[w1].items(), key=lambda e: e[0]):
                        c.emit("crd", Val(w2))
                        c.emit("val", Val(wrap(value)))
                        c.step()
                    c.emit("crd", Stop(0))
                    c.emit("val", Stop(0))
                    c.step()
                acc = {}
            for port in ("crd_outer", "crd_mid", "crd_inner", "val"):
                c.pop(port)
            if outer is Done:
                for port in ("crd_mid", "crd", "val"):
                    c.emit(port, Done)
                c.step()
                return
            c.emit("crd_mid", Stop(k))
            c.emit("crd", Stop(k + 1))
            c.emit("val", Stop(k + 1))
            c.step()
        else:
            c.fail("a crd stream holds", outer)
