"""Validation of `fuseflow tune` on cases small enough to simulate their whole search space.

    .venv/bin/python bench/tune_validation.py [--cases gcn,sae] [--share 0.1] [--seeds 20]
        [--db out/tune_validation.db] [--json out/tune_validation.json]

Per case: the joint space (`tuner.exhaustive.joint_space`: every grouping, each layout rule,
each group's default order or one of its K cheapest other valid orders, and where enabled every
level format of the tensors written between kernels; candidates compiling to the same kernels
counted once) is simulated whole and verified, point by point (the runs are logged in `--db` and
a rerun resumes). Then:

- the tuner searches the same space with a simulation budget of `--share` of its size (presets
  included; its simulations are looked up in the exhaustive table, so it is judged on the same
  runs), and its best is compared with the space's optimum: regret = best / optimum - 1;
- random search with the same number of simulations, over `--seeds` seeds: each seed's regret,
  and in how many seeds the tuner did as well or better;
- Kendall's tau between estimated and simulated cycles over every point of the space, for the
  uncalibrated heuristic (`fusion.estimate`) and the calibrated one (`tuner/calibration`).

The calibration was fitted on other programs and data (`tuner.calibrate.TRAINING`).

    .venv/bin/python bench/tune_validation.py --budgeted gcn:dblp --budget 300 --mode sampled \
        [--sample-above 1e9] [--min-width 64] [--drop-presets full] [--json out/tune_sampled.json]

`--budgeted MODEL:DATASET`: one tune of a model too large to enumerate, in a time budget, with
every candidate simulated whole (`--mode whole`) or candidates above `--sample-above` token
events evaluated sampled with successive halving (`--mode sampled`, windows at least
`--min-width` rows), its answer then simulated whole: what each mode reaches in the same budget.
`--drop-presets full`: a preset left out of both (GCN DBLP `full`, 1.1e10 token events, would
take the whole budget and more either way).
"""
from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time

import fuseflow
from fuseflow.tuner.context import SimRow, TuneContext
from fuseflow.tuner.costs import Calibration, kendall_tau, load_calibration
from fuseflow.tuner.exhaustive import joint_space
from fuseflow.tuner.judge import Sampling
from fuseflow.tuner.log import TuneLog
from fuseflow.tuner.run import context_for
from fuseflow.tuner.search import Tuner
from fuseflow.tuner.space import SpaceSpec

INDUCED = ("induced",)
# name -> (how to load it, the space enumerated)
CASES = {
    "shared_filter": (("mlir", "tests/mlir/shared_filter.mlir", {}), SpaceSpec(orders=3, formats=True)),
    "shared_induced": (("mlir", "tests/mlir/shared_induced.mlir", {}), SpaceSpec(orders=3, formats=True)),
    "softmax_sparse": (("mlir", "tests/mlir/softmax_sparse.mlir", {}), SpaceSpec(orders=3, formats=True)),
    "masked_softmax": (("mlir", "tests/mlir/masked_softmax.mlir", {"density": 0.5}),
                       SpaceSpec(orders=3, formats=True)),
    "sae_small": (("model", "sae", {"dataset": "small"}), SpaceSpec(orders=3, formats=False)),
    "gcn_karate": (("model", "gcn", {"dataset": "karate"}), SpaceSpec(layouts=INDUCED, orders=0, formats=False)),
}


def load(how) -> TuneContext:
    kind, name, options = how
    if kind == "mlir":
        density = options.get("density", 0.1)
        return TuneContext.from_program(fuseflow.from_mlir(name), density=density, label=name, program_key=name,
                                        data_key=f"density={density:g}")
    options = dict(options)
    return context_for(name, options.pop("dataset"), **options)


def describe(spec: SpaceSpec) -> str:
    return (f"groupings x {'/'.join(spec.layouts)} x orders (default + {spec.orders})"
            + (" x formats" if spec.formats else ""))


