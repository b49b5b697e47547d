"""What a node is, in the terms SAM's graphs use: primitive, index variable, tensor, mode, format.

Lowering records the variable of scans and locates (`Node.var`) and of joiners (`Node.label`);
every other node takes the variable of the coordinate stream that drives it (a repeat the one its
signal comes from, a writer the one it writes). The mode is the tensor dimension a level stores
(level k of a tensor stored in mode order (1, 0) holds mode `mode_order[k]`).

    >>> from fuseflow.sam.graph import GraphTensor, SamGraph
    >>> g = SamGraph("spmv"); r = g.add("root")
    >>> g.tensors["A"] = GraphTensor("input", (3, 4), ("dense", "compressed"), (1, 0), source="A")
    >>> s = g.add("scan", {"tensor": "A", "level": 0, "format": "dense", "dim": 4}, var="j", ref=r.out("ref"))
    >>> sig = g.add("repsig", crd=s.out("crd"))
    >>> rep = g.add("repeat", **{"in": r.out("ref"), "sig": sig.out("repsig")})
    >>> node_label(g, s)
    NodeLabel(primitive='scan', var='j', tensor='A', mode=1, format='dense', detail='')
    >>> node_label(g, rep).title, node_label(g, s).subtitle, node_label(g, s).long
    ('repeat j', 'A₁ dense', 'scan j: tensor A mode 1, dense')
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only
    from .graph import Node, SamGraph, Stream

SUBSCRIPT = dict(zip("0123456789", "₀₁₂₃₄₅₆₇₈₉"))
STRUCTURAL = ("broadcast", "fork", "join")  # pass a stream on unchanged (or dealt over lanes)


@dataclass(frozen=True)
class NodeLabel:
    primitive: str
    var: str = ""
    tensor: str = ""
    mode: int | None = None
    format: str = ""
    detail: str = ""

    @property
    def title(self) -> str:
        """Primitive and index variable, e.g. `scan i` or `intersect k`."""
        return f"{self.primitive} {self.var}".strip()

    @property
    def subtitle(self) -> str:
        """Tensor with its mode as a subscript, format, then any detail, e.g. `A₀ compressed`."""
        where = self.tensor + ("".join(SUBSCRIPT[c] for c in str(self.mode)) if self.mode is not None else "")
        return " ".join(x for x in (where, self.format, self.detail) if x)

    @property
    def long(self) -> str:
        """Everything in words, e.g. `scan i: tensor A mode 0, compressed`."""
        mode = f" mode {self.mode}" if self.mode is not None else ""
        tensor = f"tensor {self.tensor}{mode}" if self.tensor else ""
        parts = [tensor, self.format, self.detail]
        rest = ", ".join(x for x in parts if x)
        return f"{self.title}: {rest}" if rest else self.title


def stream_var(graph: SamGraph, stream: Stream) -> str:
    """The index variable of a coordinate (or repeat-signal) stream; "" when it has none."""
    node = graph.nodes[stream.node]
    while node.kind in STRUCTURAL:  # follow a broadcast, fork or join to what it carries
        stream = node.inputs["in0" if node.kind == "join" else "in"]
        node = graph.nodes[stream.node]
    if node.kind in ("scan", "locate"):
        return node.var
    if node.kind in ("intersect", "union"):
        return node.label
    source = {"spacc": {"crd": "crd_inner"}, "spacc2": {"crd": "crd_inner", "crd_mid": "crd_mid"},
              "crd_drop": {"outer": "outer", "inner": "inner"}, "repsig": {"repsig": "crd"},
              "repeat": {"out": "sig"}}.get(node.kind, {}).get(stream.port)
    return stream_var(graph, node.inputs[source]) if source else ""


def ref_tensor(graph: SamGraph, stream: Stream) -> str:
    """The tensor a reference stream points into ("" for the root reference or a value stream)."""
    node = graph.nodes[stream.node]
    if node.kind in ("scan", "locate"):
        return source_name(graph, node.params.get("tensor", ""))
    if node.kind in STRUCTURAL:
        return ref_tensor(graph, node.inputs["in0" if node.kind == "join" else "in"])
    if node.kind == "repeat":
        return ref_tensor(graph, node.inputs["in"])
    if node.kind in ("intersect", "union"):
        return ref_tensor(graph, node.inputs["pay" + stream.port[3:]])
    return ""


def source_name(graph: SamGraph, storage: str) -> str:
    """The program's name of a stored tensor (`A@1,0`, a copy of A in another mode order, is A)."""
    tensor = graph.tensors.get(storage)
    return tensor.stores(storage) if tensor is not None else storage


def _mode(graph: SamGraph, node: Node) -> int | None:
    meta = graph.tensors.get(node.params.get("tensor", ""))
    level = node.params.get("level")
    order = meta.mode_order if meta is not None else None
    if level is None or not node.params.get("tensor"):
        return None
    return order[level] if order and level < len(order) else level


def _detail(node: Node) -> str:
    p = node.params
    if node.kind == "alu" and p.get("scalar") is not None:
        return f"scalar {p['scalar']:g}"
    if node.kind in ("reduce", "spacc", "spacc2"):
        return str(p.get("kind", "sum"))
    if node.kind in ("fork", "join"):
        return f"{p.get('lanes')} lanes"
    if node.kind == "array" and p.get("fill"):
        return f"fill {p['fill']:g}"
    if "stride" in p:
        return f"stride {p['stride']}"
    return ""


def node_label(graph: SamGraph, node: Node) -> NodeLabel:
    """Primitive, index variable, tensor, mode and format of `node` (see the module docstring)."""
    kind, p, ins = node.kind, node.params, node.inputs
    primitive = f"alu {p['op']}" if kind == "alu" else kind
    var = {"scan": lambda: node.var, "locate": lambda: node.var, "intersect": lambda: node.label,
           "union": lambda: node.label, "repsig": lambda: stream_var(graph, ins["crd"]),
           "repeat": lambda: stream_var(graph, ins["sig"]), "level_write": lambda: stream_var(graph, ins["crd"]),
           "spacc": lambda: stream_var(graph, ins["crd_outer"]), "spacc2": lambda: stream_var(graph, ins["crd_outer"]),
           "crd_drop": lambda: f"{stream_var(graph, ins['outer'])},{stream_var(graph, ins['inner'])}",
           }.get(kind, lambda: "")()
    tensor = source_name(graph, p.get("tensor", ""))
    if kind == "scan" and not p.get("tensor"):
        return NodeLabel("scan", var, "universe", None, "dense", f"dim {p.get('dim')}")
    if kind == "repeat":
        tensor = ref_tensor(graph, ins["in"])
        if not tensor:
            return NodeLabel(primitive, var, detail="values" if graph.stream_kind(ins["in"]) == "val" else "root ref")
    fmt = p.get("format", "") if kind in ("scan", "level_write") else ""
    if kind == "locate":
        fmt = "dense"
    return NodeLabel(primitive, var, tensor, _mode(graph, node), fmt, _detail(node))
