"""SamGraphs as SAM's Graphviz (`.gv`) graphs, in the form SAM's simulator runs.

A SAM graph is `digraph SAM` with a `comment` listing each tensor's level formats and mode order,
the output first (`X=ss01,B=ds01`: compressed, compressed, modes 0 then 1). Every node carries its
attributes twice: as `comment="type=...,index=...,..."` and as separate attributes (`type`,
`index`, `tensor`, `mode` (the tensor dimension a level stores), `format`, ...), with SAM's label
and colour. Level writers say how much they may write in SAM's size notation (`segsize`,
`crdsize`, and `size` for values: products of `B0_dim`-style input dimensions, or digits). Edges
carry `type` (crd, ref, val, repsig), SAM's line style and a label; where SAM's tools tell ports
apart by tensor or variable the label names it (`crd_in-B`, `ref_out-B`, `crd_outer-i`) and the
edge's `comment` holds that name (`in-B`, `outer-i`). As in SAM, there is no root node: scanners
and repeats it feeds say `root="true"`, and every repeat names the tensor its references reach.

SAM's generated tests name the output `X` (`x` for a vector) and every tensor with one letter
(they read `B_shape`, `B0_dim`): tensors are renamed so, and the graph attribute `names` says
which program tensor each letter stands for (`names="X=Y B=A"`). They write compressed levels
only, so every output level is written compressed (a dense level's writer lists every
coordinate), and a dense input level scanned below another is read as a compressed level holding
every coordinate (`full_levels`: SAM's dense scanner fails on an empty fiber of references).
SAM has no locate: a locate into a dense level is written as SAM writes that access,
a dense scan intersected with the coordinates located (`sam_form`). Accumulators and the other
differences from SAM's simulator are rewritten by `sam.samform`, which refuses what SAM cannot
run (`NotInSam`, a one-line reason).

    >>> from fuseflow.fusion.compile import compile_schedule
    >>> from fuseflow.frontend import from_mlir
    >>> text = to_samgv(compile_schedule(from_mlir("tests/mlir/spmv.mlir"), "full").kernels[0].graph)
    >>> text.splitlines()[:3]
    ['digraph SAM {', '    comment="x=s0,A=ds01,B=s0"', '    names="x=y A=A B=x"']
    >>> 'type="fiberlookup" index="i" tensor="A" mode="0" format="dense" src="true" root="true"' in text
    True
"""
from __future__ import annotations

import copy
import json

from .graph import SamGraph, Stream
from .labels import node_label, stream_var
from .samform import GvEdge, GvNode, GvTensor, NotInSam, SamGv, simulator_form
from .samgv_check import check_samgv

EDGE = {"crd": {"style": "dashed"}, "ref": {"style": "bold"}, "val": {}, "repsig": {"style": "dotted"}}
COLOR = {"scan": "green4", "locate": "green4", "level_write": "green3", "value_write": "green3", "array": "green2",
         "repeat": "cyan2", "repsig": "cyan3", "intersect": "purple", "union": "purple", "crd_drop": "orange",
         "fork": "gray", "join": "gray"}
LETTERS = "BCDEFGHIJKLMNOPQRSTUVWYZAabcdefghijklmnopqrstuvwyz"

__all__ = ["NotInSam", "full_levels", "records", "render", "sam_form", "sam_names", "to_samgv", "unread_nodes"]


def _q(text) -> str:
    return json.dumps(str(text), ensure_ascii=False)


def sam_names(graph: SamGraph) -> dict[str, str]:
    """A one-letter SAM name for every stored tensor: the output `X` (`x` for a vector), an input
    its program name where that is one letter other than x, else the next free letter.

        >>> from fuseflow.sam.graph import GraphTensor
        >>> g = SamGraph("g")
        >>> g.tensors = {"Y": GraphTensor("output", (2, 3), ("dense", "compressed"), (0, 1)),
        ...              "A": GraphTensor("input", (2, 4), ("dense", "compressed"), (0, 1)),
        ...              "X": GraphTensor("input", (4, 3), ("dense", "dense"), (0, 1))}
        >>> sam_names(g)
        {'Y': 'X', 'A': 'A', 'X': 'B'}
    """
    outputs = [n for n, m in graph.tensors.items() if m.role == "output"]
    if len(outputs) != 1:
        raise NotInSam(f"writes {', '.join(outputs) or 'nothing'}: SAM's generated test writes one output")
    out = outputs[0]
    names = {out: "X" if len(graph.tensors[out].shape) > 1 else "x"}
    free = [c for c in LETTERS]
    for name, meta in graph.tensors.items():
        if meta.role == "input" and len(meta.stores(name)) == 1 and meta.stores(name) in free:
            names[name] = meta.stores(name)
            free.remove(names[name])
    for name in graph.tensors:
        if name not in names:
            if not free:
                raise NotInSam("reads more tensors than SAM's one-letter names allow")
            names[name] = free.pop(0)
    return names


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


