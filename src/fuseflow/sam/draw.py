"""Readable pictures of SamGraphs (Graphviz): labelled as SAM's graphs, boxes for the source ops.

Each node reads `primitive var` and `tensor, mode as a subscript, format` (see `labels`), then
its id (`n12`, as in `--text`, deadlock and verification reports) in grey. Streams are styled
by kind, with a legend: coordinates blue, references green dashed, values red bold, repeat
signals grey dotted. The compact picture (the default) leaves out what adds lines but no
information: a broadcast is drawn as the fan-out of its producer's edges, a repeat-signal
generator (a pure function of the coordinates it reads) as a dotted edge from those coordinates
into the repeat, and the root (the scans and repeats it feeds start every loop nest). A box
labelled with a source op's statement holds the nodes that compute its values (arrays, ALUs,
reducers, accumulators, repeats of values); the loops that feed them are shared by several ops
and stay outside. A node whose outputs nothing reads is dashed.

A deep graph (a fully fused model) is wrapped into side-by-side columns, each a run of depths,
with connectors (`to n47` at the bottom of one, `from n35` at the top of the next) where streams
cross. `best_layout` tries one column, then more, then left-to-right, and keeps the simplest
layout that shows the text about as large as any on a 1920x1200 screen.

    >>> from fuseflow.sam.graph import SamGraph
    >>> g = SamGraph("tiny"); r = g.add("root")
    >>> s = g.add("scan", {"tensor": "A", "level": 0, "format": "compressed", "dim": 3}, var="i", ref=r.out("ref"))
    >>> dot = to_dot(g, rankdir="TB")
    >>> "scan i" in dot, "n0 -> n1" in dot, "n0 -> n1" in to_dot(g, compact=False)  # compact: no root
    (True, False, True)
"""
from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import graphviz

from ..errors import UserError
from .labels import node_label, ref_tensor, stream_var

if TYPE_CHECKING:  # annotations only (the drawing reads graphs, fuseflow.sam hooks svg() into SamGraph)
    from .graph import SamGraph, Stream

EDGE_STYLE = {"crd": {"color": "#1f5fbf"}, "ref": {"color": "#2e8b2e", "style": "dashed"},
              "val": {"color": "#c0392b", "penwidth": "2.2"}, "repsig": {"color": "#888888", "style": "dotted"}}
# every style differs in its line (thin, dashed, bold, dotted), not only its colour, and every edge
# says its kind in words (`crd i`, `ref A`, `val`, `sig j`): a grayscale print keeps the stream kinds
LEGEND = {"crd": "coordinates", "ref": "references", "val": "values", "repsig": "repeat signal"}
EDGE_WORD = {"crd": "crd", "ref": "ref", "val": "val", "repsig": "sig"}
NOTES = ["A₁: tensor A, mode 1;  n12: node id (as in reports)", "fan-out: a broadcast;  dashed: outputs unused",
         "boxes: where each source op computes", "edge words: kind and variable or tensor (crd i, sig i, ref A)"]
FILL = {"root": "#eeeeee", "scan": "#dcefd5", "locate": "#dcefd5", "array": "#c9e6bf", "intersect": "#e6dcf2",
        "union": "#e6dcf2", "repsig": "#d6eef7", "repeat": "#d6eef7", "alu": "#fde3cb", "reduce": "#f8cfb0",
        "spacc": "#f8cfb0", "spacc2": "#f8cfb0", "crd_drop": "#fff2b8", "level_write": "#b9dcb0",
        "value_write": "#b9dcb0", "fork": "#e2e2e2", "join": "#e2e2e2", "broadcast": "#000000"}
CLUSTER_COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#76b7b2", "#edc948", "#9c755f",
                  "#ff9da7", "#bab0ac"]
EDGE_FONT = 8  # points, the words on edges
BOXED = ("array", "alu", "reduce", "spacc", "spacc2")  # in their op's box (with repeats of values)
COLUMN_IN = 8.5 / 2.54  # a paper's column, inches
COLUMN_HEIGHT_IN = 9.0  # the tallest a figure in a column can be, inches
SCREEN_PX = (1920, 1200)  # the screen pictures are laid out for
FITS = 0.9  # a layout shown at this zoom or more on that screen is good enough
BETTER = 1.15  # a less simple layout must show the text this much larger to be chosen


