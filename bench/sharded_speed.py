"""Sharded against whole, in one run: the wall time of each as `fuseflow simulate --model M
--dataset D --schedule S [--shards N --workers N]` spends it (the model built, compiled,
simulated and verified; the sharded one's local cluster started first, beside the model's
build, and closed at the end), the sharded run's phases (driver wall and CPU seconds) and its
window tasks on the workers, and whether cycles, tokens and counters agree (issue #27: at
least 1.8x with 2 workers).

    python bench/sharded_speed.py                                   # GCN CiteSeer full, 2 shards, 2 workers
    python bench/sharded_speed.py --model graphsage                 # GraphSAGE CiteSeer full (twice the work)
    python bench/sharded_speed.py --dataset cora --schedule partial  # a smaller case
    python bench/sharded_speed.py --sharded-only                     # skip the whole run
    python bench/sharded_speed.py --ceiling                          # only the machine's 2-core ceiling

Both are timed after the model's modules are imported (each command imports them too). The
whole run goes first: it loads numba's cache in this process (as a command's run does); the
workers load theirs within the sharded run, which counts it. The sharded wall ends when the
result is ready (a command prints it then); the cluster's close after it is shown apart.

Last (`--no-ceiling` skips it), the machine's ceiling: the whole run alone in a process of its
own, then twice at once in two; 2 x alone / the slower of the two is the most any 2-way split
can reach here (the engine's 2-core scaling: shared caches, memory bandwidth, the host).
"""
from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import time
from dataclasses import dataclass

from fuseflow.cluster import dask_client_soon
from fuseflow.partition.run import simulate_partitioned
from fuseflow.partition.timing import Timings
from fuseflow.pipeline import simulate

COUNTS = ("cycles", "tokens", "flops", "mem_reads", "mem_writes")


def build(*args):
    """A built-in model: imported here, not at the top, since the cluster's workers start by
    importing this file (multiprocessing's spawn) and need no torch."""
    from fuseflow.models.registry import build as build_model  # noqa: PLC0415 - torch, see above

    return build_model(*args)


def whole_run(args):
    start, cpu = time.perf_counter(), time.process_time()
    case = build(args.model, args.dataset)
    result = simulate(case.program, case.presets.get(args.schedule, args.schedule), case.inputs)
    return result, time.perf_counter() - start, time.process_time() - cpu


@dataclass
class Timed:
    """One whole run in a process of its own: its wall and CPU seconds from the moment every
    such process had built its model."""

    wall: float
    cpu: float
    tokens: int


def _timed_whole(case_args: tuple, ready, results) -> None:
    """A ceiling process: build the model, wait for the others, simulate it whole."""
    model, dataset, schedule = case_args
    case = build(model, dataset)
    ready.wait()
    start, cpu = time.perf_counter(), time.process_time()
    result = simulate(case.program, case.presets.get(schedule, schedule), case.inputs)
    results.put(Timed(time.perf_counter() - start, time.process_time() - cpu, result.tokens))


def concurrent_wholes(args, count: int) -> list[Timed]:
    """`count` processes each simulating the same whole kernel, started together once all have
    built the model (spawned, as the cluster's workers are)."""
    ctx = multiprocessing.get_context("spawn")
    ready, results = ctx.Barrier(count), ctx.Queue()
    procs = [ctx.Process(target=_timed_whole, args=((args.model, args.dataset, args.schedule), ready, results))
             for _ in range(count)]
    for p in procs:
        p.start()
    timed = [results.get() for _ in procs]
    for p in procs:
        p.join()
    return timed


def print_ceiling(args) -> float:
    """The engine's 2-core scaling on this machine: the whole kernel alone in one process, then
    twice at once in two; 2 * alone / concurrent is the most any 2-way split can reach here."""
    alone = concurrent_wholes(args, 1)[0]
    pair = concurrent_wholes(args, 2)
    slowest = max(t.wall for t in pair)
    ceiling = 2 * alone.wall / slowest
    print(f"ceiling ({alone.tokens:,} token events a run): alone {alone.wall:.1f} s ({alone.cpu:.1f} s CPU); "
          "two at once "
          + " and ".join(f"{t.wall:.1f} s ({t.cpu:.1f} s CPU)" for t in pair)
          + f": 2 x {alone.wall:.1f} / {slowest:.1f} = {ceiling:.2f}x at best for 2 workers "
          f"(load average {os.getloadavg()[0]:.2f}); in CPU seconds (what it would be with a core "
          f"each): 2 x {alone.cpu:.1f} / {max(t.cpu for t in pair):.1f} = "
          f"{2 * alone.cpu / max(t.cpu for t in pair):.2f}x")
    return ceiling


