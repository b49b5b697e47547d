"""Compile a Program under a Schedule into kernels: one SamGraph per fused group.

Per group: the region (`variants`), its order (given, `search.default_order`, or with
`order=reference` the reference compiler's rule, `reference_order`), the layouts
it asks of earlier groups' outputs (`layouts.LayoutRequest`, negotiated by `compile_schedule`),
then the fusion table, the lowering and the schedule's parallel lanes.

    >>> from fuseflow.frontend import from_mlir
    >>> c = compile_schedule(from_mlir("tests/mlir/matmul_chain.mlir"), "unfused")
    >>> [(k.group, ",".join(k.order)) for k in c.kernels]
    [(['T'], 'i,k,j'), (['O'], 'i,k,j')]
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import partial

from ..errors import FuseflowError, UserError
from ..ir.canonicalize import prepare
from ..ir.formats import TensorFormat
from ..ir.program import IndexOp, Program, op_output
from ..ir.verify import infer_shapes
from ..report.notebook import compiled_html
from ..sam.graph import SamGraph
from ..sam.parallel import apply_pars
from ..schedule.schedule import OrderChoice, Schedule
from .blocking import Blocking, check_format_blocks
from .cost import nest_cost
from .layouts import LayoutRequest, cheaper_layouts, layouts_for_order, wanted_layouts
from .lower import lower
from .nesting import Nesting, OrderWalk, order_problem, valid_orders
from .reference_order import region_with_reference_order
from .region import Region
from .search import PROOF_WORK, NoValidOrder, no_order_proof
from .table import FusionTable
from .variants import region_for_order, region_variants, region_with_order


@dataclass
class Kernel:
    index: int
    group: list[str]
    region: Region | None = None
    order: list[str] = field(default_factory=list)
    table: FusionTable | None = None
    graph: SamGraph | None = None  # None for a reshape kernel (a view of dense data)
    listing: object = field(default=None, repr=False)  # () -> the region whose valid orders `#N` counts
    weighed: list[str] | None = None  # for an order picked by index: the default order layouts are weighed by

    def listed_region(self) -> Region | None:
        """The region whose valid orders `order.N=#k` indexes and `fuseflow orders` lists: the
        variant the default order search settles on (the first variant if it finds none)."""
        return self.listing() if self.listing is not None else None

    @property
    def is_reshape(self) -> bool:
        return self.graph is None


@dataclass
class Compiled:
    program: Program
    schedule: Schedule
    kernels: list[Kernel]
    formats: dict[str, TensorFormat]  # storage of every tensor a kernel writes or reads

    def _repr_html_(self) -> str:  # Jupyter shows the kernels and their picture (report.notebook)
        return compiled_html(self)


DEFAULT_SCHEDULES = ("full", "full layout=induced", "unfused", "unfused layout=induced")


def compile_schedule(program: Program, schedule: Schedule | str | None = None, shapes: dict | None = None,
                     canonical: bool = False, stats=None) -> Compiled:
    """Kernels for every group of `schedule`, lowered in dependency order; without a schedule,
    the first of `DEFAULT_SCHEDULES` that compiles (its `Compiled.schedule` says which).

    A tensor written by one group is stored in the order its dataflow order visits it. When a
    later group has no valid order with that layout, the writer is asked for the layout the
    reader needs (as if the schedule said `format.T=...;order=...`) and the groups are compiled
    again. Also compiled: the same where other layouts would at least halve a reader's cost
    (unless a writer then has no valid order); the one with less total `nest_cost` is returned.
    Layouts the schedule gives are never changed. With data statistics (`stats`, an
    `ir.stats.DataStats` of the inputs), default orders weigh loops by the data's densities.
    A group without any valid order raises `NoValidOrder` (saying whether `layout=induced`
    would compile the schedule; not for `order=reference`, which keeps the declared layouts)."""
    prog = program if canonical else prepare(program, shapes)
    if schedule is None:
        return _first_that_compiles(prog, shapes, stats)
    if isinstance(schedule, str):
        schedule = Schedule.parse(schedule)
    try:
        return _compile(prog, schedule, shapes, stats)
    except NoValidOrder as err:
        if schedule.layout == "induced" or schedule.order_rule == "reference":
            raise
        induced = copy.deepcopy(schedule)  # the compiler may add to its layouts; the given schedule stays
        induced.layout = "induced"
        try:
            compiled = _compile(prog, induced, shapes, stats)
        except FuseflowError:
            raise err from None
        better = NoValidOrder(err.what, err.where, f"the schedule compiles with layout=induced: {induced}")
        better.induced = compiled
        raise better from None


def _first_that_compiles(prog: Program, shapes: dict | None, stats) -> Compiled:
    first = None
    for text in DEFAULT_SCHEDULES:
        try:
            return _compile(prog, Schedule.parse(text), shapes, stats)
        except FuseflowError as err:
            first = first or err
    raise first


def _compile(prog: Program, schedule: Schedule, shapes: dict | None, stats) -> Compiled:
    """`compile_schedule` of a canonical program (see there)."""
    try:
        tuned, asked = _negotiate(prog, schedule, shapes, stats, cost_based=True)
    except FuseflowError as err:
        try:
            return _negotiate(prog, schedule, shapes, stats, cost_based=False)[0]
        except FuseflowError:
            raise err from None
    if not asked:  # no reader asked for a layout to save work: the same as without cost-based asks
        return tuned
    try:
        plain = _negotiate(prog, schedule, shapes, stats, cost_based=False)[0]
    except FuseflowError:
        return tuned
    return tuned if _total_cost(tuned) < _total_cost(plain) else plain


def _total_cost(compiled: Compiled) -> float:
    """The kernels' estimated work, a group whose order the schedule picks by index (`#k`)
    counted with its default order: which layouts win must not depend on the pick, or `#k`
    would index another list than `fuseflow orders` shows."""
    return sum(nest_cost(Nesting(k.region, k.weighed or k.order)) for k in compiled.kernels if k.region is not None)


def _negotiate(prog: Program, schedule: Schedule, shapes: dict | None, stats,
               cost_based: bool) -> tuple[Compiled, bool]:
    """Compile, pinning the layouts readers ask writers for (and, if `cost_based`, those that
    halve a reader's cost), until every group compiles; also whether a layout was asked for only
    to save work."""
    pinned: dict[str, TensorFormat] = {}
    tried: set = set()
    optional: set[str] = set()  # asked for only because a reader gets cheaper
    before: tuple = ({}, set())  # pins and states before the first of those
    declined: set[str] = set()  # such layouts that led nowhere: not asked for again
    asked = False
    while True:
        try:
            result = _Compiler(prog, schedule, shapes, pinned, stats, declined, cost_based).run()
        except FuseflowError:
            if not optional:
                raise
            pinned, tried = dict(before[0]), set(before[1])  # a writer cannot produce what was asked to save work
            declined |= optional
            optional = set()
            continue
        if isinstance(result, Compiled):
            return result, asked
        asked = asked or result.optional
        state = frozenset((n, f.mode_order) for n, f in {**pinned, **result.formats}.items())
        if state in tried and result.optional:  # been there: keep the layouts as they are
            declined |= set(result.formats)
            continue
        if state in tried and optional:  # in circles since a layout was asked to save work: undo those
            pinned, tried = dict(before[0]), set(before[1])
            declined |= optional
            optional = set()
            continue
        if state in tried:  # negotiation goes round in circles: report the plain failure
            compiler = _Compiler(prog, schedule, shapes, pinned, stats, declined, negotiate=False)
            return compiler.run(), asked
        if result.optional:
            if not optional:
                before = (dict(pinned), set(tried))
            optional |= set(result.formats)
        pinned.update(result.formats)
        tried.add(state)


def _listed_region(prog: Program, group: list[str], formats: dict, shapes: dict, free: set) -> Region:
    return region_with_order(prog, group, formats, shapes, free)[0]


class _Compiler:
    """One compilation of every group with the layouts `pinned` so far. `run` returns the
    kernels, or the `LayoutRequest` of the first group that asks writers for other layouts
    (only if `negotiate`; `cost_based`: also for layouts that just make it cheaper, unless
    `declined`)."""

    def __init__(self, prog: Program, schedule: Schedule, shapes: dict | None, pinned: dict, stats=None,
                 declined: set = frozenset(), cost_based: bool = False, negotiate: bool = True):
        schedule.check()
        self.prog = prog
        self.schedule = schedule
        self.pinned = pinned
        self.stats = stats
        self.declined = declined
        self.cost_based = cost_based
        self.negotiate = negotiate
        self.all_shapes = infer_shapes(prog, shapes or {})
        self.formats = self.storage_formats()
        self.blocking = Blocking(schedule.block, self.all_shapes) if schedule.block is not None else None
        if self.blocking is not None:
            self.formats = {n: self.blocking.format(n, f) for n, f in self.formats.items()}
        self.region_shapes = self.blocking.grid if self.blocking is not None else self.all_shapes
        self.free = set(prog.inputs) - set(schedule.formats) if schedule.layout == "induced" else set()
        self.chosen_layout: set[str] = set()  # written tensors laid out by their writer's default order

    def storage_formats(self) -> dict[str, TensorFormat]:
        """Pinned layouts, the schedule's formats, then the inputs' declared ones."""
        formats: dict[str, TensorFormat] = dict(self.pinned)
        for name, text in self.schedule.formats.items():
            if name not in self.prog.tensors:
                raise UserError(f"format given for {name!r}, which the program does not have", "schedule")
            formats[name] = TensorFormat.parse(text, self.prog.tensors[name].rank, where=f"format.{name}")
        for name in self.prog.inputs:
            formats.setdefault(name, self.prog.tensors[name].format)
        for name, fmt in formats.items():
            check_format_blocks(name, fmt, self.all_shapes[name])
            if fmt.block and self.schedule.block is None:
                raise UserError(f"{name} is stored in blocks ({fmt}), which needs blocked execution", "schedule",
                                f"add the schedule item block={max(fmt.block)}")
        return formats

    def groups(self) -> list[list[str]]:
        """The schedule's groups; its orders and pars must name existing ones."""
        groups = self.schedule.partition(self.prog)
        for what, items in (("order", self.schedule.orders), ("par", self.schedule.pars)):
            unknown = [k for k in items if k >= len(groups)]
            if unknown:
                raise UserError(f"{what} given for group {unknown[0]}, but there are {len(groups)} groups", "schedule")
        return groups

    def run(self) -> Compiled | LayoutRequest:
        ops = {op_output(op): op for op in self.prog.ops}
        kernels = []
        for k, group in enumerate(self.groups()):
            if not isinstance(ops[group[0]], IndexOp):
                kernels.append(self.reshape_kernel(k, group, ops[group[0]]))
                continue
            kernel = self.index_kernel(k, group)
            if isinstance(kernel, LayoutRequest):
                return kernel
            kernels.append(kernel)
        return Compiled(self.prog, self.schedule, kernels, self.formats)

    def reshape_kernel(self, k: int, group: list[str], op) -> Kernel:
        if k in self.schedule.pars:
            raise UserError(f"group {k} is a reshape and cannot be parallelized", "schedule",
                            "parallelize a group of index ops")
        self.formats.setdefault(op.output, TensorFormat.dense(self.prog.tensors[op.output].rank))
        return Kernel(k, group)

    def index_kernel(self, k: int, group: list[str]) -> Kernel | LayoutRequest:
        """The kernel of a fused group: region and order, unless it asks for layouts first."""
        choice = self.schedule.orders.get(k)
        if choice is None and self.schedule.order_rule == "reference":
            return self.reference_kernel(k, group)
        by_index = choice is not None and choice.index is not None
        # `order.N=#k` indexes what `fuseflow orders` lists for the schedule without it: the
        # layouts are negotiated as for the default order, then the listed region is indexed
        region, best = self.region_and_best(group, None if by_index else choice)
        request = self.layout_request(region, None if by_index else choice, best)
        if request is not None:
            return request
        if choice is None and best is None:
            raise self.no_valid_order(k, group)
        default = best
        if by_index:
            region, best = self.listing(group)(), None
            region.stats = self.stats  # costs weighed as the default order's are
        order = choose_order(region, choice, k, best)
        kernel = Kernel(k, group, region, order, FusionTable(region, order), listing=self.listing(group))
        kernel.weighed = default if by_index else None
        self.lower_kernel(kernel)
        for name in region.outputs:
            chosen_here = name not in self.formats or name in self.pinned
            if chosen_here and choice is None and name not in self.schedule.formats:
                self.chosen_layout.add(name)
            self.formats[name] = TensorFormat.of(kernel.graph.tensors[name])
        return kernel

    def reference_kernel(self, k: int, group: list[str]) -> Kernel:
        """The kernel of a group that takes the reference compiler's order (`order=reference`):
        no search and no layouts asked of earlier groups; its outputs are not re-laid out for
        later groups either."""
        region, order = region_with_reference_order(self.prog, group, self.formats, self.region_shapes, self.free, k)
        region.stats = self.stats
        kernel = Kernel(k, group, region, order, FusionTable(region, order), listing=self.listing(group))
        self.lower_kernel(kernel)
        for name in region.outputs:
            self.formats[name] = TensorFormat.of(kernel.graph.tensors[name])
        return kernel

    def listing(self, group: list[str]):
        """`Kernel.listing`: the group's listed region, with the layouts known now."""
        return partial(_listed_region, self.prog, list(group), dict(self.formats), self.region_shapes, self.free)

    def no_valid_order(self, k: int, group: list[str]) -> FuseflowError:
        """The error for a group none of whose region variants has a valid order: `NoValidOrder`
        with the reason, when every variant's walk over the orders' prefixes finished."""
        proofs = [no_order_proof(r) for r in region_variants(self.prog, group, self.formats, self.region_shapes,
                                                             self.free)]
        why = proofs[0][0]
        fix = "split the group (e.g. schedule unfused)"
        if self.schedule.layout != "induced":
            fix += " or store the inputs as the loops visit them (layout=induced)"
        if all(proven for _, proven in proofs):
            return NoValidOrder(f"group {k} ({','.join(group)}) has no valid order: {why}", "schedule", fix)
        return UserError(f"group {k} ({','.join(group)}) has no valid order among the first {PROOF_WORK} prefixes "
                         f"of orders tried: {why}", "schedule", "give one with order.N=... or " + fix)

    def movable(self, region: Region) -> set[str]:
        """Tensors the region reads that earlier groups wrote in layouts of their own choosing."""
        return {leaf.tensor for leaf in region.leaves} & self.chosen_layout

    def region_and_best(self, group: list[str], choice: OrderChoice | None) -> tuple[Region, list[str] | None]:
        """The group's region variant and, without a given order, its default order (or None)."""
        region = Region.build(self.prog, group, formats=self.formats, shapes=self.region_shapes, free=self.free)
        if choice is None:
            return region_with_order(self.prog, group, self.formats, self.region_shapes, self.free, region,
                                     self.stats)
        listed = list(choice.vars)

        def fixable(r: Region) -> bool:
            return self.negotiate and bool(layouts_for_order(self.prog, r, listed, self.formats, self.free,
                                                             self.movable(r)))

        return region_for_order(self.prog, region, listed, self.formats, self.region_shapes, self.free,
                                fixable), None

    def layout_request(self, region: Region, choice: OrderChoice | None,
                       best: list[str] | None) -> LayoutRequest | None:
        """Layouts of earlier groups' outputs that the group asks for: without a valid default
        order, those that give it one; with one, those that make it much cheaper (if
        `cost_based`); with a listed order it violates, those that make it valid."""
        movable = self.movable(region)
        if not self.negotiate or not movable:
            return None
        wanted = {}
        if choice is None and best is None:
            wanted = wanted_layouts(self.prog, region.group, self.formats, self.region_shapes, self.free, movable,
                                    self.stats)
        optional = movable - set(self.pinned) - self.declined
        if choice is None and best is not None and self.cost_based and optional:
            wanted = cheaper_layouts(self.prog, region, best, self.formats, self.region_shapes, self.free, optional,
                                     self.stats)
            if wanted:
                return LayoutRequest(wanted, optional=True)
        listed = list(choice.vars) if choice is not None and choice.index is None else None
        if listed is not None and sorted(listed) == sorted(region.vars) and order_problem(region, listed):
            wanted = layouts_for_order(self.prog, region, listed, self.formats, self.free, movable)
        return LayoutRequest(wanted) if wanted else None

    def lower_kernel(self, kernel: Kernel) -> None:
        """The kernel's graph: its table lowered (blocked if the schedule says so), named, and
        parallelized as the schedule's `par` item for the group says."""
        region, schedule = kernel.region, self.schedule
        tiling = self.blocking.tiling(region) if self.blocking is not None else None
        kernel.graph = lower(kernel.table, {n: self.formats[n] for n in region.outputs if n in self.formats}, tiling,
                             set(self.pinned) - set(schedule.formats))
        if self.blocking is not None:
            tensors = kernel.graph.tensors  # shared with the graph before broadcasts: replaced in place
            for name, meta in list(tensors.items()):
                tensors[name] = self.blocking.full_metadata(meta, name)
        kernel.graph.name = f"k{kernel.index}:" + "+".join(region.outputs)
        if kernel.index in schedule.pars:
            kernel.graph = apply_pars(kernel.graph, schedule.pars[kernel.index], kernel.order, kernel.index,
                                      region.extent)


def choose_order(region: Region, choice: OrderChoice | None, k: int, best: list[str] | None = None) -> list[str]:
    """Group k's order: the default `best`, the `#N`-th valid order, or the listed one (checked)."""
    if choice is None:
        assert best is not None, "a group without a valid order is reported before"
        return best
    if choice.index is not None:
        count = 0
        for n, order in enumerate(valid_orders(region)):
            if n == choice.index:
                return order
            count += 1
        if count:
            raise UserError(f"group {k} has {count} valid orders, not #{choice.index}", "schedule",
                            "list them with `fuseflow orders`")
        walk = OrderWalk(region)
        walk.first()
        raise NoValidOrder(f"group {k} ({','.join(region.group)}) has no valid order: {walk.why_none()}", "schedule",
                           "change the grouping, an earlier group's order, or use layout=induced")
    order = list(choice.vars)
    if sorted(order) != sorted(region.vars):
        raise UserError(f"order {choice} of group {k} must list each of {','.join(region.vars)} once", "schedule")
    problem = order_problem(region, order)
    if problem:
        raise UserError(problem, f"schedule group {k}")
    return order
