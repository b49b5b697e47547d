"""The regions a group may be built as (how producers are shared, copied or buffered), in the
order the compiler tries them, and the first that has a default order or admits a given one.

    >>> from fuseflow.frontend import from_mlir
    >>> p = from_mlir("tests/mlir/matmul_chain.mlir")
    >>> region, order = region_with_order(p, ["T", "O"], {}, None, set())
    >>> order, region.variant.share_covered
    (['i', 'l', 'k', 'j'], True)
"""
from __future__ import annotations

from ..ir.program import Program
from .nesting import order_problem
from .region import Region, buffer_candidates
from .search import PROOF_WORK, default_order

MAX_BUFFER_TRIALS = 12  # single buffered uses tried for a group without a valid order


def region_variants(prog: Program, group: list[str], formats: dict, shapes: dict | None, free: set,
                    first: Region | None = None):
    """The group's regions in the order the compiler tries them: the region sharing covered
    producers between outputs (`Region.build`; outputs stored with another variable outermost
    than the rest keep their own, `apart_outputs`), then the same with one use read through a
    buffer (`Region.build(buffered=...)`, at most `MAX_BUFFER_TRIALS` uses); both again with
    every written output computing its own producers (`share_covered=False`); last the region
    where reductions keep their variables to themselves (`separate_reductions=True`)."""
    first = first or Region.build(prog, group, formats=formats, shapes=shapes, free=free)
    apart = apart_outputs(first, formats)
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


def region_with_order(prog: Program, group: list[str], formats: dict, shapes: dict | None, free: set,
                      region: Region | None = None, stats=None,
                      proof_work: int = PROOF_WORK) -> tuple[Region, list[str] | None]:
    """The first of the group's `region_variants` that has a default order (weighing loops by
    the data `stats` if given; `proof_work`: see `search.default_order`), with that order; else
    the first region and None."""
    first = None
    for candidate in region_variants(prog, group, formats, shapes, free, region):
        first = first or candidate
        candidate.stats = stats
        order = default_order(candidate, proof_work=proof_work)
        if order is not None:
            return candidate, order
    return first, None


def region_for_order(prog: Program, region: Region, order: list[str], formats: dict, shapes: dict | None,
                     free: set, fixable=None) -> Region:
    """The first of the group's `region_variants` in which the explicit `order` is valid; else
    the first whose variables it lists that `fixable(region)` accepts (other layouts of earlier
    groups' tensors would make the order valid); else the first whose variables it lists; else
    `region`."""
    if sorted(order) == sorted(region.vars) and not order_problem(region, order):
        return region
    listing = []
    for candidate in region_variants(prog, region.group, formats, shapes, free, region):
        if sorted(order) == sorted(candidate.vars):
            if not order_problem(candidate, order):
                return candidate
            listing.append(candidate)
    return next((r for r in listing if fixable is not None and fixable(r)), listing[0] if listing else region)


def apart_outputs(region: Region, formats: dict) -> set[str]:
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
