"""The measured chains rebuilt from a run's result lines, complete or not: each chain's plans (measured,
or failed with the reason), PyTorch eager and torch.compile where they ran, plus the smoke and
sanitizer verdicts and the GPU's facts.

    >>> from fuseflow.gpu.measuring.result_log import Record
    >>> facts = {"dims": [1, 16, 16, 16], "flops": 1.0, "dtype": "fp16", "predicted_unfused_us": 2.0,
    ...          "bottleneck": "l2", "plans": {"1": {"plan": "p", "predicted_us": 1.0, "volumes": {},
    ...                                              "cluster_size": 2, "occupancy": 1.0}}}
    >>> run = summarize_run([Record("chain", "X", chain="X", data=facts),
    ...                  Record("done", "measure:X:1", "measure", "X", 1, status="timeout", reason="hung")])
    >>> run.rows[0].fused.error
    'timeout: hung'
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .measurements import ChainMeasurement, PlanMeasurement
from .result_log import final_results
from .timing_stats import Timing


@dataclass(frozen=True)
class RunSummary:
    rows: list                  # ChainMeasurement per chain, in the run's order
    gpu: dict | None            # the env job's facts (name, sms, l2_bytes, copy_bandwidth, versions)
    checks: list                # lines: smoke and sanitizer verdicts, failures by stage
    complete: bool              # every chain's planned jobs have a result


def _plan(chain: str, rank: int, facts: dict, rec) -> PlanMeasurement:
    if rec is not None and rec.status in ("ok", "wrong") and rec.data.get("chain"):
        return PlanMeasurement.from_json(rec.data)
    info = facts["plans"].get(str(rank), {"plan": "-", "predicted_us": math.nan, "volumes": {}, "cluster_size": 0,
                                          "occupancy": 0.0})
    why = f"{rec.status}: {rec.reason}" if rec is not None else "no result: the run ended before it"
    return PlanMeasurement(chain, rank, info["plan"], info["predicted_us"], None, math.nan, False, info["volumes"],
                           info["cluster_size"], info["occupancy"], why)


def summarize_run(records) -> RunSummary:
    """The run's chains from its records (the last result of each job counts)."""
    records = list(records)
    final = final_results(records)
    facts = {}
    for r in records:
        if r.event == "chain":
            facts[r.chain] = r.data
    rows, missing = [], 0
    for chain, f in facts.items():
        ranks = sorted({int(k) for k in f["plans"]} | {r.rank for r in final.values()
                                                        if r.chain == chain and r.stage == "measure"})
        plans = []
        for rank in ranks:
            rec = final.get(f"measure:{chain}:{rank}")
            missing += rec is None
            if rec is not None and rec.status == "skipped" and rec.reason.startswith("not generated"):
                continue
            plans.append(_plan(chain, rank, f, rec))
        notes = []
        timings = {}
        for stage in ("eager", "compile"):
            rec = final.get(f"{stage}:{chain}:0")
            if rec is not None and rec.status == "ok":
                timings[stage] = Timing.from_json(rec.data)
            else:
                timings[stage] = None
                notes.append(f"{'PyTorch eager' if stage == 'eager' else 'torch.compile'} not measured: "
                             + (f"{rec.status}: {rec.reason}" if rec else "no result"))
        rows.append(ChainMeasurement(chain, tuple(f["dims"]), f["flops"], plans, timings["eager"], timings["compile"],
                                     f["predicted_unfused_us"], f["bottleneck"], f.get("dtype", "fp16"), notes))
    env = final.get("env:-:0")
    return RunSummary(rows, env.data if env is not None and env.status == "ok" else None, check_lines(records),
                      missing == 0 and bool(facts))


def check_lines(records) -> list[str]:
    """Smoke verdicts per code path, the sanitizer's, and the count of results per stage and status."""
    final = final_results(records)
    out = []
    smoke = [r for r in final.values() if r.stage == "smoke"]
    if smoke:
        bad = [r for r in smoke if r.status != "ok"]
        out.append(f"smoke: {len(smoke) - len(bad)} of {len(smoke)} code paths passed")
        out += [f"smoke failed: {r.path} ({r.chain} #{r.rank}): {r.status}: {r.reason}" for r in bad]
    sanitized = [r for r in records if r.event == "sanitize"]
    if any(r.key == "skipped" for r in sanitized):
        out.append("compute-sanitizer: not found, skipped")
    for tool in ("memcheck", "racecheck"):
        runs = [r for r in sanitized if r.key == tool]
        if runs:
            bad = [r for r in runs if r.status != "ok"]
            out.append(f"{tool}: {len(runs) - len(bad)} of {len(runs)} code paths clean")
            out += [f"{tool} {r.status}: {r.path} ({r.chain} #{r.rank}): {r.reason}" for r in bad]
    counts: dict = {}
    for r in final.values():
        counts.setdefault(r.stage, {}).setdefault(r.status, 0)
        counts[r.stage][r.status] += 1
    for stage, by in counts.items():
        out.append(f"{stage}: " + ", ".join(f"{n} {s}" for s, n in sorted(by.items())))
    return out
