"""Heuristic cost of a compiled schedule, from shapes and nonzero statistics only (no simulation).

Every op instance of a kernel iterates its nest (`fusion.nesting.Nesting.nest`): its own
variables plus the loops of consumers it is nested in, so an op recomputed inside a consumer's
extra loop is charged once per iteration of it. The expected number of points an instance visits
at depth d of its nest is

    P_d = P_{d-1} * extent(v_d) * density(v_d)

where the density of one of its own variables is its merge there (`FusionTable.merge`) evaluated
on its operands' densities (an intersection multiplies them, a union adds the misses up), and
an operand's density is a level density of the input data (`stats.DataStats`) or the output
density of a producing instance (a sum over a reduction variable fills in the coordinates of the
variables after it). A variable the instance only nests in (a consumer's loop) takes the
consumer's density there. From the points:

- flops: the points of the full nest times the ALU operations of the body (+1 per reduction);
- memory words: for every input level scanned, 2 words per fiber visit (a compressed level's
  segment) plus one per coordinate, one per value read; for every written tensor, the
  coordinates, segments and values it stores; bytes = 4 x words;
- tokens: coordinates streamed into every joiner and repeater (the sum, over nest levels, of the
  points of the enclosing level times the coordinates each operand streams there);
- cycles: the streaming hardware overlaps all nodes of a kernel, so a kernel takes roughly as
  long as its busiest stream (plus a small share of the rest); kernels run one after another.
  A `par=VAR:P` item divides the steps of nodes nested inside VAR's loop by P.

The compiler's order search counts a nest with a model of its own (`fusion.cost`), a cheap lower
bound that it evaluates on prefixes of orders; its docstring says why the two stay apart. Both
take nests from `Nesting`, what an intersection looks up from `fusion.merge.located_operands`
and level densities from `ir.stats.DataStats`.

    >>> import fuseflow
    >>> from fuseflow.fusion.compile import compile_schedule
    >>> p = fuseflow.from_mlir("tests/mlir/matmul_chain.mlir")
    >>> data = fuseflow.random_inputs(p, density=0.1, seed=0)
    >>> model = CostModel(p, data)
    >>> good = model.estimate(compile_schedule(p, "full layout=induced order=i,l,k,j", model.shapes))
    >>> bad = model.estimate(compile_schedule(p, "full layout=induced order=i,j,l,k", model.shapes))
    >>> bad.flops > 10 * good.flops, bad.cycles > good.cycles
    (True, True)
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import numpy as np

from ..ir.expr import Const, In
from ..ir.generate import random_inputs
from ..ir.program import IndexOp, Program
from ..ir.reference import bind_inputs
from ..ir.stats import DataStats, stats_for
from ..ir.values import shape_of
from .compile import compile_schedule
from .instances import LeafInput
from .merge import located_operands
from .patterns import Intersect, Nothing, Operand, Union, Universe

WORD_BYTES = 4
# share of a kernel's non-bottleneck stream traffic that adds to its bottleneck (imperfect overlap)
OVERLAP_SHARE = 0.02
# fixed cycles per kernel (pipeline fill and drain)
KERNEL_STARTUP = 20


@dataclass
class KernelEstimate:
    index: int
    group: list[str]
    order: list[str]
    flops: float = 0.0
    reads: float = 0.0  # words
    writes: float = 0.0  # words
    tokens: float = 0.0
    bottleneck: float = 0.0  # estimated steps of the busiest node
    bottleneck_node: str = ""  # which node that is (e.g. "spacc H", "join T@k", "scan A@j")
    cycles: float = 0.0


@dataclass
class Estimate:
    """Heuristic cost of one schedule on one data point."""

    flops: float
    reads: float  # memory words
    writes: float  # memory words
    tokens: float
    cycles: float
    seconds: float  # time the estimate took
    kernels: list[KernelEstimate] = field(default_factory=list)

    @property
    def bytes(self) -> float:
        return (self.reads + self.writes) * WORD_BYTES

    def to_json(self) -> dict:
        return asdict(self)


def _alu_ops(expr) -> int:
    """ALU operations one evaluation of an op body takes (inputs and constants are free)."""
    if isinstance(expr, (In, Const)):
        return 0
    return 1 + sum(_alu_ops(c) for c in expr.children())


class _TensorDensities:
    """Level densities of every tensor a kernel may read: inputs from data statistics,
    intermediates from the estimates of the kernels that wrote them."""

    def __init__(self, stats: DataStats):
        self.stats = stats
        self.written: dict[str, dict] = {}  # name -> {dim: density of that dimension's level}

    def levels(self, name: str, fmt) -> list[float]:
        if name in self.written:
            by_dim = self.written[name]
            return [1.0 if not lv.is_compressed else by_dim.get(d, 1.0)
                    for lv, d in zip(fmt.levels, fmt.mode_order)]
        if name in self.stats:
            return self.stats.level_densities(name, fmt)
        return [1.0] * len(fmt.levels)


class _KernelModel:
    def __init__(self, kernel, densities: _TensorDensities, pars: list | None = None):
        self.kernel = kernel
        self.pars = pars or []  # [(var, lanes)] of the schedule's par item for this kernel
        self.region = kernel.region
        self.table = kernel.table
        self.nesting = kernel.table.nesting
        self.pos = self.nesting.pos
        self.extent = self.region.extent
        self.densities = densities
        self.by_id = {inst.id: inst for inst in self.region.instances}
        self._md: dict = {}
        self._leaf_levels: dict[int, list[float]] = {}
        self._located: dict = {}

    def lanes(self, v) -> int:
        """Lanes sharing the work at variable `v`: the product of the factors of the parallelized
        variables that `v` is nested in (work at or above a parallel variable stays serial)."""
        if not isinstance(v, str):
            return 1
        return int(np.prod([p for u, p in self.pars if self.pos[v] > self.pos[u]] or [1]))

    # -- densities ----------------------------------------------------------------------------
    def leaf_levels(self, leaf) -> list[float]:
        if leaf.id not in self._leaf_levels:
            self._leaf_levels[leaf.id] = self.densities.levels(leaf.tensor, leaf.format)
        return self._leaf_levels[leaf.id]

    def leaf_density(self, leaf, v: str) -> float | None:
        level_vars = leaf.level_vars()
        if v not in level_vars:
            return None
        return self.leaf_levels(leaf)[level_vars.index(v)]

    def operand_density(self, inst, k: int, v: str) -> float:
        operand = inst.operands[k]
        if isinstance(operand, LeafInput):
            d = self.leaf_density(self.region.leaves[operand.leaf], v)
            return 1.0 if d is None else d
        return self.out_density(self.by_id[operand.producer], v)

    def merge_density(self, inst, v: str) -> float:
        """Fraction of v's coordinates the instance visits (its merge at v)."""
        key = (inst.id, v)
        if key not in self._md:
            self._md[key] = 1.0  # guards re-entry
            cell = self.table.cells.get((v, self.table.inst_key(inst.id)))
            merge = cell.merge if cell is not None and cell.merge is not None else self.table.merge(inst, v)
            self._md[key] = min(1.0, max(0.0, self._eval(merge, inst, v)))
        return self._md[key]

    def _eval(self, merge, inst, v: str) -> float:
        if isinstance(merge, Operand):
            return self.operand_density(inst, merge.index, v)
        if isinstance(merge, Universe):
            return 1.0
        if isinstance(merge, Nothing):
            return 0.0
        parts = [self._eval(p, inst, v) for p in merge.parts]
        if isinstance(merge, Intersect):
            return float(np.prod(parts))
        if isinstance(merge, Union):
            return 1.0 - float(np.prod([1.0 - p for p in parts]))
        return 1.0

    def out_density(self, inst, v: str) -> float:
        """Fraction of v's coordinates the instance's output holds (what a consumer streams)."""
        if v not in inst.local_vars or v in inst.reduce_vars:
            return 1.0
        base = self.merge_density(inst, v)
        inner = [r for r in inst.reduce_vars if self.pos[r] < self.pos[v]]
        if not inner:
            return base
        # each of the N reduction positions contributes with probability base * q
        n, q = 1.0, 1.0
        for r in inner:
            n *= self.extent[r]
            q *= self.merge_density(inst, r)
        return 1.0 - (1.0 - min(1.0, base * q)) ** n

    def nest_density(self, inst, v: str) -> float:
        """Density of a consumer's loop over v that the instance is nested in."""
        for consumer_id, _ in inst.consumers:
            consumer = self.by_id[consumer_id]
            if v in self.nesting.nest[consumer_id] or v in self.nesting.scope[consumer_id]:
                if v in consumer.local_vars:
                    return self.effective_density(consumer, v)
                return self.nest_density(consumer, v)
        return 1.0

    def effective_density(self, inst, v: str) -> float:
        """Fraction of v's coordinates the instance iterates: its merge, further filtered by a
        consumer's joiner at v when the instance streams v to it (v outside its reductions)."""
        key = ("eff", inst.id, v)
        if key not in self._md:
            density = self.merge_density(inst, v)
            streamed = all(self.pos[r] > self.pos[v] for r in inst.reduce_vars)
            if streamed:
                for consumer_id, k in inst.consumers:
                    consumer = self.by_id[consumer_id]
                    if v in consumer.local_vars and v in consumer.access(k):
                        density = min(density, self.effective_density(consumer, v))
            self._md[key] = density
        return self._md[key]

    def level_density(self, inst, v: str) -> float:
        return self.effective_density(inst, v) if v in inst.local_vars else self.nest_density(inst, v)

    # -- counts -------------------------------------------------------------------------------
    def estimate(self) -> KernelEstimate:
        """The kernel's counts: its instances' loops and ALUs, its input reads, its output writes;
        the busiest node's steps give the cycles."""
        k = self.kernel
        est = KernelEstimate(k.index, list(k.group), list(k.order))
        self._steps: list[float] = []  # estimated steps of the graph's busiest nodes, one entry per node
        self._names: list[str] = []
        points_of = {inst.id: self._count_instance(est, inst) for inst in self.region.instances}
        for leaf in self.region.leaves:
            self._count_reads(est, leaf, points_of[self._owner(leaf).id])
        for name in self.region.outputs:
            self._count_writes(est, name)
        steps, names = self._steps, self._names
        est.bottleneck = max(steps, default=0.0)
        if steps:
            est.bottleneck_node = names[steps.index(est.bottleneck)]
        self.node_steps = sorted(zip(steps, names), reverse=True)
        est.cycles = est.bottleneck + OVERLAP_SHARE * (sum(steps) - est.bottleneck) + KERNEL_STARTUP
        return est

    def _node(self, est: KernelEstimate, count: float, what: str, at=None, steps: float | None = None) -> None:
        """One node streaming `count` tokens in `steps` steps (default: one step per token; inside
        a parallel body it is replicated per lane)."""
        self._steps.append((count if steps is None else steps) / self.lanes(at))
        self._names.append(what)
        est.tokens += count

    def _count_instance(self, est: KernelEstimate, inst) -> list[float]:
        """Joiners, repeaters, ALUs and reducers of one instance, and its FLOPs; returns the
        points it visits at each depth of its nest."""
        nest = self.nesting.nest[inst.id]
        points = [1.0]
        for v in nest:
            points.append(points[-1] * self.extent[v] * self.level_density(inst, v))
        for d, v in enumerate(nest):
            fibers = points[d]
            if v in inst.local_vars:
                # a joiner steps once per coordinate of the union of its input streams, plus
                # once per fiber (the stop token)
                joined = [self.operand_stream(inst, j, v) for j in range(len(inst.operands))]
                joined = [x for x in joined if x is not None]
                if len(joined) > 1:
                    union = 1.0 - float(np.prod([1.0 - x for x in joined]))
                    self._node(est, fibers * (self.extent[v] * union + 1), f"join {inst.tensor}@{v}", v)
            else:  # repeated along a consumer's loop
                self._node(est, points[d + 1] + fibers, f"repeat {inst.tensor}@{v}", v)
        body_ops = _alu_ops(inst.op.body)
        innermost = nest[-1] if nest else None
        if body_ops:
            self._node(est, points[-1], f"alu {inst.tensor}", innermost)
        if inst.reduce_vars:
            out = self._value_points(inst, points)
            kind = self.nesting.plan[inst.id].kind
            # reduce or accumulator: every input, every result; an order-1 accumulator drains a
            # finished fiber while the next one accumulates (a step per input or result, the more)
            steps = max(points[-1], out) if kind == "spacc" else points[-1] + out
            self._node(est, points[-1] + out, f"{kind} {inst.tensor}", innermost, steps)
            est.flops += points[-1] * (body_ops + 1)
        else:
            est.flops += points[-1] * body_ops
        return points

    def _count_reads(self, est: KernelEstimate, leaf, points: list[float]) -> None:
        """A stored operand's reads: level segments and coordinates, then values."""
        owner = self._owner(leaf)
        nest = self.nesting.nest[owner.id]
        levels = self.leaf_levels(leaf)
        level_vars = leaf.level_vars()
        visits = 1.0
        operand = owner.operands.index(LeafInput(leaf.id))
        for lv, var, dens in zip(leaf.format.levels, level_vars, levels):
            if isinstance(var, str) and var in nest:
                visits = points[nest.index(var)]
                ext = self.extent[var]
            else:
                ext = 1
            if isinstance(var, str) and operand in self.located(owner, var):  # one lookup per coordinate iterated
                dens = self.level_density(owner, var)
            coords = visits * ext * dens
            self._node(est, coords + visits, f"scan {leaf.tensor}@{var}", var)  # the scanner (or locate)
            if lv.is_compressed:
                est.reads += 2 * visits + coords
        for d, v in enumerate(nest):  # repeats of the leaf's references along other loops
            if v not in level_vars and any(isinstance(x, str) and nest.index(x) > d
                                           for x in level_vars if x in nest):
                self._node(est, points[d + 1] + points[d], f"repeat {leaf.tensor}@{v}", v)
        est.reads += points[-1]  # value reads happen at the owner's innermost points
        self._node(est, points[-1], f"array {leaf.tensor}", nest[-1] if nest else None)

    def _count_writes(self, est: KernelEstimate, name: str) -> None:
        """A written output's coordinates, segments and values, in the levels the graph stores."""
        k = self.kernel
        inst = self.by_id[self.region.output_instance[name]]
        meta = k.graph.tensors.get(name) if k.graph is not None else None
        levels, mode_order = (meta.levels, meta.mode_order) if meta is not None else (None, None)
        out_vars = inst.out_indices
        if levels is None:
            levels, mode_order = ["dense"] * len(out_vars), list(range(len(out_vars)))
        fibers, by_dim = 1.0, {}
        for level, dim in zip(levels, mode_order):
            var = out_vars[dim] if dim < len(out_vars) else 0
            ext = self.extent.get(var, 1) if isinstance(var, str) else 1
            dens = self.out_density(inst, var) if isinstance(var, str) else 1.0
            by_dim[dim] = dens
            if level == "compressed":
                stored = fibers * ext * dens
                est.writes += stored + fibers + 1
                self._node(est, stored + fibers, f"write {name}@{var}")
                fibers = stored
            else:
                fibers *= ext
        est.writes += fibers  # values
        self._node(est, fibers, f"write {name} values")
        self.densities.written[name] = by_dim

    def _value_points(self, inst, points: list[float]) -> float:
        """Results of a reduction: the points of its value variables (outside the reduction)."""
        first = min(self.pos[r] for r in inst.reduce_vars)
        count = 1.0
        for v in self.nesting.value_vars[inst.id]:
            # variables outside the reduction keep their iteration density; those inside it hold
            # what any reduction step contributed
            dens = self.level_density(inst, v) if self.pos[v] < first else self.out_density(inst, v)
            count *= self.extent[v] * dens
        return min(count, points[-1]) if points[-1] else count

    def operand_stream(self, inst, j: int, v: str) -> float | None:
        """Coordinates per fiber that operand j streams at v (None: it does not index v)."""
        if v not in inst.access(j):
            return None
        if j in self.located(inst, v):
            return None  # looked up at the coordinates the others stream
        return self.operand_density(inst, j, v)

    def located(self, inst, v: str) -> set[int]:
        """Operands of `inst` its intersection at `v` looks up (iterate-locate)."""
        if (inst.id, v) not in self._located:
            self._located[inst.id, v] = located_operands(self.region, inst, v)
        return self._located[inst.id, v]

    def _owner(self, leaf):
        return self.by_id[self.table.leaf_owner[leaf.id]]


