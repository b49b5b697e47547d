"""The state a lowering builds on: the SamGraph under construction, the streams reaching each
leaf, instance and variable (`fusion.keys`), and the boxes (the final coordinate stream of an
instance at a variable). The steps of `fusion.lower` extend it: `lower_coords` (merges and
nests), `lower_values` (ALUs and reductions), `lower_write` (writers).

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.region import Region
    >>> from fuseflow.fusion.table import FusionTable
    >>> state = LoweringState(FusionTable(Region.build(from_mlir("tests/mlir/spmv.mlir"), ["y"]), ["i", "j"]), None)
    >>> [n.kind for n in state.g.nodes], sorted(state.g.tensors)
    (['root'], ['A', 'x'])
"""
from __future__ import annotations

from ..ir.formats import TensorFormat
from ..sam.graph import GraphTensor, SamGraph, Stream
from .blocking import Tiling
from .keys import Iteration, LeafRef
from .table import FusionTable


class LoweringState:
    """A fusion table being lowered: its graph so far, streams by key, boxes, finished instances.

    Boxes: keys are `Iteration`s and `Output`s. A joiner that filters a stream aliases the
    stream's box to the joiner's output."""

    def __init__(self, table: FusionTable, formats: dict[str, TensorFormat] | None, tiling: Tiling | None = None,
                 order_only: set[str] | frozenset = frozenset()):
        self.t = table
        self.tiling = tiling or Tiling(1, frozenset())
        self.axes: dict[int, tuple] = {}  # tile axes of each finished instance's values
        self.r = table.region
        self.n = table.nesting
        self.formats = formats or {}
        self.order_only = order_only
        self.g = SamGraph("+".join(self.r.outputs) or "region")
        self.root = self.g.add("root").out("ref")
        self.op = ""  # the instance being lowered: new nodes are tagged with it (for pictures)
        copies = [inst.tensor for inst in self.r.instances]
        self.op_names = {inst.id: inst.tensor if copies.count(inst.tensor) == 1 else f"{inst.tensor}#{inst.id}"
                         for inst in self.r.instances}
        self.g.ops = {self.op_names[inst.id]: str(inst) for inst in self.r.instances}
        self.env: dict = {LeafRef(leaf.id): self.root for leaf in self.r.leaves}
        self.box_parent: dict = {}
        self.box_value: dict = {}
        self.universe: dict = {}
        self.finished: set[int] = set()
        for leaf in self.r.leaves:
            self.g.tensors.setdefault(leaf.storage, GraphTensor(
                "input", tuple(leaf.shape), tuple(str(x) for x in leaf.format.levels), tuple(leaf.format.mode_order),
                self.r.background.get(leaf.tensor) or 0.0, source=leaf.tensor))

    # -- boxes -------------------------------------------------------------------------------------------
    def _find(self, key):
        while self.box_parent.get(key, key) != key:
            key = self.box_parent[key]
        return key

    def box(self, key) -> Stream:
        return self.box_value[self._find(key)]

    def crd(self, inst_id: int, v: str) -> Stream:
        return self.box(Iteration(inst_id, v))

    def set_box(self, key, crd: Stream, universe: bool) -> None:
        root = self._find(key)
        self.box_value[root] = crd
        self.universe[root] = universe

    def alias(self, key, into) -> None:
        """Key `key` (and the keys aliased to it) now names `into`'s stream. Only `key` moves:
        the class it was in before keeps its stream, so a consumer that already merged a
        producer keeps its coordinates when a later consumer pads or filters that producer."""
        b = self._find(into)
        if self._find(key) != b:
            self.box_parent[key] = b

    def key_universe(self, key) -> bool:
        return self.universe.get(self._find(key), False)

    def is_universe(self, inst_id: int, v: str) -> bool:
        return self.key_universe(Iteration(inst_id, v))

    # -- helpers -----------------------------------------------------------------------------------------
    def add(self, kind, params=None, arity=0, label="", var="", **inputs):
        return self.g.add(kind, params, arity, label, var=var, op=self.op, **inputs)

    def lowering(self, inst) -> None:
        """Tag the nodes created from now on with `inst`'s op."""
        self.op = self.op_names[inst.id]

    def repeat(self, stream: Stream, signal: Stream) -> Stream:
        sig = self.add("repsig", crd=signal).out("repsig")
        return self.add("repeat", **{"in": stream, "sig": sig}).out("out")

    def level_ref(self, inst_id: int, v: str) -> Stream:
        """A reference stream with one element per coordinate of the level above `v`."""
        ref = self.root
        for u in self.n.nest[inst_id]:
            if u == v:
                break
            ref = self.repeat(ref, self.crd(inst_id, u))
        return ref
