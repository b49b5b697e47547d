"""SAM's simulator form of an exported graph: where fuseflow's graph differs from what SAM's test
generator and simulator run, rewrite it; what SAM cannot run, refuse with a one-line reason.

The records (`SamGv`: tensors, nodes and edges with SAM's types, attributes and edge labels) come
from `sam.samgv.records`; `simulator_form` returns them rewritten:

- **Accumulators.** fuseflow's sparse accumulators read coordinate streams whose stop tokens
  say where each reduced fiber ends. SAM's (`SparseAccumulator1`/`2`) read point streams: one
  outer and one inner coordinate per value, made by `CrdHold` (a coordinate repeated over the
  level below it) and stripped of stop tokens by the `StknDrop`s SAM's generator puts in front of
  every accumulator input, and they emit the outer level too. So an order-1 accumulator reducing
  loop r between output levels p (above) and v (below) becomes `crdhold(p over r)`, then
  `crdhold(that over v)`, feeding the accumulator's `crd_outer-p` and `crd_inner-v`, and the
  writer of level p reads the accumulator's outer coordinates instead of p's scan. An order-2
  accumulator (outer loop r reduced over output levels p, v) becomes `crdhold(p over v)` feeding
  both ports. SAM's order-1 accumulator needs an output level above the reduced loop (none when
  the reduced loop is outermost: a matrix-vector product in j,i order), and either one holds
  just the two output levels it writes.
- **Empty fibers.** SAM's level writer cannot write an empty fiber (it closes a segment only
  after a coordinate), so every pair of output levels not already separated by a crddrop or an
  accumulator gets a crddrop, which drops outer coordinates whose inner fiber is empty.
- **Refused**, with the reason: primitives SAM lacks (locate left over, exp, div, max, fork,
  ...), a subtraction or a scalar operand (SAM's generator builds every add as `Add2()` and
  every mul with two inputs), a dense level scanned out of its stored order (SAM computes a
  position as parent * extent + coordinate), reducers other than sum, arrays with a background other than 0,
  joiners of more than two inputs or carrying values, loops no tensor stores, variables with
  names of more than one letter, and, last (`sam.samgv.to_samgv`), whatever the replay of SAM's
  generator (`sam.samgv_check`) still finds.

    >>> gv = SamGv([GvTensor("X", "s", "0", "output", "y", (4,))], {0: GvNode(0, "exp", {}, "Exp")}, [])
    >>> simulator_form(gv)
    Traceback (most recent call last):
    ...
    fuseflow.sam.samform.NotInSam: SAM has no exp
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

from ..errors import NotSupported

SAM_TYPES = {"fiberlookup", "arrayvals", "repsiggen", "repeat", "intersect", "union", "spaccumulator",
             "crddrop", "crdhold", "mul", "add", "reduce", "fiberwrite", "broadcast"}
WHY_NOT = {"locate": "SAM has no locate (only a locate into a dense level after a repeat becomes a scan)",
           "fork": "SAM has no fork (parallel lanes)", "join": "SAM has no join (parallel lanes)"}


class NotInSam(NotSupported):
    """A graph SAM's simulator cannot run; the message is the reason, one line (exit 2 at the CLI)."""


@dataclass
class GvTensor:
    """A tensor as SAM's graph comment lists it: its SAM `name`, level formats (`ds`), mode order
    (`01`), role, the program's `source_name` and shape."""
    name: str
    levels: str
    order: str
    role: str
    source_name: str
    shape: tuple[int, ...] = ()

    @property
    def format(self) -> str:
        return self.levels + self.order or "none"


@dataclass
class GvNode:
    id: int
    type: str
    attrs: dict[str, str]
    label: str
    color: str = "brown"


@dataclass
class GvEdge:
    src: int
    dst: int
    kind: str   # crd, ref, val or repsig
    label: str  # `crd`, or with the port and the variable or tensor SAM tells it by: `crd_outer-i`


@dataclass
class SamGv:
    """A graph in SAM's words: tensors (the output first), nodes by id, edges in order."""
    tensors: list[GvTensor]
    nodes: dict[int, GvNode]
    edges: list[GvEdge] = field(default_factory=list)

    def formats(self) -> str:
        """The graph comment: `X=ss01,B=ds01`."""
        return ",".join(f"{t.name}={t.format}" for t in self.tensors)

    def into(self, node: int) -> list[GvEdge]:
        return [e for e in self.edges if e.dst == node]

    def out_of(self, node: int) -> list[GvEdge]:
        return [e for e in self.edges if e.src == node]

    def add_node(self, type_: str, attrs: dict[str, str], label: str, color: str = "brown") -> GvNode:
        node = GvNode(max(self.nodes, default=-1) + 1, type_, attrs, label, color)
        self.nodes[node.id] = node
        return node

    def past_broadcasts(self, node_id: int) -> GvNode:
        """The node whose stream node `node_id` carries: itself, or what its broadcasts copy."""
        node = self.nodes[node_id]
        while node.type == "broadcast":
            node = self.nodes[self.into(node.id)[0].src]
        return node


