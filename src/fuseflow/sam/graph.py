"""SamGraph: primitives (nodes) with named, typed ports connected by streams.

    >>> g = SamGraph("spmv")
    >>> root = g.add("root")
    >>> scan = g.add("scan", {"tensor": "A", "level": 0, "format": "dense", "dim": 4}, ref=root.out("ref"))
    >>> g.add("level_write", {"tensor": "y", "level": 0, "format": "dense", "dim": 4}, crd=scan.out("crd")).kind
    'level_write'
    >>> g.verify(); print(g.to_text().splitlines()[2])
    n1 = scan A.0 dense dim=4 (ref=n0.ref)
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable, ClassVar

from .primitives import ANY, PAYLOAD, PRIMITIVES


class GraphError(AssertionError):
    """A malformed graph: a bug in whatever built it (or a corrupt JSON file)."""


@dataclass(frozen=True)
class GraphTensor:
    """A tensor a graph reads (`role` "input") or writes ("output"): its `shape` (in elements),
    its stored `levels` (level format names, outermost first) and `mode_order` (the dimension
    each level stores), `fill` (what it holds where it stores nothing), `source` (the program's
    tensor an input stores, maybe re-laid out; None for outputs) and `block` (the tile shape of
    a blocked tensor, whose levels count blocks; else None). Its JSON is the graph file's entry.

        >>> t = GraphTensor("input", (4, 3), ("dense", "compressed"), (1, 0), source="A")
        >>> t.to_json()["shape"], t.to_json()["levels"], t.to_json()["mode_order"], "block" in t.to_json()
        ([4, 3], ['dense', 'compressed'], [1, 0], False)
        >>> GraphTensor.from_json(t.to_json()) == t, t.stores("A@1,0")
        (True, 'A')
    """

    role: str
    shape: tuple[int, ...]
    levels: tuple[str, ...]
    mode_order: tuple[int, ...]
    fill: float = 0.0
    source: str | None = None
    block: tuple[int, ...] | None = None

    def stores(self, name: str) -> str:
        """The program's tensor behind graph tensor `name` (its source, else itself)."""
        return self.source or name

    def to_json(self) -> dict:
        return {"role": self.role, **({"source": self.source} if self.source is not None else {}),
                "shape": list(self.shape), "levels": list(self.levels), "mode_order": list(self.mode_order),
                "fill": self.fill, **({"block": list(self.block)} if self.block else {})}

    @staticmethod
    def from_json(data: dict, name: str = "") -> "GraphTensor":
        try:
            return GraphTensor(data["role"], tuple(data["shape"]), tuple(data["levels"]), tuple(data["mode_order"]),
                               data.get("fill", 0.0), data.get("source"),
                               tuple(data["block"]) if data.get("block") else None)
        except (KeyError, TypeError) as e:
            raise GraphError(f"graph tensor {name}: bad entry {data!r} ({e})") from None


@dataclass(frozen=True)
class Stream:
    node: int
    port: str

    def __str__(self) -> str:
        return f"n{self.node}.{self.port}"

    @staticmethod
    def parse(text: str) -> "Stream":
        node, _, port = text.partition(".")
        return Stream(int(node.lstrip("n")), port)


@dataclass
class Node:
    id: int
    kind: str
    params: dict = field(default_factory=dict)
    inputs: dict[str, Stream] = field(default_factory=dict)
    arity: int = 0
    label: str = ""
    var: str = ""  # the index variable a scan iterates (lowering metadata, not printed)
    op: str = ""  # the source op whose lowering created the node ("" when shared or structural)

    def out(self, port: str) -> Stream:
        outs = PRIMITIVES[self.kind].ports(self.arity)[1]
        if port not in outs:
            raise GraphError(f"{self.kind} n{self.id} has no output port {port!r}")
        return Stream(self.id, port)

    def describe(self) -> str:
        p = self.params
        bits = [self.kind]
        if "tensor" in p:
            bits.append(f"{p['tensor']}.{p['level']}" if "level" in p else p["tensor"])
        for key in ("format", "op", "kind", "lanes"):
            if key in p:
                bits.append(str(p[key]))
        if p.get("dim") is not None and self.kind in ("scan", "locate", "level_write"):
            bits.append(f"dim={p['dim']}")
        if p.get("scalar") is not None:
            bits.append(f"scalar={p['scalar']}@{p.get('scalar_pos', 1)}")
        if self.label:
            bits.append(f"[{self.label}]")
        ins = ", ".join(f"{port}={s}" for port, s in self.inputs.items())
        return f"n{self.id} = {' '.join(bits)} ({ins})"