def sharded_run(args):
    """As the command runs it: the cluster starting while the model is built."""
    timings = Timings()
    start, cpu = time.perf_counter(), time.process_time()
    with dask_client_soon(None, args.workers) as client:
        with timings.phase("model built"):
            case = build(args.model, args.dataset)
        result = simulate_partitioned(case.program, case.presets.get(args.schedule, args.schedule), case.inputs,
                                      shards=args.shards, client=client, timings=timings)
        closing = time.perf_counter()  # the result is ready (a command prints it here): the wall ends
    closed = time.perf_counter() - closing
    return result, closing - start, time.process_time() - cpu, timings, start, closed


def print_phases(timings: Timings, wall: float, driver_cpu: float, closed: float) -> None:
    print(f"\nsharded run's driver ({wall:.1f} s wall, {driver_cpu:.1f} s CPU in this process):")
    print(f"  {'phase':<44}{'wall s':>9}{'CPU s':>9}")
    for p in timings.phases:
        print(f"  {p.name[:44]:<44}{p.wall:>9.2f}{p.cpu:>9.2f}")
    print(f"  {'cluster closed (after the result: not in the wall)':<44}{closed:>9.2f}")
    rest = wall - sum(p.wall for p in timings.phases)
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
          f"{wall - last:.1f} s after the last (verification, outputs combined)")
    busy = timings.busy()
    cpu = {w: sum(t.cpu for t in timings.tasks if t.worker == w) for w in busy}
    print("  busy per worker: " + ", ".join(f"{w} {b:.1f} s ({cpu[w]:.1f} s CPU)" for w, b in sorted(busy.items())))
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
    ap.add_argument("--ceiling", action="store_true", help="measure only the 2-core ceiling (two whole runs at once)")
    ap.add_argument("--no-ceiling", action="store_true", help="skip the ceiling")
    args = ap.parse_args(argv)
    logging.getLogger("distributed").setLevel(logging.WARNING)  # its INFO lines would bury the tables
    print(f"{args.model} {args.dataset} {args.schedule}; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores")
    if args.ceiling:
        print_ceiling(args)
        return 0
    build(args.model)  # torch and the model's modules imported before either is timed (a command imports both)
    whole = None
    if not args.sharded_only:
        whole, whole_wall, whole_cpu = whole_run(args)
        print(f"whole: {whole_wall:.1f} s ({whole_cpu:.1f} s CPU; simulate {whole.wall_seconds:.1f} s), "
              f"{whole.tokens:,} token events, {whole.cycles:,} cycles")
    sharded, wall, cpu, timings, start, closed = sharded_run(args)
    print(f"sharded ({args.shards} shards, {args.workers} workers): {wall:.1f} s, {sharded.cycles:,} cycles, "
          f"verified {sharded.verified}")
    print_phases(timings, wall, cpu, closed)
    print_tasks(timings, start, wall)
    if whole is not None:
        same = {c: getattr(sharded, c) - getattr(whole, c) for c in COUNTS}
        print(f"\nspeedup {whole_wall / wall:.2f}x (whole {whole_wall:.1f} s / sharded {wall:.1f} s); "
              f"sharded - whole: " + ", ".join(f"{c} {d:+,}" for c, d in same.items()))
        busiest = max(sum(t.cpu for t in timings.tasks if t.worker == w) for w in timings.busy())
        print(f"in CPU seconds: whole {whole_cpu:.1f} / the busier worker's tasks {busiest:.1f} = "
              f"{whole_cpu / busiest:.2f}x (the tasks' part of the speedup, with a core per worker)")
    if not args.no_ceiling:
        print_ceiling(args)
    print(f"load average now {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
