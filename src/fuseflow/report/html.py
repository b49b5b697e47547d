"""One self-contained HTML file per compiled (or simulated) schedule: pictures to pan, zoom and click.

The page holds the overview of the kernels and two pictures per kernel (inline SVG): every
primitive (`sam.draw`) and one box per source op (`sam.opview`; a click on a box opens its
primitives), the kernels' metrics, and for every node what it is (primitive, index variable, tensor,
mode, format, source op), its streams (kind, where they come from and go to) and, after a
simulation, its steps and each stream's tokens and channel occupancy. Node ids in a deadlock or
verification report are links to the nodes. The script and style (`viewer.js`, `viewer.css`)
are inlined: opening the file needs no network.

    >>> import os, tempfile, fuseflow
    >>> from fuseflow.fusion.compile import compile_schedule
    >>> c = compile_schedule(fuseflow.from_mlir("tests/mlir/matmul_chain.mlir"), "unfused")
    >>> page = report_html(c)
    >>> page.count('class="pane"'), 'id="k1_n2"' in page, 'id="k1_box_O"' in page, "http" in page.split("<script>")[1]
    (5, True, True, False)
"""
from __future__ import annotations

import html
import json
import math
import re
from importlib import resources

from ..errors import UserError
from ..sam.draw import hidden, svg
from ..sam.graph import Stream
from ..sam.labels import node_label
from ..sam.opview import drawn_ops, op_id, op_view_svg
from ..sam.primitives import PRIMITIVES
from .overview import kernel_title, ops_text, overview_svg

METRICS = [("cycles", "cycles"), ("flops", "FLOPs"), ("mem_reads", "reads"), ("mem_writes", "writes"),
           ("tokens", "tokens"), ("max_occupancy", "max fifo")]


def _plain(value):
    """`value` with what JSON cannot hold made text: infinities and NaN (`-inf`), tuples, numpy scalars."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # a numpy scalar
        return _plain(value.item())
    return value


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _inline_svg(text: str) -> str:
    """Graphviz SVG without its XML prolog, doctype and comments, for inlining in HTML."""
    text = text[text.index("<svg"):]
    return re.sub(r"<!--.*?-->", "", text, flags=re.S)


def _consumers(graph) -> dict[Stream, list[list]]:
    """Each stream's consumers [node, port], looking through broadcasts to the nodes they feed."""
    direct: dict[Stream, list] = {}
    for node in graph.nodes:
        for port, stream in node.inputs.items():
            direct.setdefault(stream, []).append([node.id, port])
    final: dict[Stream, list] = {}
    for node in reversed(graph.nodes):  # a broadcast's consumers are known before its producer's
        for port in PRIMITIVES[node.kind].ports(node.arity)[1]:
            stream, found = Stream(node.id, port), []
            for user, user_port in direct.get(Stream(node.id, port), []):
                if graph.nodes[user].kind == "broadcast":
                    found += [c for k in range(graph.nodes[user].arity) for c in final.get(Stream(user, f"out{k}"), [])]
                else:
                    found.append([user, user_port])
            final[stream] = found
    return final


def _node_data(graph, node, stats, stand_in: dict[int, list[int]], consumers) -> dict:
    lab = node_label(graph, node)
    inputs = []
    for port, s in node.inputs.items():
        source = s
        while graph.nodes[source.node].kind == "broadcast" and node.kind != "broadcast":
            source = graph.nodes[source.node].inputs["in"]
        inputs.append({"port": port, "stream": str(source), "from": source.node, "kind": graph.stream_kind(s),
                       "via": s.node if source != s else None,
                       "tokens": stats.tokens.get(str(s)) if stats else None,
                       "occupancy": stats.occupancy.get(str(s)) if stats else None})
    outputs = [{"port": port, "stream": str(Stream(node.id, port)), "kind": graph.stream_kind(Stream(node.id, port)),
                "to": consumers.get(Stream(node.id, port), []),
                "tokens": stats.tokens.get(str(Stream(node.id, port))) if stats else None}
               for port in PRIMITIVES[node.kind].ports(node.arity)[1]]
    return {"kind": node.kind, "title": lab.title, "sub": lab.subtitle, "long": lab.long, "op": node.op,
            "statement": graph.ops.get(node.op, ""), "params": {k: v for k, v in node.params.items() if k != "tile"},
            "steps": stats.steps.get(node.id) if stats else None, "inputs": inputs, "outputs": outputs,
            "drawn_as": stand_in.get(node.id)}


def _kernel_data(compiled, kernel, result, stats) -> dict:
    data = {"index": kernel.index, "ops": kernel.group, "order": kernel.order, "reshape": kernel.is_reshape}
    run = next((k for k in (result.kernels if result is not None else []) if k.index == kernel.index), None)
    if run is not None:
        data["metrics"] = {key: getattr(run, key) for key, _ in METRICS}
    if kernel.is_reshape:
        return data
    graph = kernel.graph
    graph_stats = (stats or {}).get(graph.name)
    stand_in, consumers = hidden(graph), _consumers(graph)
    data.update(name=graph.name, statements=graph.ops, table=kernel.table.dump() if kernel.table else "",
                boxes={op_id(op): op for op in drawn_ops(graph)},
                nodes={str(n.id): _node_data(graph, n, graph_stats, stand_in, consumers) for n in graph.nodes},
                simulated=graph_stats is not None)
    return data