class SamGraph:
    def __init__(self, name: str = "graph"):
        self.name = name
        self.nodes: list[Node] = []
        self.tensors: dict[str, GraphTensor] = {}  # the tensors its scanners, arrays and writers name
        self.ops: dict[str, str] = {}  # source op (node.op) -> its statement, for pictures
        self._cse: dict = {}

    # -- construction ------------------------------------------------------------
    def add(self, kind: str, params: dict | None = None, arity: int = 0, label: str = "",
            cse: bool = True, var: str = "", op: str = "", **inputs: Stream) -> Node:
        """Add a node (or return an identical existing one: same kind, params and inputs; a node
        reused by another source op than the one that created it belongs to none)."""
        if kind not in PRIMITIVES:
            raise GraphError(f"unknown primitive {kind!r}")
        params = dict(params or {})
        key = (kind, json.dumps(params, sort_keys=True, default=str), arity,
               tuple(sorted((k, str(v)) for k, v in inputs.items())))
        if cse and kind not in ("root", "level_write", "value_write") and key in self._cse:
            found = self.nodes[self._cse[key]]
            if found.op != op:
                found.op = ""
            return found
        for port, stream in inputs.items():
            if not isinstance(stream, Stream) or stream.node >= len(self.nodes):
                raise GraphError(f"{kind} input {port} is not an existing stream: {stream!r}")
        node = Node(len(self.nodes), kind, params, dict(inputs), arity, label, var, op)
        self.nodes.append(node)
        self._cse[key] = node.id
        return node

    # -- queries -------------------------------------------------------------------
    def stream_kind(self, stream: Stream) -> str:
        node = self.nodes[stream.node]
        kind = PRIMITIVES[node.kind].ports(node.arity)[1][stream.port]
        if kind not in (PAYLOAD, ANY):
            return kind
        if node.kind in ("intersect", "union"):
            return self.stream_kind(node.inputs["pay" + stream.port[3:]])
        if node.kind == "join":
            return self.stream_kind(node.inputs["in0"])
        return self.stream_kind(node.inputs["in"])

    def consumers(self) -> dict[Stream, list[tuple[int, str]]]:
        found: dict[Stream, list[tuple[int, str]]] = {}
        for node in self.nodes:
            for port, stream in node.inputs.items():
                found.setdefault(stream, []).append((node.id, port))
        return found

    def count(self, kind: str) -> int:
        return sum(1 for n in self.nodes if n.kind == kind)

    # -- passes --------------------------------------------------------------------
    def insert_broadcasts(self) -> "SamGraph":
        """Give every stream with several consumers an explicit broadcast node."""
        uses = self.consumers()
        new = SamGraph(self.name)
        new.tensors, new.ops = self.tensors, self.ops
        pending: dict[Stream, list[Stream]] = {}
        for node in self.nodes:
            inputs = {}
            for port, stream in node.inputs.items():
                copies = pending[stream]
                inputs[port] = copies.pop(0) if len(copies) > 1 else copies[0]
            clone = new.add(node.kind, node.params, node.arity, node.label, cse=False, var=node.var, op=node.op,
                            **inputs)
            for port in PRIMITIVES[node.kind].ports(node.arity)[1]:
                s = Stream(clone.id, port)
                n_uses = len(uses.get(Stream(node.id, port), []))
                if n_uses > 1:
                    b = new.add("broadcast", arity=n_uses, cse=False, op=node.op, **{"in": s})
                    pending[Stream(node.id, port)] = [b.out(f"out{k}") for k in range(n_uses)]
                else:
                    pending[Stream(node.id, port)] = [s]
        return new

    def verify(self) -> None:
        """Port kinds match, every input is connected to an earlier node (acyclic), and unless
        broadcasts are missing each stream has at most one consumer."""
        for node in self.nodes:
            prim = PRIMITIVES.get(node.kind)
            if prim is None:
                raise GraphError(f"n{node.id}: unknown primitive {node.kind!r}")
            ins, _ = prim.ports(node.arity)
            if prim.variadic and node.arity < 1:
                raise GraphError(f"n{node.id} {node.kind}: needs arity >= 1")
            missing = [p for p in ins if p not in node.inputs and not (node.kind == "alu" and p in "bc")]
            if node.kind == "alu":
                missing = [p for p in "abc"[:node.params.get("arity", 1)] if p not in node.inputs]
            if missing:
                raise GraphError(f"n{node.id} {node.kind}: input ports {missing} are not connected")
            for port, stream in node.inputs.items():
                if port not in ins:
                    raise GraphError(f"n{node.id} {node.kind}: no input port {port!r}")
                if stream.node >= node.id:
                    raise GraphError(f"n{node.id} {node.kind}: input {port} from n{stream.node} "
                                     "is not an earlier node (cycle or bad order)")
                producer = self.nodes[stream.node]
                if stream.port not in PRIMITIVES[producer.kind].ports(producer.arity)[1]:
                    raise GraphError(f"n{node.id}: n{stream.node} has no output {stream.port!r}")
                want, got = ins[port], self.stream_kind(stream)
                if want not in (PAYLOAD, ANY) and want != got:
                    raise GraphError(f"n{node.id} {node.kind}.{port} expects a {want} stream, "
                                     f"gets {got} from {stream}")
                if want == PAYLOAD and got not in ("ref", "val"):
                    raise GraphError(f"n{node.id} {node.kind}.{port} expects ref or val, gets {got}")

    def verify_single_consumers(self) -> None:
        for stream, users in self.consumers().items():
            if len(users) > 1:
                raise GraphError(f"stream {stream} has {len(users)} consumers and no broadcast")

    # -- exporters -----------------------------------------------------------------
    # What Jupyter shows of a graph: its picture, drawn by the function `fuseflow.sam` sets here
    # from sam.draw when the package loads (drawing depends on the graph, not the reverse)
    picture: ClassVar[Callable[["SamGraph"], str] | None] = None

    def _repr_svg_(self) -> str | None:
        return None if SamGraph.picture is None else SamGraph.picture(self)

    def to_text(self) -> str:
        return "\n".join([f"graph {self.name}"] + [n.describe() for n in self.nodes])

    def to_json(self) -> dict:
        """Nodes with their parameters and inputs; lowering metadata (`var`, `op`, `ops`) only
        where it is set."""
        nodes = []
        for n in self.nodes:
            item = {"id": n.id, "kind": n.kind, "params": n.params, "arity": n.arity, "label": n.label,
                    "inputs": {p: str(s) for p, s in n.inputs.items()}}
            item.update({key: getattr(n, key) for key in ("var", "op") if getattr(n, key)})
            nodes.append(item)
        tensors = {n: t.to_json() for n, t in self.tensors.items()}
        return {"name": self.name, "tensors": tensors, **({"ops": self.ops} if self.ops else {}), "nodes": nodes}

    @staticmethod
    def from_json(data: dict) -> "SamGraph":
        g = SamGraph(data["name"])
        g.tensors = {n: GraphTensor.from_json(t, n) for n, t in data.get("tensors", {}).items()}
        g.ops = data.get("ops", {})
        for item in data["nodes"]:
            node = g.add(item["kind"], item["params"], item.get("arity", 0), item.get("label", ""), cse=False,
                         var=item.get("var", ""), op=item.get("op", ""),
                         **{p: Stream.parse(s) for p, s in item["inputs"].items()})
            if node.id != item["id"]:
                raise GraphError(f"node ids must be 0..n-1 in order (found {item['id']} at {node.id})")
        g.verify()
        return g