def _size(graph: SamGraph, names: dict[str, str], extents: list[int]) -> str:
    """A product of extents in SAM's size notation: `B0_dim` (dimension 0 of input B, read by the
    generated test from B's shape file) where an input has a dimension of that extent, else digits."""
    dims: dict[int, str] = {}
    for name, meta in graph.tensors.items():
        if meta.role == "input" and len(meta.shape) <= 10:
            for m, extent in enumerate(meta.shape):
                dims.setdefault(int(extent), f"{names[name]}{m}_dim")
    return "*".join(dims.get(int(e)) or _digits(e) for e in extents) or "1"


def _stored_extents(graph: SamGraph, storage: str) -> list[int]:
    """The extent of each stored level of a tensor, outermost first."""
    meta = graph.tensors.get(storage)
    return [int(meta.shape[m]) for m in meta.mode_order] if meta is not None else []


def _true(graph: SamGraph, stream: Stream) -> Stream:
    """The stream a chain of broadcasts copies."""
    while graph.nodes[stream.node].kind == "broadcast":
        stream = graph.nodes[stream.node].inputs["in"]
    return stream


def _from_root(graph: SamGraph, stream: Stream) -> bool:
    return graph.nodes[_true(graph, stream).node].kind == "root"


def _ref_storage(graph: SamGraph, stream: Stream) -> str:
    """The stored tensor a reference stream points into ("" for the root reference or values)."""
    node = graph.nodes[stream.node]
    if node.kind in ("scan", "locate"):
        return node.params.get("tensor", "")
    if node.kind in ("broadcast", "fork"):
        return _ref_storage(graph, node.inputs["in"])
    if node.kind == "join":
        return _ref_storage(graph, node.inputs["in0"])
    if node.kind == "repeat":
        return _ref_storage(graph, node.inputs["in"])
    if node.kind in ("intersect", "union"):
        return _ref_storage(graph, node.inputs["pay" + stream.port[3:]])
    return ""


def _downstream_storage(graph: SamGraph, node) -> str:
    """The tensor a root repeat's references reach: the first scan, locate or array below it."""
    todo, seen = [node.id], set()
    while todo:
        current = todo.pop(0)
        for reader in graph.nodes:
            if any(s.node == current for s in reader.inputs.values()) and reader.id not in seen:
                seen.add(reader.id)
                if reader.kind in ("scan", "locate", "array") and reader.params.get("tensor"):
                    return reader.params["tensor"]
                if reader.kind in ("broadcast", "repeat", "fork", "join"):
                    todo.append(reader.id)
    return ""


