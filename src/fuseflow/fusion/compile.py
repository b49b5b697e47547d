"""Compile a Program under a Schedule into kernels: one SamGraph per fused group.

    >>> from fuseflow.frontend import from_mlir
    >>> c = compile_schedule(from_mlir("tests/mlir/matmul_chain.mlir"), "unfused")
    >>> [(k.group, ",".join(k.order)) for k in c.kernels]
    [(['T'], 'i,k,j'), (['O'], 'i,k,j')]
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from ..errors import FuseflowError, UserError
from ..ir.canonicalize import drop_unit_variables, inline_copies
from ..ir.formats import LEVEL_FORMATS, TensorFormat
from ..ir.program import IndexOp, Program, op_output
from ..ir.verify import infer_shapes
from ..sam.graph import SamGraph
from ..schedule.schedule import Schedule
from .blocking import Blocking, check_format_blocks
from .lower import lower
from .nesting import Nesting, default_order, nest_cost, order_problem, topological_orders, valid_orders
from .parallel import apply_pars
from .region import Region, buffer_candidates
from .table import FusionTable


@dataclass
class Kernel:
    index: int
    group: list[str]
    region: Region | None = None
    order: list[str] = field(default_factory=list)
    table: FusionTable | None = None
    graph: SamGraph | None = None  # None for a reshape kernel (a view of dense data)

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
        from ..report.notebook import compiled_html
        return compiled_html(self)


def prepare(program: Program, shapes: dict | None = None) -> Program:
    """The canonical form that schedules name ops in: unit-extent variables become constant
    indices, then copies (transposes, broadcasts, unit reshapes) are inlined."""
    return inline_copies(drop_unit_variables(program, infer_shapes(program, shapes or {}, allow_dynamic=True)))


def _format_of(meta: dict) -> TensorFormat:
    block = tuple(meta["block"]) if meta.get("block") else None
    return TensorFormat(tuple(LEVEL_FORMATS[x] for x in meta["levels"]), tuple(meta["mode_order"]), block)


def _choose(region: Region, wanted: str | None, k: int, best: list[str] | None = None) -> list[str]:
    if wanted is None:
        if best is not None:
            return best
        raise UserError(f"group {k} ({','.join(region.group)}) has no valid order among the first "
                        f"ones tried", "schedule", "give one with order.N=... (see `fuseflow orders`), "
                        "split the group, or use layout=induced")
    if wanted is None or wanted.startswith("#"):
        try:
            index = int(wanted[1:]) if wanted else 0
        except ValueError:
            raise UserError(f"order {wanted!r} of group {k} is not #N or a list of variables", "schedule") from None
        count = 0
        for n, order in enumerate(valid_orders(region)):
            if n == index:
                return order
            count += 1
        if count:
            raise UserError(f"group {k} has {count} valid orders, not #{index}", "schedule",
                            "list them with `fuseflow orders`")
        orders = list(itertools.islice(topological_orders(region), 1))
        why = (Nesting(region, orders[0]).problem if orders else
               "the storage orders of its inputs conflict")
        raise UserError(f"group {k} ({','.join(region.group)}) has no valid order: {why}", "schedule",
                        "change the grouping, an earlier group's order, or use layout=induced")
    order = [v.strip() for v in wanted.split(",")]
    if sorted(order) != sorted(region.vars):
        raise UserError(f"order {wanted} of group {k} must list each of {','.join(region.vars)} once", "schedule")
    problem = order_problem(region, order)
    if problem:
        raise UserError(problem, f"schedule group {k}")
    return order


MAX_BUFFER_TRIALS = 12  # single buffered uses tried for a group without a valid order
MAX_LAYOUT_TRIALS = 64  # candidate layouts tried for one group (each costs an order search)
CHEAPER = 0.5  # a reader asks for other layouts of its inputs when they at least halve its order's cost


class _LayoutWanted(Exception):
    """A group needs tensors written by earlier groups stored in other mode orders (or, if
    `optional`, its order gets much cheaper with them)."""

    def __init__(self, formats: dict[str, TensorFormat], optional: bool = False):
        super().__init__(", ".join(f"{n}: {f}" for n, f in formats.items()))
        self.formats = formats
        self.optional = optional


def _region_variants(prog: Program, group: list[str], formats: dict, shapes: dict, free: set,
                     first: Region | None = None):
    """The group's regions in the order the compiler tries them: the region sharing covered
    producers between outputs (`Region.build`; outputs stored with another variable outermost
    than the rest keep their own, `_apart_outputs`), then the same with one use read through a
    buffer (`Region.build(buffered=...)`, at most `MAX_BUFFER_TRIALS` uses); both again with
    every written output computing its own producers (`share_covered=False`); last the region
    where reductions keep their variables to themselves (`separate_reductions=True`)."""
    first = first or Region.build(prog, group, formats=formats, shapes=shapes, free=free)
    apart = _apart_outputs(first, formats)
    shared = None
    for share_covered in (True, False):
        region = first if share_covered and not apart else Region.build(
            prog, group, formats=formats, shapes=shapes, free=free, share_covered=share_covered, isolated=apart)
        if not share_covered and len(region.instances) == len(shared.instances):
            break  # nothing was shared for covering the data: the same regions again
        shared = shared or region
        yield region
        for use in buffer_candidates(region)[:MAX_BUFFER_TRIALS]:
            yield Region.build(prog, group, formats=formats, shapes=shapes, free=free, buffered={use},
                               share_covered=share_covered, isolated=apart)
    yield Region.build(prog, group, formats=formats, shapes=shapes, free=free, separate_reductions=True)


def _region_with_order(prog: Program, group: list[str], formats: dict, shapes: dict, free: set,
                       region: Region | None = None, stats=None) -> tuple[Region, list[str] | None]:
    """The first of the group's `_region_variants` that has a default order (weighing loops by
    the data `stats` if given), with that order; else the first region and None."""
    first = None
    for candidate in _region_variants(prog, group, formats, shapes, free, region):
        first = first or candidate
        candidate.stats = stats
        order = default_order(candidate)
        if order is not None:
            return candidate, order
    return first, None


def _region_for_order(prog: Program, region: Region, order: list[str], formats: dict, shapes: dict,
                      free: set, fixable=None) -> Region:
    """The first of the group's `_region_variants` in which the explicit `order` is valid; else
    the first whose variables it lists that `fixable(region)` accepts (other layouts of earlier
    groups' tensors would make the order valid); else the first whose variables it lists; else
    `region`."""
    if sorted(order) == sorted(region.vars) and not order_problem(region, order):
        return region
    listing = []
    for candidate in _region_variants(prog, region.group, formats, shapes, free, region):
        if sorted(order) == sorted(candidate.vars):
            if not order_problem(candidate, order):
                return candidate
            listing.append(candidate)
    return next((r for r in listing if fixable is not None and fixable(r)), listing[0] if listing else region)


def _apart_outputs(region: Region, formats: dict) -> set[str]:
    """Outputs stored with another variable outermost than most stored outputs (a head-major K
    beside a row-major Q): sharing producers with the others would leave no valid order."""
    lead = {}
    for name, inst_id in region.output_instance.items():
        if name in formats:
            first = region.instance(inst_id).out_indices[formats[name].mode_order[0]]
            if isinstance(first, str):
                lead[name] = first
    if not lead:
        return set()
    common = max(sorted(set(lead.values())), key=list(lead.values()).count)
    return {name for name, v in lead.items() if v != common}


def _induced_layouts(region: Region, order: list[str], formats: dict, movable: set[str]) -> dict[str, TensorFormat]:
    """The mode order `order` visits each `movable` tensor's (free) leaf in, with its stored levels."""
    pos = {v: k for k, v in enumerate(order)}
    induced: dict[str, TensorFormat] = {}
    for leaf in region.leaves:
        if leaf.tensor in movable and leaf.tensor not in induced:
            leaf.induce(pos)
            induced[leaf.tensor] = TensorFormat(formats[leaf.tensor].levels, leaf.format.mode_order)
    return induced


def _changed_layouts(region: Region, order: list[str], formats: dict, movable: set[str]) -> dict[str, TensorFormat]:
    """The `_induced_layouts` that differ from the tensors' current ones."""
    return {n: f for n, f in _induced_layouts(region, order, formats, movable).items()
            if f.mode_order != formats[n].mode_order}


def _layouts_for_order(prog: Program, region: Region, order: list[str], formats: dict, free: set,
                       movable: set[str]) -> dict[str, TensorFormat]:
    """Mode orders of `movable` tensors under which the schedule's explicit `order` is valid, or {}."""
    trial = Region.build(prog, region.group, formats=formats, shapes=region.shapes, free=free | movable,
                         **region.variant)
    if sorted(trial.vars) != sorted(order) or order_problem(trial, order):
        return {}
    return _changed_layouts(trial, order, formats, movable)


def _wanted_layouts(prog: Program, group: list[str], formats: dict, shapes: dict, free: set,
                    movable: set[str], stats=None) -> dict[str, TensorFormat]:
    """Mode orders for `movable` tensors (written by earlier groups in the layouts of their
    default orders) under which `group` gets a valid order, or {} if none is found. Fewest
    changed tensors first; for each set, the program's declared layouts, then the layouts the
    group's best order would induce; then every mode order of a single tensor."""
    trials = [0]

    def valid_with(candidate: dict) -> bool:
        trials[0] += 1
        if trials[0] > MAX_LAYOUT_TRIALS:
            return False
        return _region_with_order(prog, group, {**formats, **candidate}, shapes, free, stats=stats)[1] is not None

    declared = {n: TensorFormat(formats[n].levels, prog.tensors[n].format.mode_order) for n in sorted(movable)}
    candidates = [declared]
    region, order = _region_with_order(prog, group, formats, shapes, free | movable, stats=stats)
    if order is not None:
        candidates.append(_induced_layouts(region, order, formats, movable))
    names = sorted(movable)
    for size in range(1, len(names) + 1):  # change as few layouts as possible
        for subset in itertools.combinations(names, size):
            for candidate in candidates:
                changed = {n: candidate[n] for n in subset
                           if n in candidate and candidate[n].mode_order != formats[n].mode_order}
                if len(changed) == size and valid_with(changed):
                    return changed
    for name in names:  # last resort: every other mode order of one tensor
        for perm in itertools.permutations(range(len(formats[name].mode_order))):
            if perm != tuple(formats[name].mode_order) and perm != declared[name].mode_order:
                changed = {name: TensorFormat(formats[name].levels, perm)}
                if valid_with(changed):
                    return changed
    return {}


def _cheaper_layouts(prog: Program, region: Region, order: list[str], formats: dict, shapes: dict, free: set,
                     movable: set[str], stats=None) -> dict[str, TensorFormat]:
    """Layouts of `movable` tensors under which the group's default order costs at most
    `CHEAPER` times what `order` costs with the current ones (`nest_cost`), or {}."""
    other, better = _region_with_order(prog, region.group, formats, shapes, free | movable, stats=stats)
    if better is None or nest_cost(Nesting(other, better)) > CHEAPER * nest_cost(Nesting(region, order)):
        return {}
    return _changed_layouts(other, better, formats, movable)


def compile_schedule(program: Program, schedule: Schedule | str, shapes: dict | None = None,
                     canonical: bool = False, stats=None) -> Compiled:
    """Kernels for every group of `schedule`, lowered in dependency order.

    A tensor written by one group is stored in the order its dataflow order visits it. When a
    later group has no valid order with that layout, the writer is asked for the layout the
    reader needs (as if the schedule said `format.T=...;order=...`) and the groups are compiled
    again. Also compiled: the same where other layouts would at least halve a reader's cost
    (unless a writer then has no valid order); the one with less total `nest_cost` is returned.
    Layouts the schedule gives are never changed. With data statistics (`stats`, an
    `ir.stats.DataStats` of the inputs), default orders weigh loops by the data's densities."""
    if isinstance(schedule, str):
        schedule = Schedule.parse(schedule)
    prog = program if canonical else prepare(program, shapes)
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
    return sum(nest_cost(Nesting(k.region, k.order)) for k in compiled.kernels if k.region is not None)


def _negotiate(prog: Program, schedule: Schedule, shapes: dict | None, stats,
               cost_based: bool) -> tuple[Compiled, bool]:
    """Compile, asking writers for the layouts readers need (and, if `cost_based`, for those
    that halve a reader's cost), until every group compiles; also whether a layout was asked
    for only to save work."""
    pinned: dict[str, TensorFormat] = {}
    tried: set = set()
    optional: set[str] = set()  # asked for only because a reader gets cheaper
    before: tuple = ({}, set())  # pins and states before the first of those
    declined: set[str] = set()  # such layouts that led nowhere: not asked for again
    asked = False
    while True:
        try:
            return _compile(prog, schedule, shapes, pinned, negotiate=True, stats=stats, declined=declined,
                            cost_based=cost_based), asked
        except _LayoutWanted as wanted:
            asked = asked or wanted.optional
            state = frozenset((n, f.mode_order) for n, f in {**pinned, **wanted.formats}.items())
            if state in tried and wanted.optional:  # been there: keep the layouts as they are
                declined |= set(wanted.formats)
                continue
            if state in tried and optional:  # in circles since a layout was asked to save work: undo those
                pinned, tried = dict(before[0]), set(before[1])
                declined |= optional
                optional = set()
                continue
            if state in tried:  # negotiation goes round in circles: report the plain failure
                return _compile(prog, schedule, shapes, pinned, negotiate=False, stats=stats, declined=declined), asked
            if wanted.optional:
                if not optional:
                    before = (dict(pinned), set(tried))
                optional |= set(wanted.formats)
            pinned.update(wanted.formats)
            tried.add(state)
        except FuseflowError:
            if not optional:
                raise
            pinned, tried = dict(before[0]), set(before[1])  # a writer cannot produce what was asked to save work
            declined |= optional
            optional = set()


def _compile(prog: Program, schedule: Schedule, shapes: dict | None, pinned: dict,
             negotiate: bool, stats=None, declined: set = frozenset(), cost_based: bool = False) -> Compiled:
    all_shapes = infer_shapes(prog, shapes or {})
    formats: dict[str, TensorFormat] = dict(pinned)
    for name, text in schedule.formats.items():
        if name not in prog.tensors:
            raise UserError(f"format given for {name!r}, which the program does not have", "schedule")
        formats[name] = TensorFormat.parse(text, prog.tensors[name].rank, where=f"format.{name}")
    for name in prog.inputs:
        formats.setdefault(name, prog.tensors[name].format)
    for name, fmt in formats.items():
        check_format_blocks(name, fmt, all_shapes[name])
        if fmt.block and schedule.block is None:
            raise UserError(f"{name} is stored in blocks ({fmt}), which needs blocked execution", "schedule",
                            f"add the schedule item block={max(fmt.block)}")
    blocking = Blocking(schedule.block, all_shapes) if schedule.block is not None else None
    if blocking is not None:
        formats = {n: blocking.format(n, f) for n, f in formats.items()}
    region_shapes = blocking.grid if blocking is not None else all_shapes
    kernels = []
    groups = schedule.partition(prog)
    unknown = [k for k in schedule.orders if k >= len(groups)]
    if unknown:
        raise UserError(f"order given for group {unknown[0]}, but there are {len(groups)} groups", "schedule")
    unknown = [k for k in schedule.pars if k >= len(groups)]
    if unknown:
        raise UserError(f"par given for group {unknown[0]}, but there are {len(groups)} groups", "schedule")
    ops = {op_output(op): op for op in prog.ops}
    chosen_layout: set[str] = set()  # written tensors laid out by their writer's default order
    for k, group in enumerate(groups):
        kernel = Kernel(k, group)
        if not isinstance(ops[group[0]], IndexOp):
            if k in schedule.pars:
                raise UserError(f"group {k} is a reshape and cannot be parallelized", "schedule",
                                "parallelize a group of index ops")
            op = ops[group[0]]
            formats.setdefault(op.output, TensorFormat.dense(prog.tensors[op.output].rank))
            kernels.append(kernel)
            continue
        free = set(prog.inputs) - set(schedule.formats) if schedule.layout == "induced" else set()
        region = Region.build(prog, group, formats=formats, shapes=region_shapes, free=free)
        kernel.region = region
        wanted_order = schedule.orders.get(k)
        best = None
        if wanted_order is None:
            region, best = _region_with_order(prog, group, formats, region_shapes, free, region, stats)
            kernel.region = region
        listed = [v.strip() for v in wanted_order.split(",")] if wanted_order and not wanted_order.startswith("#") else None
        if listed is not None:  # the region variant the order belongs to
            movable_of = lambda r: {leaf.tensor for leaf in r.leaves} & chosen_layout  # noqa: E731
            region = kernel.region = _region_for_order(
                prog, region, listed, formats, region_shapes, free,
                lambda r: negotiate and bool(_layouts_for_order(prog, r, listed, formats, free, movable_of(r))))
        movable = {leaf.tensor for leaf in region.leaves} & chosen_layout
        if wanted_order is None and best is None and negotiate and movable:
            wanted = _wanted_layouts(prog, group, formats, region_shapes, free, movable, stats)
            if wanted:
                raise _LayoutWanted(wanted)
        optional = movable - set(pinned) - declined
        if wanted_order is None and best is not None and negotiate and cost_based and optional:
            wanted = _cheaper_layouts(prog, region, best, formats, region_shapes, free, optional, stats)
            if wanted:
                raise _LayoutWanted(wanted, optional=True)
        if listed is not None and negotiate and movable and sorted(listed) == sorted(region.vars) \
                and order_problem(region, listed):
            wanted = _layouts_for_order(prog, region, listed, formats, free, movable)
            if wanted:
                raise _LayoutWanted(wanted)
        kernel.order = _choose(region, wanted_order, k, best)
        kernel.table = FusionTable(region, kernel.order)
        tiling = blocking.tiling(region) if blocking is not None else None
        kernel.graph = lower(kernel.table, {n: formats[n] for n in region.outputs if n in formats}, tiling,
                             set(pinned) - set(schedule.formats))
        if blocking is not None:
            for name, meta in kernel.graph.tensors.items():
                blocking.full_metadata(meta, name)
        kernel.graph.name = f"k{k}:" + "+".join(region.outputs)
        if k in schedule.pars:
            kernel.graph = apply_pars(kernel.graph, schedule.pars[k], kernel.order, k)
        for name in region.outputs:
            if (name not in formats or name in pinned) and wanted_order is None and name not in schedule.formats:
                chosen_layout.add(name)
            formats[name] = _format_of(kernel.graph.tensors[name])
        kernels.append(kernel)
    return Compiled(prog, schedule, kernels, formats)
