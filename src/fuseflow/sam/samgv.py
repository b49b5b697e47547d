"""SamGraphs as SAM's Graphviz (`.gv`) graphs: the node and edge attributes SAM's tools read.

A SAM graph is `digraph SAM` with a `comment` listing each tensor's level formats and mode order
(`B=ss01`: compressed, compressed, modes 0 then 1). Every node carries its attributes twice: as
`comment="type=...,index=...,..."` and as separate attributes (`type`, `index`, `tensor`, `mode`,
`format`, ...), with SAM's label and colour. Edges carry `type` (crd, ref, val, repsig), SAM's
line style for it (dashed, bold, plain, dotted) and a label naming the port. As in SAM, there
is no root node: scanners and repeats it feeds say `root="true"`. SAM's type names are used where
SAM has the primitive (fiberlookup, repsiggen, arrayvals, spaccumulator, crddrop, fiberwrite,
...); fuseflow's own primitives keep their names (locate, fork, join, and ALU ops such as
`coalesce`).

    >>> from fuseflow.fusion.compile import compile_schedule
    >>> from fuseflow.frontend import from_mlir
    >>> text = to_samgv(compile_schedule(from_mlir("tests/mlir/spmv.mlir"), "full").kernels[0].graph)
    >>> text.splitlines()[:2]
    ['digraph SAM {', '    comment="A=ds01,x=d0,y=d0"']
    >>> 'type="fiberlookup" index="i" tensor="A" mode="0" format="dense" src="true" root="true"' in text
    True
"""
from __future__ import annotations

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
    parts = []
    for name, meta in graph.tensors.items():
        levels = "".join("s" if x.startswith("compressed") else "d" for x in meta.levels)
        parts.append(f"{_tensor(graph, name)}={levels}{''.join(str(m) for m in meta.mode_order)}")
    return ",".join(parts)


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
        of = ref_tensor(graph, node.inputs["in"])
        attrs = {"index": lab.var, "tensor": of, "root": str(_from_root(graph, node.inputs["in"])).lower()}
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
        attrs = {"index": lab.var, "tensor": tensor, "mode": mode, "format": p["format"], "sink": "true"}
        return "fiberwrite", attrs, f"FiberWrite {lab.var}: {tensor}{mode}\\n{p['format']}"
    if kind == "value_write":
        return "fiberwrite", {"mode": "vals", "tensor": tensor, "sink": "true"}, f"FiberWrite Vals: {tensor}"
    if kind == "broadcast":
        return "broadcast", {}, ""
    return kind, {"lanes": str(p.get("lanes"))}, f"{kind.capitalize()} {p.get('lanes')}"


def _edge_label(graph: SamGraph, node, port: str, kind: str) -> str:
    if node.kind in ("intersect", "union"):
        side = "in-" + (ref_tensor(graph, node.inputs["pay" + port.lstrip("crdpay")]) or port)
        return f"{kind}_{side}"
    if node.kind in ("crd_drop", "spacc", "spacc2") and kind == "crd":
        return f"crd_{port.replace('crd_', '')}-{stream_var(graph, node.inputs[port])}"
    return kind


def to_samgv(graph: SamGraph) -> str:
    """SAM's `.gv` text of `graph` (see the module docstring)."""
    lines = ["digraph SAM {", f"    comment={_q(_formats(graph))}"]
    dropped = {n.id for n in graph.nodes
               if n.kind == "root" or (n.kind == "broadcast" and _from_root(graph, n.inputs["in"]))}
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
            lines.append(f"    {stream.node} -> {node.id} [label={_q(label)}{style} type={_q(kind)} "
                         f"comment={_q(f'{stream}->{port}')}]")
    lines.append("}")
    return "\n".join(lines) + "\n"
