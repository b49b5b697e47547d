"""SamGraphs as SAM's Graphviz (`.gv`) graphs: the node and edge attributes SAM's tools read.

A SAM graph is `digraph SAM` with a `comment` listing each tensor's level formats and mode order,
the output first (`x=s0,B=ss01`: compressed, compressed, modes 0 then 1). Every node carries its
attributes twice: as `comment="type=...,index=...,..."` and as separate attributes (`type`,
`index`, `tensor`, `mode` (the tensor dimension a level stores), `format`, ...), with SAM's label
and colour. Level writers say how much they may write in SAM's size notation (`segsize`,
`crdsize`, and `size` for values: products of `B0_dim`-style input dimensions, or digits). Edges
carry `type` (crd, ref, val, repsig), SAM's line style and a label; where SAM's tools tell ports
apart by tensor or variable the label names it (`crd_in-B`, `ref_out-B`, `crd_outer-i`) and the
edge's `comment` holds that name (`in-B`, `outer-i`). As in SAM, there is no root node: scanners
and repeats it feeds say `root="true"`, and every repeat names the tensor its references reach.
SAM has no locate: a locate into a dense level is written as SAM writes that access, a dense scan
intersected with the coordinates located (`sam_form`). SAM's type names are used where SAM has the
primitive (fiberlookup, repsiggen, arrayvals, spaccumulator, crddrop, fiberwrite, ...); fuseflow's
own keep their names (fork, join, and ALU ops such as `exp`), which SAM's tools refuse
(`sam/samgv_check` says which).

    >>> from fuseflow.fusion.compile import compile_schedule
    >>> from fuseflow.frontend import from_mlir
    >>> text = to_samgv(compile_schedule(from_mlir("tests/mlir/spmv.mlir"), "full").kernels[0].graph)
    >>> text.splitlines()[:2]
    ['digraph SAM {', '    comment="y=d0,A=ds01,x=d0"']
    >>> 'type="fiberlookup" index="i" tensor="A" mode="0" format="dense" src="true" root="true"' in text
    True
"""
from __future__ import annotations

import copy
import json

from .comal import comal_name
from .graph import SamGraph, Stream
from .labels import node_label, ref_tensor, source_name, stream_var

EDGE = {"crd": {"style": "dashed"}, "ref": {"style": "bold"}, "val": {}, "repsig": {"style": "dotted"}}
SAM_TYPE = {"scan": "fiberlookup", "repsig": "repsiggen", "array": "arrayvals", "spacc": "spaccumulator",
            "spacc2": "spaccumulator", "crd_drop": "crddrop", "level_write": "fiberwrite",
            "value_write": "fiberwrite", "reduce": "reduce"}
COLOR = {"scan": "green4", "locate": "green4", "level_write": "green3", "value_write": "green3", "array": "green2",
         "repeat": "cyan2", "repsig": "cyan3", "intersect": "purple", "union": "purple", "crd_drop": "orange",
         "fork": "gray", "join": "gray"}


def _q(text) -> str:
    return json.dumps(str(text), ensure_ascii=False)


def _tensor(graph: SamGraph, storage: str) -> str:
    """SAM's name of a stored tensor: the program's name, or a safe name for a re-laid-out copy."""
    source = source_name(graph, storage)
    return source if storage == source else comal_name(storage)


def _formats(graph: SamGraph) -> str:
    """The graph comment: each tensor's level formats and mode order, the output first as SAM's
    tools expect (`x=s0,B=ss01`); a tensor without levels is `none`."""
    parts = []
    ordered = sorted(graph.tensors.items(), key=lambda item: item[1].role != "output")
    for name, meta in ordered:
        levels = "".join("s" if x.startswith("compressed") else "d" for x in meta.levels)
        order = "".join(str(m) for m in meta.mode_order)
        parts.append(f"{_tensor(graph, name)}={levels + order or 'none'}")
    return ",".join(parts)


