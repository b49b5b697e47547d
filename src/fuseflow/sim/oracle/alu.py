"""The oracle's ALU: elementwise ops on aligned value streams, an optional scalar operand, tiles.

    >>> from fuseflow.sim.oracle import alu, format_tokens
    >>> format_tokens(alu("div", "1.0 N S0 D", "2.0 3.0 S0 D"))
    '0.5 0 S0 D'
    >>> format_tokens(alu("mul", "1.0 2.0 S0 D", scalar=3.0))
    '3 6 S0 D'
"""
from __future__ import annotations

from ...sam.graph import GraphError
from ..tiles import Tile, TileSpec
from ..tokens import Done, Empty, Stop, Val, is_elem
from .arith import ALU_OPS, _num
from .context import _Ctx


def _alu_signature(kind_where: str, params: dict, connected: list[str]):
    op = params.get("op")
    if op not in ALU_OPS:
        raise GraphError(f"{kind_where}: unknown ALU op {op!r}")
    arity = params.get("arity") or len(connected)
    ports = "abc"[:arity]
    scalar, pos = params.get("scalar"), params.get("scalar_pos", 1)
    nargs, fn = ALU_OPS[op]
    if op in ("const", "coalesce"):
        if scalar is None or arity != 1:
            raise GraphError(f"{kind_where}: {op} needs a scalar and one input")
    elif nargs != arity + (scalar is not None) or (scalar is not None and not 0 <= pos <= arity):
        raise GraphError(f"{kind_where}: op {op} takes {nargs} operands, got {arity} inputs"
                         + (f" and a scalar at {pos}" if scalar is not None else ""))
    return op, ports, fn, (None if scalar is None else float(scalar)), pos


def _tile_alu(spec: TileSpec, op: str, toks, scalar, pos) -> Val:
    """One tile ALU result (N operands are tiles of zeros)."""
    if op == "coalesce":
        return Val(Tile(spec.full(1, scalar)[0])) if toks[0] is Empty else toks[0]
    if op == "const":
        return Val(Tile(spec.full(1, scalar)[0]))
    stacks = [spec.full(1, 0.0, axes) if t is Empty else t.x.a[None] for t, axes in zip(toks, spec.ins)]
    return Val(Tile(spec.alu(op, stacks, scalar, pos)[0]))


def _alu(c: _Ctx) -> None:
    op, ports, fn, scalar, pos = _alu_signature(c.where(), c.params, [p for p in "abc" if p in c.inputs])
    spec = c.tile
    while True:
        toks = [c.pop(p) for p in ports]
        if spec is not None and all(is_elem(t) for t in toks):
            c.emit("val", _tile_alu(spec, op, toks, scalar, pos))
            if op != "coalesce":
                c.counters["flops"] += spec.flops_per_token
        elif op == "coalesce" and is_elem(toks[0]):
            c.emit("val", Val(scalar if toks[0] is Empty else float(_num(toks[0]))))
        elif all(is_elem(t) for t in toks):
            if op == "const":
                result = scalar
            else:
                xs = [_num(t) for t in toks]
                if scalar is not None:
                    xs.insert(pos, scalar)
                result = fn(*xs)
            c.counters["flops"] += 1
            c.emit("val", Val(float(result)))
        else:
            first = toks[0]
            if not (isinstance(first, Stop) or first is Done or is_elem(first)):
                c.fail("a val stream holds", first)
            for t in toks[1:]:
                if t != first:
                    c.fail("inputs are not aligned", first, t)
            c.emit("val", first)
        c.step()
        if toks[0] is Done:
            return
