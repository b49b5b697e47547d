"""Whether Comal's loader takes a graph: a replay of the rules by which it builds a simulation.

Comal reads the operations of a `tortilla.ComalGraph` in order and, per operation, takes a channel
for every stream field from one of four maps keyed by stream id, one per stream kind (ref, crd,
val, repsig). The first field to name an id creates that id's channel; a second sender or a second
receiver of one id panics, an output with id 0 goes nowhere (an input with id 0 reads a channel
nobody writes), and a channel left with a sender but no receiver (or the reverse) stops the
simulation from starting. Which map a field uses is fixed by the operation, not by the field's
message type. Some operations and ALU arms are `todo!()` or panic; some read tensor files.
`check(graph, entry, files)` replays all of it and returns what Comal would refuse, each with the
operation that causes it (the rules are listed in docs/interop.md).

Entry points: `run_graph` (scalar values), `run_graph_block16/32/64` (timing only: scalar values,
every accumulator of order 1), `run_graph_true_block16/32/64` (values are NxN tiles: fewer ALU arms,
every accumulator of order 1, value files read N*N numbers per tile).

    >>> from fuseflow.sam.comal_schema import message
    >>> g = message("ComalGraph")(name="g")
    >>> op = g.graph.operators.add(name="n0")
    >>> op.root.output_ref.id.id = 1
    >>> [r.reason for r in check(g).rejections]
    ['ref stream 1 is written but nothing reads it']
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from .comal_schema import enum_name

ENTRIES = ("run_graph",) + tuple(f"run_graph_{kind}{b}" for kind in ("block", "true_block") for b in (16, 32, 64))
SCALAR_BINARY = {"ADD", "SUB", "MUL", "DIV", "ELEMMUL"}
SCALAR_UNARY = {"EXP", "SIN", "COS", "MAX", "SCALARADD", "SCALARMUL", "SCALARDIV", "RSQRT", "SIGMOID"}
TILE_BINARY = {"MUL", "ADD", "SUB", "ELEMMUL"}
TILE_UNARY = {"SCALARMUL", "SCALARADD"}
UNBUILT = {"func": "todo!()", "coord_mask": "unimplemented!()", "gen_ref": "todo!()"}


@dataclass(frozen=True)
class Rejection:
    op: str  # the operation's name (fuseflow's `n<id>`)
    kind: str  # its oneof, e.g. `alu`, or `alu DIV`
    reason: str

    def __str__(self) -> str:
        return f"{self.op} ({self.kind}): {self.reason}"


@dataclass
class LoadCheck:
    entry: str
    rejections: list[Rejection] = field(default_factory=list)
    files: set[str] = field(default_factory=set)  # the tensor files the graph reads

    @property
    def loads(self) -> bool:
        return not self.rejections


def tile_size(entry: str) -> int:
    """The tile side of a true-block entry point (0 for the others)."""
    found = re.fullmatch(r"run_graph_true_block(\d+)", entry)
    return int(found.group(1)) if found else 0


class _Replay:
    def __init__(self, entry: str, directory: str | None):
        self.entry, self.directory = entry, directory
        self.tile = tile_size(entry)
        self.result = LoadCheck(entry)
        self.ends: dict[tuple[str, int], dict[str, list[str]]] = {}  # (map, id) -> direction -> ops
        self.op = self.kind = ""

    def reject(self, reason: str) -> None:
        self.result.rejections.append(Rejection(self.op, self.kind, reason))

    def take(self, kind: str, stream, direction: str) -> None:
        """One channel end: `stream` is a stream message (or None: an unset field, id 0)."""
        sid = stream.id.id if stream is not None and stream.HasField("id") else 0
        if sid == 0 and direction == "send":
            return  # an unused output: Comal hands it a channel to nowhere
        if sid == 0:
            self.reject(f"reads {kind} stream id 0, which nothing can write")
            return
        users = self.ends.setdefault((kind, sid), {"send": [], "recv": []})[direction]
        if users:
            self.reject(f"{kind} stream {sid} has a second {'writer' if direction == 'send' else 'reader'} "
                        f"(first {users[0]}): Comal panics")
        users.append(self.op)

    def need(self, name: str, count: int | None = None, tile: bool = False) -> list[float] | None:
        """A tensor file the operation reads: it must exist and every line parse (Comal drops lines
        that do not parse); `count` is the least number of entries it must hold."""
        self.result.files.add(name)
        if self.directory is None:
            return None
        path = os.path.join(self.directory, name)
        if not os.path.isfile(path):
            self.reject(f"reads {name}, which is missing (Comal panics)")
            return None
        with open(path) as handle:
            lines = [x.strip() for x in handle if x.strip()]
        integer = not name.endswith("_vals")
        try:
            numbers = [int(x) if integer else float(x) for x in lines]
        except ValueError:
            self.reject(f"{name} holds a line that is not {'an integer' if integer else 'a number'}: "
                        "Comal would skip it")
            return None
        if count is not None and len(numbers) < count:
            self.reject(f"{name} has {len(numbers)} entries, Comal indexes entry {count - 1}")
        if tile and len(numbers) % (self.tile * self.tile):
            self.reject(f"{name} has {len(numbers)} values, not whole {self.tile}x{self.tile} tiles")
        return numbers


def _bundle(r: _Replay, conn, one: str, many: str, one_way: str) -> None:
    """Broadcast, fork and join: one stream in (or out) and several out (or in), all in the map of
    the bundle's kind."""
    kind = conn.WhichOneof("conn")
    if kind is None:
        r.reject("no bundle set (Comal unwraps it)")
        return
    bundle = getattr(conn, kind)
    r.take(kind, getattr(bundle, one), one_way)
    for stream in getattr(bundle, many):
        r.take(kind, stream, "recv" if one_way == "send" else "send")


