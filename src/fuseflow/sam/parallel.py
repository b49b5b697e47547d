"""Parallelization: deal the iterations of one variable's loop body over P fork/join lanes.

Every stream of a lowered graph iterates a tuple of index variables (`stream_vars`: scans add
their variable, reducers and accumulators remove the reduced one). Parallelizing variable `v`
replicates, once per lane, every node whose outputs all lie inside `v`'s loop (they iterate `v`)
except the nodes that decide which `v` coordinates exist (the scans and joiners *at* `v`, a
`crd_drop` or accumulator that removes or creates whole `v` elements) and the writers. Streams
entering the lanes at `v`'s level are dealt round-robin by a `fork` (stops reach every lane);
streams from above `v` (the element a `repeat` copies along `v`) are broadcast to every lane;
streams leaving the lanes go through a `join` with `depth` = the levels they grew below `v`, so
whole elements are gathered back in the order they were dealt. A reduction over `v` therefore runs
after the join, on the gathered stream.

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.compile import compile_schedule
    >>> g = compile_schedule(from_mlir("tests/mlir/spmv.mlir"), "full order=i,j").kernels[0].graph
    >>> p = parallelize(g, "i", 2)
    >>> p.count("fork"), p.count("join"), p.count("reduce") == 2 * g.count("reduce")
    (2, 1, True)
"""
from __future__ import annotations

from ..errors import NotSupported, UserError
from .graph import Node, SamGraph, Stream
from .primitives import PRIMITIVES

__all__ = ["stream_vars", "parallel_region", "parallelize", "apply_pars"]


def _par_item(group: int, levels) -> str:
    """The schedule item that deals `levels` (variable, lanes) of group `group`: `par.2=i:4`."""
    return ("par=" if group == 0 else f"par.{group}=") + ",".join(f"{v}:{p}" for v, p in levels)

SERIAL_KINDS = ("root", "fork", "join", "level_write", "value_write")


def _outs(node: Node) -> list[Stream]:
    return [Stream(node.id, port) for port in PRIMITIVES[node.kind].ports(node.arity)[1]]


def _without_reduced(inner: tuple, outer: tuple) -> tuple:
    return tuple(x for x in inner if x != outer[-1])


def stream_vars(g: SamGraph) -> dict[Stream, tuple[str, ...]]:
    """The index variables each stream iterates, outermost first (a scan must carry `var`).

    >>> from fuseflow.sam.graph import SamGraph
    >>> g = SamGraph(); r = g.add("root"); s = g.add("scan", {"tensor": "A", "level": 0}, var="i", ref=r.out("ref"))
    >>> stream_vars(g)[s.out("crd")]
    ('i',)
    """
    found: dict[Stream, tuple[str, ...]] = {}
    for node in g.nodes:
        of = {port: found[s] for port, s in node.inputs.items()}
        k = node.kind
        if k == "root":
            here: dict[str, tuple] = {"ref": ()}
        elif k == "scan":
            if not node.var:
                raise NotSupported(f"parallelizing a graph whose scan n{node.id} names no index variable")
            here = {"crd": of["ref"] + (node.var,), "ref": of["ref"] + (node.var,)}
        elif k in ("spacc", "spacc2"):
            kept = _without_reduced(of["crd_inner"], of["crd_outer"])
            here = {"crd": kept, "val": kept}
            if k == "spacc2":
                here["crd_mid"] = _without_reduced(of["crd_mid"], of["crd_outer"])
        elif k == "reduce":
            here = {"val": of["val"][:-1]}
        elif k == "crd_drop":
            here = {"outer": of["outer"], "inner": of["inner"]}
        else:  # every output at the level of a leading input: locate, repsig, repeat, joiners, alu, ...
            first = {"repeat": "sig", "locate": "crd", "array": "ref", "repsig": "crd", "alu": "a",
                     "intersect": "crd0", "union": "crd0", "broadcast": "in", "fork": "in", "join": "in0"}
            lead = of.get(first.get(k, ""), ())
            here = {s.port: lead for s in _outs(node)}
        for port, vs in here.items():
            found[Stream(node.id, port)] = vs
    return found


def _deeper(vs: tuple, v: str) -> bool:
    return v in vs and vs[-1] != v


