"""The protobuf messages of Comal's graph format (package `tortilla`), built in code: no protoc step.

The field table below is the wire contract: message, field, number, type and label (`repeated`,
or `oneof:NAME`); nested messages are written `Outer.Inner`, and a type name is looked up from
the innermost enclosing message outwards (in `Joiner.JoinBundle`, `Payload` is `Joiner.Payload`).
Streams are connected by equal ids; id 0 marks an unused output.

    >>> ComalGraph = message("ComalGraph")
    >>> g = ComalGraph(name="spmv", channel_size=1024)
    >>> op = g.graph.operators.add(name="n0", id=1)
    >>> op.root.output_ref.id.id = 7
    >>> ComalGraph.FromString(g.SerializeToString()).graph.operators[0].WhichOneof("op")
    'root'
"""
from __future__ import annotations

from functools import lru_cache

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "tortilla"

FIELDS = """
ComalGraph name 1 string
ComalGraph channel_size 2 uint64
ComalGraph graph 3 ProgramGraph
ProgramGraph name 1 string
ProgramGraph operators 2 Operation repeated
RefStream.StreamID id 1 uint64
RefStream id 1 StreamID
RefStream name 2 string
ValStream.StreamID id 1 uint64
ValStream id 1 StreamID
ValStream name 2 string
CrdStream.StreamID id 1 uint64
CrdStream id 1 StreamID
CrdStream name 2 string
RepSigStream.StreamID id 1 uint64
RepSigStream id 1 StreamID
RepSigStream name 2 string
Operation name 1 string
Operation id 2 uint64
Operation root 11 Generator oneof:op
Operation joiner 12 Joiner oneof:op
Operation fiber_lookup 13 FiberLookup oneof:op
Operation fiber_write 14 FiberWrite oneof:op
Operation repeat 15 Repeat oneof:op
Operation repeatsig 16 RepeatSig oneof:op
Operation alu 17 ALU oneof:op
Operation reduce 18 Reduce oneof:op
Operation coord_hold 19 CoordHold oneof:op
Operation coord_mask 20 CoordMask oneof:op
Operation coord_drop 21 CoordDrop oneof:op
Operation array 22 ArrayVals oneof:op
Operation spacc 23 SparseAccumulator oneof:op
Operation val_write 24 ValWrite oneof:op
Operation func 25 Intrinsic oneof:op
Operation broadcast 26 Broadcast oneof:op
Operation fork 27 Fork oneof:op
Operation join 28 Join oneof:op
Operation gen_ref 29 GenRef oneof:op
Operation locate 30 Locate oneof:op
Generator label 1 string
Generator tensor 2 string
Generator output_ref 3 RefStream
Broadcast label 1 string
Broadcast.CrdBundle input 1 CrdStream
Broadcast.CrdBundle outputs 2 CrdStream repeated
Broadcast.RefBundle input 1 RefStream
Broadcast.RefBundle outputs 2 RefStream repeated
Broadcast.ValBundle input 1 ValStream
Broadcast.ValBundle outputs 2 ValStream repeated
Broadcast.RepSigBundle input 1 RepSigStream
Broadcast.RepSigBundle outputs 2 RepSigStream repeated
Broadcast crd 2 CrdBundle oneof:conn
Broadcast ref 3 RefBundle oneof:conn
Broadcast val 4 ValBundle oneof:conn
Broadcast repsig 5 RepSigBundle oneof:conn
Joiner.Payload ref_stream 1 RefStream oneof:stream
Joiner.Payload val_stream 2 ValStream oneof:stream
Joiner.JoinBundle crd 1 CrdStream
Joiner.JoinBundle in_ref 2 Payload
Joiner join_type 1 Type
Joiner input_pairs 2 JoinBundle repeated
Joiner index 3 string
Joiner label 4 string
Joiner output_refs 5 Payload repeated
Joiner output_crd 6 CrdStream
FiberLookup input_ref 2 RefStream
FiberLookup output_ref 3 RefStream
FiberLookup output_crd 4 CrdStream
FiberLookup index 5 string
FiberLookup tensor 6 string
FiberLookup mode 7 uint64
FiberLookup format 8 string
FiberLookup src 9 bool
FiberLookup root 10 bool
FiberLookup label 11 string
FiberWrite ref 1 bool
FiberWrite input_crd 2 CrdStream
FiberWrite index 3 string
FiberWrite tensor 4 string
FiberWrite mode_val 5 string
FiberWrite format 6 string
FiberWrite segsize 7 string
FiberWrite crdsize 8 string
FiberWrite size 9 string
FiberWrite sink 10 bool
FiberWrite label 11 string
ValWrite input_val 1 ValStream
ValWrite label 2 string
ValWrite crdsize 3 string
ValWrite segsize 4 string
ValWrite tensor 5 string
ValWrite sink 6 bool
Repeat in_ref 1 RefStream oneof:input_ref
Repeat in_val 2 ValStream oneof:input_ref
Repeat out_ref 3 RefStream oneof:output_ref
Repeat out_val 4 ValStream oneof:output_ref
Repeat rep_ref 5 RefStream oneof:input_rep_sig
Repeat rep_val 6 ValStream oneof:input_rep_sig
Repeat label 7 string
Repeat index 8 string
Repeat root 9 bool
Repeat tensor 10 string
RepeatSig input_crd 1 CrdStream
RepeatSig output_rep_sig 2 RepSigStream
RepeatSig label 3 string
RepeatSig index 4 string
ALU.Val inputs 1 ValStream repeated
ALU.Val output 2 ValStream
ALU.Crd inputs 1 CrdStream repeated
ALU.Crd output 2 CrdStream
ALU vals 1 Val oneof:conn
ALU crds 2 Crd oneof:conn
ALU.Stage inputs 1 uint64 repeated
ALU.Stage output 2 uint64
ALU.Stage op 3 ALUOp
ALU stages 3 Stage repeated
ALU output_val 4 uint64
ALU label 5 string
ALU stream_shape 6 uint64
ALU blocked 7 bool
ALU scalar 8 double
Reduce input_val 1 ValStream
Reduce output_val 2 ValStream
Reduce label 3 string
Reduce stream_shape 4 uint64
Reduce blocked 5 bool
Reduce reduce_type 6 Type
GenRef input_crd 1 ValStream
GenRef output_ref 2 ValStream
GenRef label 3 string
SparseAccumulator input_inner_crd 1 CrdStream
SparseAccumulator output_inner_crd 2 CrdStream
SparseAccumulator input_outer_crds 3 CrdStream repeated
SparseAccumulator input_val 4 ValStream
SparseAccumulator output_val 5 ValStream
SparseAccumulator order 6 uint64
SparseAccumulator inner_crd 7 string
SparseAccumulator outer_crds 8 string repeated
SparseAccumulator label 9 string
SparseAccumulator output_outer_crds 10 CrdStream repeated
SparseAccumulator stream_shape 11 uint64
SparseAccumulator blocked 12 bool
CoordHold input_inner_crd 1 CrdStream
CoordHold input_outer_crd 2 CrdStream
CoordHold output_inner_crd 3 CrdStream
CoordHold output_outer_crd 4 CrdStream
CoordHold inner_crd 5 string
CoordHold outer_crd 6 string
CoordHold label 7 string
Locate input_crd 1 CrdStream
Locate input_ref 2 RefStream
Locate output_ref1 3 RefStream
Locate output_ref2 4 RefStream
Locate output_crd 5 CrdStream
Locate label 6 string
CoordDrop input_inner_crd 1 CrdStream
CoordDrop input_outer_crd 2 CrdStream
CoordDrop output_inner_crd 3 CrdStream
CoordDrop output_outer_crd 4 CrdStream
CoordDrop inner_crd 5 string
CoordDrop outer_crd 6 string
CoordDrop label 7 string
CoordMask input_inner_crd 1 CrdStream
CoordMask input_outer_crd 2 CrdStream
CoordMask input_ref 3 RefStream
CoordMask output_inner_crd 4 CrdStream
CoordMask output_outer_crd 5 CrdStream
CoordMask output_ref 6 RefStream
ArrayVals tensor 1 string
ArrayVals input_ref 2 RefStream
ArrayVals output_val 3 ValStream
ArrayVals label 4 string
ArrayVals stream_shape 5 uint64
ArrayVals blocked 6 bool
Intrinsic name 1 string
Intrinsic input_val 2 ValStream
Intrinsic inputs 3 CrdStream repeated
Intrinsic output_val 4 ValStream
Intrinsic outputs 5 CrdStream repeated
Fork label 1 string
Fork.CrdBundle input 1 CrdStream
Fork.CrdBundle outputs 2 CrdStream repeated
Fork.RefBundle input 1 RefStream
Fork.RefBundle outputs 2 RefStream repeated
Fork.ValBundle input 1 ValStream
Fork.ValBundle outputs 2 ValStream repeated
Fork.RepSigBundle input 1 RepSigStream
Fork.RepSigBundle outputs 2 RepSigStream repeated
Fork crd 2 CrdBundle oneof:conn
Fork ref 3 RefBundle oneof:conn
Fork val 4 ValBundle oneof:conn
Fork repsig 5 RepSigBundle oneof:conn
Join label 1 string
Join.CrdBundle output 1 CrdStream
Join.CrdBundle inputs 2 CrdStream repeated
Join.RefBundle output 1 RefStream
Join.RefBundle inputs 2 RefStream repeated
Join.ValBundle output 1 ValStream
Join.ValBundle inputs 2 ValStream repeated
Join.RepSigBundle output 1 RepSigStream
Join.RepSigBundle inputs 2 RepSigStream repeated
Join crd 2 CrdBundle oneof:conn
Join ref 3 RefBundle oneof:conn
Join val 4 ValBundle oneof:conn
Join repsig 5 RepSigBundle oneof:conn
"""

