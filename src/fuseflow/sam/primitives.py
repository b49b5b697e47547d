"""The primitive catalogue: ports, stream kinds and token semantics of each SAM primitive.

Streams carry tokens `Val(x)`, `Stop(n)`, `Empty` and `Done`, written `x`, `Sn`, `N`, `D`.
A stream of depth d is a sequence of nested fibers. **Every fiber ends with its own stop**:
`S0` closes an innermost fiber and `Sn` closes a fiber n levels further out, right after the
`S(n-1)` of its last child. (SAM merges `S0 S1` into `S1`; fuseflow does not, because the merged
form cannot tell an empty inner fiber from an empty outer one and reducers then emit spurious
values.) Example, the rows {5,7} and {6} of a matrix at the column level: `5 7 S0 6 S0 S1 D`.

Stream kinds: `crd` (coordinates), `ref` (positions into a tensor level), `val` (values) and
`repsig` (repeat signals: `R`, stops, `D`). Payload ports of joiners carry `ref` or `val`.

    >>> PRIMITIVES["scan"].inputs, PRIMITIVES["scan"].outputs
    ({'ref': 'ref'}, {'crd': 'crd', 'ref': 'ref'})
"""
from __future__ import annotations

from dataclasses import dataclass, field

PAYLOAD = "ref|val"  # a port that carries either kind; the output has the input's kind
ANY = "any"  # broadcast, fork and join carry streams of any kind


@dataclass(frozen=True)
class Primitive:
    kind: str
    inputs: dict[str, str]
    outputs: dict[str, str]
    params: tuple[str, ...] = ()
    variadic: bool = False  # joiners and broadcast: ports are numbered, see `ports`
    doc: str = field(default="", repr=False)

    def ports(self, arity: int = 0) -> tuple[dict[str, str], dict[str, str]]:
        """(input ports, output ports) with their stream kinds; `arity` numbers variadic ports."""
        if not self.variadic:
            return dict(self.inputs), dict(self.outputs)
        if self.kind in ("intersect", "union"):
            ins = {f"{name}{k}": kind for k in range(arity) for name, kind in self.inputs.items()}
            return ins, {"crd": "crd", **{f"pay{k}": PAYLOAD for k in range(arity)}}
        if self.kind in ("broadcast", "fork"):
            return {"in": ANY}, {f"out{k}": ANY for k in range(arity)}
        if self.kind == "join":
            return {f"in{k}": ANY for k in range(arity)}, {"out": ANY}
        raise AssertionError(self.kind)


def _p(kind, inputs, outputs, params=(), variadic=False, doc=""):
    return Primitive(kind, inputs, outputs, tuple(params), variadic, doc)