def _digits(n: int) -> str:
    """`n`, or the least number above it with only one-digit factors, as a product of digits: SAM's
    generator reads a size token longer than one character as a tensor dimension (`C1_dim`)."""
    n = max(int(n), 1)
    while True:
        factors, rest = [], n
        for d in (9, 8, 7, 6, 5, 4, 3, 2):
            while rest % d == 0 and rest > 1:
                factors.append(str(d))
                rest //= d
        if rest == 1:
            return "*".join(factors) or "1"
        n += 1


def _size(graph: SamGraph, extents: list[int]) -> str:
    """A product of extents in SAM's size notation: `B0_dim` (dimension 0 of input B, a one-letter
    tensor read by the generated test) where an input has a dimension of that extent, else digits."""
    dims = {}
    for name, meta in graph.tensors.items():
        sam = _tensor(graph, name)
        if meta.role == "input" and len(sam) == 1 and sam not in "xX":
            for m, extent in enumerate(meta.shape):
                dims.setdefault(int(extent), f"{sam}{m}_dim")
    return "*".join(dims.get(int(e)) or _digits(e) for e in extents) or "1"


def _stored_extents(graph: SamGraph, storage: str) -> list[int]:
    """The extent of each stored level of a tensor, outermost first."""
    meta = graph.tensors.get(storage)
    return [int(meta.shape[m]) for m in meta.mode_order] if meta is not None else []


def _from_root(graph: SamGraph, stream: Stream) -> bool:
    node = graph.nodes[stream.node]
    while node.kind == "broadcast":
        node = graph.nodes[node.inputs["in"].node]
    return node.kind == "root"


def _attributes(graph: SamGraph, node) -> tuple[str, dict, str]:
    """(SAM type, attributes, label) of a node."""
    p, lab = node.params, node_label(graph, node)
    tensor = _tensor(graph, p["tensor"]) if p.get("tensor") else ""
    mode = "" if lab.mode is None else str(lab.mode)
    kind = node.kind
    if kind == "scan":
        root = _from_root(graph, node.inputs["ref"])
        attrs = {"index": node.var, "tensor": tensor or f"universe_{node.var}", "mode": mode or "0",
                 "format": p.get("format", "dense"), "src": "true", "root": str(root).lower()}
        return "fiberlookup", attrs, f"FiberLookup {node.var}: {attrs['tensor']}{attrs['mode']}\\n{attrs['format']}"
    if kind == "locate":
        attrs = {"index": node.var, "tensor": tensor, "mode": mode, "dim_size": str(p.get("dim"))}
        return "locate", attrs, f"Locate {node.var}: {tensor}{mode}"
    if kind == "repsig":
        return "repsiggen", {"index": lab.var}, f"RepeatSignalGenerator {lab.var}"
    if kind == "repeat":
        root = _from_root(graph, node.inputs["in"])
        of = ref_tensor(graph, node.inputs["in"]) or _downstream_tensor(graph, node)
        attrs = {"index": lab.var, "tensor": of, "root": str(root).lower()}
        return "repeat", attrs, f"Repeat {lab.var}: {of or lab.detail}"
    if kind in ("intersect", "union"):
        return kind, {"index": node.label}, f"{kind} {node.label}"
    if kind == "array":
        return "arrayvals", {"tensor": tensor}, f"Array Vals: {tensor}"
    if kind == "alu":
        attrs = {} if p.get("scalar") is None else {"const0": f"{p['scalar']:g}"}
        if p["op"] in ("add", "sub"):
            attrs["sub"] = "1" if p["op"] == "sub" else "0"
        sam = "add" if p["op"] == "sub" else ("smax" if p["op"] == "max" and "const0" in attrs else p["op"])
        return sam, attrs, f"{p['op'].capitalize()}" + (f" {attrs['const0']}" if "const0" in attrs else "")
    if kind == "reduce":
        reducer = p.get("kind", "sum")
        return "reduce", {"kind": reducer}, "Reduce" + ("" if reducer == "sum" else f" {reducer}")
    if kind in ("spacc", "spacc2"):
        ports = ["crd_inner", "crd_mid", "crd_outer"] if kind == "spacc2" else ["crd_inner", "crd_outer"]
        attrs = {"order": str(len(ports) - 1),
                 **{f"in{k}": stream_var(graph, node.inputs[q]) for k, q in enumerate(ports)}}
        names = " ".join(f"{k}={attrs[f'in{k}']}" for k in range(len(ports)))
        return "spaccumulator", attrs, f"SparseAccumulator {attrs['order']}\\n{names}"
    if kind == "crd_drop":
        outer, inner = stream_var(graph, node.inputs["outer"]), stream_var(graph, node.inputs["inner"])
        return "crddrop", {"outer": outer, "inner": inner}, f"CrdDrop {outer},{inner}"
    if kind == "level_write":
        attrs = {"index": lab.var, "tensor": tensor, "mode": mode, "format": p["format"]}
        if p["format"] == "compressed":  # fibers above the level + 1, and coordinates, at most
            above = _stored_extents(graph, p["tensor"])[:int(p.get("level", 0))]
            extent = _stored_extents(graph, p["tensor"])[int(p.get("level", 0))]
            attrs["segsize"] = f"{_size(graph, above)}+1" if above else "2"
            attrs["crdsize"] = _size(graph, above + [extent])
        attrs["sink"] = "true"
        return "fiberwrite", attrs, f"FiberWrite {lab.var}: {tensor}{mode}\\n{p['format']}"
    if kind == "value_write":
        attrs = {"mode": "vals", "tensor": tensor, "size": f"1*{_size(graph, _stored_extents(graph, p['tensor']))}",
                 "sink": "true"}
        return "fiberwrite", attrs, f"FiberWrite Vals: {tensor}"
    if kind == "broadcast":
        return "broadcast", {}, ""
    return kind, {"lanes": str(p.get("lanes"))}, f"{kind.capitalize()} {p.get('lanes')}"