def _var(label: str) -> str:
    return label.rsplit("-", 1)[1] if "-" in label else ""


def _crd_port(source: GvNode, var: str) -> str:
    """The output of `source` (past broadcasts) that SAM's generated code reads the coordinates of
    `var` from: `crd`, or `crd_outer`/`crd_inner` of a crddrop, crdhold or accumulator."""
    if source.type in ("crddrop", "crdhold"):
        return "crd_outer" if source.attrs.get("outer") == var else "crd_inner"
    if source.type == "spaccumulator":
        return "crd_inner" if source.attrs.get("in0") == var else "crd_outer"
    return "crd"


def _node_problem(gv: SamGv, node: GvNode) -> str | None:
    a, kind = node.attrs, node.type
    if kind not in SAM_TYPES:
        return WHY_NOT.get(kind, f"SAM has no {kind}")
    if kind == "fiberlookup" and not a.get("tensor"):
        return f"loop {a.get('index')} runs over no stored tensor: SAM scans only tensor levels"
    if kind == "fiberlookup" and "stride" in a:
        return (f"loop {a.get('index')} reads {a['tensor']}{a['mode']} out of its stored level order: "
                "SAM scans a level only below the one stored above it")
    if kind == "add" and a.get("sub") == "1":
        return "SAM's generated test builds every add as an addition: it has no subtraction"
    if "const0" in a:
        return f"SAM's generated test has no scalar operand ({kind} {a['const0']})"
    if a.get("kind", "sum") != "sum":
        return f"SAM's {kind} only sums ({a['kind']})"
    if kind == "arrayvals" and a.get("fill"):
        return f"SAM's arrays read 0 where a tensor stores nothing ({a['tensor']} holds {a['fill']})"
    if kind in ("intersect", "union"):
        ins = [e for e in gv.into(node.id) if e.label.startswith(("crd_in", "crd"))]
        if len([e for e in ins if e.kind == "crd"]) > 2:
            return f"SAM's joiners take two inputs ({kind} {a.get('index')} has {len(ins)})"
        if any(e.kind == "val" for e in gv.into(node.id)):
            return f"SAM's joiners carry references, not values ({kind} {a.get('index')})"
    return None


def _hold(gv: SamGv, outer: int, inner: int, outer_var: str, inner_var: str) -> GvNode:
    """A crdhold repeating the coordinates `outer_var` that node `outer` emits over the coordinates
    `inner_var` of node `inner`."""
    hold = gv.add_node("crdhold", {"outer": outer_var, "inner": inner_var}, f"CrdHold {outer_var},{inner_var}",
                       "orange")
    for src, var in ((outer, outer_var), (inner, inner_var)):
        gv.edges.append(GvEdge(src, hold.id, "crd", f"{_crd_port(gv.past_broadcasts(src), var)}-{var}"))
    return hold


def _writers(gv: SamGv) -> dict[int, GvNode]:
    """The output's level writers by level (the output is the first tensor)."""
    out = gv.tensors[0]
    return {out.order.index(n.attrs["mode"]): n for n in gv.nodes.values()
            if n.type == "fiberwrite" and n.attrs.get("mode") != "vals" and n.attrs.get("mode") in out.order}


def _bypass_drops(gv: SamGv, acc: GvNode) -> GvEdge | None:
    """SAM's accumulators emit only outer coordinates that hold values, so a crddrop after one has
    nothing to drop: its readers (level writers) read the accumulator instead. Returns the edge
    that brought the crddrop its outer coordinates (None without a crddrop)."""
    outer = None
    for drop in [n for n in gv.nodes.values() if n.type == "crddrop"]:
        ins = gv.into(drop.id)
        if not any(gv.past_broadcasts(e.src).id == acc.id for e in ins):
            continue
        for e in gv.out_of(drop.id):
            if gv.nodes[e.dst].type != "fiberwrite":
                raise NotInSam(f"a crddrop after an accumulator feeds a {gv.nodes[e.dst].type}: SAM's accumulator "
                               "emits its outer coordinates itself, for level writers only")
            e.src, e.label = acc.id, f"crd-{_var(e.label)}"
        outer = next(e for e in ins if _var(e.label) == drop.attrs["outer"])
        for e in ins:
            gv.edges.remove(e)
        del gv.nodes[drop.id]
    return outer