def parallel_region(g: SamGraph, v: str, vars_of: dict | None = None) -> set[int]:
    """Ids of the nodes replicated per lane when `v` is parallelized (see the module docstring)."""
    vars_of = vars_of if vars_of is not None else stream_vars(g)
    region: set[int] = set()
    for node in g.nodes:
        outs = [vars_of[s] for s in _outs(node)]
        ins = {port: vars_of[s] for port, s in node.inputs.items()}
        if node.kind in SERIAL_KINDS or not all(v in o for o in outs):
            continue
        if node.kind in ("scan", "intersect", "union") and all(o[-1] == v for o in outs):
            continue  # decides which v coordinates exist: the fork comes after it
        if node.kind == "crd_drop" and not _deeper(ins["outer"], v):
            continue  # drops whole v elements: lanes would no longer line up at the join
        if node.kind in ("spacc", "spacc2") and not _deeper(ins["crd_outer"], v):
            continue  # its output coordinates are a new sequence at or above v
        if node.kind == "broadcast" and node.inputs["in"].node not in region:
            continue  # fork each copy instead
        region.add(node.id)
    return region


def parallelize(g: SamGraph, v: str, lanes: int) -> SamGraph:
    """A copy of `g` with the loop body of `v` replicated over `lanes` fork/join lanes."""
    if lanes == 1:
        return g
    vars_of = stream_vars(g)
    region = parallel_region(g, v, vars_of)
    new = SamGraph(g.name)
    new.tensors, new.ops = g.tensors, g.ops
    serial: dict[Stream, Stream] = {}
    lane_of: list[dict[Stream, Stream]] = [{} for _ in range(lanes)]

    def entry(node: Node, port: str, s: Stream) -> list[Stream]:
        """The per-lane copies of a stream that a lane node reads from outside the lanes."""
        vs = vars_of[s]
        if vs and vs[-1] == v:
            kind = "fork"
        elif v not in vs and node.kind == "repeat" and port == "in":
            kind = "broadcast"  # the element repeated along v: every lane needs each one
        else:
            raise NotSupported(f"parallelizing {v}: n{node.id} {node.kind}.{port} reads a stream "
                               f"over ({','.join(vs)}) from outside the parallel region")
        params = {"lanes": lanes} if kind == "fork" else {}
        split = new.add(kind, params, arity=lanes, cse=False, **{"in": serial[s]})
        return [split.out(f"out{k}") for k in range(lanes)]

    for node in g.nodes:
        if node.id in region:
            copies = [dict() for _ in range(lanes)]
            for port, s in node.inputs.items():
                streams = [lane_of[k][s] for k in range(lanes)] if s.node in region else entry(node, port, s)
                for k in range(lanes):
                    copies[k][port] = streams[k]
            for k in range(lanes):
                clone = new.add(node.kind, node.params, node.arity, node.label, cse=False, var=node.var,
                                op=node.op, **copies[k])
                for s in _outs(node):
                    lane_of[k][s] = Stream(clone.id, s.port)
            continue
        inputs = {}
        for port, s in node.inputs.items():
            if s.node not in region:
                inputs[port] = serial[s]
                continue
            vs = vars_of[s]
            depth = len(vs) - 1 - vs.index(v)
            join = new.add("join", {"lanes": lanes, "depth": depth}, arity=lanes, cse=False,
                           **{f"in{k}": lane_of[k][s] for k in range(lanes)})
            inputs[port] = join.out("out")
        clone = new.add(node.kind, node.params, node.arity, node.label, cse=False, var=node.var, op=node.op,
                        **inputs)
        for s in _outs(node):
            serial[s] = Stream(clone.id, s.port)
    new.verify()
    new.verify_single_consumers()
    return new


def apply_pars(g: SamGraph, levels: list[tuple[str, int]], order: list[str], group: int,
               extent: dict[str, int] | None = None) -> SamGraph:
    """Parallelize the schedule's `par.N` levels (outer first) of group `group`, whose dataflow
    order is `order` and loops have `extent` iterations; a variable the group does not iterate,
    inner-before-outer, or more lanes than its loop has iterations is a UserError."""
    item = _par_item(group, levels)
    for v, lanes in levels:
        if v not in order:
            raise UserError(f"{item} names {v!r}, which group {group} does not iterate", "schedule",
                            f"parallelize one of its variables {','.join(order)}")
        if extent and v in extent and lanes > extent[v]:
            raise UserError(f"{item} deals {lanes} lanes, but loop {v} of group {group} has only {extent[v]} "
                            "iterations", "schedule",
                            f"use at most {_par_item(group, [(u, min(p, extent.get(u, p))) for u, p in levels])}")
    if len(levels) == 2 and order.index(levels[0][0]) > order.index(levels[1][0]):
        raise UserError(f"{item} lists the inner variable first (order {','.join(order)})", "schedule",
                        f"write par={levels[1][0]}:{levels[1][1]},{levels[0][0]}:{levels[0][1]}")
    for v, lanes in levels:
        g = parallelize(g, v, lanes)
    return g
