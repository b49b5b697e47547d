"""Pictures of SamGraphs: Graphviz DOT text, rendered to SVG/PNG with the `graphviz` package.

Streams are styled by kind: coordinates blue, references green dashed, values red bold,
repeat signals grey dotted.

    >>> from fuseflow.sam.graph import SamGraph
    >>> g = SamGraph("tiny"); r = g.add("root")
    >>> _ = g.add("scan", {"tensor": "A", "level": 0, "format": "compressed", "dim": 3}, ref=r.out("ref"))
    >>> "n0 -> n1" in to_dot(g)
    True
"""
from __future__ import annotations

import graphviz

from ..errors import UserError
from .graph import SamGraph

EDGE_STYLE = {"crd": 'color="#1f5fbf"', "ref": 'color="#2e8b2e", style=dashed',
              "val": 'color="#c0392b", penwidth=2', "repsig": 'color="#888888", style=dotted'}
NODE_STYLE = {"root": "ellipse", "scan": "box", "locate": "box", "array": "box3d",
              "level_write": "cds", "value_write": "cds", "intersect": "diamond", "union": "diamond",
              "alu": "circle", "reduce": "invtriangle", "spacc": "invhouse", "repeat": "hexagon",
              "repsig": "hexagon", "broadcast": "point", "crd_drop": "octagon", "fork": "trapezium",
              "join": "invtrapezium"}


def _label(node) -> str:
    p = node.params
    if node.kind == "scan" and not p.get("tensor"):
        return f"{node.label or 'universe'}\\ndense {p['dim']}"
    if node.kind in ("scan", "level_write"):
        return f"{node.kind} {p['tensor']}.{p['level']}\\n{p.get('format', '')}"
    if node.kind in ("array", "value_write", "locate"):
        return f"{node.kind} {p['tensor']}"
    if node.kind == "alu":
        return str(p["op"]) + (f" {p['scalar']:g}" if p.get("scalar") is not None else "")
    if node.kind in ("reduce", "spacc"):
        return f"{node.kind}\\n{p.get('kind', 'sum')}"
    return node.kind


def to_dot(graph: SamGraph) -> str:
    lines = [f'digraph "{graph.name}" {{', "  rankdir=TB;", '  node [fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=8];']
    for node in graph.nodes:
        shape = NODE_STYLE.get(node.kind, "box")
        if node.kind == "broadcast":
            lines.append(f'  n{node.id} [shape=point, width=0.08];')
        else:
            lines.append(f'  n{node.id} [shape={shape}, label="{_label(node)}"];')
    for node in graph.nodes:
        for stream in node.inputs.values():
            kind = graph.stream_kind(stream)
            lines.append(f"  n{stream.node} -> n{node.id} [{EDGE_STYLE[kind]}];")
    lines.append("}")
    return "\n".join(lines)


def render(graph: SamGraph, path: str) -> str:
    """Write an SVG or PNG picture (by the file's suffix); needs Graphviz's `dot` program."""
    fmt = path.rsplit(".", 1)[-1].lower()
    if fmt not in ("svg", "png", "pdf"):
        raise UserError(f"cannot render to {path!r}", None, "use a .svg, .png or .pdf file name")
    source = graphviz.Source(to_dot(graph))
    try:
        data = source.pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise UserError("Graphviz's `dot` program is not installed", None,
                        "apt-get install graphviz (scripts/setup.sh does this)") from None
    with open(path, "wb") as handle:
        handle.write(data)
    return path