def _joiner(r: _Replay, op) -> None:
    for pair in op.input_pairs:
        r.take("crd", pair.crd, "recv")
        which = pair.in_ref.WhichOneof("stream") if pair.HasField("in_ref") else None
        if which is None:
            r.reject("an input pair without a payload stream (Comal unwraps it)")
            continue
        r.take("ref" if which == "ref_stream" else "val", getattr(pair.in_ref, which), "recv")
    for out in op.output_refs:
        which = out.WhichOneof("stream")
        if which is None:
            r.reject("an output payload without a stream (Comal unwraps it)")
            continue
        r.take("ref" if which == "ref_stream" else "val", getattr(out, which), "send")
    r.take("crd", op.output_crd, "send")


def _fiber_lookup(r: _Replay, op) -> None:
    r.take("ref", op.input_ref, "recv")
    r.take("crd", op.output_crd, "send")
    r.take("ref", op.output_ref, "send")
    if op.format == "compressed":
        r.need(f"tensor_{op.tensor}_mode_{op.mode}_seg")
        r.need(f"tensor_{op.tensor}_mode_{op.mode}_crd")
    else:  # any other format is scanned dense, its size taken from the shape file at index `mode`
        r.need(f"tensor_{op.tensor}_mode_shape", op.mode + 1)


def _repeat(r: _Replay, op) -> None:
    signal, source, target = (op.WhichOneof(x) for x in ("input_rep_sig", "input_ref", "output_ref"))
    if signal is None or source is None or target is None:
        r.reject("a repeat without its signal, input or output stream: todo!() in Comal")
        return
    if (source, target) not in (("in_ref", "out_ref"), ("in_val", "out_val")):
        r.reject(f"a repeat from {source} to {target}: todo!() in Comal (both refs or both values)")
        return
    r.take("ref" if signal == "rep_ref" else "val", getattr(op, signal), "recv")
    r.take(source[3:], getattr(op, source), "recv")
    r.take(target[4:], getattr(op, target), "send")


def _alu(r: _Replay, op) -> None:
    if op.WhichOneof("conn") != "vals":
        r.reject("an ALU over coordinates (or with no streams): todo!() in Comal")
        return
    inputs = list(op.vals.inputs)
    r.take("val", op.vals.output, "send")
    if not inputs or not op.stages:
        r.reject("an ALU without inputs or stages: Comal panics")
        return
    name = enum_name("ALU.ALUOp", op.stages[0].op)
    r.kind = f"alu {name}"
    binary, unary = (TILE_BINARY, TILE_UNARY) if r.tile else (SCALAR_BINARY, SCALAR_UNARY)
    where = f" in {r.entry}" if r.tile else ""
    if len(inputs) > 2:
        r.reject(f"an ALU with {len(inputs)} inputs: Comal builds nothing for it")
    elif len(inputs) == 2 and name not in binary:
        r.reject(f"no two-input {name}{where}: todo!() in Comal (it has {', '.join(sorted(binary))})")
    elif len(inputs) == 1 and name not in unary:
        r.reject(f"no one-input {name}{where}: Comal panics (it has {', '.join(sorted(unary))})")
    else:
        for stream in inputs:
            r.take("val", stream, "recv")


