"""Comal graphs from SamGraphs: one Comal operation per fuseflow primitive, streams joined by id.

| fuseflow primitive | Comal operation |
|---|---|
| root | root |
| scan (a universe scan reads a tensor `universe_<var>` that only has a shape) | fiber_lookup |
| locate | locate (`output_ref1`; the other outputs are unused, id 0) |
| repsig + repeat | repeat (its signal made inside, from the `rep_ref`/`rep_val` stream aligned with the repsig's crd) |
| intersect, union | joiner (INTERSECT, UNION) |
| array | array |
| alu | alu (ADD SUB MUL/ELEMMUL DIV MAX EXP RSQRT, and SCALARADD SCALARMUL SCALARDIV for a scalar operand) |
| reduce | reduce (ADD, MAX) |
| spacc, spacc2 | spacc order 1, order 2 |
| crd_drop | coord_drop |
| level_write, value_write | fiber_write, val_write |
| fork, join | fork, join |
| broadcast | broadcast: rebuilt for every stream with several Comal readers |

A mul feeding a reduce or spacc is MUL, any other ELEMMUL (they differ only on tiles). What has
no Comal equivalent is still written, and `ComalExport.notes` says so, node by node:

- ALU ops Comal lacks (min, comparisons, select, const, coalesce, sqrt, tanh, erf, abs, a scalar
  on the left of sub or div): written as `func` named after the op (Comal does not run func);
- a min reduction, a max or min spacc, a dense level visited with a stride: no Comal form;
- an array with a background other than 0 (Comal reads a missing entry as 0), a locate below a
  tensor's first level (Comal's locate ignores the parent reference), a max reduction (Comal
  resets its running max to 0 after each fiber): written, but Comal computes something else;
- a repeat signal from coordinates with no aligned reference or value stream: written as
  `repeatsig` feeding the repeat's `rep_ref`.

Comal's stream tokens merge stops (`S1` ends an inner and an outer fiber) where fuseflow's do
not; each simulator's primitives follow its own convention, so the graph is the same.

    >>> from fuseflow.fusion.compile import compile_schedule
    >>> from fuseflow.frontend import from_mlir
    >>> g = compile_schedule(from_mlir("tests/mlir/spmv.mlir"), "full").kernels[0].graph
    >>> export = to_comal(g)
    >>> [op.WhichOneof("op") for op in export.message.graph.operators][:4]
    ['root', 'broadcast', 'fiber_lookup', 'broadcast']
    >>> export.notes
    []
"""
from __future__ import annotations

import collections
import math
import re
from dataclasses import dataclass, field

from .comal_schema import enum_value, message
from .graph import SamGraph, Stream
from .labels import node_label, ref_tensor, stream_var
from .primitives import PRIMITIVES

STREAM_MESSAGE = {"crd": "CrdStream", "ref": "RefStream", "val": "ValStream", "repsig": "RepSigStream"}
BUNDLE = {"crd": "crd", "ref": "ref", "val": "val", "repsig": "repsig"}
BINARY = {"add": "ADD", "sub": "SUB", "mul": "MUL", "div": "DIV", "max": "MAX"}
UNARY = {"exp": ("EXP", None), "rsqrt": ("RSQRT", None), "neg": ("SCALARMUL", -1.0)}
WITH_SCALAR = {"add": ("SCALARADD", 1.0), "sub": ("SCALARADD", -1.0), "mul": ("SCALARMUL", 1.0),
               "div": ("SCALARDIV", 1.0), "max": ("MAX", 1.0)}
COMMUTATIVE = ("add", "mul", "max")
CHANNEL_SIZE = 1024  # what the reference compiler writes (Comal ignores it)
TILE_SIDES = (16, 32, 64)  # the tile sides of Comal's true-block modes

ERF_CUBIC, ERF_SCALE = 0.08943, 4.0 / math.sqrt(math.pi)  # erf(z) ~ 2 sigmoid(SCALE (z + CUBIC z^3)) - 1


