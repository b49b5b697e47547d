"""`fuseflow study fusion MODEL`: the fusion study (`fuseflow.study`): the model's presets or
given schedules simulated, verified and compared with the first (unfused).

    fuseflow study fusion --model gcn --dataset cora [--schedule S ...] [--plot out.png] [--json]
"""
from __future__ import annotations

import json
import sys

from .. import api
from ..errors import UserError
from ..files import atomic_path, check_output
from ..studies.granularity import read_schedules
from .args import budget_of
from .source import load_source


def _study_schedules(args, source) -> dict:
    """Each schedule the command names (`--schedule`, then `--schedules` items), read once into its
    `Schedule` record (or the error reading it, which that row reports), keyed by its name."""
    names = list(args.schedule or [])
    listed = []
    if args.schedules or not names:
        listed = [item.strip() for item in (args.schedules or "unfused,partial,full").split(",") if item.strip()]
    read = read_schedules(source, names + listed)
    for item in listed:
        if item not in source.presets and isinstance(read[item], UserError):
            raise UserError(f"--schedules {item!r} is not a preset of {source.label} "
                            f"({', '.join(source.presets)})", "--schedules",
                            "give schedule strings with --schedule S (repeatable), e.g. "
                            "--schedule 'fusion=[t2,t5][t6,t7,t8]'")
    return read


def run(args) -> int:
    if args.plot:
        check_output(args.plot, "--plot", (".png", ".svg", ".pdf"))
    budget = budget_of(args)
    source = load_source(args, budget)
    case = source.as_case(args.density, args.seed, budget)
    result = api.study(case, schedules=_study_schedules(args, source), engine=args.engine, progress=not args.json,
                       max_tokens=args.max_tokens, budget=budget)
    print(json.dumps(result.to_json(), indent=1) if args.json else result)
    if args.plot:
        with atomic_path(args.plot, "--plot") as temp:
            result.plot(temp)
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0
