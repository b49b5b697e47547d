"""Compile a Program under a Schedule into kernels: one SamGraph per fused group.

    >>> from fuseflow.frontend import from_mlir
    >>> c = compile_schedule(from_mlir("tests/mlir/matmul_chain.mlir"), "unfused")
    >>> [(k.group, ",".join(k.order)) for k in c.kernels]
    [(['T'], 'i,k,j'), (['O'], 'i,k,j')]
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from ..errors import UserError
from ..ir.canonicalize import drop_unit_variables, inline_copies
from ..ir.formats import LEVEL_FORMATS, TensorFormat
from ..ir.program import IndexOp, Program, op_output
from ..ir.verify import infer_shapes
from ..sam.graph import SamGraph
from ..schedule.schedule import Schedule
from .blocking import Blocking, check_format_blocks
from .lower import lower
from .nesting import Nesting, default_order, order_problem, topological_orders, valid_orders
from .parallel import apply_pars
from .region import Region
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


def prepare(program: Program, shapes: dict | None = None) -> Program:
    """The canonical form that schedules name ops in: unit-extent variables become constant
    indices, then copies (transposes, broadcasts, unit reshapes) are inlined."""
    return inline_copies(drop_unit_variables(program, infer_shapes(program, shapes or {}, allow_dynamic=True)))


def _format_of(meta: dict) -> TensorFormat:
    block = tuple(meta["block"]) if meta.get("block") else None
    return TensorFormat(tuple(LEVEL_FORMATS[x] for x in meta["levels"]), tuple(meta["mode_order"]), block)


def _choose(region: Region, wanted: str | None, k: int) -> list[str]:
    if wanted is None:
        best = default_order(region)
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


def compile_schedule(program: Program, schedule: Schedule | str, shapes: dict | None = None,
                     canonical: bool = False) -> Compiled:
    """Kernels for every group of `schedule`, lowered in dependency order."""
    if isinstance(schedule, str):
        schedule = Schedule.parse(schedule)
    prog = program if canonical else prepare(program, shapes)
    all_shapes = infer_shapes(prog, shapes or {})
    formats: dict[str, TensorFormat] = {}
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
        kernel.order = _choose(region, schedule.orders.get(k), k)
        kernel.table = FusionTable(region, kernel.order)
        tiling = blocking.tiling(region) if blocking is not None else None
        kernel.graph = lower(kernel.table, {n: formats[n] for n in region.outputs if n in formats}, tiling)
        if blocking is not None:
            for name, meta in kernel.graph.tensors.items():
                blocking.full_metadata(meta, name)
        kernel.graph.name = f"k{k}:" + "+".join(region.outputs)
        if k in schedule.pars:
            kernel.graph = apply_pars(kernel.graph, schedule.pars[k], kernel.order, k)
        for name in region.outputs:
            formats[name] = _format_of(kernel.graph.tensors[name])
        kernels.append(kernel)
    return Compiled(prog, schedule, kernels, formats)


def group_regions(program: Program, schedule: Schedule | str, shapes: dict | None = None):
    """(group, region) pairs with earlier groups compiled as the schedule says (for listing orders)."""
    compiled = compile_schedule(program, schedule, shapes)
    return [(k.group, k.region) for k in compiled.kernels]
