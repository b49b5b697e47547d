"""`fuseflow sweep`: a product of schedules and data points simulated into SQLite (its grammar:
`cmdline.grammar`; the sweep itself: `studies.runner`).

    fuseflow sweep tests/mlir/matmul_chain.mlir --granularity "full layout=induced" --orders all \\
        --density 0.05 --density 0.3 --db sweep.db
    fuseflow sweep --config sweep.toml [--jobs 2] [--executor dask --scheduler tcp://host:8786]

Bad input raises fuseflow.errors.UserError.
"""
from __future__ import annotations

import argparse
import os
import tomllib

from ..errors import UserError
from ..files import read_file
from ..studies.runner import SweepSpec, run_sweep
from .args import MAX_COUNT, positive_real, shape_items

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


def floats(items, flag: str) -> list[float]:
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
        settings["densities"] = floats(args.density, "--density")
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


def run(args) -> int:
    spec = spec_from_args(args)
    summary = run_sweep(spec, progress=not args.quiet, budget=args.max_memory)
    if not args.quiet:
        print(f"sweep: {summary.simulated} simulated, {summary.pruned} pruned, {summary.failed} failed, "
              f"{summary.skipped} already done; {summary.seconds:.1f} s; results in {spec.db}")
    return 0
