"""The output step of a lowering: level and value writers for each tensor the region writes, in
its declared (or chosen) layout, with `crd_drop` where an intersection may empty a written fiber.

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.lower import lower
    >>> from fuseflow.fusion.region import Region
    >>> from fuseflow.fusion.table import FusionTable
    >>> g = lower(FusionTable(Region.build(from_mlir("tests/mlir/spmv.mlir"), ["y"]), ["i", "j"]))
    >>> [(n.kind, n.params["tensor"]) for n in g.nodes if n.kind.endswith("_write")]
    [('level_write', 'y'), ('value_write', 'y')]
"""
from __future__ import annotations

from ..errors import NotSupported
from ..ir.formats import COMPRESSED, DENSE
from ..sam.graph import GraphTensor
from .keys import Iteration, Output, Values
from .lower_state import LoweringState


class WriteStep(LoweringState):
    """The writers of a lowering."""

    def write(self, name: str) -> None:
        inst = self.r.instance(self.r.output_instance[name])
        self.lowering(inst)
        out = inst.out_indices
        level_vars = sorted((v for v in out if isinstance(v, str)), key=self.n.pos.get)
        mode_order = [out.index(v) for v in level_vars] + [d for d, v in enumerate(out) if not isinstance(v, str)]
        crds, universe = [], []
        plan = self.n.plan[inst.id]
        accumulated = {"spacc2": set(plan.inner), "spacc": {self.n.last[inst.id]}}.get(plan.kind, set())
        for v in level_vars:
            key = Output(inst.id, v) if v in accumulated else Iteration(inst.id, v)
            crds.append(self.box(key))
            universe.append(self.key_universe(key))
        declared = self.formats.get(name)
        if declared is not None:  # unit dimensions' levels: dense, innermost (as `mode_order` has them)
            constant = {d for d, v in enumerate(out) if not isinstance(v, str)}
            declared = declared.constant_levels_dense(constant).dims_last(constant)
            if list(declared.mode_order) != mode_order:
                raise NotSupported(f"{name} is produced in mode order {mode_order}, declared "
                                   f"{list(declared.mode_order)}")
        if declared is not None and name not in self.order_only:
            levels = list(declared.levels)
        else:
            levels = [DENSE if u else COMPRESSED for u in universe] + [DENSE] * (len(out) - len(level_vars))
        for k, v in enumerate(level_vars):
            if not levels[k].is_compressed and not universe[k]:
                raise NotSupported(f"{name} level {k} ({v}) has sparse coordinates and cannot be stored dense")
        for k in range(len(crds) - 1, 0, -1):  # drop coordinates whose fibers an intersection emptied
            if levels[k - 1].is_compressed and not universe[k]:
                node = self.add("crd_drop", outer=crds[k - 1], inner=crds[k])
                crds[k - 1], crds[k] = node.out("outer"), node.out("inner")
                universe[k - 1] = False
        shape = tuple(self.r.shapes[name])
        for k, crd in enumerate(crds):
            self.add("level_write", {"tensor": name, "level": k, "format": str(levels[k]),
                                     "dim": shape[mode_order[k]]}, crd=crd)
        axes = self.axes[inst.id]
        self.add("value_write", {"tensor": name, **self.tiling.param([axes], axes)}, val=self.env[Values(inst.id)])
        self.g.tensors[name] = GraphTensor("output", shape, tuple(str(x) for x in levels), tuple(mode_order),
                                           self.r.background.get(name) or 0.0)
