"""The coordinate steps of a lowering, at each variable in dataflow order: `merge` (an op instance
merges its operands' coordinate streams: scans of stored levels, universes, iterate-locate, and
joiners that carry every aligned stream as a payload) and `nest` (an instance nested in a
consumer's loop repeats its references along it).

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.region import Region
    >>> from fuseflow.fusion.table import FusionTable
    >>> table = FusionTable(Region.build(from_mlir("tests/mlir/spmv.mlir"), ["y"]), ["i", "j"])
    >>> steps = CoordinateSteps(table, None)
    >>> steps.merge(table.region.instances[0], "i"); [n.kind for n in steps.g.nodes]
    ['root', 'scan', 'repsig', 'repeat']
"""
from __future__ import annotations

import math

from ..errors import NotSupported
from ..sam.graph import Stream
from .instances import LeafInput
from .keys import BufferedValues, Coord, Iteration, LeafRef, Output, UniverseRef, Values
from .lower_state import LoweringState
from .merge import located_operands
from .patterns import Intersect, Merge, Nothing, Operand, Union, Universe


class CoordinateSteps(LoweringState):
    """Merges and nests of a lowering."""

    # -- coordinate streams ------------------------------------------------------------------------------
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
            if not inst.operands:  # what constant folding leaves: an output no input determines
                raise NotSupported(f"{inst.tensor} is {inst.op.body.to_text([])} everywhere: no input determines it, "
                                   "so no data flows to simulate", None, "return tensors the inputs determine")
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

    # -- the steps ---------------------------------------------------------------------------------------
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
