"""The oracle's writers: level_write (a level's seg and crd) and value_write (the values).

    >>> from fuseflow.sim.oracle import level_write, value_write
    >>> level = level_write("0 2 S0 1 S0 S1 D")
    >>> level.seg.tolist(), level.crd.tolist()
    ([0, 2, 3], [0, 2, 1])
    >>> value_write("1.5 N S0 D")
    [1.5, 0.0]
"""
from __future__ import annotations

from ...sam.graph import GraphError
from ..storage import Level
from ..tokens import Done, Empty, Stop, Val, is_elem
from .arith import _num
from .context import _Ctx


def _level_write(c: _Ctx) -> None:
    fmt, dim = c.params.get("format", "compressed"), c.params.get("dim")
    compressed = fmt == "compressed"
    if not compressed and (fmt != "dense" or dim is None):
        raise GraphError(f"{c.where()}: format must be compressed or dense with a dim, got {fmt} dim={dim}")
    seg, crd, count = [0], [], 0  # count: coordinates in the open fiber
    while True:
        tok = c.pop("crd")
        if isinstance(tok, Val):
            if compressed:
                if (dim is not None and not 0 <= tok.x < dim) or (count and tok.x <= crd[-1]):
                    c.fail("coordinates must increase within a fiber and lie in 0..dim-1",
                           *[Val(x) for x in crd[-1:] if count], tok)
                crd.append(tok.x)
                c.counters["mem_writes"] += 1
            elif tok.x != count:
                c.fail(f"a dense level's fiber must hold 0..{dim - 1}", Val(count), tok)
            count += 1
        elif tok == Stop(0):
            if compressed:
                seg.append(len(crd))
                c.counters["mem_writes"] += 1
            elif count != dim:
                c.fail(f"a dense level's fiber must hold {dim} coordinates, got {count} before", tok)
            count = 0
        elif isinstance(tok, Stop) or tok is Done:
            if count:
                c.fail("coordinates not closed by S0 before", tok)
        else:
            c.fail("a crd stream holds", tok)
        c.step()
        if tok is Done:
            break
    c.written_level = Level("compressed", dim, seg, crd) if compressed else Level("dense", dim)


def _value_write(c: _Ctx) -> None:
    vals, spec = [], c.tile
    while True:
        tok = c.pop("val")
        if is_elem(tok) and spec is not None:
            vals.append(spec.full(1, 0.0)[0] if tok is Empty else tok.x.a)
            c.counters["mem_writes"] += spec.out_elements
        elif is_elem(tok):
            vals.append(_num(tok))
            c.counters["mem_writes"] += 1
        elif not (isinstance(tok, Stop) or tok is Done):
            c.fail("a val stream holds", tok)
        c.step()
        if tok is Done:
            break
    c.written_vals = vals