@dataclass(frozen=True)
class AluStep:
    """One Comal ALU of a chain standing for an op Comal lacks: its inputs are the node's ports
    ("a", "b") or the numbers of earlier steps; the last step writes the node's output."""
    op: str
    inputs: tuple
    scalar: float | None = None


def alu_steps(params: dict, may_be_empty: bool) -> list[AluStep] | None:
    """The chain of Comal ALUs that computes an ALU op Comal lacks; None where none does.

        >>> [s.op for s in alu_steps({"op": "max", "arity": 2}, False)]
        ['SUB', 'MAX', 'ADD']
    """
    S = AluStep
    name, arity, scalar = params["op"], params.get("arity", 1), params.get("scalar")
    first = scalar is not None and params.get("scalar_pos", 1) == 0
    relu = [S("MAX", (0,), 0.0)]
    if arity == 2 and name == "max":  # a + max(b - a, 0)
        return [S("SUB", ("b", "a"))] + relu + [S("ADD", ("a", 1))]
    if arity == 2 and name == "min":  # a - max(a - b, 0)
        return [S("SUB", ("a", "b"))] + relu + [S("SUB", ("a", 1))]
    if arity == 1 and name == "min" and scalar is not None:  # x - max(x - s, 0)
        return [S("SCALARADD", ("a",), -float(scalar))] + relu + [S("SUB", ("a", 1))]
    if arity == 1 and name == "sub" and first:  # s - x
        return [S("SCALARMUL", ("a",), -1.0), S("SCALARADD", (0,), float(scalar))]
    if name == "const":  # 0 x + s (exact for finite x)
        return [S("SCALARMUL", ("a",), 0.0), S("SCALARADD", (0,), float(scalar))]
    if name == "coalesce" and not may_be_empty:  # no Empty reaches it in Comal: the values pass
        return [S("SCALARMUL", ("a",), 1.0)]
    return UNARY_CHAINS.get(name) if arity == 1 and scalar is None else None


UNARY_CHAINS = {  # exact identities, except erf (see ERF_CUBIC)
    "tanh": [AluStep("SCALARMUL", ("a",), 2.0), AluStep("SIGMOID", (0,)), AluStep("SCALARMUL", (1,), 2.0),
             AluStep("SCALARADD", (2,), -1.0)],  # 2 sigmoid(2x) - 1
    "sqrt": [AluStep("RSQRT", ("a",)), AluStep("ELEMMUL", (0, 0)), AluStep("RSQRT", (1,))],  # rsqrt(rsqrt(x)^2)
    "abs": [AluStep("MAX", ("a",), 0.0), AluStep("SCALARMUL", ("a",), -1.0), AluStep("MAX", (1,), 0.0),
            AluStep("ADD", (0, 2))],  # max(x, 0) + max(-x, 0)
    "erf": [AluStep("ELEMMUL", ("a", "a")), AluStep("SCALARMUL", (0,), ERF_CUBIC), AluStep("SCALARADD", (1,), 1.0),
            AluStep("ELEMMUL", (2, "a")), AluStep("SCALARMUL", (3,), ERF_SCALE), AluStep("SIGMOID", (4,)),
            AluStep("SCALARMUL", (5,), 2.0), AluStep("SCALARADD", (6,), -1.0)],
}


@dataclass
class ComalExport:
    message: object  # tortilla.ComalGraph
    notes: list[str] = field(default_factory=list)  # nodes without an exact Comal equivalent
    tensors: dict[str, str] = field(default_factory=dict)  # Comal tensor name -> stored tensor ("" = universe)
    universes: dict[str, int] = field(default_factory=dict)  # Comal tensor name -> extent of a universe


