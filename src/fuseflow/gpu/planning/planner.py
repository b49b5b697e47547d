"""Search engine: enumerate, prune (Rules 1-5), analyze and rank plans; keep the top K.

    >>> from fuseflow.gpu.problem.benchmarks import BENCHMARKS
    >>> r = plan_chain(BENCHMARKS["G2"], topk=2)
    >>> [k for k in r.counts], len(r.plans)
    (['original', 'rule1', 'rule2', 'rule3', 'rule4', 'rule5'], 2)
    >>> r.plans[0].volumes["global"] >= 128*512*2 + 512*256*2 + 256*64*2 + 128*64*2  # compulsory bytes
    True
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from fuseflow.errors import UserError

from ..problem.chains import Chain
from ..problem.device import LEVELS, Device
from .loop_schedules import Schedule
from .roofline import level_times
from .search_space import Candidates, candidates, cluster_ok, count_rules_1_to_4, derived, legal_schedules, tile_choices
from .traffic import TIERS, analyze

DEFAULT_TOPK = 11


@dataclass
class Plan:
    """One fused plan with its modelled traffic and time."""

    chain: str
    strategy: str
    schedule: Schedule
    cls: tuple
    blk: tuple
    placement: dict
    volumes: dict
    parts: dict
    times: dict
    cost: float
    bottleneck: str
    blocks: int
    clusters: int
    occupancy: float
    smem_used: int
    reg_used: int
    trips: dict = field(default_factory=dict)

    @property
    def shuffle_reduce(self) -> tuple[int, int]:
        return derived(*self.cls)

    def summary(self) -> str:
        cls = "x".join(map(str, self.cls))
        blk = "x".join(map(str, self.blk))
        return (f"{self.schedule.name:<12} {self.strategy[:4]:<4} cls {cls:<9} blk {blk:<15} "
                f"C:{self.placement['C']:<6} E:{self.placement['E_acc']:<6}")

    def to_json(self) -> dict:
        sh, cr = self.shuffle_reduce
        return {"chain": self.chain, "strategy": self.strategy, "schedule": self.schedule.name,
                "spatial": sorted(self.schedule.spatial), "temporal": list(self.schedule.temporal),
                "cls": dict(zip("mnkl", self.cls)), "blk": dict(zip("mnkl", self.blk)),
                "cls_shuffle": sh, "cls_reduce": cr, "trips": self.trips, "placement": self.placement,
                "volumes": self.volumes, "breakdown": self.parts, "times": self.times, "cost_s": self.cost,
                "bottleneck": self.bottleneck, "blocks_per_cluster": self.blocks, "clusters": self.clusters,
                "occupancy": self.occupancy, "smem_bytes_per_block": self.smem_used,
                "reg_bytes_per_block": self.reg_used}


@dataclass
class PlanResult:
    chain: Chain
    counts: dict
    plans: list
    evaluated: int
    seconds: float

    def to_json(self) -> dict:
        return {"chain": self.chain.to_json(), "counts": self.counts, "evaluated": self.evaluated,
                "search_seconds": self.seconds, "plans": [p.to_json() for p in self.plans]}


def make_plan(chain: Chain, device: Device, schedule: Schedule, strategy: str, cls: tuple, blk: tuple,
              compute: bool = True) -> Plan:
    """Analyze one explicit plan (it must pass Rules 1-4; Rule 5 is reported, not enforced)."""
    _check_explicit(chain, device, schedule, strategy, cls, blk)
    a = analyze(chain, device, schedule, strategy, Candidates.single(cls, blk))
    t = level_times(a.vol, a.blocks, a.blocks * a.clusters, device, chain.flops(), compute)
    return Plan(chain=chain.name, strategy=strategy, schedule=schedule, cls=tuple(cls), blk=tuple(blk),
                placement={"C": TIERS[a.c_tier[0]], "E_acc": TIERS[a.e_tier[0]]},
                volumes={k: int(v[0]) for k, v in a.vol.items()},
                parts={k: int(v[0]) for k, v in a.parts.items()},
                times={k[2:]: float(v[0]) for k, v in t.items() if k.startswith("t_")},
                cost=float(t["cost"][0]), bottleneck=str(t["bottleneck"][0]), blocks=int(a.blocks[0]),
                clusters=int(a.clusters[0]), occupancy=float(t["occupancy"][0]),
                smem_used=int(a.smem_used[0]), reg_used=int(a.reg_used[0]),
                trips={d: int(v[0]) for d, v in a.trips.items()})


def _check_explicit(chain, device, schedule, strategy, cls, blk):
    if strategy not in chain.strategies:
        raise UserError(f"strategy {strategy!r} does not apply to {chain.name}", "plan",
                        f"use one of {', '.join(chain.strategies)}")
    if not cluster_ok(*cls, strategy, device.max_cluster):
        raise UserError(f"cluster shape {cls} breaks Rule 2", "plan")
    kk = 1 if strategy == "spatial" else cls[2]
    for d, p, c, b in zip("MNKL", chain.padded, (cls[0], cls[1], kk, cls[3]), blk):
        if b not in tile_choices(p) or p % (c * b):
            raise UserError(f"tile {d}={b} x cluster {c} does not divide the padded extent {p}", "plan")
    if schedule not in legal_schedules():
        raise UserError(f"schedule {schedule.name} breaks Rule 3 or 4", "plan")


def _canonical(schedule: Schedule, trips: dict, i: int) -> tuple:
    """Schedules that differ only in loops of one trip run the same code: key them together. K is
    always the innermost loop, so its trip count (the K step) is left to the volumes to tell apart."""
    spatial = tuple(d for d in "MN" if d in schedule.spatial and trips[d][i] > 1)
    temporal = tuple(d for d in schedule.temporal if d != "K" and trips[d][i] > 1)
    return spatial, temporal


def plan_chain(chain: Chain, device: Device | None = None, topk: int = DEFAULT_TOPK, compute: bool = True,
               strategies=None, restrict=None) -> PlanResult:
    """Search all plans of ``chain``; return the counts after each rule and the ``topk`` best plans.

    ``restrict(schedule, analysis)`` may return a boolean mask of extra conditions (baselines use it);
    ``compute=False`` ranks by memory levels only, as the paper's cost model does.
    """
    device = device or Device()
    if not isinstance(topk, int) or topk < 1:
        raise UserError(f"topk must be a positive integer, got {topk!r}", "plan")
    start = time.perf_counter()
    strategies = strategies or chain.strategies
    counts = count_rules_1_to_4(chain, device.max_cluster, strategies)
    groups, cost_all, tie_all = [], [], []
    survivors = 0
    for strategy in strategies:
        cand = candidates(chain, strategy, device.max_cluster)
        for schedule in legal_schedules():
            a = analyze(chain, device, schedule, strategy, cand)
            ok = np.flatnonzero(a.rule5_ok & (restrict(schedule, a) if restrict else True))
            survivors += len(ok)
            if not len(ok):
                continue
            vol = {k: v[ok] for k, v in a.vol.items()}
            t = level_times(vol, a.blocks[ok], (a.blocks * a.clusters)[ok], device, chain.flops(), compute)
            groups.append((strategy, schedule, cand.take(ok), {d: v[ok] for d, v in a.trips.items()}, vol))
            cost_all.append(t["cost"])
            # ties (common: one bottleneck level) go to the plan that loads the other levels least
            tie_all.append(sum(t[f"t_{lv}"] for lv in LEVELS) + t["t_compute"])
    counts["rule5"] = survivors
    plans = []
    if groups:
        sizes = np.cumsum([0] + [len(c) for c in cost_all])
        cost, tie = np.concatenate(cost_all), np.concatenate(tie_all)
        order = np.lexsort((tie, cost))
        seen = set()
        for flat in order:
            g = int(np.searchsorted(sizes, flat, side="right") - 1)
            i = int(flat - sizes[g])
            strategy, schedule, cand, trips, vol = groups[g]
            cls, blk = cand.row(i)
            # plans that differ only in loops of one trip, or in tiles that change no modelled
            # volume, are the same plan to this model: list the first of each
            key = (strategy, _canonical(schedule, trips, i), cls, tuple(int(vol[lv][i]) for lv in LEVELS))
            if key in seen:
                continue
            seen.add(key)
            plans.append(make_plan(chain, device, schedule, strategy, cls, blk, compute))
            if len(plans) == topk:
                break
    return PlanResult(chain=chain, counts=counts, plans=plans, evaluated=survivors,
                      seconds=time.perf_counter() - start)

