"""Loop precedences that every valid order obeys, read off `Nesting`'s rules for whole orders,
and the fast proof they give that a region has no valid order.

A consumer reads a producer's values in loops of its own (`Nesting._check_read`): each variable
the producer's nest holds and does not reduce must be a loop of the consumer (after a buffered
read's renaming). The producer nests every variable of its scope (its own and its consumers')
up to its last own variable, so a scope variable the consumer lacks must come after all of the
producer's own variables. Likewise a written output's nest keeps only its output variables
(`Nesting._check_outputs`): any other variable of its scope that it does not reduce comes after
all of its own. A variable that would have to come after itself leaves no valid order.

In a fused GPT-3 layer these precedences put the layer's row and model dimensions before the
attention heads' variables: a walk over prefixes that obeys them settles in a hundred prefixes
what a walk checking `Nesting` alone does not settle in 20,000.

    >>> from fuseflow.frontend import from_mlir
    >>> from fuseflow.fusion.region import Region
    >>> r = Region.build(from_mlir("tests/mlir/matmul_chain.mlir"), ["T", "O"])
    >>> {v: sorted(before) for v, before in loop_precedences(r).items() if before}
    {'j': ['k'], 'l': ['i']}
    >>> has_no_valid_order(r)
    False
"""
from __future__ import annotations

from .nesting import OrderWalk
from .region import Region

PRECEDENCE_WORK = 20_000  # prefixes the precedence-pruned walk may visit before it gives up


def loop_precedences(region: Region) -> dict[str, set[str]]:
    """Each variable's variables that every valid order places before it: the stored level
    orders (`region.before`) and the read and output rules above."""
    preds: dict[str, set[str]] = {v: set() for v in region.vars}
    for a, b in region.before:
        preds[b].add(a)
    scopes = region.index.scopes
    for inst in region.instances:
        kept = scopes[inst.id] - set(inst.reduce_vars)
        for consumer_id, k in inst.consumers:
            rename = region.instance(consumer_id).rename.get(k, {})
            for x in kept:
                if rename.get(x, x) not in scopes[consumer_id]:
                    preds[x].update(inst.local_vars)
    for inst_id in region.output_instance.values():
        inst = region.instance(inst_id)
        outputs = {v for v in inst.out_indices if isinstance(v, str)}
        for x in scopes[inst_id] - set(inst.reduce_vars) - outputs:
            preds[x].update(inst.local_vars)
    return preds


def has_no_valid_order(region: Region, work: int = PRECEDENCE_WORK) -> bool:
    """Whether a walk over prefixes that obey `loop_precedences` (and that `Nesting` accepts)
    ends within `work` prefixes without an order: then no valid order exists. False when it
    finds one or runs out of work."""
    walk = OrderWalk(region, work, preds=loop_precedences(region))
    return walk.first() is None and walk.finished
