"""Loop schedules: an unordered non-empty set of spatial dims plus an ordered list of temporal dims.

    >>> len(all_schedules())
    41
    >>> s = Schedule(frozenset("M"), ("L", "N", "K"))
    >>> s.name, rule3_ok(s), rule4_ok(s)
    ('[M] L,N,K', True, True)
    >>> sum(rule3_ok(s) for s in all_schedules()), sum(rule3_ok(s) and rule4_ok(s) for s in all_schedules())
    (10, 5)
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from fuseflow.errors import UserError

from ..problem.chains import DIMS


@dataclass(frozen=True)
class Schedule:
    """Spatial dims run on the grid of clusters; temporal dims are swept outer -> inner by each cluster."""

    spatial: frozenset
    temporal: tuple

    @property
    def name(self) -> str:
        return f"[{''.join(d for d in DIMS if d in self.spatial)}] {','.join(self.temporal)}"

    def position(self, dim: str) -> int:
        """Index of a temporal dim (0 = outermost); -1 if spatial."""
        return self.temporal.index(dim) if dim in self.temporal else -1


def all_schedules() -> list[Schedule]:
    """The 41 schedules: for each non-empty spatial set, every order of the remaining dims."""
    out = []
    for size in range(1, len(DIMS) + 1):
        for spatial in itertools.combinations(DIMS, size):
            rest = [d for d in DIMS if d not in spatial]
            out.extend(Schedule(frozenset(spatial), perm) for perm in itertools.permutations(rest))
    return out


def rule3_ok(s: Schedule) -> bool:
    """Rule 3 (activation): GEMM0's reduction K is temporal and innermost, so the activation
    only ever sees complete sums; K is split only inside a cluster (cls_k), never over the grid."""
    return "K" not in s.spatial and s.temporal[-1] == "K"


def rule4_ok(s: Schedule) -> bool:
    """Rule 4 (dependency): L is never spatial over the grid: each L tile needs all of C, which
    only blocks of one cluster can share (cls_l > 1 inside a cluster is fine)."""
    return "L" not in s.spatial


def parse_schedule(text: str) -> Schedule:
    """Parse the printed form, e.g. ``[M] L,N,K``.

    >>> parse_schedule("[MN] L,K") == Schedule(frozenset("MN"), ("L", "K"))
    True
    """
    text = text.strip()
    if not text.startswith("[") or "]" not in text:
        raise UserError(f"schedule {text!r} is not of the form '[SPATIAL] T1,T2,...'", "schedule")
    head, _, tail = text[1:].partition("]")
    spatial = frozenset(head)
    temporal = tuple(d.strip() for d in tail.split(",") if d.strip())
    if not spatial or sorted(list(spatial) + list(temporal)) != sorted(DIMS):
        raise UserError(f"schedule {text!r} must use each of M, N, K, L once with a non-empty spatial set",
                        "schedule")
    return Schedule(spatial, temporal)