def _edge_label(graph: SamGraph, node, port: str, kind: str) -> str:
    """SAM's label of the edge into `port` of `node`: the stream kind, with the tensor or variable
    it belongs to where SAM's tools tell ports apart by it (`crd_in-B`, `ref_out-B`, `crd_outer-i`)."""
    if node.kind in ("intersect", "union"):
        side = "in-" + (ref_tensor(graph, node.inputs["pay" + port.lstrip("crdpay")]) or port)
        return f"{kind}_{side}"
    if node.kind in ("crd_drop", "spacc", "spacc2") and kind == "crd":
        return f"crd_{port.replace('crd_', '')}-{stream_var(graph, node.inputs[port])}"
    source = graph.nodes[node.inputs[port].node]
    out = node.inputs[port].port
    if source.kind in ("intersect", "union") and out.startswith("pay"):
        return f"{kind}_out-{ref_tensor(graph, Stream(source.id, out)) or out}"
    if source.kind == "crd_drop":
        return f"crd_{out}-{stream_var(graph, source.inputs[out])}"
    return kind


def _downstream_tensor(graph: SamGraph, node) -> str:
    """The tensor a root repeat's references reach: the first scan, locate or array below it."""
    todo, seen = [node.id], set()
    while todo:
        current = todo.pop(0)
        for reader in graph.nodes:
            if any(s.node == current for s in reader.inputs.values()) and reader.id not in seen:
                seen.add(reader.id)
                if reader.kind in ("scan", "locate", "array") and reader.params.get("tensor"):
                    return _tensor(graph, reader.params["tensor"])
                if reader.kind in ("broadcast", "repeat", "fork", "join"):
                    todo.append(reader.id)
    return ""


def _aligned_ref(graph: SamGraph, crd: Stream) -> Stream | None:
    """The reference stream that runs token-aligned with coordinates `crd` (a scan's references,
    a joiner's first payload)."""
    node = graph.nodes[crd.node]
    while node.kind == "broadcast":
        crd = node.inputs["in"]
        node = graph.nodes[crd.node]
    if node.kind == "scan":
        return Stream(node.id, "ref")
    if node.kind in ("intersect", "union") and graph.stream_kind(Stream(node.id, "pay0")) == "ref":
        return Stream(node.id, "pay0")
    return None


