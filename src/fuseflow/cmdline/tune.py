"""`fuseflow tune MODEL`: the best schedule found in a time budget, simulator in the loop
(`fuseflow.tune`; the search: `tuner.search`); `--calibrate` refits the heuristic.

    fuseflow tune --model gcn --dataset karate --budget 120 --json
    fuseflow tune tests/mlir/softmax_sparse.mlir --objective pareto --db tune.db --plot fronts.png
    fuseflow tune --model gcn --dataset dblp --budget 600 --scheduler local --workers 2
    fuseflow tune --calibrate [--hbm]
"""
from __future__ import annotations

import json
import os
import sys

from ..errors import UserError
from ..sim.hw import HwConfig
from .args import budget_of
from .source import load_source


def _calibrate(args, hw) -> int:
    from ..tuner.calibrate import calibrate  # noqa: PLC0415

    if args.source or args.torch or (args.model and args.model != args.default_model):
        raise UserError("--calibrate refits on the training set and takes no model", "--calibrate",
                        "drop the model, or drop --calibrate")
    calibration = calibrate(hw=hw, progress=not args.quiet)
    if args.json:
        print(json.dumps(calibration.to_json(), indent=1))
        return 0
    fitted = calibration.fitted
    before, after = fitted["rms_log_error_before"], fitted["rms_log_error_after"]
    print(f"calibrated the heuristic on {fitted['candidates']} candidates ({fitted['kernels']} kernels) of "
          f"{len(fitted['cases'])} cases for hardware '{calibration.hw}': rms log error of kernels "
          f"{before['kernels']} -> {after['kernels']}, of candidates within a case {before['candidates_relative']} "
          f"-> {after['candidates_relative']}")
    print(f"{'case':<60} {'candidates':>10} {'tau before':>10} {'tau after':>10}")
    for case, row in fitted["cases"].items():
        print(f"{case[:60]:<60} {row['candidates']:>10} {_fmt(row['uncalibrated']):>10} {_fmt(row['calibrated']):>10}")
    return 0


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def run(args) -> int:
    from ..tuner.context import TuneContext  # noqa: PLC0415
    from ..tuner.run import tune_context  # noqa: PLC0415

    hw = HwConfig(hbm=args.hbm)
    if args.calibrate:
        return _calibrate(args, hw)
    budget = budget_of(args)
    source = load_source(args, budget)
    data = source.data(args.density, args.seed, budget)
    if source.kind == "model":
        key = f"model:{source.label}" + (f"@{args.scale:g}" if args.scale != 1.0 else "")
        data_key = f"dataset={source.dataset}"
    else:
        key = source.label
        data_key = f"density={args.density:g}" + (f" inputs={args.inputs}" if args.inputs else "")
    label = f"{source.label} {source.dataset}" if source.dataset else source.label
    ctx = TuneContext(source.program, data, dict(source.presets), label=label, program_key=key, data_key=data_key,
                      seed=args.seed, density=args.density, hw=hw, engine=args.engine, budget=budget)
    progress = not args.quiet and not args.json and sys.stderr.isatty()
    if args.plot and not os.path.isdir(os.path.dirname(os.path.abspath(args.plot))):
        raise UserError(f"cannot write the chart to {args.plot}: its folder does not exist", "--plot")
    result = tune_context(ctx, budget=args.budget, lanes=args.lanes, objective=args.objective, db=args.db,
                          max_sims=args.max_sims, progress=progress, sample_above=args.sample_above,
                          scheduler=args.scheduler, workers=args.workers)
    if args.plot:
        from ..tuner.chart import front_chart  # noqa: PLC0415 - matplotlib is slow to import

        front_chart(result, args.plot)
    print(json.dumps(result.to_json(), indent=1) if args.json else result)
    return 0