ENUMS = {
    "Joiner.Type": ["INTERSECT", "UNION"],
    "Joiner.RefType": ["REF", "VAL"],
    "ALU.ALUOp": ["ADD", "SUB", "MUL", "DIV", "EXP", "SIN", "COS", "MAX", "SCALARADD", "SCALARMUL", "SCALARDIV",
                  "RSQRT", "SIGMOID", "ELEMMUL"],
    "Reduce.Type": ["ADD", "MAX", "ADDSUM"],
}

SCALARS = {"string": "TYPE_STRING", "uint64": "TYPE_UINT64", "bool": "TYPE_BOOL", "double": "TYPE_DOUBLE"}


def _rows() -> list[tuple[str, str, int, str, str]]:
    rows = []
    for line in FIELDS.strip().splitlines():
        owner, name, number, kind, *label = line.split()
        rows.append((owner, name, int(number), kind, label[0] if label else ""))
    return rows


def _resolve(owner: str, kind: str, known: set[str]) -> str:
    """The full name of type `kind` used inside message `owner` (innermost scope first)."""
    scope = owner.split(".")
    while scope:
        candidate = ".".join(scope + [kind])
        if candidate in known:
            return candidate
        scope.pop()
    if kind in known:
        return kind
    raise KeyError(f"{owner}: unknown type {kind}")