def exhaustive(ctx: TuneContext, spec: SpaceSpec, db: str, progress: bool):
    """Every point of the space, simulated (logged in `db`, resumed from it)."""
    start = time.perf_counter()
    points = joint_space(ctx, spec)
    enumerated = time.perf_counter() - start
    log = TuneLog(db, ctx.program_key, ctx.data_key + " bench", ctx.seed)
    done = log.load()
    rows = {}
    for n, point in enumerate(points):
        row = done.get(point.schedule)
        if row is None:
            row = ctx.simulate(point.schedule)
            log.record(row, "exhaustive", kernels=len(point.costs))
        rows[point.skey] = row
        if progress and n % 50 == 0:
            print(f"  {n}/{len(points)} simulated ({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    log.close()
    return points, rows, enumerated, time.perf_counter() - start


def run_case(name: str, args) -> dict:
    how, spec = CASES[name]
    ctx = load(how)
    print(f"{name}: {len(ctx.graph)} ops", file=sys.stderr, flush=True)
    points, rows, enum_seconds, seconds = exhaustive(ctx, spec, args.db, not args.quiet)
    ok = [(p, rows[p.skey]) for p in points if rows[p.skey].ok]
    optimum = min(r.cycles for _, r in ok)
    budget = max(1, math.floor(args.share * len(points)))
    cal, identity = load_calibration(), Calibration.identity()
    sims = [r.cycles for _, r in ok]
    tau = {"uncalibrated": kendall_tau([identity.cycles(p.costs) for p, _ in ok], sims),
           "calibrated": kendall_tau([cal.cycles(p.costs) for p, _ in ok], sims)}
    outside = []

    def lookup(entry) -> SimRow:
        row = rows.get(entry.skey)
        if row is None:  # a point the enumeration did not hold (another region's orders): simulate it
            row = ctx.simulate(entry.schedule)
            rows[entry.skey] = row
            outside.append(entry.schedule)
        return row

    start = time.perf_counter()
    tuner = Tuner(ctx, budget=1e9, max_sims=budget, spec=SpaceSpec(**{**spec.__dict__, "lanes": 1}),
                  simulate=lookup, final_check=False)
    result = tuner.run()
    tune_seconds = time.perf_counter() - start
    regret = result.cycles / optimum - 1
    randoms = []
    for seed in range(args.seeds):
        rng = random.Random(seed)
        picked = rng.sample(points, min(budget, len(points)))
        best = min((rows[p.skey].cycles for p in picked if rows[p.skey].ok), default=math.inf)
        randoms.append(best / optimum - 1)
    best_preset = min((p["cycles"] for p in result.presets if p.get("cycles")), default=None)
    return {"case": name, "ops": len(ctx.graph), "space": describe(spec), "points": len(points),
            "verified": len(ok), "budget": budget, "simulated": result.evaluated["simulated"],
            "optimum": optimum, "best_preset": best_preset, "tuned": result.cycles, "schedule": result.schedule,
            "found_at": result.evaluated["winner_at"],
            "regret": regret, "random_median_regret": statistics.median(randoms),
            "random_best_regret": min(randoms), "random_worst_regret": max(randoms),
            "as_good_as_random": sum(regret <= r + 1e-12 for r in randoms), "seeds": args.seeds,
            "tau": tau, "outside": len(outside), "enumerate_seconds": round(enum_seconds, 1),
            "exhaustive_seconds": round(seconds, 1), "tune_seconds": round(tune_seconds, 1)}


def _pct(x) -> str:
    return f"{100 * x:.1f}%"


def _t(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def table(results: list[dict]) -> str:
    lines = ["| case | ops | space | points | sims (10%) | optimum | best preset | tuned | found at sim | regret | "
             "random: median regret (best..worst) | tuned >= random | tau uncal. | tau cal. |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['case']} | {r['ops']} | {r['space']} | {r['points']} | {r['simulated']} | "
                     f"{r['optimum']:,} | {r['best_preset']:,} | {r['tuned']:,} | {r['found_at']} | "
                     f"{_pct(r['regret'])} | "
                     f"{_pct(r['random_median_regret'])} ({_pct(r['random_best_regret'])}.."
                     f"{_pct(r['random_worst_regret'])}) | {r['as_good_as_random']}/{r['seeds']} | "
                     f"{_t(r['tau']['uncalibrated'])} | {_t(r['tau']['calibrated'])} |")
    return "\n".join(lines)


def budgeted(args) -> dict:
    """One tune of `args.budgeted` in `args.budget` seconds (see the module), its answer simulated whole."""
    model, dataset = args.budgeted.split(":")
    ctx = context_for(model, dataset)
    for name in filter(None, args.drop_presets.split(",")):
        del ctx.presets[name]
    sampling = Sampling(above=args.sample_above if args.mode == "sampled" else None, min_width=args.min_width)
    start = time.perf_counter()
    tuner = Tuner(ctx, budget=args.budget, sampling=sampling, progress=not args.quiet)
    result = tuner.run()
    wall = time.perf_counter() - start
    whole = result.cycles if result.mode == "whole" else ctx.simulate(result.schedule, as_given=True).cycles
    best = result.best_preset
    return {"case": args.budgeted, "mode": args.mode, "budget": args.budget, "sample_above": sampling.above,
            "min_width": args.min_width, "schedule": result.schedule, "cycles": result.cycles,
            "final_mode": result.mode, "cycles_low": result.cycles_low, "cycles_high": result.cycles_high,
            "whole_cycles": whole, "best_preset": best["name"], "best_preset_cycles": best["cycles"],
            "speedup_whole": round(best["cycles"] / whole, 4), "evaluated": result.evaluated,
            "presets": result.presets, "wall": round(wall, 1), "search_seconds": round(result.seconds, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--share", type=float, default=0.1, help="simulation budget as a share of the space (0.1)")
    ap.add_argument("--seeds", type=int, default=20, help="random-search seeds (20)")
    ap.add_argument("--db", default="out/tune_validation.db", help="log of the exhaustive simulations (resumable)")
    ap.add_argument("--json", default="out/tune_validation.json", help="results as JSON")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--budgeted", metavar="MODEL:DATASET", help="one tune in a time budget (see the module)")
    ap.add_argument("--budget", type=float, default=240.0, help="--budgeted: seconds of search (240)")
    ap.add_argument("--mode", choices=["whole", "sampled"], default="sampled", help="--budgeted: how to evaluate")
    ap.add_argument("--sample-above", type=float, default=1e9, help="--budgeted: sampled above this many tokens")
    ap.add_argument("--min-width", type=int, default=64, help="--budgeted: sampled windows' least width (rows)")
    ap.add_argument("--drop-presets", default="", help="--budgeted: presets left out (comma-separated)")
    args = ap.parse_args()
    if args.budgeted:
        found = budgeted(args)
        with open(args.json, "w") as handle:
            json.dump(found, handle, indent=1)
        print(json.dumps({k: v for k, v in found.items() if k not in ("presets",)}, indent=1))
        return
    results = []
    for name in args.cases.split(","):
        results.append(run_case(name.strip(), args))
        print(table(results[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    with open(args.json, "w") as handle:
        json.dump(results, handle, indent=1)
    print(table(results))


if __name__ == "__main__":
    main()