def comal_name(storage: str) -> str:
    """A file-name-safe tensor name (`A@1,0`, A stored in mode order 1,0, becomes `A_at_1_0`)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", storage.replace("@", "_at_"))


def _true(graph: SamGraph, stream: Stream) -> Stream:
    """The stream a chain of broadcasts copies."""
    while graph.nodes[stream.node].kind == "broadcast":
        stream = graph.nodes[stream.node].inputs["in"]
    return stream


class _Builder:
    def __init__(self, graph: SamGraph):
        self.g = graph
        self.notes: list[str] = []
        self.tensors: dict[str, str] = {}
        self.universes: dict[str, int] = {}
        self.kept_repsigs: set[int] = set()
        self.signal: dict[int, Stream] = {}  # repeat node -> the stream Comal derives its signal from
        self.readers: dict[Stream, list[tuple[int, str]]] = {}
        self.next_id = 1
        self.produced: dict[Stream, int] = {}
        self.read: dict[tuple[int, str], int] = {}
        self.operators = None  # the graph's operation list, for chains that add operations

    def note(self, node, text: str) -> None:
        self.notes.append(f"n{node.id} {node_label(self.g, node).title}: {text}")

    # -- which stream each Comal operation reads -----------------------------------------------
    def aligned(self, crd: Stream) -> Stream | None:
        """A reference or value stream with the same token structure as coordinates `crd`: a
        sibling output of its producer, or for a fork's lane the same lane of a fork of that."""
        node = self.g.nodes[crd.node]
        if node.kind == "fork":
            source = self.aligned(_true(self.g, node.inputs["in"]))
            twin = next((n for n in self.g.nodes if n.kind == "fork" and n.arity == node.arity and source is not None
                         and _true(self.g, n.inputs["in"]) == source), None)
            return Stream(twin.id, crd.port) if twin is not None else None
        port = {"scan": "ref", "intersect": "pay0", "union": "pay0", "spacc": "val", "spacc2": "val"}.get(node.kind)
        if node.kind == "spacc2" and crd.port != "crd":
            return None
        return Stream(node.id, port) if port else None

    def plan(self) -> None:
        emitted = [n for n in self.g.nodes if n.kind not in ("broadcast", "repsig")]
        for node in self.g.nodes:
            if node.kind != "repeat":
                continue
            repsig = self.g.nodes[_true(self.g, node.inputs["sig"]).node]
            source = self.aligned(_true(self.g, repsig.inputs["crd"]))
            if source is None:
                self.kept_repsigs.add(repsig.id)
                source = Stream(repsig.id, "repsig")
                self.note(node, "its signal's coordinates have no aligned reference or value stream: written as "
                                f"repeatsig n{repsig.id} feeding rep_ref")
            self.signal[node.id] = source
        for node in emitted + [self.g.nodes[r] for r in sorted(self.kept_repsigs)]:
            for port, stream in node.inputs.items():
                target = self.signal[node.id] if (node.kind, port) == ("repeat", "sig") else _true(self.g, stream)
                self.readers.setdefault(target, []).append((node.id, port))
        for stream, users in self.readers.items():
            self.produced[stream] = self.new_id()
            for user in users:
                self.read[user] = self.produced[stream] if len(users) == 1 else self.new_id()

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    # -- stream fields ------------------------------------------------------------------------------
    def kind(self, stream: Stream) -> str:
        return self.g.stream_kind(stream)

    def set_in(self, target, node, port: str) -> None:
        target.id.id = self.read[(node.id, port)]
        target.name = str(_true(self.g, node.inputs[port]))

    def set_out(self, target, node, port: str) -> None:
        stream = Stream(node.id, port)
        target.id.id = self.produced.get(stream, 0)
        target.name = str(stream)

    def payload(self, target, stream_kind: str):
        return target.ref_stream if stream_kind == "ref" else target.val_stream

    # -- operations ----------------------------------------------------------------------------------
    def tensor(self, node) -> str:
        storage = node.params.get("tensor", "")
        if not storage:  # a universe: a dense level with only a shape
            name = comal_name(f"universe_{node.var or node.id}")
            self.universes[name] = int(node.params["dim"])
            self.tensors[name] = ""
            return name
        name = comal_name(storage)
        self.tensors[name] = storage
        return name

    def tile(self, body, node) -> None:
        tile = node.params.get("tile")
        if tile:
            body.stream_shape, body.blocked = int(tile["b"]), True

    def emit(self, op, node) -> None:
        getattr(self, "op_" + node.kind)(op, node)

    def op_root(self, op, node):
        op.root.label = "root"
        self.set_out(op.root.output_ref, node, "ref")

    def op_scan(self, op, node):
        body, p = op.fiber_lookup, node.params
        self.set_in(body.input_ref, node, "ref")
        self.set_out(body.output_ref, node, "ref")
        self.set_out(body.output_crd, node, "crd")
        lab = node_label(self.g, node)  # mode: the tensor dimension the level stores, as the reference numbers it
        body.index, body.tensor, body.mode = node.var, self.tensor(node), lab.mode if lab.mode is not None else 0
        body.format, body.src, body.label = str(p.get("format", "dense")), True, lab.long
        body.root = self.g.nodes[_true(self.g, node.inputs["ref"]).node].kind == "root"
        if "stride" in p:
            self.note(node, "a dense level visited with a stride has no Comal form (written as a plain scan)")

    def op_locate(self, op, node):
        body = op.locate
        self.set_in(body.input_crd, node, "crd")
        self.set_in(body.input_ref, node, "ref")
        self.set_out(body.output_ref1, node, "ref")
        body.label = node_label(self.g, node).long + f" of {self.tensor(node)}"
        if node.params.get("level", 0) > 0 or "stride" in node.params:
            self.note(node, "Comal's locate ignores the parent reference: right only at a tensor's first level")

    def op_repsig(self, op, node):
        body = op.repeatsig
        self.set_in(body.input_crd, node, "crd")
        self.set_out(body.output_rep_sig, node, "repsig")
        body.index, body.label = stream_var(self.g, node.inputs["crd"]), "repsig"

    def op_repeat(self, op, node):
        body = op.repeat
        value = self.kind(node.inputs["in"]) == "val"
        self.set_in(body.in_val if value else body.in_ref, node, "in")
        self.set_out(body.out_val if value else body.out_ref, node, "out")
        source = self.signal[node.id]
        target = body.rep_val if self.kind(source) == "val" else body.rep_ref
        target.id.id, target.name = self.read[(node.id, "sig")], str(source)
        lab = node_label(self.g, node)
        body.label, body.index, body.tensor = lab.long, lab.var, ref_tensor(self.g, node.inputs["in"])
        body.root = self.g.nodes[_true(self.g, node.inputs["in"]).node].kind == "root"

    def op_intersect(self, op, node, join_type="INTERSECT"):
        body = op.joiner
        body.join_type, body.index, body.label = enum_value("Joiner.Type", join_type), node.label, node.kind
        for k in range(node.arity):
            pair = body.input_pairs.add()
            self.set_in(pair.crd, node, f"crd{k}")
            self.set_in(self.payload(pair.in_ref, self.kind(node.inputs[f"pay{k}"])), node, f"pay{k}")
            self.set_out(self.payload(body.output_refs.add(), self.kind(node.inputs[f"pay{k}"])), node, f"pay{k}")
        self.set_out(body.output_crd, node, "crd")

    def op_union(self, op, node):
        self.op_intersect(op, node, "UNION")

    def op_array(self, op, node):
        body = op.array
        body.tensor, body.label = self.tensor(node), node_label(self.g, node).long
        self.set_in(body.input_ref, node, "ref")
        self.set_out(body.output_val, node, "val")
        self.tile(body, node)
        if node.params.get("fill"):
            self.note(node, f"background {node.params['fill']:g}: Comal's array reads a missing entry as 0")

    def alu_op(self, node) -> tuple[str | None, float | None]:
        p = node.params
        name, arity, scalar = p["op"], p.get("arity", 1), p.get("scalar")
        if arity == 2 and name in BINARY:
            return BINARY[name], None
        if arity == 1 and scalar is None and name in UNARY:
            return UNARY[name]
        if arity == 1 and scalar is not None and name in WITH_SCALAR and (
                p.get("scalar_pos", 1) == 1 or name in COMMUTATIVE):
            op, sign = WITH_SCALAR[name]
            return op, sign * float(scalar)
        return None, None

    def op_alu(self, op, node):
        comal, scalar = self.alu_op(node)
        ports = [p for p in "abc" if p in node.inputs]
        if comal is None:
            steps = alu_steps(node.params, self.may_be_empty(node.inputs[ports[0]]))
            if steps is None:
                self.op_func(op, node, ports)
                return
            self.alu_chain(op, node, steps)
            return
        if comal == "MUL" and not any(self.g.nodes[n].kind in ("reduce", "spacc", "spacc2")
                                      for n, _ in self.readers.get(Stream(node.id, "val"), [])):
            comal = "ELEMMUL"
        if comal == "SCALARDIV" and node.params.get("tile"):  # Comal's tile modes multiply by a scalar only
            comal, scalar = "SCALARMUL", 1.0 / scalar
        body = op.alu
        for port in ports:
            self.set_in(body.vals.inputs.add(), node, port)
        self.set_out(body.vals.output, node, "val")
        body.stages.add(inputs=list(range(len(ports))), output=len(ports), op=enum_value("ALU.ALUOp", comal))
        body.output_val, body.label = len(ports), node_label(self.g, node).long
        if scalar is not None:
            body.scalar = scalar
        self.tile(body, node)

    def op_func(self, op, node, ports) -> None:
        """An ALU op with no Comal form: written as `func` (which Comal's loader does not take)."""
        body, name = op.func, str(node.params["op"])
        body.name = name
        self.set_in(body.input_val, node, ports[0])
        for port in ports[1:]:  # further value inputs, by id
            self.set_in(body.inputs.add(), node, port)
        self.set_out(body.output_val, node, "val")
        why = {"coalesce": " of a stream that may hold Empty (a union's payload)"}.get(name, "")
        if name in WITH_SCALAR and node.params.get("scalar_pos", 1) == 0:
            why = " with the scalar first"
        self.note(node, f"Comal has no ALU op {name}{why}: written as func (Comal's loader rejects func)")

    def may_be_empty(self, stream: Stream) -> bool:
        """Whether a value stream can carry Empty tokens in Comal: only a union's payloads make them
        (arrays read Empty as 0, reducers and accumulators emit values, a unary ALU panics on one)."""
        node = self.g.nodes[stream.node]
        if node.kind in ("broadcast", "fork"):
            return self.may_be_empty(node.inputs["in"])
        if node.kind == "join":
            return any(self.may_be_empty(s) for s in node.inputs.values())
        if node.kind == "repeat":
            return self.may_be_empty(node.inputs["in"])
        if node.kind in ("intersect", "union"):
            return node.kind == "union" or self.may_be_empty(node.inputs["pay" + stream.port[3:]])
        if node.kind == "alu" and node.params.get("arity", 1) > 1:
            return all(self.may_be_empty(s) for s in node.inputs.values())
        return False

    def alu_chain(self, op, node, steps: list[AluStep]) -> None:
        """`node` as a chain of Comal ALUs: `op` is the first, the others follow it in the graph;
        a value read by several steps goes through a broadcast."""
        ops = self.operators
        outs = [self.new_id() for _ in steps[:-1]] + [self.produced.get(Stream(node.id, "val"), 0)]
        uses = collections.Counter(src for step in steps for src in step.inputs)
        feeds: dict = {}
        for src, count in uses.items():
            first = self.read[(node.id, src)] if isinstance(src, str) else outs[src]
            if count == 1:
                feeds[src] = [first]
                continue
            copy = ops.add(name=f"n{node.id}.{src}.copy", id=len(ops))
            copy.broadcast.label = f"broadcast n{node.id} step input {src}"
            copy.broadcast.val.input.id.id = first
            feeds[src] = [self.new_id() for _ in range(count)]
            for i in feeds[src]:
                copy.broadcast.val.outputs.add().id.id = i
        label = node_label(self.g, node).long
        for k, step in enumerate(steps):
            target = op if k == 0 else ops.add(name=f"n{node.id}.{k}", id=len(ops))
            body = target.alu
            for src in step.inputs:
                body.vals.inputs.add().id.id = feeds[src].pop(0)
            body.vals.output.id.id = outs[k]
            body.stages.add(inputs=list(range(len(step.inputs))), output=len(step.inputs),
                            op=enum_value("ALU.ALUOp", step.op))
            body.output_val, body.label = len(step.inputs), f"{label} (step {k + 1} of {len(steps)})"
            if step.scalar is not None:
                body.scalar = step.scalar
            self.tile(body, node)
        if node.params["op"] == "erf":
            self.note(node, "erf written as 2*sigmoid(4/sqrt(pi)*(z + 0.08943 z^3)) - 1, the tanh form of "
                            "GELU's erf (within 3.6e-4 of erf)")

    def op_reduce(self, op, node):
        kind = node.params.get("kind", "sum")
        body = op.reduce
        self.set_in(body.input_val, node, "val")
        self.set_out(body.output_val, node, "val")
        body.label = node_label(self.g, node).long
        body.reduce_type = enum_value("Reduce.Type", "MAX" if kind == "max" else "ADD")
        self.tile(body, node)
        if kind == "max":
            self.note(node, "Comal's max reduction restarts from 0 (not -inf) after each fiber")
        elif kind != "sum":
            self.note(node, f"Comal has no {kind} reduction: written as ADD")

    def op_spacc(self, op, node, outer=("crd_outer",)):
        body = op.spacc
        self.set_in(body.input_inner_crd, node, "crd_inner")
        for port in outer:
            self.set_in(body.input_outer_crds.add(), node, port)
            body.outer_crds.append(stream_var(self.g, node.inputs[port]))
        self.set_in(body.input_val, node, "val")
        self.set_out(body.output_inner_crd, node, "crd")
        self.set_out(body.output_val, node, "val")
        body.order, body.inner_crd = len(outer), stream_var(self.g, node.inputs["crd_inner"])
        body.label = node_label(self.g, node).long
        self.tile(body, node)
        if node.params.get("kind", "sum") != "sum":
            self.note(node, f"Comal's spacc only sums (this one takes the {node.params['kind']})")

    def op_spacc2(self, op, node):
        self.op_spacc(op, node, ("crd_mid", "crd_outer"))
        self.set_out(op.spacc.output_outer_crds.add(), node, "crd_mid")

    def op_crd_drop(self, op, node):
        body = op.coord_drop
        self.set_in(body.input_inner_crd, node, "inner")
        self.set_in(body.input_outer_crd, node, "outer")
        self.set_out(body.output_inner_crd, node, "inner")
        self.set_out(body.output_outer_crd, node, "outer")
        body.inner_crd = stream_var(self.g, node.inputs["inner"])
        body.outer_crd = stream_var(self.g, node.inputs["outer"])
        body.label = "crd_drop"

    def op_level_write(self, op, node):
        body, p = op.fiber_write, node.params
        self.set_in(body.input_crd, node, "crd")
        lab = node_label(self.g, node)
        meta = self.g.tensors.get(p["tensor"])
        dims = [meta.shape[m] for m in meta.mode_order] if meta is not None else []
        level = int(p.get("level", 0))
        body.index, body.tensor = lab.var, comal_name(p["tensor"])
        body.mode_val, body.format = str(lab.mode if lab.mode is not None else level), str(p["format"])
        if dims:
            body.segsize, body.crdsize = str(math.prod(dims[:level]) + 1), str(math.prod(dims[:level + 1]))
        body.sink, body.label = True, lab.long

    def op_value_write(self, op, node):
        body = op.val_write
        self.set_in(body.input_val, node, "val")
        meta = self.g.tensors.get(node.params["tensor"])
        body.tensor, body.sink, body.label = comal_name(node.params["tensor"]), True, node_label(self.g, node).long
        if meta is not None:
            body.crdsize = str(math.prod(meta.shape))

    def op_fork(self, op, node):
        kind = self.kind(node.inputs["in"])
        bundle = getattr(op.fork, BUNDLE[kind])
        self.set_in(bundle.input, node, "in")
        for k in range(node.arity):
            self.set_out(bundle.outputs.add(), node, f"out{k}")
        op.fork.label = f"fork {node.params.get('lanes')} lanes"

    def op_join(self, op, node):
        kind = self.kind(node.inputs["in0"])
        bundle = getattr(op.join, BUNDLE[kind])
        for k in range(node.arity):
            self.set_in(bundle.inputs.add(), node, f"in{k}")
        self.set_out(bundle.output, node, "out")
        op.join.label = f"join {node.params.get('lanes')} lanes"

    def broadcasts(self, operators, node) -> None:
        """A broadcast after `node` for each of its outputs with several Comal readers."""
        for port in PRIMITIVES[node.kind].ports(node.arity)[1]:
            stream = Stream(node.id, port)
            users = self.readers.get(stream, [])
            if len(users) < 2:
                continue
            kind = self.kind(stream)
            op = operators.add(name=f"{stream}.broadcast", id=len(operators))
            op.broadcast.label = f"broadcast {stream}"
            bundle = getattr(op.broadcast, BUNDLE[kind])
            bundle.input.id.id, bundle.input.name = self.produced[stream], str(stream)
            for user in users:
                out = bundle.outputs.add()
                out.id.id, out.name = self.read[user], f"{stream}->n{user[0]}.{user[1]}"


