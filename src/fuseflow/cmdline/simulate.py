"""`fuseflow simulate MODEL`: a schedule simulated cycle by cycle, its outputs verified against the
numpy reference, with a live progress display; optionally an HTML report and the outputs saved.

    fuseflow simulate tests/mlir/spmm_ikj.mlir --schedule full [--inputs data.npz] [--json] [--html r.html]
"""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

from .. import api
from ..checks import sim_request
from ..errors import UserError
from ..files import atomic_path, check_output, temporary_beside
from ..progress import RunProgress, numba_notice
from ..request import Partitioning
from ..sim.hw import HwConfig
from ..simreport import simulate_report
from .args import budget_of
from .source import load_source


def _save_outputs(path: str, program, result) -> None:
    with atomic_path(path, "--save-outputs") as temp:
        with open(temp, "wb") as handle:
            np.savez(handle, **{f"out{k}": result.outputs[n] for k, n in enumerate(program.outputs)})
    print(f"wrote {path}", file=sys.stderr)


def _interval(low, high) -> str:
    return f"{low:,}..{high:,}" if low is not None else ""


def _print_result(result) -> None:
    """The kernels' table; a sharded or sampled run says so, a sampled one with its intervals."""
    sampled, parted = result.mode == "sampled", result.mode != "whole"
    print(f"program {result.program}  schedule: {result.schedule}" +
          (f"  [{result.mode}]" if parted else ""))
    extra = f" {'cycles 95% interval':>25}" if sampled else ""
    ran = f" {'ran':<8}" if parted else ""  # each kernel: whole, windows or sampled
    print(f"{'kernel':<28} {'order':<14}{ran} {'cycles':>12}{extra} {'flops':>10} {'reads':>10} {'writes':>10} "
          f"{'tokens':>11} {'max fifo':>8}")
    for k in result.kernels:
        band = f" {_interval(k.cycles_low, k.cycles_high):>25}" if sampled else ""
        how = f" {k.mode:<8}" if parted else ""
        print(f"{k.name[:28]:<28} {','.join(k.order)[:14]:<14}{how} {k.cycles:>12,}{band} {k.flops:>10,} "
              f"{k.mem_reads:>10,} {k.mem_writes:>10,} {k.tokens:>11,} {k.max_occupancy:>8,}")
    band = f" {_interval(result.cycles_low, result.cycles_high):>25}" if sampled else ""
    print(f"{'total':<43}{' ' * len(ran)} {result.cycles:>12,}{band} {result.flops:>10,} {result.mem_reads:>10,} "
          f"{result.mem_writes:>10,} {result.tokens:>11,} {result.max_occupancy:>8,}")
    if result.mode != "whole" or result.method:  # a sample asked for, run whole: why
        share = f", {result.sampled_fraction:.1%} of windows simulated" if sampled else ""
        print(f"{result.mode}{share}: {result.method}" + ("; counts are estimates" if sampled else ""))
    what = "outputs verified against the numpy reference" if result.verified else \
        "outputs partly verified (a sampled window of a reduction holds partial sums)"
    print(f"{what} (max abs error {result.max_abs_error:.2e}); {result.wall_seconds:.2f} s")


def _partitioning(args) -> Partitioning | None:
    """How the run is cut (`--shards`, `--sample`, `--error`), or None when it is whole."""
    if args.shards is None and args.sample is None and args.error is None:
        if args.scheduler or args.workers:
            raise UserError("--scheduler and --workers go with --shards, --sample or --error", "--scheduler")
        return None
    if args.html or args.depth:
        raise UserError(f"{'--html' if args.html else '--depth'} needs a whole run", "--shards",
                        "drop --shards/--sample/--error")
    return Partitioning(args.shards, args.sample, args.error, args.sample_seed, args.scheduler, args.workers)


def _simulate_with_report(request, args):
    """`simulate_report`: the HTML report is written (atomically) also when the simulation fails,
    then the failure is raised."""
    temp = temporary_beside(args.html, "--html")

    def written(path: str) -> None:
        os.replace(path, args.html)
        print(f"wrote {args.html}", file=sys.stderr)

    try:
        return simulate_report(request, path=temp, on_written=written)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def run(args) -> int:
    for path, flag, suffixes in ((args.save_outputs, "--save-outputs", (".npz",)), (args.html, "--html", ())):
        if path:
            check_output(path, flag, suffixes)
    with api.early_cluster(_partitioning(args)) as partitioning:
        return _run(args, partitioning)


def _run(args, partitioning: Partitioning | None) -> int:
    start = time.perf_counter()
    budget = budget_of(args)
    source = load_source(args, budget)
    data = source.data(args.density, args.seed, budget)
    request = sim_request(source.program, source.schedule(args.schedule), data, seed=args.seed,
                          density=args.density, hw=HwConfig(hbm=args.hbm, channel_depth=args.depth),
                          engine=args.engine, budget=budget, partitioning=partitioning)
    label = f"{source.program.name} {args.schedule or '(default schedule)'}"
    with RunProgress(label, enabled=None if not args.json else False) as bar, \
            numba_notice():
        if args.html:
            result = _simulate_with_report(request, args)
        else:
            result = api.simulate_request(request, on_kernel=bar.on_kernel, on_events=bar.on_events)
    result.wall_seconds = time.perf_counter() - start  # loading and compiling included
    if args.save_outputs:
        _save_outputs(args.save_outputs, source.program, result)
    if args.json:
        print(json.dumps(result.to_json(), indent=1))
    else:
        _print_result(result)
    return 0
