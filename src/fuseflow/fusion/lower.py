"""Lowering a fusion table to a SamGraph.

Variables are processed in dataflow order. At each variable, op instances merge their operands'
coordinate streams (producers first); every stream that must stay aligned with a coordinate
stream rides through the joiner as a payload (tensor references, values of finished
intermediates). An intersection with a dense stored level iterates the other parts and looks
the dense one up (`locate`, the reference's iterate-locate), so y = A·x with x dense walks A's
row only. Instances nested in a consumer's loop then repeat their references along it
(consumers first). An instance computes its values after its last variable (ALUs, then
`reduce`, or `spacc` when a variable follows the reduction variable), and the region's outputs
get level and value writers, with `crd_drop` where an intersection may empty a written fiber.

Blocked lowering (`Tiling`): the region's extents are counted in blocks and every value is a
tile over the region's tiled variables it depends on; each value node gets a `tile` parameter
(`sim.tiles`) naming the axes of its inputs and output. A sum of a product over a tiled variable
folds the inner contraction into the multiply (the tile matmul); other reductions reduce inside
the tile in their reducer.

The steps live in their own modules on a shared state (`lower_state`: the graph so far, streams
by key, boxes): `lower_coords` (merge, nest), `lower_values` (finish: ALUs, reductions),
`lower_write` (writers); `_Lowering.run` calls them in order.

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.region import Region
    >>> p = from_mlir("tests/mlir/spmv.mlir")
    >>> g = lower(FusionTable(Region.build(p, ["y"]), ["i", "j"]))
    >>> sorted({n.kind for n in g.nodes})
    ['alu', 'array', 'broadcast', 'level_write', 'locate', 'reduce', 'repeat', 'repsig', 'root', 'scan', 'value_write']
"""
from __future__ import annotations

from ..errors import NotSupported
from ..ir.formats import TensorFormat
from ..sam.graph import SamGraph
from .blocking import Tiling
from .lower_coords import CoordinateSteps
from .lower_values import ValueSteps
from .lower_write import WriteStep
from .table import FusionTable


class _Lowering(CoordinateSteps, ValueSteps, WriteStep):
    """The steps in order: per variable, merges and finished instances, then nests (consumers
    first); the remaining instances; the writers."""

    def run(self) -> SamGraph:
        if not self.n.valid:
            raise NotSupported(f"order {','.join(self.n.order)}: {self.n.problem}")
        instances = self.r.instances
        for v in self.n.order:
            for inst in instances:
                if self.t.cells[(v, self.t.inst_key(inst.id))].kind == "merge":
                    self.merge(inst, v)
                if self.ready(inst, v):
                    self.finish(inst)
            for inst in reversed(instances):
                if self.t.cells[(v, self.t.inst_key(inst.id))].kind == "nest":
                    self.nest(inst, v)
        for inst in instances:
            if inst.id not in self.finished:
                self.finish(inst)
        for name in self.r.outputs:
            self.write(name)
        graph = self.g.insert_broadcasts()
        graph.verify()
        graph.verify_single_consumers()
        return graph


def lower(table: FusionTable, formats: dict[str, TensorFormat] | None = None,
          tiling: Tiling | None = None, order_only: set[str] | frozenset = frozenset()) -> SamGraph:
    """The SamGraph of a fusion table; `formats` fixes the storage of written tensors (only their
    mode order for names in `order_only`); `tiling` lowers a region whose extents count blocks to
    tile-valued streams."""
    return _Lowering(table, formats, tiling, order_only).run()