def to_comal(graph: SamGraph, channel_size: int = CHANNEL_SIZE) -> ComalExport:
    """The Comal graph of `graph` (see the module docstring for the mapping)."""
    b = _Builder(graph)
    b.plan()
    out = message("ComalGraph")(name=graph.name, channel_size=channel_size)
    out.graph.name = graph.name
    b.operators = out.graph.operators
    for node in graph.nodes:
        if node.kind == "broadcast" or (node.kind == "repsig" and node.id not in b.kept_repsigs):
            continue
        op = out.graph.operators.add(name=f"n{node.id}", id=len(out.graph.operators))
        b.emit(op, node)
        b.broadcasts(out.graph.operators, node)
    return ComalExport(out, b.notes, b.tensors, b.universes)


def entry_point(graph: SamGraph) -> str | None:
    """The Comal function that runs `graph`: `run_graph` for scalar values, the true-block mode of
    the tile side for tile-valued graphs (`block=16`: `run_graph_true_block16`); None for a tile
    side Comal has no mode for (it has 16, 32 and 64)."""
    sides = {int(n.params["tile"]["b"]) for n in graph.nodes if n.params.get("tile")}
    if not sides:
        return "run_graph"
    side = max(sides)
    return f"run_graph_true_block{side}" if side in TILE_SIDES else None


def stream_ids(operation) -> tuple[list[int], list[int]]:
    """(ids read, ids written) by one `tortilla.Operation`: every stream field below it, an output
    when a field on its path is named `out...`."""
    reads: list[int] = []
    writes: list[int] = []

    def walk(msg, output: bool) -> None:
        if msg.DESCRIPTOR.name.endswith("Stream"):
            (writes if output else reads).append(msg.id.id)
            return
        for fd, value in msg.ListFields():
            if fd.message_type is None:
                continue
            out = output or fd.name.startswith("out")
            for item in (value if fd.is_repeated else [value]):
                walk(item, out)

    walk(getattr(operation, operation.WhichOneof("op")), False)
    return reads, writes