def _linked(problem, compiled) -> str:
    """The problem's message with each node id it names (`n10`, `n10.crd`) made a link; a
    mismatch in tensor T also links T's writers."""
    text = html.escape(problem.message)
    kernel = problem.kernel
    if problem.kind == "mismatch":
        found = re.search(r"simulated (\S+) differs", problem.message)
        for k in compiled.kernels:
            if found and not k.is_reshape and found.group(1) in k.graph.tensors and \
                    k.graph.tensors[found.group(1)].role == "output":
                writers = [n.id for n in k.graph.nodes if n.kind in ("level_write", "value_write")
                           and n.params.get("tensor") == found.group(1)]
                kernel = k.index
                text += f" (written in kernel {k.index} by " + ", ".join(f"n{w}" for w in writers) + ")"
    if kernel is None:
        return text
    return re.sub(r"\bn(\d+)\b", lambda m: f'<a href="#" class="node-link" data-kernel="{kernel}" '
                                           f'data-node="{m.group(1)}">{m.group(0)}</a>', text)


def _kernel_rows(kernels: list[dict]) -> str:
    shown = [(key, title) for key, title in METRICS if any(key in (k.get("metrics") or {}) for k in kernels)]
    rows = []
    for k in kernels:
        metrics = k.get("metrics") or {}
        cells = "".join(f"<td>{metrics[key]:,}</td>" if key in metrics else "<td></td>" for key, _ in shown)
        size = "reshape" if k["reshape"] else f"{len(k['nodes'])}"
        names = html.escape(ops_text(k["ops"], 4))
        rows.append(f'<tr data-kernel="{k["index"]}"><td>k{k["index"]}</td>'
                    f'<td title="{html.escape(", ".join(k["ops"]))}">{names}</td>'
                    f'<td>{html.escape(",".join(k["order"]))}</td><td>{size}</td>{cells}</tr>')
    head = "".join(f"<th>{title}</th>" for _, title in shown)
    return (f'<table id="kernel-table"><thead><tr><th>kernel</th><th>ops</th><th>order</th><th>nodes</th>{head}'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table>')


def report_html(compiled, result=None, stats=None, problem=None) -> str:
    """The page (see the module docstring); `result` is a SimResult, `stats` per-graph statistics
    (`runs.Recorder.stats`), `problem` what stopped the simulation (`runs.Problem`)."""
    program = compiled.program
    kernels = [_kernel_data(compiled, k, result, stats) for k in compiled.kernels]
    panes = [f'<div class="pane" data-tab="overview">{_inline_svg(overview_svg(compiled, result, "ov_"))}</div>']
    tabs = ['<button data-tab="overview">overview</button>']
    for k in compiled.kernels:
        if k.is_reshape:
            continue
        panes.append(f'<div class="pane" data-tab="k{k.index}">'
                     f'{_inline_svg(svg(k.graph, prefix=f"k{k.index}_", title=kernel_title(k)))}</div>')
        panes.append(f'<div class="pane" data-tab="k{k.index}ops">'  # one box per op: `ops` in the toolbar
                     f'{_inline_svg(op_view_svg(k.graph, prefix=f"k{k.index}_", title=kernel_title(k)))}</div>')
        tabs.append(f'<button data-tab="k{k.index}">k{k.index}</button>')
    if problem is not None:
        status = {"deadlock": "deadlock", "mismatch": "output differs from the reference"}.get(problem.kind, "error")
        badge = f'<span class="badge bad">{status}</span>'
        problems = f'<section id="problems"><h3>{status}</h3><p>{_linked(problem, compiled)}</p></section>'
    else:
        verified = result is not None and result.verified
        badge = (f'<span class="badge good">simulated: {result.cycles:,} cycles, outputs verified</span>' if verified
                 else '<span class="badge">compiled (not simulated)</span>')
        problems = ""
    data = json.dumps(_plain({"kernels": kernels}), default=str, allow_nan=False).replace("</", "<\\/")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>fuseflow: {html.escape(program.name)}</title>
<style>{_asset("viewer.css")}</style></head>
<body>
<header><b>fuseflow</b> {html.escape(program.name)} <code>{html.escape(str(compiled.schedule))}</code> {badge}</header>
<div id="main">
<aside id="side">{problems}
<section id="kernels"><h3>kernels</h3>{_kernel_rows(kernels)}</section>
<section id="details"><h3>node</h3>
<div id="detail-body">Click a node in a picture, or type its id (n12) below.</div></section>
</aside>
<section id="view">
<nav id="tabs">{"".join(tabs)}</nav>
<div id="toolbar"><button id="zoom-out" title="zoom out">−</button><button id="zoom-in" title="zoom in">+</button>
<button id="zoom-fit" title="fit to the window">fit</button>
<button id="view-toggle" title="one box per source op (click a box for its primitives), or every primitive">ops</button>
<input id="search" placeholder="n12, t5, intersect k, A" size="22"
 title="a node id, an op, a primitive or a tensor; Enter again: the next match">
<span id="hint">drag to pan, wheel to zoom</span></div>
<div id="canvas">{"".join(panes)}</div>
</section></div>
<script type="application/json" id="report-data">{data}</script>
<script>{_asset("viewer.js")}</script>
</body></html>
"""


def write_report(path: str, compiled, result=None, stats=None, problem=None) -> str:
    """Write `report_html(...)` to `path`; returns the path."""
    page = report_html(compiled, result, stats, problem)
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(page)
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror}", "--html") from None
    return path


def compile_report(compiled, path: str) -> str:
    """The report of a compiled schedule (no simulation)."""
    return write_report(path, compiled)