@lru_cache(maxsize=None)
def _pool():
    rows = _rows()
    messages = list(dict.fromkeys(owner for owner, *_ in rows))
    known = set(messages) | set(ENUMS)
    file = descriptor_pb2.FileDescriptorProto(name="fuseflow/tortilla.proto", package=PACKAGE, syntax="proto3")
    protos: dict[str, descriptor_pb2.DescriptorProto] = {}
    for full in sorted(messages, key=lambda m: m.count(".")):  # outer messages before nested ones
        parent, _, short = full.rpartition(".")
        protos[full] = (protos[parent].nested_type if parent else file.message_type).add(name=short)
    for full, values in ENUMS.items():
        parent, _, short = full.rpartition(".")
        enum = protos[parent].enum_type.add(name=short)
        for number, value in enumerate(values):
            enum.value.add(name=value, number=number)
    F = descriptor_pb2.FieldDescriptorProto
    for owner, name, number, kind, label in rows:
        msg = protos[owner]
        field = msg.field.add(name=name, number=number,
                              label=F.LABEL_REPEATED if label == "repeated" else F.LABEL_OPTIONAL)
        if kind in SCALARS:
            field.type = getattr(F, SCALARS[kind])
        else:
            full = _resolve(owner, kind, known)
            field.type = F.TYPE_ENUM if full in ENUMS else F.TYPE_MESSAGE
            field.type_name = f".{PACKAGE}.{full}"
        if label.startswith("oneof:"):
            names = [d.name for d in msg.oneof_decl]
            oneof = label.split(":", 1)[1]
            if oneof not in names:
                msg.oneof_decl.add(name=oneof)
                names.append(oneof)
            field.oneof_index = names.index(oneof)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return pool


def message(name: str):
    """The generated class of message `name` (e.g. `ComalGraph`, `Operation`, `Joiner.Payload`)."""
    return message_factory.GetMessageClass(_pool().FindMessageTypeByName(f"{PACKAGE}.{name}"))


def enum_value(name: str, value: str) -> int:
    """The number of enum value `value` of enum `name` (e.g. `ALU.ALUOp`, `MUL`)."""
    return ENUMS[name].index(value)


def enum_name(name: str, number: int) -> str:
    """The name of value `number` of enum `name`, the inverse of `enum_value` (`ALU.ALUOp`, 2: `MUL`)."""
    values = ENUMS[name]
    return values[number] if 0 <= number < len(values) else str(number)