def sam_form(graph: SamGraph) -> SamGraph:
    """A copy of `graph` in SAM's primitives where fuseflow takes a shortcut. SAM has no locate: a
    locate into a dense level becomes a dense scan of that level, fed by the reference the locate's
    repeat copied, intersected with the coordinates it located (a dense fiber holds every
    coordinate, so the intersection passes the sparse side through)."""
    g = copy.deepcopy(graph)
    readers = g.consumers()
    for loc in [n for n in g.nodes if n.kind == "locate" and "stride" not in n.params]:
        repeat = g.nodes[loc.inputs["ref"].node]
        sparse = _aligned_ref(g, loc.inputs["crd"])
        if repeat.kind != "repeat" or sparse is None:
            continue
        p = loc.params
        scan = g.add("scan", {"tensor": p["tensor"], "level": p.get("level", 0), "format": "dense", "dim": p["dim"]},
                     cse=False, var=loc.var, ref=repeat.inputs["in"])
        for reader, port in readers.get(Stream(loc.id, "ref"), []):
            g.nodes[reader].inputs[port] = Stream(loc.id, "pay1")
        loc.kind, loc.label, loc.arity, loc.params = "intersect", loc.var, 2, {}
        loc.inputs = {"crd0": loc.inputs["crd"], "pay0": sparse, "crd1": scan.out("crd"), "pay1": scan.out("ref")}
    return g


def unread_nodes(graph: SamGraph) -> set[int]:
    """Nodes whose outputs nothing reads (a repeat a locate no longer uses, its signal)."""
    dead: set[int] = set()
    while True:
        read = {s.node for n in graph.nodes if n.id not in dead for s in n.inputs.values()}
        more = {n.id for n in graph.nodes if n.id not in dead and n.id not in read
                and n.kind in ("repeat", "repsig", "broadcast", "scan")}
        if not more:
            return dead
        dead |= more


def to_samgv(graph: SamGraph) -> str:
    """SAM's `.gv` text of `graph` (see the module docstring)."""
    graph = sam_form(graph)
    lines = ["digraph SAM {", f"    comment={_q(_formats(graph))}"]
    dropped = unread_nodes(graph) | {n.id for n in graph.nodes if n.kind == "root"
                                     or (n.kind == "broadcast" and _from_root(graph, n.inputs["in"]))}
    for node in graph.nodes:
        if node.id in dropped:
            continue
        sam, attrs, label = _attributes(graph, node)
        comment = ",".join([f"type={sam}"] + [f"{k}={v}" for k, v in attrs.items()])
        extra = " ".join(f"{k}={_q(v)}" for k, v in attrs.items())
        if sam == "broadcast":
            lines.append(f'    {node.id} [comment={_q(comment)} shape=point style=invis type="broadcast"]')
            continue
        lines.append(f'    {node.id} [comment={_q(comment)} label="{label}" color={COLOR.get(node.kind, "brown")} '
                     f'shape=box style=filled type={_q(sam)}{" " + extra if extra else ""}]')
    for node in graph.nodes:
        if node.id in dropped:
            continue
        for port, stream in node.inputs.items():
            if stream.node in dropped:
                continue
            kind = graph.stream_kind(stream)
            label = _edge_label(graph, node, port, kind)
            style = "".join(f" style={v}" for v in EDGE[kind].values())
            named = label.split("_", 1)[1] if "-" in label else ""  # the tensor or variable: `in-B`, `outer-i`
            lines.append(f"    {stream.node} -> {node.id} [label={_q(label)}{style} type={_q(kind)}"
                         + (f" comment={_q(named)}]" if named else "]"))
    lines.append("}")
    return "\n".join(lines) + "\n"