def _spacc(r: _Replay, op) -> None:
    order = 1 if r.entry != "run_graph" else op.order  # the block modes build every spacc as order 1
    if order == 0:
        r.reject("a sparse accumulator of order 0: Comal asserts order != 0")
        return
    if order > 2:
        r.reject(f"a sparse accumulator of order {order}: Comal builds nothing for it")
        return
    if len(op.input_outer_crds) < order or (order == 2 and not op.output_outer_crds):
        r.reject(f"order {order} needs {order} outer coordinate inputs"
                 + (" and an outer output" if order == 2 else "") + ": Comal panics")
        return
    r.take("crd", op.input_inner_crd, "recv")
    for stream in op.input_outer_crds[:order]:
        r.take("crd", stream, "recv")
    r.take("val", op.input_val, "recv")
    r.take("crd", op.output_inner_crd, "send")
    r.take("val", op.output_val, "send")
    if order == 2:
        r.take("crd", op.output_outer_crds[0], "send")


def _simple(fields: list[tuple[str, str, str]]):
    def replay(r: _Replay, op) -> None:
        for name, kind, direction in fields:
            r.take(kind, getattr(op, name) if op.HasField(name) else None, direction)
    return replay


def _array(r: _Replay, op) -> None:
    r.take("ref", op.input_ref, "recv")
    r.take("val", op.output_val, "send")
    r.need(f"tensor_{op.tensor}_mode_vals", tile=bool(r.tile))


CRD_MANAGER = _simple([("input_inner_crd", "crd", "recv"), ("input_outer_crd", "crd", "recv"),
                       ("output_inner_crd", "crd", "send"), ("output_outer_crd", "crd", "send")])
OPERATIONS = {
    "root": _simple([("output_ref", "ref", "send")]),
    "broadcast": lambda r, op: _bundle(r, op, "input", "outputs", "recv"),
    "fork": lambda r, op: _bundle(r, op, "input", "outputs", "recv"),
    "join": lambda r, op: _bundle(r, op, "output", "inputs", "send"),
    "joiner": _joiner,
    "fiber_lookup": _fiber_lookup,
    "fiber_write": _simple([("input_crd", "crd", "recv")]),
    "repeat": _repeat,
    "repeatsig": _simple([("input_crd", "crd", "recv"), ("output_rep_sig", "repsig", "send")]),
    "alu": _alu,
    "reduce": _simple([("input_val", "val", "recv"), ("output_val", "val", "send")]),
    "coord_hold": CRD_MANAGER,
    "coord_drop": CRD_MANAGER,
    "locate": _simple([("input_ref", "ref", "recv"), ("input_crd", "crd", "recv"), ("output_ref1", "ref", "send"),
                       ("output_ref2", "ref", "send"), ("output_crd", "crd", "send")]),
    "array": _array,
    "spacc": _spacc,
    "val_write": _simple([("input_val", "val", "recv")]),
}


def check(graph, entry: str = "run_graph", directory: str | None = None) -> LoadCheck:
    """What Comal's loader would refuse in `graph` (a `tortilla.ComalGraph`) run through `entry`
    with the tensor files in `directory` (files are not checked when it is None)."""
    if entry not in ENTRIES:
        raise ValueError(f"unknown Comal entry point {entry!r}")
    r = _Replay(entry, directory)
    for operation in graph.graph.operators:
        r.op, r.kind = operation.name or f"#{operation.id}", operation.WhichOneof("op") or ""
        if not r.kind:
            r.reject("an operation with no op set: Comal panics")
        elif r.kind in ("fork", "join") and getattr(operation, r.kind).WhichOneof("conn") == "repsig":
            r.reject(f"a {r.kind} of repeat signals: Comal panics")
        elif r.kind in UNBUILT:
            r.reject(f"{r.kind}: {UNBUILT[r.kind]} in Comal's loader")
        else:
            OPERATIONS[r.kind](r, getattr(operation, r.kind))
    for (kind, sid), ends in sorted(r.ends.items()):
        if not ends["recv"]:
            r.op, r.kind = ends["send"][0], "channel"
            r.reject(f"{kind} stream {sid} is written but nothing reads it")
        elif not ends["send"]:
            r.op, r.kind = ends["recv"][0], "channel"
            r.reject(f"{kind} stream {sid} is read but nothing writes it")
    return r.result