class CostModel:
    """Estimates schedules of one program on one data point (statistics computed once)."""

    def __init__(self, program: Program, data: dict | None = None, *, stats: DataStats | None = None):
        self.program = program
        bound = bind_inputs(program, data or {}) if data is not None else {}
        self.shapes = {n: shape_of(a) for n, a in (data or {}).items() if n in program.inputs}
        self.stats = stats if stats is not None else stats_for(program, bound)

    def estimate(self, compiled) -> Estimate:
        start = time.perf_counter()
        densities = _TensorDensities(self.stats)
        kernels = []
        for kernel in compiled.kernels:
            if kernel.region is None or kernel.table is None:
                op = compiled.program.producer(kernel.group[0]) if hasattr(compiled.program, "producer") else None
                if op is not None and not isinstance(op, IndexOp) and op.input in densities.written:
                    densities.written[op.output] = {}  # a reshape: stored dense
                kernels.append(KernelEstimate(kernel.index, list(kernel.group), []))
                continue
            pars = compiled.schedule.pars.get(kernel.index, [])
            kernels.append(_KernelModel(kernel, densities, pars).estimate())
        totals = [float(sum(getattr(k, attr) for k in kernels)) for attr in ("flops", "reads", "writes", "tokens",
                                                                              "cycles")]
        return Estimate(*totals, time.perf_counter() - start, kernels)

    def estimate_schedule(self, schedule) -> Estimate:
        return self.estimate(compile_schedule(self.program, schedule, self.shapes or None, stats=self.stats))


def kernel_estimate(kernel, stats, pars: list | None = None, extents: dict | None = None) -> KernelEstimate:
    """One kernel's estimate from level statistics `stats` (anything with `in` and
    `level_densities`, e.g. a `DataStats` of what it reads), with `extents` replacing some of its
    variables' extents (the partitioned mode estimates a window of its outer loop this way)."""
    model = _KernelModel(kernel, _TensorDensities(stats), pars)
    model.extent = {**model.extent, **(extents or {})}
    return model.estimate()


def estimate(program: Program, schedule, data: dict | None = None, *, density: float = 0.1,
             seed: int = 0) -> Estimate:
    """Heuristic cost of `schedule` for `program` (cycles, FLOPs, reads, writes, token events per
    kernel; no simulation) on `data` ({input name: array or scipy sparse matrix}), or on random inputs
    from `seed` at `density` when `data` is None; `schedule` is anything `fuseflow.compile`
    takes."""
    if data is None:
        data = random_inputs(program, density=density, seed=seed)
    return CostModel(program, data).estimate_schedule(schedule)


__all__ = ["CostModel", "Estimate", "KernelEstimate", "estimate", "kernel_estimate"]
