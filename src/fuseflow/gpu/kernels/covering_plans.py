"""Which ranked plans exercise which code paths of the generated kernel, and a small set of plans that
covers them all (what the compile test builds, so it stays short).

    >>> from fuseflow.gpu.problem.benchmarks import BENCHMARKS
    >>> listed = ranked_layouts([BENCHMARKS["G1"], BENCHMARKS["S8"]], topk=3)
    >>> picked = covering_set(listed)
    >>> feature_values(picked) == feature_values(listed)
    True
"""
from __future__ import annotations

from dataclasses import dataclass

from fuseflow.errors import NotSupported

from ..planning.planner import Plan, plan_chain
from ..problem.chains import Chain
from ..problem.device import Device
from .kernel_layout import KernelLayout, kernel_layout, unsupported_reason


@dataclass(frozen=True)
class RankedLayout:
    chain: Chain
    rank: int            # 1-based place in the planner's top K
    plan: Plan
    layout: KernelLayout


@dataclass(frozen=True)
class Skipped:
    chain: Chain
    rank: int
    reason: str


def ranked_layouts(chains, topk: int = 11, device: Device | None = None, dtype: str = "fp16",
                   skipped: list | None = None) -> list[RankedLayout]:
    """The kernel layouts of every chain's top-K plans; plans the generator cannot build go to ``skipped``."""
    device = device or Device()
    out = []
    for chain in chains:
        for rank, plan in enumerate(plan_chain(chain, device, topk=topk).plans, 1):
            reason = unsupported_reason(chain, plan)
            if reason is None:
                try:
                    layout = kernel_layout(chain, plan, device, dtype)
                except NotSupported as err:
                    reason = err.what
            if reason:
                if skipped is not None:
                    skipped.append(Skipped(chain, rank, reason))
                continue
            out.append(RankedLayout(chain, rank, plan, layout))
    return out


def feature_values(listed) -> set:
    """Every (feature, value) pair the listed layouts take."""
    return {(k, v) for item in listed for k, v in item.layout.features().items()}


def covering_set(listed) -> list[RankedLayout]:
    """A greedy small subset of ``listed`` that takes every (feature, value) pair the whole list takes."""
    need, picked = feature_values(listed), []
    while need:
        best = max(listed, key=lambda it: len(need & set(it.layout.features().items())))
        picked.append(best)
        need -= set(best.layout.features().items())
    return picked
