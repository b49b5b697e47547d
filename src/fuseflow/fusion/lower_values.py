"""The value step of a lowering: once an instance's last variable is merged (`ready`), `finish`
computes its values: array reads and producers' values, the ALU tree of its body (tile-valued
when blocked, a sum of a product over tiled variables contracting in the multiply), then its
reduction (`reduce`, or `spacc`/`spacc2` whose output coordinates consumers see).

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.lower import lower
    >>> from fuseflow.fusion.region import Region
    >>> from fuseflow.fusion.table import FusionTable
    >>> g = lower(FusionTable(Region.build(from_mlir("tests/mlir/spmv.mlir"), ["y"]), ["i", "j"]))
    >>> [(n.kind, n.params.get("op") or n.params.get("kind")) for n in g.nodes if n.kind in ("alu", "reduce")]
    [('alu', 'mul'), ('reduce', 'sum')]
"""
from __future__ import annotations

import math

from ..errors import NotSupported
from ..ir.expr import Binary, Compare, Const, Expr, In, Select, Unary
from ..sam.graph import Stream
from ..scalar_ops import is_identity
from .blocking import union_axes
from .instances import LeafInput
from .keys import BufferedValues, LeafRef, Output, Values
from .lower_state import LoweringState


class ValueSteps(LoweringState):
    """ALUs and reductions of a lowering."""

    def ready(self, inst, v: str) -> bool:
        if inst.id in self.finished or self.n.pos[v] < self.n.pos.get(self.n.last[inst.id], -1):
            return False
        return all(ref in self.finished for ref in inst.producer_ids())

    def finish(self, inst) -> None:
        """The instance's values once its last variable is merged: ALUs over its operands'
        values, then its reduction (`reduce`, or an accumulator whose output boxes consumers see)."""
        self.lowering(inst)
        final = self.tiling.axes(inst.out_indices)
        values = [self.leaf_value(inst, k, final) if isinstance(x, LeafInput) else self.producer_value(inst, k)
                  for k, x in enumerate(inst.operands)]
        op = inst.op
        top = final if (not inst.reduce_vars or self.fold_contraction(inst)) else None
        value, axes = self.alu_tree(inst.op.body, values, inst.tensor, top)
        if top is not None and axes != final and set(axes) <= set(final):  # a copy: reorder or broadcast tiles
            value, axes = self.alu({"op": "mul", "arity": 1, "scalar": 1.0, "scalar_pos": 1}, [(value, axes)], final)
        if top is not None and axes != final:
            raise NotSupported(f"{inst.tensor}: a copy that reorders tile axes {axes} to {final}")
        if any(v not in axes for v in final):
            raise NotSupported(f"{inst.tensor}: a reduction that broadcasts to tile axes {final}")
        if not is_identity(op.init, op.reduce_kind):
            raise NotSupported(f"{inst.tensor}: a reduction starting from {op.init} (not the identity)")
        self.env[Values(inst.id)] = self.reduction(inst, value, self.tiling.param([axes], final), final)
        self.axes[inst.id] = final
        self.finished.add(inst.id)

    # -- operand values ----------------------------------------------------------------------------------
    def coalesce(self, value: Stream, tensor: str, axes: tuple = ()) -> Stream:
        """Missing entries (N) of a tensor whose background is not 0 read as that background."""
        bg = self.r.background.get(tensor) or 0.0
        if bg == 0.0:
            return value
        return self.add("alu", {"op": "coalesce", "arity": 1, "scalar": bg, "scalar_pos": 1,
                                **self.tiling.param([axes], axes)}, a=value).out("val")

    def leaf_value(self, inst, k: int, final: tuple) -> tuple:
        """(value stream, tile axes) of stored operand k: an array read at its references. A
        missing reference (N) reads the tensor's background, except an infinite one of a tensor
        stored dense: with an entry everywhere, its N only stands in for a factor whose partner
        is missing at a position its merges visit, and inf * 0 would be nan there."""
        leaf = self.r.leaves[inst.operands[k].leaf]
        axes = self.tiling.axes(leaf.indices)
        want = axes
        if inst.op.body == In(k) and not inst.reduce_vars and set(axes) == set(final):
            want = final  # a copy: the array reads its tile transposed
        params = {"tensor": leaf.storage, **self.tiling.param([axes], want)}
        bg = self.r.background.get(leaf.tensor) or 0.0
        if bg != 0.0:
            params["fill"] = bg if math.isfinite(bg) or any(x.is_compressed for x in leaf.format.levels) else 0.0
        return self.add("array", params, ref=self.env[LeafRef(leaf.id)]).out("val"), want

    def producer_value(self, inst, k: int) -> tuple:
        """(value stream, tile axes) of computed operand k, repeated along the instance's loops
        inside the producer's last value variable."""
        ref = inst.operands[k].producer
        rename = inst.rename.get(k, {})
        axes = tuple(rename.get(a, a) for a in self.axes[ref])
        own = self.env.get(BufferedValues(ref, inst.id), self.env[Values(ref)])  # a buffered read's own values
        value = self.coalesce(own, self.r.instance(ref).tensor, axes)
        done = [rename.get(v, v) for v in self.n.value_vars[ref]]
        start = self.n.pos[done[-1]] if done else -1
        for w in self.n.nest[inst.id]:
            if self.n.pos[w] > start:
                value = self.repeat(value, self.crd(inst.id, w))
        return value, axes

    # -- arithmetic --------------------------------------------------------------------------------------
    def fold_contraction(self, inst) -> bool:
        """Whether a sum over tiled variables of a product contracts inside the multiply's tile."""
        op, tiled = inst.op, self.tiling.axes(inst.reduce_vars)
        if op.reduce_kind != "sum" or not tiled or not (isinstance(op.body, Binary) and op.body.op == "mul"):
            return False
        sides = [op.body.lhs, op.body.rhs]
        if not all(isinstance(x, In) for x in sides):
            return False
        seen = [self.tiling.axes(inst.access(x.index)) for x in sides]
        return all(v in seen[0] and v in seen[1] for v in tiled)

    def reduction(self, inst, value: Stream, tile: dict, final: tuple) -> Stream:
        """The instance's reduction of `value` by its plan (nothing, reducers, an accumulator)."""
        kind = inst.op.reduce_kind
        plan = self.n.plan[inst.id]
        if plan.kind == "reduce":
            for _ in inst.reduce_vars:
                value = self.add("reduce", {"kind": kind, **tile}, val=value).out("val")
                tile = self.tiling.param([final], final)
        elif plan.kind == "spacc":
            last, r = self.n.last[inst.id], plan.var
            node = self.add("spacc", {"kind": kind, **tile}, crd_inner=self.crd(inst.id, last),
                            crd_outer=self.crd(inst.id, r), val=value)
            value = node.out("val")
            self.set_box(Output(inst.id, last), node.out("crd"),
                         self.is_universe(inst.id, last) and self.is_universe(inst.id, r))
        elif plan.kind == "spacc2":
            r, (mid, last) = plan.var, plan.inner
            node = self.add("spacc2", {"kind": kind, **tile}, crd_inner=self.crd(inst.id, last),
                            crd_mid=self.crd(inst.id, mid), crd_outer=self.crd(inst.id, r), val=value)
            value = node.out("val")
            r_full = self.is_universe(inst.id, r)
            self.set_box(Output(inst.id, last), node.out("crd"), self.is_universe(inst.id, last) and r_full)
            self.set_box(Output(inst.id, mid), node.out("crd_mid"), self.is_universe(inst.id, mid) and r_full)
        return value

    def alu(self, params: dict, ins: list, out=None):
        """An ALU over (stream, tile axes) inputs; its output axes are `out` or their union."""
        axes = union_axes(*(a for _, a in ins)) if out is None else tuple(out)
        params = {**params, **self.tiling.param([a for _, a in ins], axes)}
        node = self.add("alu", params, **{p: stream for p, (stream, _) in zip("abc", ins)})
        return node.out("val"), axes

    def alu_tree(self, e: Expr, values: list, where: str, out=None):
        """(stream, tile axes) of an expression over (stream, axes) operand values; the top node
        produces tile axes `out` (contracting or broadcasting) when given."""
        if isinstance(e, In):
            return values[e.index]
        if isinstance(e, Const):
            raise NotSupported(f"{where}: a value that is a bare constant in a fused graph")
        if isinstance(e, Unary):
            return self.alu({"op": e.op, "arity": 1, "scalar": None, "scalar_pos": 1},
                            [self.alu_tree(e.arg, values, where)], out)
        if isinstance(e, (Binary, Compare)):
            op = e.op if isinstance(e, Binary) else e.pred
            if isinstance(e.rhs, Const) or isinstance(e.lhs, Const):
                const, other, pos = (e.rhs, e.lhs, 1) if isinstance(e.rhs, Const) else (e.lhs, e.rhs, 0)
                return self.alu({"op": op, "arity": 1, "scalar": const.value, "scalar_pos": pos},
                                [self.alu_tree(other, values, where)], out)
            return self.alu({"op": op, "arity": 2, "scalar": None, "scalar_pos": 1},
                            [self.alu_tree(e.lhs, values, where), self.alu_tree(e.rhs, values, where)], out)
        if isinstance(e, Select):
            cond = self.alu_tree(e.cond, values, where)
            branches = []
            for branch in (e.if_true, e.if_false):
                if isinstance(branch, Const):
                    branches.append(self.alu({"op": "const", "arity": 1, "scalar": branch.value,
                                              "scalar_pos": 1}, [cond]))
                else:
                    branches.append(self.alu_tree(branch, values, where))
            return self.alu({"op": "select", "arity": 3, "scalar": None, "scalar_pos": 1},
                            [cond, *branches], out)
        raise TypeError(e)