def _q(text: str) -> str:
    """A quoted Graphviz string."""
    return json.dumps(str(text), ensure_ascii=False)


def _attrs(items: dict) -> str:
    return ", ".join(f'{k}={v if str(v).startswith("<") else _q(v)}' for k, v in items.items())


def drawn_source(graph: SamGraph, stream: Stream, compact: bool) -> tuple[Stream | None, str]:
    """(the stream an edge is drawn from, the kind it is drawn as) for an input `stream`: in the
    compact picture a broadcast's output is drawn from the broadcast's input, a repeat signal
    from the coordinates its generator reads, and the root reference not at all (None)."""
    kind = graph.stream_kind(stream)
    node = graph.nodes[stream.node]
    while compact and node.kind in ("broadcast", "repsig"):
        stream = node.inputs["in" if node.kind == "broadcast" else "crd"]
        node = graph.nodes[stream.node]
    return (None if compact and node.kind == "root" else stream), kind


def hidden(graph: SamGraph, compact: bool = True) -> dict[int, list[int]]:
    """Nodes the compact picture leaves out -> the drawn nodes that stand for them: a broadcast's
    producer; the consumers of a repeat-signal generator or of the root (through broadcasts)."""
    if not compact:
        return {}
    users: dict[int, list[int]] = {}
    for node in graph.nodes:
        for stream in node.inputs.values():
            users.setdefault(stream.node, []).append(node.id)
    out: dict[int, list[int]] = {}
    for node in reversed(graph.nodes):  # consumers first: a broadcast of a repsig maps to the repeats
        if node.kind in ("repsig", "root") or (node.kind == "broadcast" and
                                               graph.nodes[node.inputs["in"].node].kind in ("repsig", "root")):
            out[node.id] = [m for user in users.get(node.id, []) for m in out.get(user, [user])]
    for node in graph.nodes:  # a broadcast of anything else stands for its producer
        if node.kind == "broadcast" and node.id not in out:
            source = graph.nodes[node.inputs["in"].node]
            out[node.id] = out.get(source.id, [source.id])
    return out


def _boxed(graph: SamGraph, node) -> bool:
    """Whether a node is drawn in its source op's box: the nodes that compute its values (the
    loops that feed them are shared and stay outside, which keeps the boxes compact)."""
    if node.op not in graph.ops:
        return False
    return node.kind in BOXED or (node.kind == "repeat" and graph.stream_kind(node.inputs["in"]) == "val")


def _node_line(graph: SamGraph, node, prefix: str, used: set[int] | frozenset = frozenset()) -> str:
    if node.kind == "broadcast":
        return f'  n{node.id} [id="{prefix}n{node.id}", shape=point, width=0.08, tooltip="n{node.id} broadcast"];'
    lab = node_label(graph, node)
    text = f"<b>{html.escape(lab.title)}</b>"
    if lab.subtitle:
        text += f" {html.escape(lab.subtitle)}"
    text += f' <font point-size="8" color="#777777">n{node.id}</font>'
    attrs = {"id": f"{prefix}n{node.id}", "label": f"<{text}>", "fillcolor": FILL[node.kind],
             "tooltip": f"n{node.id} {lab.long}"}
    if node.kind == "root":
        attrs["shape"] = "ellipse"
    if used and node.id not in used and node.kind not in ("level_write", "value_write"):
        attrs.update(style="rounded,filled,dashed", tooltip=attrs["tooltip"] + " (its outputs are unused)")
    return f"  n{node.id} [{_attrs(attrs)}];"


