"""The tuner's answer assembled once its search ends: the winner run again as `fuseflow
simulate` runs it, with what the search evaluated, its rank quality and its Pareto fronts
(`result.TuneResult`).
"""
from __future__ import annotations

from ..errors import UserError
from .context import SimRow
from .costs import kendall_tau
from .judge import load
from .result import Point, TuneResult, front


def simulated_points(tuner) -> list[Point]:
    """Every simulated schedule as the Pareto fronts see it (presets named: `unfused/partial`
    where two presets are one schedule string)."""
    names: dict[str, list[str]] = {}
    for name, text in tuner.ctx.presets.items():
        names.setdefault(text, []).append(name)
    return [Point(e.schedule, e.sim.cycles, e.sim.traffic, e.sim.max_occupancy or 0,
                  "/".join(names.get(e.schedule, ())),
                  *((e.sim.cycles_low, e.sim.cycles_high) if e.sim.sampled else ()))
            for e in tuner._simulated()]

def answer(tuner, presets: list[dict]) -> TuneResult:
    """The search's result: the answer (the incumbent where sampled, else the best simulated
    candidate) run once more from its string (`final_run`), with the presets, the counts, the
    rank quality of the estimates and both Pareto fronts."""
    best = tuner._best()
    if not best:
        tuner.refuse_if_too_large()
        raise UserError("no candidate simulated and verified, the presets included", "tune",
                        "raise --budget, or check that the model simulates (fuseflow simulate)")
    sampled = any(e.rung is not None for e in best)
    winner = tuner.incumbent if sampled and tuner.incumbent is not None else best[0]
    row, reproduced = final_run(tuner, winner) if tuner.final_check else (winner.sim, True)
    one_lane = None
    if tuner.spec.lanes > 1:
        plain = [e for e in best if e.candidate is None or not e.candidate.pars]
        if plain:
            one_lane = {"schedule": plain[0].schedule, "cycles": plain[0].sim.cycles,
                        "traffic_bytes": plain[0].sim.traffic}
    simulated = tuner._simulated()
    tau = {}
    pairs = [(tuner.identity.cycles(e.costs), tuner.cal.cycles(e.costs), e.sim.cycles)
             for e in simulated if e.costs]
    if len(pairs) >= 3:
        tau = {"n": len(pairs), "uncalibrated": kendall_tau([p[0] for p in pairs], [p[2] for p in pairs]),
               "calibrated": kendall_tau([p[1] for p in pairs], [p[2] for p in pairs])}
    compiled = [e for e in tuner.entries.values() if e.costs is not None]
    points = simulated_points(tuner)
    evaluated = {"simulated": tuner.sims, "resumed": tuner.resumed, "winner_at": winner.order,
                 "presets_given": sorted(n for n, r in tuner.known_presets.items() if r.ok),
                 "whole": tuner.sims - sum(tuner.ladder.evaluations), "sampled": tuner.ladder.counts(),
                 "promoted": len(tuner.ladder.promoted), "sample_above": tuner.sampling.above,
                 "on_cluster": tuner.pool.submitted if tuner.pool is not None else 0,
                 "simulated_now": tuner.sims - tuner.resumed,
                 "estimated": sum(1 for e in compiled if e.sim is None),
                 "too_large": sum(1 for e in compiled if e.too_large),
                 "rejected": tuner.rejected, "timed_out": tuner.timeouts,
                 "failed": sum(1 for e in tuner.entries.values() if e.sim is not None and not e.sim.ok) +
                 len(tuner.failed_rows),
                 "compile_seconds": round(tuner.ctx.compile_seconds, 2),
                 "simulate_seconds": round(tuner.sim_seconds, 2), "space": tuner.queue.space}
    kernels = []
    if winner.costs is not None:
        for k, c in zip(winner.costs, row.kernel_cycles):
            kernels.append({"group": list(k.key[0]), "order": list(k.key[1]), "cycles": c})
    return TuneResult(tuner.ctx.label or tuner.ctx.program.name, winner.schedule, row.cycles, bool(row.verified),
                      row.traffic, row.max_occupancy or 0, tuner.objective, tuner.spec.lanes, presets, evaluated,
                      tuner._elapsed(), kernels,
                      front(points, "traffic_bytes"),
                      tau, one_lane, reproduced,
                      calibration="calibrated" if not tuner.cal.is_identity else "uncalibrated",
                      pareto_buffering=front(points, "max_fifo"), points=points, mode=row.mode,
                      cycles_low=row.cycles_low if row.sampled else None,
                      cycles_high=row.cycles_high if row.sampled else None)

def final_run(tuner, winner) -> tuple[SimRow, bool]:
    """The answer run again from its string as `fuseflow simulate --schedule` runs it: whole
    where it was evaluated whole or is small enough (`Sampling.final_whole`), else sampled to
    the last rung's error as `fuseflow simulate --error E --sample-seed S` samples it; and
    whether that run reproduces the search's (the same cycles; a whole run of a candidate
    the search sampled: its cycles within the sampled interval). A preset given as already
    simulated (`Tuner.known_presets`) is not run again."""
    row = winner.sim
    if any(row is given for given in tuner.known_presets.values()):
        return row, True  # a preset as given (a suite's verified run of it): nothing to run again
    if winner.rung is None or tuner.sampling.final_whole(load(winner.costs, tuner.ctx.block)):
        again = tuner.ctx.simulate(winner.schedule, as_given=True)
        low, high = row.interval()
        reproduced = again.ok and low <= again.cycles <= high
    else:
        again = tuner.ctx.simulate(winner.schedule, as_given=True, sample=tuner.sampling.plan(tuner.sampling.top))
        reproduced = again.ok and winner.rung == tuner.sampling.top and again.cycles == row.cycles
    return (again if again.ok else row), reproduced
