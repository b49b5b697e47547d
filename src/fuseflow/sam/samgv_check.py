"""Whether SAM's tools take a `.gv` graph: a replay of what its test generator needs.

SAM's generator (`scripts/gen_sam_apps/test_generating_code.py`) reads the graph comment from the
file's second line, each node's `comment` as `key=value` pairs, drops broadcasts, and writes one
simulator object per node in topological order: it knows fiberlookup (dense or compressed),
arrayvals, repsiggen, repeat, intersect, union, spaccumulator (order 1 or 2), crddrop, crdhold,
mul, add, reduce and fiberwrite, and drops the whole graph on any other type. Sizes of written
levels are expressions whose tokens are one digit or `<tensor><dim>_dim`. A joiner's inputs are
named by the tensor of the node they come from, and what reads a joiner's output finds its input
pair by its own tensor. It writes one output tensor, the first of the comment. It loads a
tensor's level files by its own rules for each format string (`loaded_modes`), so a compressed
scan of another mode stops the test. Walking the graph (`generator_walk_problem`), its `add`
branch reads the edge labels at a stale loop index (whatever `i` the node written before it
left), so an add written right after a joiner of two inputs (i = 3) stops it with an IndexError,
and it pairs a joiner's inputs as neighbours in its edge list, which must name each input once.
`check_samgv(text)` returns the first thing that stops it (None when it produces a test).

    >>> check_samgv('digraph SAM {\\n    comment="x=s0"\\n    1 [comment="type=exp"]\\n}')
    'SAM has no exp'
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import networkx as nx

SAM_TYPES = {"fiberlookup", "arrayvals", "repsiggen", "repeat", "intersect", "union", "spaccumulator",
             "crddrop", "crdhold", "mul", "add", "reduce", "fiberwrite", "broadcast"}
NEEDS = {"fiberlookup": ("tensor", "index", "mode", "format", "root"), "repeat": ("tensor", "index", "root"),
         "repsiggen": ("index",), "intersect": ("index",), "union": ("index",), "arrayvals": ("tensor",),
         "fiberwrite": ("mode",), "crddrop": ("inner", "outer"), "crdhold": ("inner", "outer"),
         "spaccumulator": ("order", "in0")}
ATTRIBUTE = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^\s\]]+)')
NODE = re.compile(r"^\s*(\w+)\s*\[(.*)\]\s*$")
EDGE = re.compile(r"^\s*(\w+)\s*->\s*(\w+)\s*\[(.*)\]\s*$")
SIZE_TOKEN = re.compile(r"^(\d|[A-Za-z]\d_dim)$")


@dataclass
class GvGraph:
    comment: str = ""
    nodes: dict[str, dict[str, str]] = field(default_factory=dict)
    edges: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)


def _attributes(text: str) -> dict[str, str]:
    return {k: v[1:-1] if v.startswith('"') else v for k, v in ATTRIBUTE.findall(text)}


def parse_gv(text: str) -> GvGraph:
    """The nodes and edges of a `.gv` graph in the form SAM writes (one statement a line)."""
    graph = GvGraph()
    lines = re.sub(r'"(?:[^"\\]|\\.)*"', lambda m: m.group(0).replace("\n", "\\n"), text).splitlines()
    if len(lines) > 1 and lines[1].strip().startswith("comment="):
        graph.comment = _attributes(lines[1])["comment"]
    for line in lines[2:]:
        edge = EDGE.match(line)
        if edge:
            graph.edges.append((edge.group(1), edge.group(2), _attributes(edge.group(3))))
            continue
        node = NODE.match(line)
        if node:
            graph.nodes[node.group(1)] = _attributes(node.group(2))
    return graph


def _info(attrs: dict[str, str]) -> dict[str, str] | None:
    """The node's comment as SAM's generator splits it: `key=value` items, or None if one is not."""
    items = [x.split("=") for x in attrs.get("comment", "").split(",")]
    return dict(items) if all(len(x) == 2 for x in items) else None


def _without_broadcasts(graph: GvGraph) -> list[tuple[str, str, dict[str, str]]]:
    """The edges once broadcasts are bypassed, each reader linked to what the broadcast copies."""
    source = {d: s for s, d, _ in graph.edges if graph.nodes.get(d, {}).get("type") == "broadcast"}

    def origin(node: str) -> str:
        while graph.nodes.get(node, {}).get("type") == "broadcast" and node in source:
            node = source[node]
        return node
    return [(origin(s), d, a) for s, d, a in graph.edges if graph.nodes.get(d, {}).get("type") != "broadcast"]


def _node_problem(name: str, info: dict[str, str], tensors: set[str]) -> str | None:
    kind = info.get("type", "")
    if kind not in SAM_TYPES:
        return f"SAM has no {kind or 'untyped node'}"
    missing = [k for k in NEEDS.get(kind, ()) if k not in info]
    if kind == "fiberwrite":
        missing += [k for k in (("size", "sink") if info.get("mode") == "vals" else ("segsize", "crdsize", "sink")
                                if info.get("format") == "compressed" else ()) if k not in info]
    if missing:
        return f"node {name} ({kind}) lacks {', '.join(missing)}"
    if kind == "fiberlookup" and info["format"] not in ("dense", "compressed"):
        return f"node {name}: SAM scans dense or compressed levels, not {info['format']}"
    if kind == "spaccumulator" and info["order"] not in ("1", "2"):
        return f"node {name}: SAM has no spaccumulator of order {info['order']}"
    for key in ("size", "segsize", "crdsize"):
        for token in re.split(r"[+*]", info.get(key, "1")):
            if not SIZE_TOKEN.match(token) or (len(token) > 1 and token[0] not in tensors):
                return f"node {name}: size token {token!r} is neither a digit nor a tensor dimension"
    return None


def loaded_modes(fmt: str) -> set[int]:
    """The modes whose seg and crd files SAM's generated test loads for a tensor of format `fmt`
    (`T_crd<m>` from `tensor_T_mode_<m>_crd`): its special cases, else the position of each `s`."""
    special = {"ds01": {1}, "ds10": {0}, "ss01": {0, 1}, "ss10": {0, 1}, "dss012": {1, 2}}
    return special.get(fmt, {k for k, c in enumerate(fmt) if c == "s"})


def _files_problem(formats: list[list[str]], info: dict[str, dict[str, str]]) -> str | None:
    """A compressed scan of a mode whose files the generated test does not load."""
    fmt = dict(formats[1:])
    for attrs in info.values():
        if attrs.get("type") == "fiberlookup" and attrs.get("format") == "compressed":
            tensor, mode = attrs["tensor"], int(attrs["mode"])
            if tensor in fmt and mode not in loaded_modes(fmt[tensor]):
                return (f"SAM's generated test loads the compressed levels of {tensor} ({fmt[tensor]}) as modes "
                        f"{sorted(loaded_modes(fmt[tensor]))}, not mode {mode}")
    return None


def _joiner_problem(graph: GvGraph, info: dict[str, dict[str, str]]) -> str | None:
    edges = _without_broadcasts(graph)
    for joiner, attrs in info.items():
        if attrs.get("type") not in ("intersect", "union"):
            continue
        parents = [s for s, d, _ in edges if d == joiner]
        named = {info[p].get("tensor") for p in parents}
        if None in named:
            kinds = sorted({info[p]["type"] for p in parents if "tensor" not in info[p]})
            return f"{attrs['type']} {attrs.get('index', '')} reads a {kinds[0]}: SAM names joiner inputs by tensor"
        for s, d, a in edges:
            reader = info[d]
            if s == joiner and a.get("type") == "ref" and reader["type"] in ("fiberlookup", "repeat", "arrayvals") \
                    and reader.get("tensor") not in named:
                return (f"{reader['type']} of {reader.get('tensor')} reads {attrs['type']} {attrs.get('index', '')}, "
                        f"whose inputs are {', '.join(sorted(t for t in named if t)) or 'unnamed'}")
    return None


def _as_generator_reads(graph: GvGraph) -> nx.MultiDiGraph:
    """The graph as SAM's generator holds it: nodes and edges in file order, then each broadcast
    replaced by edges from its source to its readers (appended, with the reader's edge data)."""
    g = nx.MultiDiGraph()
    for name, attrs in graph.nodes.items():
        g.add_node(name, **attrs)
    for s, d, attrs in graph.edges:
        g.add_edge(s, d, **attrs)
    for name in list(g.nodes):
        if _info(g.nodes[name]).get("type") == "broadcast":
            for pred in list(g.predecessors(name)):
                for succ in list(g.successors(name)):
                    g.add_edge(pred, succ, **g.get_edge_data(name, succ)[0])
            g.remove_node(name)
    return g


# node types whose code in the generator's main loop runs `for i in range(<parents>)`
LOOPS_OVER_I = {"fiberlookup", "intersect", "union", "crdhold", "spaccumulator", "mul", "fiberwrite"}


def generator_walk_problem(graph: GvGraph) -> str | None:
    """What goes wrong when SAM's generator walks the graph: a joiner whose inputs, paired as
    neighbours in its edge list (crd, ref), do not give each input once (it would read one twice),
    or an add whose edge labels it reads at an index past its inputs (an IndexError), walking
    nodes as its main loop does; None when neither happens."""
    g = _as_generator_reads(graph)
    info = {n: _info(g.nodes[n]) or {} for n in g.nodes}
    parents = {n: [u for u, _ in g.in_edges(n)] for n in g.nodes}
    for v, attrs in info.items():
        if attrs.get("type") in ("intersect", "union") and sorted(parents[v][0::2]) != sorted(set(parents[v])):
            return f"{attrs['type']} {attrs.get('index', '')}: SAM's generator pairs its inputs wrongly"
    done = {n: 0 for n in g.nodes if parents[n]}
    for n in g.nodes:
        if info[n].get("type") == "fiberlookup" and info[n].get("root") == "true":
            done[n] = 1
    i = 0
    for i in range(10):
        for _, v in [(u, v) for u, v, *_ in nx.edge_bfs(g)]:
            if done.get(v, 1) == 1 or any(done.get(p, 1) != 1 for p in g.predecessors(v)):
                continue
            kind = info[v].get("type")
            if kind == "add" and i >= len(parents[v]):
                return f"add {v}: SAM's generator reads its inputs' labels at a stale index ({i}) and fails"
            if kind in LOOPS_OVER_I and parents[v]:
                i = len(parents[v]) - 1
            if kind in SAM_TYPES:
                done[v] = 1
    return None


def check_samgv(text: str) -> str | None:
    """The first thing that stops SAM's test generator on `text`; None when it writes a test."""
    graph = parse_gv(text)
    formats = [x.split("=") for x in graph.comment.split(",")] if graph.comment else []
    if not formats or any(len(x) != 2 for x in formats):
        return "the second line is not a comment listing name=format per tensor"
    tensors = {name for name, _ in formats[1:]} - {"x", "X"}
    info: dict[str, dict[str, str]] = {}
    for name, attrs in graph.nodes.items():
        parsed = _info(attrs)
        if parsed is None:
            return f"node {name}: its comment is not key=value items"
        info[name] = parsed
    if any(s not in info or d not in info for s, d, _ in graph.edges):
        return "an edge names a node the graph does not declare"
    for name, attrs in info.items():
        problem = _node_problem(name, attrs, tensors)
        if problem:
            return problem
    written = {a.get("tensor") for a in info.values() if a["type"] == "fiberwrite"}
    if written != {formats[0][0]}:
        return f"writes {', '.join(sorted(t for t in written if t))}: SAM's test has one output, {formats[0][0]}"
    return _files_problem(formats, info) or _joiner_problem(graph, info) or generator_walk_problem(graph)
