"""What a GPU run does, as jobs a child process runs one by one: the kernels to run (each chain's top
plans with their code path and launch parameters), one small kernel per code path for the smoke stage,
and the job records the child reads.

A code path is what changes the kernel's code: strategy, all-exchange, shuffle, reduce-scatter, how E is
written (plain stores, bulk or atomic reductions) and the cluster size.

    >>> from fuseflow.gpu.problem.benchmarks import BENCHMARKS
    >>> planned = planned_kernels([BENCHMARKS["G1"], BENCHMARKS["G2"]], topk=2)
    >>> [(k.chain.name, k.rank) for k in planned]
    [('G1', 1), ('G1', 2), ('G2', 1), ('G2', 2)]
    >>> planned[0].path
    'standard shuffle bulk-reduce cls16'
    >>> len(smoke_picks(planned)) == len({k.path for k in planned})
    True
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from ..kernels.covering_plans import ranked_layouts
from ..kernels.kernel_layout import KernelLayout
from ..kernels.reproducer import LaunchParams, launch_of
from ..planning.planner import Plan
from ..problem.chains import Chain
from ..problem.device import Device

STAGES = ("env", "smoke", "measure", "eager", "compile")


def code_path(layout: KernelLayout) -> str:
    """The kernel code path of a layout, as a short name."""
    f = layout.features()
    parts = [f["strategy"]] + [name for name in ("exchange", "shuffle", "reduce_scatter") if f[name]]
    parts.append("bulk-reduce" if f["bulk_reduce"] else "atomic-reduce" if f["atomic_reduce"] else "store")
    return " ".join(parts + [f"cls{f['cluster_size']}"])


@dataclass(frozen=True)
class PlannedKernel:
    chain: Chain
    rank: int
    plan: Plan
    path: str
    launch: LaunchParams


def planned_kernels(chains, topk: int = 4, dtype: str = "fp16", device: Device | None = None,
                    skipped: list | None = None) -> list[PlannedKernel]:
    """Each chain's top-``topk`` plans the generator builds; the others go to ``skipped`` (covering_plans.Skipped)."""
    return [PlannedKernel(it.chain, it.rank, it.plan, code_path(it.layout), launch_of(it.layout, it.plan))
            for it in ranked_layouts(chains, topk, device, dtype, skipped)]


def smoke_picks(planned) -> list[PlannedKernel]:
    """One kernel per code path: the one with the fewest blocks times rows of M (the quickest to run)."""
    best: dict[str, PlannedKernel] = {}
    for k in planned:
        size = k.launch.grid_blocks * k.chain.M
        if k.path not in best or size < best[k.path].launch.grid_blocks * best[k.path].chain.M:
            best[k.path] = k
    return list(best.values())


@dataclass(frozen=True)
class KernelJob:
    """One thing a child runs: ``env`` (the GPU's facts), ``smoke`` (one launch, checked), ``measure`` (checked
    and timed), ``eager`` (PyTorch unfused timed) or ``compile`` (torch.compile timed)."""

    stage: str
    chain: str               # benchmark id (or chain text, as for `gpu plan`)
    rank: int = 0            # the plan's place in the planner's ranking (0: not a plan)
    dtype: str = "fp16"
    reps: int = 25
    timeout_s: float = 30.0  # from the job's start record to its done record
    path: str = ""
    library: str = ""        # the plan's compiled library (smoke, measure)
    symbol: str = ""         # its launcher
    launch: dict | None = None

    @property
    def key(self) -> str:
        return f"{self.stage}:{self.chain}:{self.rank}"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "KernelJob":
        return cls(**data)


def write_jobs(path, jobs) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump([j.to_json() for j in jobs], f)


def read_jobs(path) -> list[KernelJob]:
    with open(path, encoding="utf-8") as f:
        return [KernelJob.from_json(d) for d in json.load(f)]
