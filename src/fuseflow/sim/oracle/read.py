"""The oracle's nodes that read a stored tensor: root, scan (level scanners), locate and array
(value reads).

    >>> from fuseflow.sim.oracle import format_tokens, locate
    >>> format_tokens(locate("1 3 S0 D", "2 0 S0 D", dim=4))
    '9 3 S0 D'
"""
from __future__ import annotations

from ...sam.graph import GraphError
from ..tiles import Tile, stored_tile
from ..tokens import Done, Empty, Stop, Val, is_elem
from .context import _Ctx


def _root(c: _Ctx) -> None:
    c.emit("ref", Val(0))
    c.step()
    c.emit("ref", Done)
    c.step()


def _scan(c: _Ctx) -> None:
    level = c.level()
    fmt, dim = c.params.get("format", level.format), c.params.get("dim")
    if fmt != level.format:
        raise GraphError(f"{c.where()}: scans a {fmt} level, tensor {c.params['tensor']} level "
                         f"{c.params.get('level', 0)} is {level.format}")
    if not level.is_compressed and dim is not None and dim != level.dim:
        raise GraphError(f"{c.where()}: dim={dim} but the stored level has dim {level.dim}")
    stride = c.params.get("stride") or 0
    if stride and (level.is_compressed or not isinstance(stride, int) or stride < 0):
        raise GraphError(f"{c.where()}: stride={stride!r} needs a dense level and a positive integer")
    window = c.params.get("window")
    while True:
        tok = c.pop("ref")
        if isinstance(tok, Val):
            r = tok.x
            if level.is_compressed:
                if not (isinstance(r, int) and 0 <= r < len(level.seg) - 1):
                    c.fail(f"reference out of range 0..{len(level.seg) - 2}", tok)
                c.counters["mem_reads"] += 2
            pairs = level.child_positions(r) if not stride else [(x, r + x * stride) for x in range(level.dim)]
            if window:  # a partitioned run: only the coordinates of the window's ranges
                pairs = [(crd, pos) for crd, pos in pairs if any(lo <= crd < hi for lo, hi in window)]
            for crd, pos in pairs:
                if level.is_compressed:
                    c.counters["mem_reads"] += 1
                c.emit("crd", Val(crd))
                c.emit("ref", Val(pos))
                c.step()
            c.emit_all(Stop(0))
            c.step()
        elif tok is Empty:
            if not level.is_compressed:  # a dense level under a missing parent: every coordinate, no data
                for crd in range(level.dim):
                    c.emit("crd", Val(crd))
                    c.emit("ref", Empty)
                    c.step()
            c.emit_all(Stop(0))
            c.step()
        elif isinstance(tok, Stop):
            c.emit_all(Stop(tok.n + 1))
            c.step()
        elif tok is Done:
            c.emit_all(Done)
            c.step()
            return
        else:
            c.fail("a ref stream holds", tok)


def _locate(c: _Ctx) -> None:
    dim = c.params.get("dim")
    if dim is None:
        dim = c.level().dim
    stride = c.params.get("stride") or 0
    if not isinstance(stride, int) or stride < 0:
        raise GraphError(f"{c.where()}: stride={stride!r} is not a positive integer")
    while True:
        a, b = c.pop("crd"), c.pop("ref")
        if isinstance(a, Val) and isinstance(b, Val):
            if not 0 <= a.x < dim:
                c.fail(f"coordinate out of range 0..{dim - 1}", a)
            c.emit("ref", Val(b.x * dim + a.x if not stride else b.x + a.x * stride))
        elif is_elem(a) and is_elem(b):
            c.emit("ref", Empty)
        elif isinstance(a, Stop) and a == b:
            c.emit("ref", a)
        elif a is Done and b is Done:
            c.emit("ref", Done)
            c.step()
            return
        else:
            c.fail("crd and ref are not aligned", a, b)
        c.step()


def _array(c: _Ctx) -> None:
    tensor, spec = c.tensor(), c.tile
    vals, fill = tensor.vals, float(c.params.get("fill", tensor.fill))
    while True:
        tok = c.pop("ref")
        if isinstance(tok, Val):
            if not (isinstance(tok.x, int) and 0 <= tok.x < len(vals)):
                c.fail(f"reference out of range 0..{len(vals) - 1}", tok)
            if spec is None:
                c.counters["mem_reads"] += 1
                c.emit("val", Val(float(vals[tok.x])))
            else:
                c.counters["mem_reads"] += spec.out_elements
                c.emit("val", Val(Tile(stored_tile(tensor, tok.x, spec))))
        elif tok is Empty:
            c.emit("val", Val(fill) if spec is None else Val(Tile(spec.full(1, fill)[0])))
        elif isinstance(tok, Stop) or tok is Done:
            c.emit("val", tok)
        else:
            c.fail("a ref stream holds", tok)
        c.step()
        if tok is Done:
            return