def _attributes(graph: SamGraph, names: dict[str, str], node, full: set) -> tuple[str, dict, str]:
    """(SAM type, attributes, label) of a node; `full`: the (tensor, level) pairs read as compressed
    levels that hold every coordinate (`full_levels`)."""
    p, lab = node.params, node_label(graph, node)
    tensor = names.get(p.get("tensor", ""), "")
    mode = "" if lab.mode is None else str(lab.mode)
    kind = node.kind
    if kind == "scan":
        root = _from_root(graph, node.inputs["ref"])
        fmt = "compressed" if (p.get("tensor"), p.get("level", 0)) in full else p.get("format", "dense")
        attrs = {"index": node.var, "tensor": tensor, "mode": mode or "0",
                 "format": fmt, "src": "true", "root": str(root).lower(),
                 **({"stride": str(p["stride"])} if p.get("stride") is not None else {})}
        return "fiberlookup", attrs, f"FiberLookup {node.var}: {tensor}{attrs['mode']}\\n{attrs['format']}"
    if kind == "locate":
        attrs = {"index": node.var, "tensor": tensor, "mode": mode, "dim_size": str(p.get("dim"))}
        return "locate", attrs, f"Locate {node.var}: {tensor}{mode}"
    if kind == "repsig":
        return "repsiggen", {"index": lab.var}, f"RepeatSignalGenerator {lab.var}"
    if kind == "repeat":
        root = _from_root(graph, node.inputs["in"])
        of = names.get(_ref_storage(graph, node.inputs["in"]) or _downstream_storage(graph, node), "")
        attrs = {"index": lab.var, "tensor": of, "root": str(root).lower()}
        return "repeat", attrs, f"Repeat {lab.var}: {of or lab.detail}"
    if kind in ("intersect", "union"):
        return kind, {"index": node.label}, f"{kind} {node.label}"
    if kind == "array":
        attrs = {"tensor": tensor, **({"fill": f"{p['fill']:g}"} if p.get("fill") else {})}
        return "arrayvals", attrs, f"Array Vals: {tensor}"
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
        attrs = {"order": str(len(ports) - 1), "kind": p.get("kind", "sum"),
                 **{f"in{k}": stream_var(graph, node.inputs[q]) for k, q in enumerate(ports)}}
        names_ = " ".join(f"{k}={attrs[f'in{k}']}" for k in range(len(ports)))
        return "spaccumulator", attrs, f"SparseAccumulator {attrs['order']}\\n{names_}"
    if kind == "crd_drop":
        outer, inner = stream_var(graph, node.inputs["outer"]), stream_var(graph, node.inputs["inner"])
        return "crddrop", {"outer": outer, "inner": inner}, f"CrdDrop {outer},{inner}"
    if kind == "level_write":  # written compressed: SAM's tests write no dense level
        attrs = {"index": lab.var, "tensor": tensor, "mode": mode, "format": "compressed"}
        above = _stored_extents(graph, p["tensor"])[:int(p.get("level", 0))]
        extent = _stored_extents(graph, p["tensor"])[int(p.get("level", 0))]
        attrs["segsize"] = f"{_size(graph, names, above)}+1" if above else "2"
        attrs["crdsize"] = _size(graph, names, above + [extent])
        attrs["sink"] = "true"
        return "fiberwrite", attrs, f"FiberWrite {lab.var}: {tensor}{mode}\\ncompressed"
    if kind == "value_write":
        size = _size(graph, names, _stored_extents(graph, p["tensor"]))
        return "fiberwrite", {"mode": "vals", "tensor": tensor, "size": f"1*{size}", "sink": "true"}, \
            f"FiberWrite Vals: {tensor}"
    if kind == "broadcast":
        return "broadcast", {}, ""
    return kind, {"lanes": str(p.get("lanes"))}, f"{kind.capitalize()} {p.get('lanes')}"


def _edge_label(graph: SamGraph, names: dict[str, str], node, port: str, kind: str) -> str:
    """SAM's label of the edge into `port` of `node`: the stream kind, with the tensor or variable
    it belongs to where SAM's tools tell ports apart by it (`crd_in-B`, `ref_out-B`, `crd_outer-i`)."""
    if node.kind in ("intersect", "union"):
        side = "in-" + (names.get(_ref_storage(graph, node.inputs["pay" + port.lstrip("crdpay")]), "") or port)
        return f"{kind}_{side}"
    if node.kind in ("crd_drop", "spacc", "spacc2") and kind == "crd":
        return f"crd_{port.replace('crd_', '')}-{stream_var(graph, node.inputs[port])}"
    source = graph.nodes[node.inputs[port].node]
    out = node.inputs[port].port
    if source.kind in ("intersect", "union") and out.startswith("pay"):
        return f"{kind}_out-{names.get(_ref_storage(graph, Stream(source.id, out)), '') or out}"
    if source.kind == "crd_drop":
        return f"crd_{out}-{stream_var(graph, source.inputs[out])}"
    if source.kind in ("spacc", "spacc2") and kind == "crd":  # the variable tells SAM's outputs apart
        return f"crd-{stream_var(graph, node.inputs[port])}"
    return kind


def _aligned_ref(graph: SamGraph, crd: Stream) -> Stream | None:
    """The reference stream that runs token-aligned with coordinates `crd` (a scan's references,
    a joiner's first payload)."""
    crd = _true(graph, crd)
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


def full_levels(graph: SamGraph) -> set[tuple[str, int]]:
    """The dense input levels scanned below another level: SAM's dense scanner fails when its
    references hold an empty fiber (which a fiber above, empty, gives it), so these are read as
    compressed levels that hold every coordinate (positions and values as the dense level's)."""
    return {(n.params["tensor"], n.params.get("level", 0)) for n in graph.nodes
            if n.kind == "scan" and n.params.get("format", "dense") == "dense" and n.params.get("tensor")
            and not _from_root(graph, n.inputs["ref"])}


def _tensor_records(graph: SamGraph, names: dict[str, str], full: set) -> list[GvTensor]:
    """Each tensor's SAM name, level formats and mode order, the output first; output levels and
    `full` levels are compressed."""
    out = []
    for name, meta in sorted(graph.tensors.items(), key=lambda item: item[1].role != "output"):
        levels = "".join("s" if x.startswith("compressed") or meta.role == "output" or (name, k) in full else "d"
                         for k, x in enumerate(meta.levels))
        out.append(GvTensor(names[name], levels, "".join(str(m) for m in meta.mode_order), meta.role,
                            name, tuple(int(s) for s in meta.shape)))
    return out