def _accumulator(gv: SamGv, acc: GvNode) -> None:
    """Rewrites one accumulator into SAM's point-stream form (see the module docstring)."""
    ports = {e.label.split("-")[0]: e for e in gv.into(acc.id) if e.kind == "crd"}
    inner, outer, mid = ports["crd_inner"], ports["crd_outer"], ports.get("crd_mid")
    vi, vr = _var(inner.label), _var(outer.label)
    dropped_outer = _bypass_drops(gv, acc)
    writers, levels = _writers(gv), len(gv.tensors[0].levels)
    by_writer = {e.dst: e for e in gv.out_of(acc.id) if e.kind == "crd"}
    level = next((k for k, w in writers.items() if w.id in by_writer and _var(by_writer[w.id].label) == vi), None)
    if mid is None:
        if level == 0:
            raise NotInSam(f"SAM's order-1 accumulator groups by an output level above the reduced loop {vr}, "
                           "and here that loop is outermost")
        if levels != 2 or level != 1:
            raise NotInSam(f"SAM's order-1 accumulator writes two output levels; this one sits under {levels}")
        parent_writer = writers[0]
        parent = gv.into(parent_writer.id)[0]
        vp = _var(parent.label) or parent_writer.attrs.get("index", "")
        if parent.src == acc.id:  # the level was written from a bypassed crddrop
            parent = dropped_outer
        else:
            gv.edges.remove(parent)
            gv.edges.append(GvEdge(acc.id, parent_writer.id, "crd", f"crd-{vp}"))
        first = _hold(gv, parent.src, outer.src, vp, vr)
        hold = _hold(gv, first.id, inner.src, vp, vi)
        removed = [inner, outer]
    else:
        vp = _var(mid.label)
        if levels != 2:
            raise NotInSam(f"SAM's order-2 accumulator writes two output levels; this one writes {levels}")
        hold = _hold(gv, mid.src, inner.src, vp, vi)
        removed = [inner, outer, mid]
    for edge in removed:
        gv.edges.remove(edge)
    gv.edges += [GvEdge(hold.id, acc.id, "crd", f"crd_outer-{vp}"), GvEdge(hold.id, acc.id, "crd", f"crd_inner-{vi}")]
    order = "1" if mid is None else "2"
    acc.attrs = {"order": order, "in0": vi, "in1": vp}
    acc.label = f"SparseAccumulator {order}\\n0={vi} 1={vp}"


def _drop_empty_fibers(gv: SamGv) -> None:
    """SAM's level writer closes a segment only after a coordinate, so it cannot write an empty
    fiber: each output level that does not come from a crddrop or an accumulator gets a crddrop
    with the level below, innermost pair first (SAM's compiler writes them so)."""
    writers = _writers(gv)
    for level in sorted(writers, reverse=True)[1:]:
        if level + 1 not in writers:
            continue
        upper, lower = gv.into(writers[level].id)[0], gv.into(writers[level + 1].id)[0]
        if gv.past_broadcasts(upper.src).type in ("crddrop", "spaccumulator"):
            continue
        outer, inner = writers[level].attrs.get("index", ""), writers[level + 1].attrs.get("index", "")
        drop = gv.add_node("crddrop", {"outer": outer, "inner": inner}, f"CrdDrop {outer},{inner}", "orange")
        gv.edges += [GvEdge(upper.src, drop.id, "crd", f"crd_outer-{outer}"),
                     GvEdge(lower.src, drop.id, "crd", f"crd_inner-{inner}")]
        upper.src, upper.label = drop.id, f"crd_outer-{outer}"
        lower.src, lower.label = drop.id, f"crd_inner-{inner}"


def simulator_form(gv: SamGv) -> SamGv:
    """A copy of `gv` rewritten into the form SAM's simulator runs (see the module docstring);
    raises `NotInSam` with the first reason it cannot be."""
    gv = copy.deepcopy(gv)
    for node in list(gv.nodes.values()):
        problem = _node_problem(gv, node)
        if problem:
            raise NotInSam(problem)
    for node in [n for n in gv.nodes.values() if n.type == "spaccumulator"]:
        _accumulator(gv, node)
    _drop_empty_fibers(gv)
    for edge in gv.edges:
        if "-" in edge.label and len(_var(edge.label)) != 1:
            raise NotInSam(f"SAM's generator reads one-letter names from edge labels, not {_var(edge.label)!r}")
        if _var(edge.label) not in ("", "i", "j", "k") and gv.nodes[edge.dst].type in ("fiberwrite", "mul", "add") \
                and edge.kind == "crd" and gv.past_broadcasts(edge.src).type != "spaccumulator":
            raise NotInSam(f"SAM's generator strips only -i, -j and -k from the edge labels a writer reads "
                           f"({edge.label})")
    return gv
