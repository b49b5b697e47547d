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

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.region import Region
    >>> p = from_mlir("tests/mlir/spmv.mlir")
    >>> g = lower(FusionTable(Region.build(p, ["y"]), ["i", "j"]))
    >>> sorted({n.kind for n in g.nodes})
    ['alu', 'array', 'broadcast', 'level_write', 'locate', 'reduce', 'repeat', 'repsig', 'root', 'scan', 'value_write']
"""
from __future__ import annotations

import math

from ..errors import NotSupported
from ..ir.expr import Binary, Compare, Const, Expr, In, Select, Unary
from ..ir.formats import COMPRESSED, DENSE, TensorFormat
from ..sam.graph import SamGraph, Stream
from ..scalar_ops import is_identity
from .blocking import Tiling, union_axes
from .instances import LeafInput
from .keys import BufferedValues, Coord, Iteration, LeafRef, Output, UniverseRef, Values
from .merge import located_operands
from .patterns import Intersect, Merge, Nothing, Operand, Union, Universe
from .table import FusionTable


class _Lowering:
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
            self.g.tensors.setdefault(leaf.storage, {
                "role": "input", "source": leaf.tensor, "shape": list(leaf.shape),
                "levels": [str(x) for x in leaf.format.levels], "mode_order": list(leaf.format.mode_order),
                "fill": self.r.background.get(leaf.tensor) or 0.0})

    # -- boxes: the final coordinate stream of an instance at a variable ------------------
    # Keys are `Iteration`s and `Output`s. A joiner that filters a stream aliases the stream's box
    # to the joiner's output.
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

    # -- helpers ----------------------------------------------------------------------------
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

    # -- coordinate streams -----------------------------------------------------------------
    @staticmethod
    def source_var(inst, k: int, v: str) -> str:
        """The producer's variable for `inst`'s variable `v` of input k (another one where the
        input is read through a buffer, in a loop of its own: the producer's stream of that
        dimension, complete by then, is iterated again)."""
        for theirs, mine in inst.rename.get(k, {}).items():
            if mine == v:
                return theirs
        return v

    def view(self, inst_id: int, v: str, touched: list) -> Coord:
        """Instance `inst_id`'s coordinates at `v` as its consumer sees them."""
        if inst_id in self.finished:
            key = Output(inst_id, v)
            if self._find(key) not in self.box_value:  # its values are aligned with its own iteration
                self.alias(key, Iteration(inst_id, v))
            touched.append(key)
            return Coord(self.box(key), (Values(inst_id),), self.key_universe(key))
        touched.append(Iteration(inst_id, v))
        return Coord(self.crd(inst_id, v), tuple(self.live_keys(inst_id, v, touched)),
                     self.is_universe(inst_id, v))

    def live_keys(self, inst_id: int, v: str, touched: list[int]) -> list:
        inst = self.r.instance(inst_id)
        keys: list = []
        for k, operand in enumerate(inst.operands):
            if isinstance(operand, LeafInput):
                keys.append(LeafRef(operand.leaf))
            elif v in inst.access(k):
                keys.extend(self.operand_view(inst, k, v, touched).keys)
        return list(dict.fromkeys(keys))

    def operand_view(self, inst, k: int, v: str, touched: list) -> Coord:
        """Input k's coordinates at `v` as `inst` sees them. A buffered read iterates its
        producer's finished stream again with values of its own (`BufferedValues`):
        its joiners leave the producer's boxes and value stream to the other consumers."""
        ref = inst.operands[k].producer
        if v not in inst.rename.get(k, {}).values():
            return self.view(ref, v, touched)
        coord = self.view(ref, self.source_var(inst, k, v), [])
        key = BufferedValues(ref, inst.id)
        self.env.setdefault(key, self.env[Values(ref)])
        return Coord(coord.crd, tuple(key if x == Values(ref) else x for x in coord.keys), coord.universe)

    def operand_coord(self, inst, k: int, v: str, touched: list[int]) -> Coord:
        if not isinstance(inst.operands[k], LeafInput):
            return self.operand_view(inst, k, v, touched)
        ref = inst.operands[k].leaf
        leaf = self.r.leaves[ref]
        level = leaf.level_vars().index(v)
        fmt = leaf.format.levels[level]
        scan = self.add("scan", {**self.level_params(leaf, level), "format": str(fmt)}, var=v,
                        ref=self.env[LeafRef(ref)])
        self.env[LeafRef(ref)] = scan.out("ref")
        return Coord(scan.out("crd"), (LeafRef(ref),), not fmt.is_compressed)

    def strides(self, leaf) -> list[int] | None:
        """For a dense leaf visited out of its stored level order (random access, which only
        dense levels allow): each level's stride in its value array; else None."""
        levels = [v for v in leaf.level_vars() if isinstance(v, str)]
        if [self.n.pos[v] for v in levels] == sorted(self.n.pos[v] for v in levels):
            return None
        dims = [leaf.shape[d] for d in leaf.format.mode_order]
        return [int(math.prod(dims[k + 1:])) for k in range(len(dims))]

    def level_params(self, leaf, level: int) -> dict:
        """The parameters a scan or locate of stored level `level` of `leaf` share."""
        params = {"tensor": leaf.storage, "level": level, "dim": leaf.shape[leaf.format.mode_order[level]]}
        strides = self.strides(leaf)
        if strides is not None:
            params["stride"] = strides[level]
        return params

    def locate(self, inst, k: int, v: str, crd: Stream) -> tuple:
        """Input k's positions at `v` for the coordinates `crd` the intersection iterates: its
        reference repeated along them, then located in its dense level."""
        ref = inst.operands[k].leaf
        leaf = self.r.leaves[ref]
        parent = self.repeat(self.env[LeafRef(ref)], crd)
        node = self.add("locate", self.level_params(leaf, leaf.level_vars().index(v)), var=v, crd=crd, ref=parent)
        self.env[LeafRef(ref)] = node.out("ref")
        return LeafRef(ref)

    def build(self, inst, v: str, merge: Merge, touched: list[int], memo: dict | None = None) -> Coord:
        if memo is None:  # the operands the intersections look up (as the cost models count them)
            memo = {"located": located_operands(self.r, inst, v)}
        if isinstance(merge, Operand):
            if merge.index not in memo:  # an operand appearing twice in the tree is scanned once
                memo[merge.index] = self.operand_coord(inst, merge.index, v, touched)
            return memo[merge.index]
        if isinstance(merge, Universe):
            scan = self.add("scan", {"tensor": "", "level": 0, "format": "dense", "dim": self.r.extent[v]},
                            label=f"universe {v}", var=v, ref=self.level_ref(inst.id, v))
            key = UniverseRef(scan.id)
            self.env[key] = scan.out("ref")
            return Coord(scan.out("crd"), (key,), True)
        if isinstance(merge, Nothing):
            raise NotSupported(f"{inst.tensor} is identically zero at {v}")
        if isinstance(merge, Intersect):
            iterated = [p for p in merge.parts if not (isinstance(p, Operand) and p.index in memo["located"])]
            if len(iterated) < len(merge.parts):
                coord = self.build(inst, v, iterated[0] if len(iterated) == 1 else Intersect(tuple(iterated)),
                                   touched, memo)
                keys = [self.locate(inst, p.index, v, coord.crd) for p in merge.parts if p not in iterated]
                return Coord(coord.crd, tuple(dict.fromkeys(coord.keys + tuple(keys))), coord.universe)
        parts = [self.build(inst, v, p, touched, memo) for p in merge.parts]
        real = [c for c, p in zip(parts, merge.parts) if not isinstance(p, Universe)]
        if isinstance(merge, Union) and any(c.universe for c in real):
            parts = real  # a dense universe adds nothing to a part that already has every coordinate
        parts = list({(c.crd, c.keys): c for c in parts}.values())
        if len(parts) == 1:
            return parts[0]
        inputs = [(c.crd, key) for c in parts for key in c.keys]
        kind = "intersect" if isinstance(merge, Intersect) else "union"
        ports = {}
        for k, (crd, key) in enumerate(inputs):
            ports[f"crd{k}"], ports[f"pay{k}"] = crd, self.env[key]
        node = self.add(kind, arity=len(inputs), label=v, **ports)
        for k, (_, key) in enumerate(inputs):
            self.env[key] = node.out(f"pay{k}")
        universe = any(c.universe for c in parts) if kind == "union" else all(c.universe for c in parts)
        return Coord(node.out("crd"), tuple(dict.fromkeys(k for _, k in inputs)), universe)

    # -- the three steps per variable -----------------------------------------------------------
    def merge(self, inst, v: str) -> None:
        self.lowering(inst)
        touched: list = []
        coord = self.build(inst, v, self.t.merge(inst, v), touched)
        self.set_box(Iteration(inst.id, v), coord.crd, coord.universe)
        for key in touched:
            self.alias(key, Iteration(inst.id, v))
        for k, operand in enumerate(inst.operands):
            if isinstance(operand, LeafInput) and v not in inst.access(k):
                key = LeafRef(operand.leaf)
                self.env[key] = self.repeat(self.env[key], coord.crd)

    def nest(self, inst, v: str) -> None:
        self.lowering(inst)
        consumer = next(c for c, _ in inst.consumers if v in self.n.nest[c])
        self.alias(Iteration(inst.id, v), Iteration(consumer, v))
        signal = self.crd(consumer, v)
        for ref in inst.leaf_ids():
            self.env[LeafRef(ref)] = self.repeat(self.env[LeafRef(ref)], signal)

    def ready(self, inst, v: str) -> bool:
        if inst.id in self.finished or self.n.pos[v] < self.n.pos.get(self.n.last[inst.id], -1):
            return False
        return all(ref in self.finished for ref in inst.producer_ids())

    def coalesce(self, value: Stream, tensor: str, axes: tuple = ()) -> Stream:
        """Missing entries (N) of a tensor whose background is not 0 read as that background."""
        bg = self.r.background.get(tensor) or 0.0
        if bg == 0.0:
            return value
        return self.add("alu", {"op": "coalesce", "arity": 1, "scalar": bg, "scalar_pos": 1,
                                **self.tiling.param([axes], axes)}, a=value).out("val")

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

    # -- outputs --------------------------------------------------------------------------------
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
        self.g.tensors[name] = {"role": "output", "shape": list(shape), "levels": [str(x) for x in levels],
                                "mode_order": mode_order, "fill": self.r.background.get(name) or 0.0}

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