def _legend(prefix: str) -> list[str]:
    """One box: a line of each stream kind's style, and what ids, subscripts and boxes mean."""
    rows = ['<tr><td colspan="2"><b>streams</b></td></tr>']
    for kind, what in LEGEND.items():
        style = EDGE_STYLE[kind]
        dash = f' style="{style["style"]}"' if style.get("style") in ("dashed", "dotted") else ""
        width = 3 if kind == "val" else 2
        line = (f'<table border="0" cellborder="0" cellspacing="0"><tr><td width="34" height="6" sides="b" '
                f'border="{width}" color="{style["color"]}"{dash}></td></tr><tr><td height="6"></td></tr></table>')
        rows.append(f'<tr><td>{line}</td><td align="left">{kind}: {what}</td></tr>')
    for note in NOTES:
        rows.append(f'<tr><td colspan="2" align="left">{html.escape(note)}</td></tr>')
    table = f'<<table border="0" cellborder="0" cellspacing="2">{"".join(rows)}</table>>'
    return [f'  legend [id="{prefix}legend", shape=box, style=rounded, color="#999999", fontsize=9, '
            f'tooltip="legend", label={table}];']


def edge_label(graph: SamGraph, stream: Stream, kind: str) -> str:
    """The words on an edge: its kind and what it carries, e.g. `crd i` (coordinates of index
    variable i), `ref A` (references into tensor A), `val`, `sig j` (a repeat signal along j)."""
    what = stream_var(graph, stream) if kind in ("crd", "repsig") else ""
    if kind == "ref":
        what = ref_tensor(graph, stream)
    return f"{EDGE_WORD[kind]} {what}".strip()


@dataclass
class DrawnEdge:
    """What one drawn edge stands for: its words (`edge_label`) and the streams (`n3.crd -> n5.in`)."""

    words: str
    streams: list[str] = field(default_factory=list)


def _edges(graph: SamGraph, skip: set[int], compact: bool) -> dict[tuple[int, int, str], DrawnEdge]:
    """Drawn edges (source node, target node, kind) -> what they stand for."""
    edges: dict[tuple, DrawnEdge] = {}
    for node in graph.nodes:
        if node.id in skip:
            continue
        for port, stream in node.inputs.items():
            source, kind = drawn_source(graph, stream, compact)
            if source is not None:
                edge = edges.setdefault((source.node, node.id, kind), DrawnEdge(edge_label(graph, stream, kind)))
                edge.streams.append(f"{stream} -> n{node.id}.{port}")
    return edges


