"""Sharded against whole, in one run: the wall time of each as `fuseflow simulate --model M
--dataset D --schedule S [--shards N --workers N]` spends it (the model built, compiled,
simulated and verified; the sharded one's local cluster started first, beside the model's
build, and closed at the end), the sharded run's phases (driver wall and CPU seconds) and its
window tasks on the workers, and whether cycles, tokens and counters agree (issue #27: at
least 1.8x with 2 workers).

    python bench/sharded_speed.py                                   # GCN CiteSeer full, 2 shards, 2 workers
    python bench/sharded_speed.py --dataset cora --schedule partial  # a smaller case
    python bench/sharded_speed.py --sharded-only                     # skip the whole run

Both are timed after the model's modules are imported (each command imports them too). The
whole run goes first: it loads numba's cache in this process (as a command's run does); the
workers load theirs within the sharded run, which counts it.
"""
from __future__ import annotations

import argparse
import logging
import os
import time

from fuseflow.partition.run import simulate_partitioned
from fuseflow.partition.timing import Timings
from fuseflow.pipeline import simulate
from fuseflow.studies.cluster import dask_client_soon

COUNTS = ("cycles", "tokens", "flops", "mem_reads", "mem_writes")


def build(*args):
    """A built-in model: imported here, not at the top, since the cluster's workers start by
    importing this file (multiprocessing's spawn) and need no torch."""
    from fuseflow.models.registry import build as build_model  # noqa: PLC0415 - torch, see above

    return build_model(*args)


def whole_run(args):
    start = time.perf_counter()
    case = build(args.model, args.dataset)
    result = simulate(case.program, case.presets.get(args.schedule, args.schedule), case.inputs)
    return result, time.perf_counter() - start


def sharded_run(args):
    """As the command runs it: the cluster starting while the model is built."""
    timings = Timings()
    start, cpu = time.perf_counter(), time.process_time()
    with dask_client_soon(None, args.workers) as client:
        with timings.phase("model built"):
            case = build(args.model, args.dataset)
        result = simulate_partitioned(case.program, case.presets.get(args.schedule, args.schedule), case.inputs,
                                      shards=args.shards, client=client, timings=timings)
        closing = time.perf_counter()
    closed = time.perf_counter() - closing
    return result, time.perf_counter() - start, time.process_time() - cpu, timings, start, closed


def print_phases(timings: Timings, wall: float, driver_cpu: float, closed: float) -> None:
    print(f"\nsharded run's driver ({wall:.1f} s wall, {driver_cpu:.1f} s CPU in this process):")
    print(f"  {'phase':<44}{'wall s':>9}{'CPU s':>9}")
    for p in timings.phases:
        print(f"  {p.name:<44}{p.wall:>9.2f}{p.cpu:>9.2f}")
    print(f"  {'cluster closed':<44}{closed:>9.2f}")
    rest = wall - sum(p.wall for p in timings.phases) - closed
    print(f"  {'the rest':<44}{rest:>9.2f}")


def print_tasks(timings: Timings, start: float, wall: float) -> None:
    """Each worker's tasks in the order they started, offsets from the sharded run's start."""
    epoch0 = time.time() - (time.perf_counter() - start)
    print("\nwindow tasks on the workers (start and end: seconds after the sharded run began):")
    print(f"  {'worker':<12}{'task':<46}{'start':>8}{'end':>8}{'wall':>8}{'CPU':>8}")
    for t in sorted(timings.tasks, key=lambda t: (t.worker, t.start)):
        s = t.start - epoch0
        print(f"  {t.worker:<12}{t.label[:45]:<46}{s:>8.2f}{s + t.wall:>8.2f}{t.wall:>8.2f}{t.cpu:>8.2f}")
    first = min(t.start for t in timings.tasks) - epoch0
    last = max(t.start + t.wall for t in timings.tasks) - epoch0
    print(f"  critical path: {first:.1f} s before the first task, {last - first:.1f} s of tasks, "
          f"{wall - last:.1f} s after the last (verification, close)")
    busy = timings.busy()
    print("  busy per worker: " + ", ".join(f"{w} {b:.1f} s" for w, b in sorted(busy.items())))
    for role in ("window", "settling", "boundary"):
        secs = sum(t.wall for t in timings.tasks if t.label.startswith(role))
        print(f"  {role} runs: {secs:.1f} s ({timings.task_share(role):.0%} of task time)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gcn")
    ap.add_argument("--dataset", default="citeseer")
    ap.add_argument("--schedule", default="full")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sharded-only", action="store_true")
    args = ap.parse_args(argv)
    logging.getLogger("distributed").setLevel(logging.WARNING)  # its INFO lines would bury the tables
    print(f"{args.model} {args.dataset} {args.schedule}; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores")
    build(args.model)  # torch and the model's modules imported before either is timed (a command imports both)
    whole = None
    if not args.sharded_only:
        whole, whole_wall = whole_run(args)
        print(f"whole: {whole_wall:.1f} s (simulate {whole.wall_seconds:.1f} s), {whole.tokens:,} token events, "
              f"{whole.cycles:,} cycles")
    sharded, wall, cpu, timings, start, closed = sharded_run(args)
    print(f"sharded ({args.shards} shards, {args.workers} workers): {wall:.1f} s, {sharded.cycles:,} cycles, "
          f"verified {sharded.verified}")
    print_phases(timings, wall, cpu, closed)
    print_tasks(timings, start, wall)
    if whole is not None:
        same = {c: getattr(sharded, c) - getattr(whole, c) for c in COUNTS}
        print(f"\nspeedup {whole_wall / wall:.2f}x (whole {whole_wall:.1f} s / sharded {wall:.1f} s); "
              f"sharded - whole: " + ", ".join(f"{c} {d:+,}" for c, d in same.items()))
    print(f"load average now {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
