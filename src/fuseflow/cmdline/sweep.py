"""The `sweep` and `plot` commands (wired into `fuseflow` by `add_commands(subparsers)`).

    fuseflow sweep tests/mlir/matmul_chain.mlir --granularity "full layout=induced" --orders all \\
        --density 0.05 --density 0.3 --db sweep.db
    fuseflow sweep --config sweep.toml [--jobs 2] [--executor dask --scheduler tcp://host:8786]
    fuseflow plot sweep.db -o charts/

Handlers return an exit code; bad input raises fuseflow.errors.UserError.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import tomllib

from ..errors import UserError
from ..files import read_file
from ..studies.analysis import summary_text
from ..studies.db import open_existing
from ..studies.plot import draw
from ..studies.runner import SweepSpec, run_sweep
from .args import MAX_COUNT, count, positive, positive_real, shape_items

DEFAULT_PRUNE = 1.5  # measured: keeps the best schedule of every swept group (docs/exploration.md)

# TOML keys (and their types) a sweep file may set; flags given on the command line win
TOML_KEYS = {
    "program": (str, list), "programs": (list,), "granularities": (list, str), "orders": (str, list),
    "max_orders": (int,), "pars": (list, str), "densities": (list, float, int), "datasets": (list, str),
    "blocks": (list, int),
    "seeds": (list, int), "layout": (str,), "random_seed": (int,), "engine": (str,), "check": (bool,),
    "db": (str,), "executor": (str,), "jobs": (int,), "scheduler": (str,), "prune": (float, int),
    "func": (str,), "scale": (float, int), "shapes": (dict,), "limit": (int,),
}


def _read_toml(path: str) -> dict:
    try:
        data = tomllib.loads(read_file(path, "--config").decode("utf-8"))
    except UnicodeDecodeError as err:
        raise UserError(f"{path} is not UTF-8 text (offset {err.start})", "--config") from None
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{path} is not valid TOML: {err}", "--config") from None
    data = data.get("sweep", data)  # keys at the top or under [sweep]
    for key, value in data.items():
        if key not in TOML_KEYS:
            raise UserError(f"unknown key {key!r} in {path}", "--config",
                            f"known keys: {', '.join(sorted(TOML_KEYS))}")
        if not isinstance(value, TOML_KEYS[key]) or isinstance(value, bool) and bool not in TOML_KEYS[key]:
            raise UserError(f"{key} in {path} has the wrong type ({type(value).__name__})", "--config")
    # relative program and database paths are relative to the TOML file
    base = os.path.dirname(os.path.abspath(path))
    programs = data.pop("programs", None) or data.pop("program", None) or []
    programs = [programs] if isinstance(programs, str) else list(programs)
    data["programs"] = [_near(p, base) for p in programs]
    if "db" in data:
        data["db"] = _near(data["db"], base, must_exist=False)
    for key in ("densities", "datasets", "blocks", "seeds", "granularities", "pars"):
        if key in data and not isinstance(data[key], list):
            data[key] = [data[key]]
    return data


def _near(path: str, base: str, must_exist: bool = True) -> str:
    if path.startswith("model:") or os.path.isabs(path) or (must_exist and os.path.exists(path)):
        return path
    candidate = os.path.join(base, path)
    if not must_exist or os.path.exists(candidate):
        return os.path.relpath(candidate)
    return path


def _floats(items, flag: str) -> list[float]:
    """Finite numbers from repeatable, comma-separated items."""
    out = []
    for item in items or []:
        for part in str(item).split(","):
            if part.strip():
                try:
                    out.append(positive_real(part.strip()))
                except argparse.ArgumentTypeError as err:
                    raise UserError(f"{flag} {err}", "command line") from None
    return out


def _ints(items, flag: str, least: int = 0) -> list[int]:
    """Whole numbers (ASCII digits, at least `least`) from repeatable, comma-separated items."""
    out = []
    for item in items or []:
        for part in str(item).split(","):
            part = part.strip()
            if not part:
                continue
            if not (part.isascii() and part.isdigit()) or not least <= int(part) <= MAX_COUNT:
                raise UserError(f"{flag} {part!r} is not a whole number of at least {least}"
                                f" (and at most {MAX_COUNT})", "command line")
            out.append(int(part))
    return out


def spec_from_args(args):
    settings: dict = _read_toml(args.config) if args.config else {"programs": []}
    if args.programs:
        settings["programs"] = list(args.programs)
    if args.granularity:
        settings["granularities"] = list(args.granularity)
    if args.par:
        settings["pars"] = list(args.par)
    flags = {
        "orders": args.orders, "max_orders": args.max_orders, "layout": args.layout, "engine": args.engine,
        "db": args.db, "executor": args.executor, "jobs": args.jobs, "scheduler": args.scheduler,
        "prune": args.prune, "func": args.func, "scale": args.scale, "limit": args.limit,
        "random_seed": args.random_seed,
    }
    settings.update({k: v for k, v in flags.items() if v is not None})
    if args.density:
        settings["densities"] = _floats(args.density, "--density")
    if args.dataset:
        settings["datasets"] = list(args.dataset)
    if args.block:
        settings["blocks"] = _ints(args.block, "--block", least=1)
    if args.seed:
        settings["seeds"] = _ints(args.seed, "--seed")
    if args.shape:
        settings["shapes"] = {**settings.get("shapes", {}), **shape_items(args.shape)}
    for name, shape in settings.get("shapes", {}).items():
        shape_items([f"{name}={'x'.join(map(str, shape))}"], "shapes")  # the same rules for TOML shapes
    if args.no_check:
        settings["check"] = False
    if isinstance(settings.get("orders"), list):
        settings["orders"] = [str(o) for o in settings["orders"]]
    for key in ("densities",):
        settings[key] = [float(x) for x in settings.get(key, [])]
    spec = SweepSpec(**settings)
    spec.validate()
    return spec


def cmd_sweep(args) -> int:
    spec = spec_from_args(args)
    summary = run_sweep(spec, progress=not args.quiet, budget=args.max_memory)
    if not args.quiet:
        print(f"sweep: {summary.simulated} simulated, {summary.pruned} pruned, {summary.failed} failed, "
              f"{summary.skipped} already done; {summary.seconds:.1f} s; results in {spec.db}")
    return 0


def cmd_plot(args) -> int:
    db = open_existing(args.db)
    try:
        rows = db.rows()
    finally:
        db.close()
    if args.program:
        rows = [r for r in rows if r["program"] == args.program]
    if not rows:
        raise UserError(f"{args.db} has no rows" + (f" for program {args.program}" if args.program else ""),
                        "plot", "run a sweep into it first")
    factors = _floats([args.factors], "--factors") if args.factors else [1.25, 1.5, 2.0, 3.0]
    print(summary_text(rows, factors))
    if not args.no_charts:
        out = args.output or os.path.splitext(args.db)[0] + "-charts"
        parent = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(parent) or (os.path.exists(out) and not os.path.isdir(out)):
            raise UserError(f"directory {parent} does not exist" if not os.path.isdir(parent)
                            else f"{out} exists and is not a directory", "-o",
                            "give a directory to create or fill with the charts")
        paths = _draw_atomically(rows, out, parent)
        print(f"wrote {len(paths)} charts to {out}/")
    return 0


def _draw_atomically(rows, out: str, parent: str) -> list[str]:
    """Draw the charts into a temporary directory beside `out`, then move each into `out`: a
    failure part-way leaves no half-written chart there."""
    try:
        with tempfile.TemporaryDirectory(prefix=".charts-", dir=parent) as temp:
            drawn = draw(rows, temp)
            os.makedirs(out, exist_ok=True)
            paths = [os.path.join(out, os.path.basename(p)) for p in drawn]
            for source, target in zip(drawn, paths):
                os.replace(source, target)
    except OSError as err:
        raise UserError(f"cannot write charts to {out}: {err.strerror}", "-o") from None
    return paths


def add_commands(subparsers) -> None:
    """Register `sweep` and `plot` on the `fuseflow` command's subparsers."""
    p = subparsers.add_parser("sweep", help="simulate a product of schedules and data points into SQLite",
                              description="Simulate every granularity x dataflow order x data point; "
                                          "one SQLite row per result; rerun to resume.")
    p.add_argument("programs", nargs="*", metavar="PROGRAM",
                   help="an .mlir file, or model:NAME for a built-in model (e.g. model:gcn)")
    p.add_argument("--config", metavar="SWEEP.toml", help="read the sweep from a TOML file (flags override it)")
    p.add_argument("--granularity", "-g", action="append", metavar="SCHEDULE",
                   help="unfused | partial | full | random:N | any schedule string (repeatable; "
                        "default: unfused, partial, full)")
    p.add_argument("--orders", help="default (the compiler's choice), all (every valid order of each group, "
                                    "one group varied at a time), or order items separated by ';'")
    p.add_argument("--max-orders", type=positive, help="cap on the orders tried per group (default 24)")
    p.add_argument("--par", action="append", metavar="VAR:P[,VAR:P]",
                   help="parallelization of group 0 tried with every schedule (repeatable; 1 = none), "
                        "e.g. --par 1 --par i:2 --par i:4,j:2")
    p.add_argument("--layout", choices=["declared", "induced"], help="layout added to every granularity")
    p.add_argument("--density", action="append", metavar="D", help="density of random sparse inputs "
                   "(repeatable or comma-separated; default 0.1)")
    p.add_argument("--dataset", action="append", metavar="NAME",
                   help="a model's dataset (karate, synthetic:cora, ...) or an .npz of inputs (repeatable)")
    p.add_argument("--block", action="append", metavar="B", help="block-sparse random data in BxB blocks")
    p.add_argument("--seed", action="append", metavar="S", help="seed of the generated data (repeatable)")
    p.add_argument("--random-seed", type=count, help="seed for random:N groupings")
    p.add_argument("--shape", action="append", metavar="NAME=AxB", help="shape of an input with dynamic dims")
    p.add_argument("--func", help="MLIR function to import when the module has several")
    p.add_argument("--scale", type=positive_real, help="scale of synthetic graph datasets (models)")
    p.add_argument("--engine", choices=["fast", "oracle"], help="simulator engine (default fast; oracle "
                                                               "when fast is unavailable)")
    p.add_argument("--no-check", action="store_true", help="skip verification against the numpy reference")
    p.add_argument("--db", help="SQLite database to write (default sweep.db)")
    p.add_argument("--executor", choices=["local", "dask"], help="local processes (default) or dask.distributed "
                   "(the scheduler at --scheduler ADDR, else a local cluster of --jobs workers, default one per core)")
    p.add_argument("--jobs", "-j", type=positive, help="local worker processes (default 1; with --executor dask: "
                                                        "the local cluster's workers)")
    p.add_argument("--scheduler", metavar="ADDR", help="dask scheduler address for --executor dask (default: start "
                                                       "a local cluster)")
    p.add_argument("--prune", type=positive_real, metavar="F", nargs="?", const=DEFAULT_PRUNE,
                   help="skip schedules whose heuristic estimate exceeds F x the best estimate of the "
                        f"same program and data (F defaults to {DEFAULT_PRUNE:g})")
    p.add_argument("--limit", type=count, help="simulate at most N schedules this run (resume later)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    p.set_defaults(run=cmd_sweep)

    p = subparsers.add_parser("plot", help="charts and heuristic/pruning statistics of a sweep database")
    p.add_argument("db", help="a database written by `fuseflow sweep`")
    p.add_argument("-o", "--output", metavar="DIR", help="directory for the PNG charts (default DB-charts/); with "
                                                          "--figure the chart's file (default DB-figure12.png)")
    p.add_argument("--program", help="only rows of this program")
    p.add_argument("--factors", help="pruning factors to evaluate, comma-separated (default 1.25,1.5,2,3)")
    p.add_argument("--no-charts", action="store_true", help="print the statistics only")
    p.set_defaults(run=cmd_plot)
