"""Layouts a reading group asks of tensors written by earlier groups (`LayoutRequest`): the mode
orders under which it gets a valid order at all, under which a given order becomes valid, or
under which its default order gets much cheaper. The compiler (`compile.compile_schedule`)
pins what is asked and compiles again.

    >>> from fuseflow.ir.formats import TensorFormat
    >>> r = LayoutRequest({"T": TensorFormat.parse("dense,dense;order=1,0")})
    >>> str(r), r.optional
    ('T: dense,dense;order=1,0', False)
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from ..ir.formats import TensorFormat
from ..ir.program import Program
from .cost import nest_cost
from .nesting import Nesting, order_problem
from .region import Region
from .variants import region_with_order

MAX_LAYOUT_TRIALS = 64  # candidate layouts tried for one group (each costs an order search)
CHEAPER = 0.5  # a reader asks for other layouts of its inputs when they at least halve its order's cost
TRIAL_PROOF_WORK = 0  # layout trials look for orders by search alone, not by walking every prefix


@dataclass(frozen=True)
class LayoutRequest:
    """A group needs tensors written by earlier groups stored in other mode orders (or, if
    `optional`, its order gets much cheaper with them)."""

    formats: dict
    optional: bool = False

    def __str__(self) -> str:
        return ", ".join(f"{n}: {f}" for n, f in self.formats.items())


def induced_layouts(region: Region, order: list[str], formats: dict, movable: set[str]) -> dict[str, TensorFormat]:
    """The mode order `order` visits each `movable` tensor's (free) leaf in, with its stored levels."""
    pos = {v: k for k, v in enumerate(order)}
    induced: dict[str, TensorFormat] = {}
    for leaf in region.leaves:
        if leaf.tensor in movable and leaf.tensor not in induced:
            leaf.induce(pos)
            induced[leaf.tensor] = TensorFormat(formats[leaf.tensor].levels, leaf.format.mode_order)
    return induced


def changed_layouts(region: Region, order: list[str], formats: dict, movable: set[str]) -> dict[str, TensorFormat]:
    """The `induced_layouts` that differ from the tensors' current ones."""
    return {n: f for n, f in induced_layouts(region, order, formats, movable).items()
            if f.mode_order != formats[n].mode_order}


def layouts_for_order(prog: Program, region: Region, order: list[str], formats: dict, free: set,
                      movable: set[str]) -> dict[str, TensorFormat]:
    """Mode orders of `movable` tensors under which the schedule's explicit `order` is valid, or {}."""
    trial = Region.build(prog, region.group, formats=formats, shapes=region.shapes, free=free | movable,
                         **region.variant.options())
    if sorted(trial.vars) != sorted(order) or order_problem(trial, order):
        return {}
    return changed_layouts(trial, order, formats, movable)


def wanted_layouts(prog: Program, group: list[str], formats: dict, shapes: dict, free: set,
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
        return region_with_order(prog, group, {**formats, **candidate}, shapes, free, stats=stats,
                                 proof_work=TRIAL_PROOF_WORK)[1] is not None

    declared = {n: TensorFormat(formats[n].levels, prog.tensors[n].format.mode_order) for n in sorted(movable)}
    candidates = [declared]
    region, order = region_with_order(prog, group, formats, shapes, free | movable, stats=stats,
                                      proof_work=TRIAL_PROOF_WORK)
    if order is not None:
        candidates.append(induced_layouts(region, order, formats, movable))
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


def cheaper_layouts(prog: Program, region: Region, order: list[str], formats: dict, shapes: dict, free: set,
                    movable: set[str], stats=None) -> dict[str, TensorFormat]:
    """Layouts of `movable` tensors under which the group's default order costs at most
    `CHEAPER` times what `order` costs with the current ones (`nest_cost`), or {}."""
    other, better = region_with_order(prog, region.group, formats, shapes, free | movable, stats=stats,
                                      proof_work=TRIAL_PROOF_WORK)
    if better is None or nest_cost(Nesting(other, better)) > CHEAPER * nest_cost(Nesting(region, order)):
        return {}
    return changed_layouts(other, better, formats, movable)
