"""The oracle's primitives as plain functions on token lists (or their text), for tests and examples.

    >>> from fuseflow.sim.tokens import format_tokens
    >>> format_tokens(root()), format_tokens(broadcast("1 S0 D", 2)[1])
    ('0 D', '1 S0 D')
"""
from __future__ import annotations

from ..storage import Level, StoredTensor
from ..tokens import Token
from .node import apply


def root() -> list[Token]:
    return apply("root", {}).outs["ref"]


def scan(refs, *, seg=None, crd=None, dim=None, format=None) -> tuple[list[Token], list[Token]]:
    """Scan a compressed level (give seg and crd) or a dense level (give dim) -> (crd, ref)."""
    if format is None:
        format = "compressed" if seg is not None else "dense"
    level = (Level("compressed", dim, list(seg), list(crd)) if format == "compressed" else Level("dense", dim))
    run = apply("scan", {"ref": refs}, {"tensor": "T", "level": 0, "format": format, "dim": dim},
                tensors={"T": StoredTensor([level], [])})
    return run.outs["crd"], run.outs["ref"]


def locate(crd, ref, *, dim: int) -> list[Token]:
    return apply("locate", {"crd": crd, "ref": ref}, {"dim": dim}).outs["ref"]


def repsig(crd) -> list[Token]:
    return apply("repsig", {"crd": crd}).outs["repsig"]


def repeat(inp, sig) -> list[Token]:
    return apply("repeat", {"in": inp, "sig": sig}).outs["out"]


def _joiner_fn(kind, pairs):
    inputs = {}
    for i, (crd, pay) in enumerate(pairs):
        inputs[f"crd{i}"], inputs[f"pay{i}"] = crd, pay
    run = apply(kind, inputs, arity=len(pairs))
    return run.outs["crd"], [run.outs[f"pay{i}"] for i in range(len(pairs))]


def intersect(*pairs) -> tuple[list[Token], list[list[Token]]]:
    """intersect((crd0, pay0), (crd1, pay1), ...) -> (crd, [pay0, pay1, ...])"""
    return _joiner_fn("intersect", pairs)


def union(*pairs) -> tuple[list[Token], list[list[Token]]]:
    return _joiner_fn("union", pairs)


def array(refs, vals) -> list[Token]:
    return apply("array", {"ref": refs}, {"tensor": "T"},
                 tensors={"T": StoredTensor([], list(vals))}).outs["val"]


def alu(op: str, *inputs, scalar=None, scalar_pos: int = 1) -> list[Token]:
    params = {"op": op, "arity": len(inputs), "scalar": scalar, "scalar_pos": scalar_pos}
    return apply("alu", dict(zip("abc", inputs)), params).outs["val"]


def reduce(vals, kind: str = "sum") -> list[Token]:
    return apply("reduce", {"val": vals}, {"kind": kind}).outs["val"]


def spacc(crd_outer, crd_inner, vals, kind: str = "sum") -> tuple[list[Token], list[Token]]:
    run = apply("spacc", {"crd_outer": crd_outer, "crd_inner": crd_inner, "val": vals}, {"kind": kind})
    return run.outs["crd"], run.outs["val"]


def crd_drop(outer, inner) -> tuple[list[Token], list[Token]]:
    run = apply("crd_drop", {"outer": outer, "inner": inner})
    return run.outs["outer"], run.outs["inner"]


def level_write(crd, *, format: str = "compressed", dim: int | None = None) -> Level:
    return apply("level_write", {"crd": crd}, {"tensor": "T", "level": 0, "format": format,
                                               "dim": dim}).written_level


def value_write(vals) -> list[float]:
    return apply("value_write", {"val": vals}, {"tensor": "T"}).written_vals


def broadcast(inp, k: int) -> list[list[Token]]:
    run = apply("broadcast", {"in": inp}, arity=k)
    return [run.outs[f"out{i}"] for i in range(k)]


def fork(inp, lanes: int) -> list[list[Token]]:
    run = apply("fork", {"in": inp}, {"lanes": lanes}, arity=lanes)
    return [run.outs[f"out{i}"] for i in range(lanes)]


def join(lanes: list, depth: int = 0) -> list[Token]:
    run = apply("join", {f"in{i}": lane for i, lane in enumerate(lanes)},
                {"lanes": len(lanes), "depth": depth}, arity=len(lanes))
    return run.outs["out"]