def _bands(drawn: list[int], edges, columns: int) -> dict[int, int]:
    """Column of each drawn node when a deep picture is wrapped into `columns` side by side: its
    longest-path depth, split into equal runs."""
    depth = {n: 0 for n in drawn}
    for source, target, _ in sorted(edges, key=lambda e: e[1]):
        depth[target] = max(depth[target], depth[source] + 1)
    total = max(depth.values(), default=0) + 1
    return {n: min(columns - 1, depth[n] * columns // total) for n in drawn}


def _connectors(edges, band: dict[int, int], prefix: str) -> tuple[dict[int, list[str]], list[tuple]]:
    """Edges between columns become a pair of connectors (`to n47` at the bottom of one column,
    `from n35` at the top of the next): per column, the connector nodes to add; and the edges
    that now run inside columns."""
    nodes: dict[int, list[str]] = {}
    kept = []
    crossing: dict[tuple, list[tuple]] = {}
    for (source, target, kind), edge in edges.items():
        if band[source] == band[target]:
            kept.append((f"n{source}", f"n{target}", kind, edge))
        else:
            crossing.setdefault((source, band[target], kind), []).append((target, edge))
    for (source, column, kind), targets in crossing.items():
        names = ", ".join(f"n{t}" for t, _ in targets)
        out_id, in_id = f"to_{source}_{column}_{kind}", f"from_{source}_{column}_{kind}"
        style = {"shape": "cds", "style": "filled", "fillcolor": "white", "color": EDGE_STYLE[kind]["color"],
                 "fontsize": 8, "height": 0.15, "margin": "0.04,0.01"}
        out_attrs = {**style, "id": prefix + out_id, "label": f"to {names}",
                     "tooltip": f"continues in column {column + 1}"}
        in_attrs = {**style, "id": prefix + in_id, "label": f"from n{source}",
                    "tooltip": f"from column {band[source] + 1}"}
        nodes.setdefault(band[source], []).append(f"  {out_id} [{_attrs(out_attrs)}];")
        nodes.setdefault(column, []).append(f"  {in_id} [{_attrs(in_attrs)}];")
        kept.append((f"n{source}", out_id, kind,
                     DrawnEdge(targets[0][1].words, [t for _, edge in targets for t in edge.streams])))
        kept += [(in_id, f"n{t}", kind, edge) for t, edge in targets]
    return nodes, kept


def to_dot(graph: SamGraph, *, compact: bool = True, legend: bool = True, clusters: bool = True,
           rankdir: str = "TB", columns: int = 1, prefix: str = "", title: str | None = None,
           edge_labels: bool = True) -> str:
    """Graphviz text of the picture. `columns` > 1 wraps a deep graph into side-by-side columns
    joined by connectors; `prefix` makes SVG ids unique when several graphs share a page;
    `edge_labels` writes each edge's kind and variable or tensor on it (`crd i`, `ref A`)."""
    skip = set(hidden(graph, compact))
    drawn = [n.id for n in graph.nodes if n.id not in skip]
    groups = {n: graph.nodes[n].op if clusters and _boxed(graph, graph.nodes[n]) else "" for n in drawn}
    edges = _edges(graph, skip, compact)
    band = _bands(drawn, edges, columns)
    connectors, kept = _connectors(edges, band, prefix)
    used = {s.node for n in graph.nodes for s in n.inputs.values()}
    lines = [f"digraph {_q(graph.name)} {{",
             f'  graph [rankdir={rankdir}, newrank=true, nodesep=0.12, ranksep=0.16, fontname="Helvetica", '
             f'fontsize=12, labelloc=t, label={_q(title if title is not None else graph.name)}];',
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10, margin="0.06,0.02", '
             'height=0.2, color="#555555"];',
             '  edge [arrowsize=0.6, fontname="Helvetica"];']
    ops = list(dict.fromkeys(op for op in groups.values() if op))
    for column in range(columns):
        lines.append(f"  subgraph cluster_column{column} {{")
        lines.append(f'    graph [label="", style=invis, id="{prefix}column{column}"];' if columns > 1 else
                     '    graph [label="", style=invis];')
        boxes = list(dict.fromkeys(groups[n] for n in drawn if groups[n] and band[n] == column))
        for op in boxes:  # one box per source op (and column it reaches)
            color = CLUSTER_COLORS[ops.index(op) % len(CLUSTER_COLORS)]
            first = min(band[n] for n in drawn if groups[n] == op) == column
            label = graph.ops[op] if first else f"{op} (continued)"
            lines += [f"  subgraph cluster_{column}_{ops.index(op)} {{",
                      f'    graph [id="{prefix}op_{html.escape(op)}_{column}", label={_q(label)}, '
                      f'style="rounded,filled", fillcolor="#fafafa", color="{color}", penwidth=1.6, '
                      f'fontcolor="{color}", fontsize=9, margin=4];']
            lines += ["  " + _node_line(graph, graph.nodes[n], prefix, used) for n in drawn
                      if groups[n] == op and band[n] == column]
            lines.append("  }")
        lines += [_node_line(graph, graph.nodes[n], prefix, used) for n in drawn if not groups[n] and band[n] == column]
        lines += connectors.get(column, [])
        lines.append("  }")
    if legend:
        lines += _legend(prefix)
    for source, target, kind, edge in kept:
        attrs = {**EDGE_STYLE[kind], "tooltip": f"{kind}: " + "; ".join(edge.streams)}
        words = edge.words + (f" ×{len(edge.streams)}" if len(edge.streams) > 1 else "")  # feeds several inputs
        if edge_labels:
            attrs.update(label=words, fontsize=EDGE_FONT, fontcolor=EDGE_STYLE[kind]["color"])
        lines.append(f"  {source} -> {target} [{_attrs(attrs)}];")
    lines.append("}")
    return "\n".join(lines)


def _pipe(dot: str, fmt: str) -> bytes:
    try:
        return graphviz.Source(dot).pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise UserError("Graphviz's `dot` program is not installed", None,
                        "apt-get install graphviz (scripts/setup.sh does this)") from None


def fit_scale(svg_text: str) -> float:
    """The zoom at which an SVG picture fits a screen (1920x1200 pixels at 96 dpi): the larger,
    the larger its text on one screen."""
    size = re.search(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg_text)
    width, height = (float(x) * 96 / 72 or 1.0 for x in size.groups())
    return min(SCREEN_PX[0] / width, SCREEN_PX[1] / height)


def text_points(svg_text: str, width_in: float = COLUMN_IN, height_in: float = COLUMN_HEIGHT_IN) -> float:
    """The smallest text of an SVG picture, in points, when it is printed within `width_in` by
    `height_in` inches (a paper's column, 8.5 cm wide, by default; a picture that fits is
    printed at full size)."""
    size = re.search(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg_text)
    fonts = [float(f) for f in re.findall(r'font-size="([\d.]+)"', svg_text)]
    if not size or not fonts:
        return 0.0
    return min(fonts) * min(1.0, width_in * 72 / float(size.group(1)), height_in * 72 / float(size.group(2)))


def best_layout(candidates) -> tuple[str, str]:
    """(Graphviz text, SVG) of the candidate layout whose text shows largest on one screen. The
    candidates (Graphviz texts, simplest first) are tried in order until one nearly fits at full
    size; a later one is taken only when it shows the text at least `BETTER` times larger."""
    best = None
    for dot in candidates:
        picture = _pipe(dot, "svg").decode("utf-8")
        scale = fit_scale(picture)
        if best is None or scale > BETTER * best[0]:
            best = (scale, dot, picture)
        if best[0] >= FITS:
            break
    return best[1], best[2]


def layouts(graph: SamGraph, **options):
    """The layouts tried for a picture: top-down in 1 to 4 columns, then left-to-right."""
    if "rankdir" in options:
        yield to_dot(graph, **options)
        return
    for columns in range(1, 5):
        yield to_dot(graph, rankdir="TB", columns=columns, **options)
    yield to_dot(graph, rankdir="LR", **options)


def svg(graph: SamGraph, **options) -> str:
    """The picture as SVG text (for notebooks and HTML reports)."""
    return best_layout(layouts(graph, **options))[1]


def _graph_attrs(dot: str, attrs: str) -> str:
    head, rest = dot.split("{", 1)
    return f"{head}{{\n  graph [{attrs}];{rest}"


def for_column(dot: str) -> str:
    """Graphviz text made to print within a paper's column (`COLUMN_IN` by `COLUMN_HEIGHT_IN`
    inches, shrunk to fit, never enlarged); `write_picture` makes its PNG 300 dpi, about 1000
    pixels wide."""
    return _graph_attrs(dot, f'size="{COLUMN_IN:.2f},{COLUMN_HEIGHT_IN:g}"')


def write_picture(dot: str, path: str, svg_text: str | None = None) -> str:
    """Render Graphviz text to an SVG, PNG or PDF file (by the file's suffix); a picture sized
    for print (`for_column`) gets 300 dpi as a PNG."""
    fmt = path.rsplit(".", 1)[-1].lower()
    if fmt not in ("svg", "png", "pdf"):
        raise UserError(f"cannot draw to {path!r}", None, "use a .svg, .png or .pdf file name")
    if fmt == "png" and 'size="' in dot.split("\n", 2)[1]:
        dot = _graph_attrs(dot, "dpi=300")
    data = svg_text.encode("utf-8") if fmt == "svg" and svg_text else _pipe(dot, fmt)
    try:
        with open(path, "wb") as handle:
            handle.write(data)
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror}") from None
    return path


def render(graph: SamGraph, path: str, **options) -> str:
    """Draw `graph` to an SVG, PNG or PDF file; needs Graphviz's `dot` program."""
    dot, picture = best_layout(layouts(graph, **options))
    return write_picture(dot, path, picture)
