"""The compact picture of a large kernel: one box per source op, with its statement and how many
primitives compute it, and the streams between ops (Graphviz).

A fully fused model is a hundred primitives; drawn one by one it needs a screen. Here each op
(`SamGraph.ops`) is one box: its statement, then its primitive count by kind (`9 primitives: 2
scan, 1 intersect, ...`) and the input and output tensors it reads and writes. An edge runs from
op A to op B when a stream of A's primitives feeds one of B's (streams through shared
primitives, the loops several ops use, are followed back to the ops they come from): values
(`val t2`, bold) or loop coordinates (`crd l,k`, thin), in words and line style as in the
detailed picture, so a grayscale print keeps the kinds. `column_view` lays it out for a
paper's column. The HTML report opens an op's primitives from its box.

    >>> import fuseflow
    >>> from fuseflow.fusion.compile import compile_schedule
    >>> g = compile_schedule(fuseflow.from_mlir("tests/mlir/matmul_chain.mlir"), "full").kernels[0].graph
    >>> dot = op_view_dot(g)
    >>> dot.count('[id="box_'), "val T" in dot, "reads A, B" in dot
    (2, True, True)
"""
from __future__ import annotations

import html
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .draw import EDGE_STYLE, EDGE_WORD, LEGEND, _attrs, _q, best_layout, for_column, text_points, write_picture
from .labels import source_name, stream_var

if TYPE_CHECKING:  # annotations only
    from .graph import SamGraph, Stream

LEFT_OUT = ("broadcast", "root")  # not counted: a broadcast is a fan-out, the root starts every loop
KIND_ORDER = ("scan", "locate", "intersect", "union", "repsig", "repeat", "array", "alu", "reduce", "spacc",
              "spacc2", "crd_drop", "fork", "join", "level_write", "value_write")
MIN_POINTS = 7  # the smallest text a printed picture should have
WRAP = 26  # characters per line of a box's text (its statement: 10 more)


@dataclass
class OpEdge:
    """The streams of one kind from one op to another: what they carry (the source op's values,
    or index variables) and how many there are."""

    kind: str
    carries: list[str] = field(default_factory=list)
    streams: int = 0

    @property
    def words(self) -> str:
        """`crd i,k` or `val t2`."""
        what = ",".join(sorted(dict.fromkeys(c for c in self.carries if c)))
        return f"{EDGE_WORD[self.kind]} {what}".strip()


def op_id(op: str) -> str:
    """A Graphviz and HTML id for an op name (`t35#0` -> `t35_23_0`: other characters than
    letters, digits and `_` by their code in hex)."""
    return "".join(c if c.isalnum() or c == "_" else f"_{ord(c):x}_" for c in op)


def drawn_ops(graph: SamGraph) -> list[str]:
    """The ops that get a box: those some primitive computes, in the graph's order."""
    have = {n.op for n in graph.nodes}
    return [op for op in graph.ops if op in have]


def primitive_counts(graph: SamGraph, op: str) -> Counter:
    """How many primitives of each kind compute `op` (broadcasts and the root left out)."""
    return Counter(n.kind for n in graph.nodes if n.op == op and n.kind not in LEFT_OUT)