PRIMITIVES: dict[str, Primitive] = {p.kind: p for p in [
    _p("root", {}, {"ref": "ref"}, doc="""Emits the root reference: `0 D`."""),
    _p("scan", {"ref": "ref"}, {"crd": "crd", "ref": "ref"}, ("tensor", "level", "format", "dim", "stride", "window"),
       doc="""
        Level scanner. For each input `Val(r)`: emit the coordinates of fiber r with their positions,
        then `S0`. Compressed: positions seg[r]..seg[r+1], coordinates crd[p]. Dense: coordinates
        0..dim-1, positions r*dim + c; with a `stride` (a dense tensor visited out of its stored
        level order, each level adding its coordinate times its stride), positions r + c*stride.
        `N` (a missing parent) gives an empty fiber (just `S0`) on a compressed level and the full
        fiber 0..dim-1 with `N` positions on a dense level, so a dense level always holds every
        coordinate. `Sn` becomes `S(n+1)`. A `window` (sorted, disjoint coordinate ranges
        `[[lo, hi], ...]`, set on the scanners of a kernel's outermost loop for a partitioned run)
        keeps only the coordinates of a `Val(r)` fiber that lie in one of its ranges.
        Example (seg=[0,2,3], crd=[5,7,6]): refs `0 1 S0 D` -> crd `5 7 S0 6 S0 S1 D`,
        refs `0 1 S0 2 S0 S1 D`."""),
    _p("locate", {"crd": "crd", "ref": "ref"}, {"ref": "ref"}, ("tensor", "level", "dim", "stride"), doc="""
        Random access into a dense level: token-aligned `crd` and parent `ref` give the position
        `ref*dim + crd` (with a `stride`, as for `scan`: `ref + crd*stride`); `N` on either side
        gives `N`; stops and `D` pass through.
        Example (dim=4): crd `1 3 S0 D`, ref `2 2 S0 D` -> `9 11 S0 D`."""),
    _p("repsig", {"crd": "crd"}, {"repsig": "repsig"}, doc="""
        Repeat-signal generator: `Val`/`N` -> `R`, stops and `D` pass through.
        Example: `4 9 S0 S1 D` -> `R R S0 S1 D`."""),
    _p("repeat", {"in": PAYLOAD, "sig": "repsig"}, {"out": PAYLOAD}, doc="""
        Repeats each element of a depth-d stream over a new inner level. Signal `R`: emit the head
        of `in` without consuming it. `S0`: consume the head (a `Val`/`N`), emit `S0`. `Sn` (n>=1):
        the head must be `S(n-1)`; consume it, emit `Sn`. `D`: emit `D`.
        Example: in `a b S0 D`, sig `R R S0 R S0 S1 D` -> `a a S0 b S0 S1 D`."""),
    _p("intersect", {"crd": "crd", "pay": PAYLOAD}, {}, variadic=True, doc="""
        N-ary coordinate intersection; each input is a coordinate stream with one aligned payload.
        All heads equal coordinates: emit the coordinate and every payload head, consume all.
        Otherwise skip (consume without output) the inputs whose heads are the smallest
        coordinate or that are not yet at the stop the others wait at. All heads `Sn`: emit `Sn`.
        Example: (`1 3 S0 D`, `a b`) and (`3 4 S0 D`, `c d`) -> crd `3 S0 D`, pay0 `b S0 D`, pay1 `c S0 D`."""),
    _p("union", {"crd": "crd", "pay": PAYLOAD}, {}, variadic=True, doc="""
        N-ary coordinate union: emit the smallest head coordinate; inputs holding it emit and
        consume their payload head, the others emit `N`. All heads `Sn`: emit `Sn`.
        Example: (`1 3 S0 D`, `a b`) and (`3 4 S0 D`, `c d`) -> crd `1 3 4 S0 D`,
        pay0 `a b N S0 D`, pay1 `N c d S0 D`."""),
    _p("array", {"ref": "ref"}, {"val": "val"}, ("tensor", "fill"), doc="""
        Value lookup: `Val(r)` -> `Val(vals[r])`, `N` -> the tensor's background `fill` (0 unless
        given), stops and `D` pass through."""),
    _p("alu", {"a": "val", "b": "val", "c": "val"}, {"val": "val"}, ("op", "arity", "scalar", "scalar_pos"),
       doc="""
        Token-aligned arithmetic over 1-3 value inputs (`N` counts as 0): unary ops (neg exp sqrt
        rsqrt tanh erf abs; `const` emits the scalar for every element; `coalesce` turns `N` into the
        scalar, the background of a tensor whose missing entries are not 0), binary ops (add sub
        mul div max min and comparisons gt ge lt le eq ne giving 1/0), `select` (3 inputs). With a
        `scalar`, a binary op takes it as operand `scalar_pos`. Stops must match and pass through.
        Example (mul, scalar 2): `1 3 S0 D` -> `2 6 S0 D`."""),
    _p("reduce", {"val": "val"}, {"val": "val"}, ("kind",), doc="""
        Reduces the innermost level (sum, max or min; `N` counts as 0). `S0`: emit the result of the
        fiber (the identity if it was empty) and reset. `Sn` (n>=1): emit `S(n-1)`.
        Example (sum): `1 2 S0 S0 4 S0 S1 D` -> `3 0 4 S0 D`."""),
    _p("spacc", {"crd_inner": "crd", "crd_outer": "crd", "val": "val"}, {"crd": "crd", "val": "val"},
       ("kind",), doc="""
        Sparse accumulator of order 1: reduces the level of `crd_outer` (the reduction variable)
        while keeping the level below it. For each outer coordinate, consume one inner fiber of
        (crd, val) pairs into an ordered map. Outer `S0`: emit the map in coordinate order, then `S0`.
        Outer `Sn` (n>=1): emit `Sn`.
        Example: outer `0 1 S0 D`, inner `2 5 S0 5 S0 S1 D`, val `1 1 S0 2 S0 S1 D`
        -> crd `2 5 S0 D`, val `1 3 S0 D`."""),
    _p("spacc2", {"crd_inner": "crd", "crd_mid": "crd", "crd_outer": "crd", "val": "val"},
       {"crd_mid": "crd", "crd": "crd", "val": "val"}, ("kind",), doc="""
        Sparse accumulator of order 2: reduces the level of `crd_outer` while keeping the two levels
        below it (`crd_mid`, then `crd_inner` with the values). At each outer `S0` it emits the
        accumulated (mid, inner) entries in coordinate order: every mid coordinate on `crd_mid`,
        its inner fiber on `crd`/`val`, then `S0` on `crd_mid` and `S1` on `crd`/`val`.
        Example: outer `0 1 S0 D`, mid `3 S0 3 4 S0 S1 D`, inner `5 S0 S1 5 S0 6 S0 S1 S2 D`,
        val `1 S0 S1 2 S0 4 S0 S1 S2 D` -> crd_mid `3 4 S0 D`, crd `5 S0 6 S0 S1 D`, val `3 S0 4 S0 S1 D`."""),
    _p("crd_drop", {"outer": "crd", "inner": "crd"}, {"outer": "crd", "inner": "crd"}, doc="""
        Drops outer coordinates whose inner fiber is empty, and those empty fibers.
        Example: outer `0 1 2 S0 D`, inner `5 S0 S0 6 S0 S1 D` -> outer `0 2 S0 D`, inner `5 S0 6 S0 S1 D`."""),
    _p("level_write", {"crd": "crd"}, {}, ("tensor", "level", "format", "dim"), doc="""
        Writes one level of an output tensor. Compressed: appends coordinates and closes a segment on
        each `S0`. Dense: checks every fiber holds exactly 0..dim-1."""),
    _p("value_write", {"val": "val"}, {}, ("tensor",), doc="""
        Appends values (`N` as 0) to an output tensor; stops are dropped."""),
    _p("broadcast", {"in": ANY}, {}, variadic=True, doc="""
        Copies every token to each of its outputs `out0..outK`. Inserted for fan-out."""),
    _p("fork", {"in": ANY}, {}, ("lanes",), variadic=True, doc="""
        Parallelization: deals `Val`/`N` tokens round-robin over the lanes; stops and `D` go to all."""),
    _p("join", {"in": ANY}, {"out": ANY}, ("lanes",), variadic=True, doc="""
        Gathers lanes in order, the inverse of `fork`."""),
]}

STREAM_KINDS = ("crd", "ref", "val", "repsig")
