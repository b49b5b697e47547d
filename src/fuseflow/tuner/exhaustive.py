"""The joint search space enumerated whole, for cases small enough (the validation bench's
ground truth): every grouping, under each layout rule, with every combination of each group's
default order or one of its `spec.orders` cheapest other valid orders (by the compiler's
loop-work measure, as the search picks them), and, with `spec.formats`, every combination of
level formats of the tensors written between kernels. Candidates that compile to the same
kernels are one point.

    >>> import fuseflow
    >>> from fuseflow.tuner.context import TuneContext
    >>> from fuseflow.tuner.space import SpaceSpec
    >>> ctx = TuneContext.from_program(fuseflow.from_mlir("tests/mlir/shared_filter.mlir"))
    >>> points = joint_space(ctx, SpaceSpec(layouts=("induced",), orders=0, formats=False))
    >>> len(points), points[0].schedule
    (4, 'fusion=[T,Y,Z] layout=induced')
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

from ..errors import FuseflowError
from .context import TuneContext
from .costs import KernelCost
from .space import Candidate, SpaceSpec, groupings, level_formats, ordered_groups, other_orders, written_between


@dataclass
class Point:
    """One distinct candidate of the space: its schedule, its kernels' costs and structure key."""

    candidate: Candidate
    schedule: str
    costs: list[KernelCost]
    skey: tuple


class SpaceTooLarge(Exception):
    """The enumeration passed its limit."""


def joint_space(ctx: TuneContext, spec: SpaceSpec, limit: int | None = None,
                deadline: float | None = None) -> list[Point]:
    """Every distinct point of the space (see the module); `SpaceTooLarge` past `limit` points or
    the `deadline` (a `time.perf_counter()` value)."""
    points: list[Point] = []
    keys: set = set()

    def add(cand: Candidate, compiled=None) -> object:
        if deadline is not None and time.perf_counter() > deadline:
            raise SpaceTooLarge(f"not enumerated by the deadline ({len(points)} points so far)")
        try:
            compiled = compiled or ctx.compile(cand.schedule)
        except FuseflowError:
            return None
        costs = ctx.costs(compiled)
        key = tuple(k.key for k in costs)
        if key not in keys:
            keys.add(key)
            points.append(Point(cand, cand.schedule, costs, key))
            if limit is not None and len(points) > limit:
                raise SpaceTooLarge(f"more than {limit} points")
        return compiled

    for groups in groupings(ctx.graph):
        for layout in spec.layouts:
            base = Candidate(ordered_groups(ctx.canonical, groups), layout, block=ctx.block)
            compiled = add(base)
            if compiled is None:
                continue
            options = [[(k.index, None)] + [(k.index, o) for o in other_orders(k, spec.orders)]
                       for k in compiled.kernels if k.region is not None]
            for combo in itertools.product(*options):
                cand = base
                for index, order in combo:
                    if order is not None:
                        cand = cand.with_order(index, order)
                ordered = compiled if cand == base else add(cand)
                if ordered is None or not spec.formats:
                    continue
                choices = [[(name, None)] + [(name, f) for f in level_formats(meta.levels, meta.mode_order)]
                           for _, name, meta in written_between(ordered)]
                for formats in itertools.product(*choices):
                    if all(f is None for _, f in formats):
                        continue
                    with_formats = cand
                    for name, fmt in formats:
                        if fmt is not None:
                            with_formats = with_formats.with_format(name, fmt)
                    add(with_formats)
    return points