def _counts_text(counts: Counter, wrap: int = WRAP) -> list[str]:
    """`9 primitives: 2 scan, 1 intersect, ...`, wrapped into lines of about `wrap` characters."""
    kinds = sorted(counts, key=lambda k: KIND_ORDER.index(k) if k in KIND_ORDER else len(KIND_ORDER))
    total = sum(counts.values())
    words = [f"{total} primitive{'s' if total != 1 else ''}:"] + [f"{counts[k]} {k}," for k in kinds]
    words[-1] = words[-1].rstrip(",")
    lines, line = [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > wrap:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return lines + [line]


def _origins(graph: SamGraph, stream: Stream, memo: dict) -> list[tuple[str, Stream]]:
    """The (op, stream) pairs a stream comes from: its producer's op, or, for a shared primitive
    (no op of its own), the ops its own inputs come from."""
    node = graph.nodes[stream.node]
    if node.op or node.kind == "root":
        return [(node.op, stream)] if node.op else []
    if node.id not in memo:
        memo[node.id] = []
        memo[node.id] = [o for s in node.inputs.values() for o in _origins(graph, s, memo)]
    return memo[node.id]


def op_edges(graph: SamGraph) -> list[tuple[str, str, OpEdge]]:
    """(source op, target op, edge): values (`val t2`: t2's values feed the target) and loop
    streams (`crd l,k`: coordinates, with the references and repeat signals that go with them,
    of the loops the source op iterates and the target reuses)."""
    edges: dict[tuple[str, str, str], OpEdge] = {}
    memo: dict[int, list] = {}
    for node in graph.nodes:
        if not node.op:
            continue
        for stream in node.inputs.values():
            for op, origin in _origins(graph, stream, memo):
                if op == node.op:
                    continue
                kind = "val" if graph.stream_kind(origin) == "val" else "crd"
                edge = edges.setdefault((op, node.op, kind), OpEdge(kind))
                edge.carries.append(op if kind == "val" else stream_var(graph, origin))
                edge.streams += 1
    return [(s, t, e) for (s, t, _), e in edges.items()]


def tensors_of(graph: SamGraph, op: str) -> tuple[list[str], list[str]]:
    """(input tensors `op`'s primitives read, output tensors they write), by the program's names."""
    reads, writes = {}, {}
    for node in graph.nodes:
        meta = graph.tensors.get(node.params.get("tensor", ""))
        if node.op == op and meta is not None:
            target = reads if meta.role == "input" else writes
            target[source_name(graph, node.params["tensor"])] = True
    return list(reads), list(writes)


def _wrapped(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, break_on_hyphens=False) or [""]


def _box(graph: SamGraph, op: str, prefix: str, wrap: int) -> str:
    """An op's box: its statement (the name in bold), what it reads and writes, its primitives."""
    name, _, rhs = graph.ops[op].partition(" = ")
    lines = _wrapped(f"{name} = {rhs}", wrap + 10)
    rows = [f'<tr><td align="left"><b>{html.escape(name)}</b>{html.escape(lines[0][len(name):])}</td></tr>']
    rows += [f'<tr><td align="left">{html.escape(line)}</td></tr>' for line in lines[1:]]
    reads, writes = tensors_of(graph, op)
    io = (f"reads {', '.join(reads)}" if reads else "") + ("; " if reads and writes else "") + \
        (f"writes {', '.join(writes)}" if writes else "")
    grey = [*(_wrapped(io, wrap + 10) if io else []), *_counts_text(primitive_counts(graph, op), wrap)]
    rows += [f'<tr><td align="left"><font color="#444444">{html.escape(line)}</font></td></tr>' for line in grey]
    label = '<<table border="0" cellborder="0" cellspacing="0" cellpadding="0">' + "".join(rows) + "</table>>"
    attrs = {"id": f"{prefix}box_{op_id(op)}", "shape": "box", "style": "rounded,filled", "fillcolor": "#f4f7fb",
             "color": "#4e79a7", "label": label, "tooltip": f"{graph.ops[op]} (click: its primitives)"}
    return f"  op_{op_id(op)} [{_attrs(attrs)}];"


def op_view_dot(graph: SamGraph, *, rankdir: str = "TB", prefix: str = "", title: str | None = None,
                fontsize: float = 9, loops: bool = True, wrap: int = WRAP) -> str:
    """Graphviz text of the compact picture (see the module docstring): the ops in program
    order, one a rank, so that it stays a narrow column; `loops=False` leaves the loop streams
    (`crd` edges) out and says so; `wrap`: characters per line of a box's counts."""
    ops = drawn_ops(graph)
    shared = sum(1 for n in graph.nodes if not n.op and n.kind not in LEFT_OUT)
    heading = _wrapped(title if title is not None else graph.name, wrap + 20)
    heading.append(f"{len(ops)} ops, {sum(1 for n in graph.nodes if n.kind not in LEFT_OUT)} primitives" +
                   (f" ({shared} in loops the ops share)" if shared else ""))
    if not loops:
        heading.append("values only: loop streams between ops left out")
    lines = [f"digraph {_q(graph.name)} {{",
             f'  graph [rankdir={rankdir}, nodesep=0.08, ranksep=0.2, fontname="Helvetica", fontsize={fontsize}, '
             f'labelloc=t, label={_q(chr(10).join(heading))}];',
             f'  node [fontname="Helvetica", fontsize={fontsize}, margin="0.06,0.03", height=0.2];',
             f'  edge [arrowsize=0.5, fontname="Helvetica", fontsize={fontsize}];']
    lines += [_box(graph, op, prefix, wrap) for op in ops]
    lines += [f"  op_{op_id(a)} -> op_{op_id(b)} [style=invis, weight=20];" for a, b in zip(ops, ops[1:])]
    for source, target, edge in op_edges(graph):
        if edge.kind == "crd" and not loops:
            continue
        attrs = {**EDGE_STYLE[edge.kind], "label": edge.words, "fontcolor": EDGE_STYLE[edge.kind]["color"],
                 "tooltip": f"{source} -> {target}: {edge.streams} {LEGEND[edge.kind]} stream(s)"}
        if edge.kind == "crd":
            attrs["constraint"] = "false"  # loops run both ways: the values alone rank the ops
        lines.append(f"  op_{op_id(source)} -> op_{op_id(target)} [{_attrs(attrs)}];")
    lines.append("}")
    return "\n".join(lines)


def op_view_svg(graph: SamGraph, **options) -> str:
    """The compact picture as SVG text."""
    return best_layout([op_view_dot(graph, **options)])[1]


def column_view(graph: SamGraph, **options) -> tuple[str, str]:
    """(Graphviz text, SVG) of the compact picture for a paper's column (`text_points`): with
    the loop streams if its text stays at least `MIN_POINTS` there, else values only; boxes
    narrow and tall, or wider and shorter when a tall picture would be shrunk; the first that
    reaches `MIN_POINTS`, else the one whose text is largest."""
    best = None
    for loops in (True, False):
        for wrap in (WRAP, WRAP + 10, WRAP + 20):
            dot = op_view_dot(graph, loops=loops, wrap=wrap, **options)
            picture = best_layout([dot])[1]
            points = text_points(picture)
            if best is None or points > best[0] + 0.05:
                best = (points, dot, picture)
            if points >= MIN_POINTS:
                return dot, picture
    return best[1], best[2]


def render_op_view(graph: SamGraph, path: str, **options) -> str:
    """Draw the compact picture, laid out for a paper's column (`column_view`), to an SVG, PNG
    or PDF file."""
    return write_picture(for_column(column_view(graph, **options)[0]), path)