def records(graph: SamGraph) -> SamGv:
    """`graph` (after `sam_form`) as SAM's nodes and edges, tensors renamed (see the module
    docstring); roots, the broadcasts of the root reference and nodes nothing reads left out."""
    graph = sam_form(graph)
    names = sam_names(graph)
    dropped = unread_nodes(graph) | {n.id for n in graph.nodes if n.kind == "root"
                                     or (n.kind == "broadcast" and _from_root(graph, n.inputs["in"]))}
    full = full_levels(graph)
    gv = SamGv(_tensor_records(graph, names, full), {}, [])
    for node in graph.nodes:
        if node.id not in dropped:
            sam, attrs, label = _attributes(graph, names, node, full)
            gv.nodes[node.id] = GvNode(node.id, sam, attrs, label, COLOR.get(node.kind, "brown"))
    for node in graph.nodes:
        if node.id in dropped:
            continue
        for port, stream in node.inputs.items():
            if stream.node not in dropped:
                kind = graph.stream_kind(stream)
                gv.edges.append(GvEdge(stream.node, node.id, kind, _edge_label(graph, names, node, port, kind)))
    return gv


def render(gv: SamGv, order: list[int] | None = None) -> str:
    """The `.gv` text of SAM-form records, nodes declared in `order` (default: by id)."""
    lines = ["digraph SAM {", f"    comment={_q(gv.formats())}",
             f"    names={_q(' '.join(f'{t.name}={t.source_name}' for t in gv.tensors))}"]
    for node in (gv.nodes[n] for n in (order or list(gv.nodes))):
        comment = ",".join([f"type={node.type}"] + [f"{k}={v}" for k, v in node.attrs.items()])
        extra = " ".join(f"{k}={_q(v)}" for k, v in node.attrs.items())
        if node.type == "broadcast":
            lines.append(f'    {node.id} [comment={_q(comment)} shape=point style=invis type="broadcast"]')
            continue
        lines.append(f'    {node.id} [comment={_q(comment)} label="{node.label}" color={node.color} '
                     f'shape=box style=filled type={_q(node.type)}{" " + extra if extra else ""}]')
    for e in gv.edges:
        style = "".join(f" style={v}" for v in EDGE[e.kind].values())
        named = e.label.split("_", 1)[1] if "_" in e.label and "-" in e.label else ""  # `in-B`, `outer-i`
        lines.append(f"    {e.src} -> {e.dst} [label={_q(e.label)}{style} type={_q(e.kind)}"
                     + (f" comment={_q(named)}]" if named else "]"))
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_samgv(graph: SamGraph) -> str:
    """SAM's `.gv` text of `graph` in the form SAM's simulator runs (see the module docstring), its
    nodes declared in the first order the replay of SAM's generator (`sam.samgv_check`) takes;
    raises `NotInSam` (a one-line reason) for a graph SAM cannot run."""
    gv = simulator_form(records(graph))
    problems = []
    for order in _declaration_orders(gv):
        text = render(gv, order)
        problem = check_samgv(text)
        if problem is None:
            return text
        problems.append(problem)
    raise NotInSam(problems[0])


def _declaration_orders(gv: SamGv) -> list[list[int]]:
    """Orders to declare the nodes in: SAM's generator walks the graph in declaration order, and
    in some its add branch reads a stale index or a joiner's inputs pair wrongly (`samgv_check`).

    The generator's main loop makes up to ten passes; in each it visits every edge (a breadth-first
    walk from the nodes in declaration order) and writes the code of the edge's head once all
    its inputs are written."""
    ids = list(gv.nodes)
    last = {kind: [n for n in ids if gv.nodes[n].type != kind] + [n for n in ids if gv.nodes[n].type == kind]
            for kind in ("add", "broadcast")}
    first = {kind: [n for n in ids if gv.nodes[n].type == kind] + [n for n in ids if gv.nodes[n].type != kind]
             for kind in ("add", "broadcast")}
    # the inputs of the adds first: the generator's walk meets an add's edges before its inputs are
    # written, and writes the add first thing in its next pass, where the stale index is 1
    feeds_add = {e.src for e in gv.edges if gv.nodes[e.dst].type == "add"}
    add_inputs_first = [n for n in ids if n in feeds_add] + [n for n in ids if n not in feeds_add]
    return [ids, add_inputs_first, ids[::-1], last["add"], first["add"], last["broadcast"], first["broadcast"]]
