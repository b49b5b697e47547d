"""A kernel's graph restricted to a window of its outermost loop (a partitioned run).

A kernel's outermost loop is iterated by the scanners whose reference comes straight from a
root (through broadcasts). Restricting those scanners to a window of coordinates (`scan`'s
`window` parameter) runs exactly that slice of the work: the same primitives, tokens and cycle
rules, on the coordinates the window keeps. Dense output levels cannot store a part of a fiber,
so a window run writes them as compressed levels (what was written, and where) and takes their
crd and seg writes back out of `mem_writes` (a dense level stores nothing).

    >>> import numpy as np, fuseflow
    >>> from fuseflow.fusion.compile import compile_schedule
    >>> from fuseflow.sim.oracle import run_graph
    >>> p = fuseflow.from_mlir("tests/mlir/spmv.mlir")
    >>> graph = compile_schedule(p, "full").kernels[0].graph
    >>> outer_extent(graph), outer_dims(graph)
    (64, {'y': 0})
    >>> Window.parse("8:16,24:32").ranges, Window.even(32, 4)[1]
    (((8, 16), (24, 32)), Window(ranges=((8, 16),)))
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass

from ..errors import NotSupported, UserError
from ..sam.graph import GraphTensor, SamGraph

_PASS = ("broadcast",)  # nodes a root's reference passes through unchanged to the outer scanners
_CRD_PASS = ("broadcast", "fork", "join")  # nodes an outer coordinate stream passes through


@dataclass(frozen=True)
class Window:
    """Sorted, disjoint coordinate ranges [lo, hi) of a kernel's outermost loop."""

    ranges: tuple[tuple[int, int], ...]

    def __post_init__(self):
        merged: list[list[int]] = []
        for lo, hi in sorted((int(a), int(b)) for a, b in self.ranges):
            if lo < 0 or hi < lo:
                raise UserError(f"window range {lo}:{hi} is not a range of coordinates", "window",
                                "give LO:HI with 0 <= LO <= HI")
            if merged and lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            elif hi > lo:
                merged.append([lo, hi])
        object.__setattr__(self, "ranges", tuple((a, b) for a, b in merged))

    @staticmethod
    def parse(text: str) -> Window:
        """`LO:HI[,LO:HI...]`, e.g. `0:128,512:640`."""
        try:
            return Window(tuple(tuple(int(x) for x in part.split(":")) for part in text.split(",")))
        except ValueError:
            raise UserError(f"window {text!r} is not LO:HI[,LO:HI...]", "window") from None

    @staticmethod
    def even(extent: int, count: int) -> list[Window]:
        """`count` windows of (nearly) equal width covering 0..extent-1 in order."""
        cuts = [extent * k // count for k in range(count + 1)]
        return [Window(((cuts[k], cuts[k + 1]),)) for k in range(count)]

    def width(self) -> int:
        return sum(hi - lo for lo, hi in self.ranges)

    def __str__(self) -> str:
        return ",".join(f"{lo}:{hi}" for lo, hi in self.ranges) or "empty"


def _roots_through(graph: SamGraph) -> set:
    """Streams that carry a root's reference unchanged."""
    streams = set()
    for node in graph.nodes:
        if node.kind == "root":
            streams.add(node.out("ref"))
        elif node.kind in _PASS and node.inputs["in"] in streams:
            streams.update(node.out(f"out{k}") for k in range(node.arity))
    return streams


def outer_scanners(graph: SamGraph) -> list[int]:
    """Ids of the scanners of the kernel's outermost loop (their reference comes from a root)."""
    roots = _roots_through(graph)
    return [n.id for n in graph.nodes if n.kind == "scan" and n.inputs["ref"] in roots]


def outer_extent(graph: SamGraph) -> int:
    """How many coordinates the outermost loop has (the largest dimension its scanners scan)."""
    extents = []
    for nid in outer_scanners(graph):
        p = graph.nodes[nid].params
        meta = graph.tensors.get(p.get("tensor"))
        if meta is not None:  # a tiled tensor's levels count blocks
            dim = meta.mode_order[p.get("level", 0)]
            extents.append(int(meta.shape[dim]) // (int(meta.block[dim]) if meta.block else 1))
        elif p.get("dim") is not None:
            extents.append(int(p["dim"]))
    if not extents:
        raise NotSupported(f"kernel {graph.name} has no scanner on its outermost loop to partition",
                           "partitioned simulation")
    return max(extents)


def outer_dims(graph: SamGraph) -> dict[str, int]:
    """Output tensor -> the dimension its writers take from the outermost loop's coordinates;
    an output missing here does not index the outer loop (it is a reduction over it: each
    window writes a partial sum)."""
    outer = {graph.nodes[nid].out("crd") for nid in outer_scanners(graph)}
    dims = {}
    for node in graph.nodes:
        ins = set(node.inputs.values())
        if node.kind in _CRD_PASS and ins & outer:
            outer.update(node.out(port) for port in _out_ports(node))
        elif node.kind in ("intersect", "union") and ins & outer:
            outer.add(node.out("crd"))
        elif node.kind == "crd_drop" and node.inputs.get("outer") in outer:
            outer.add(node.out("outer"))
        elif node.kind == "level_write" and node.inputs["crd"] in outer:
            meta = graph.tensors[node.params["tensor"]]
            dims[node.params["tensor"]] = int(meta.mode_order[node.params.get("level", 0)])
    return dims


def _out_ports(node) -> list[str]:
    if node.kind == "join":
        return ["out"]
    return [f"out{k}" for k in range(node.arity)]


@dataclass
class WindowedGraph:
    """A graph restricted to a window, and the dense output levels it writes compressed."""

    graph: SamGraph
    partial_levels: list[tuple[str, int]]

    def written_meta(self, name: str) -> GraphTensor:
        """The metadata of output `name` as the window run writes it."""
        meta = self.graph.tensors[name]
        levels = list(meta.levels)
        for tensor, k in self.partial_levels:
            if tensor == name:
                levels[k] = "compressed"
        return dataclasses.replace(meta, levels=tuple(levels))


def restrict(graph: SamGraph, window: Window) -> WindowedGraph:
    """A copy of `graph` whose outermost loop visits only `window`'s coordinates."""
    scanners = outer_scanners(graph)
    if not scanners:
        outer_extent(graph)  # raises NotSupported naming the kernel
    new = copy.deepcopy(graph)
    for nid in scanners:
        new.nodes[nid].params["window"] = [list(r) for r in window.ranges] or [[0, 0]]  # [] would be none
    partial = []
    for node in new.nodes:
        if node.kind == "level_write" and node.params.get("format", "compressed") == "dense":
            node.params["format"] = "compressed"
            partial.append((node.params["tensor"], node.params.get("level", 0)))
    return WindowedGraph(new, partial)


def run_window(graph: SamGraph, tensors: dict, window: Window, hw, run_graph_fn, **options):
    """(`GraphRun` of the window, `WindowedGraph`): the run's `mem_writes` count a dense output
    level as a whole run does (nothing), though the window stored it compressed."""
    windowed = restrict(graph, window)
    run = run_graph_fn(windowed.graph, tensors, hw, **options)
    for name, k in windowed.partial_levels:
        level = run.written[name].levels[k]
        run.counters["mem_writes"] -= len(level.crd) + len(level.seg) - 1
    return run, windowed
