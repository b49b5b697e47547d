"""Wall time of the GCN study's schedules with bounded channels (`channel_depth`, the command's
`--depth`) against the same runs unbounded, in one process, and the ratio.

    python bench/bounded_speed.py                          # GCN on Cora, depth 1024
    python bench/bounded_speed.py --dataset karate --depth 4
    python bench/bounded_speed.py --dataset synthetic:cora --scale 0.1

Each schedule (unfused, partial, full) is simulated on the fast engine, unbounded and then with
every channel bounded to --depth tokens (back-pressure inside the engine's kernels; a deadlock
is reported with its blocked nodes); both verify their outputs. A numba warm-up run of both
kinds comes first. Not a test: pytest does not collect this directory.
"""
from __future__ import annotations

import argparse
import time

import fuseflow
from fuseflow.sim.bounded import Deadlock
from fuseflow.sim.hw import HwConfig


def timed(case, schedule: str, hw: HwConfig | None):
    """(seconds, result or the deadlock) of one simulation."""
    start = time.perf_counter()
    try:
        result = fuseflow.simulate(case.program, case.presets[schedule], case.inputs, hw=hw)
    except Deadlock as err:
        return time.perf_counter() - start, err
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--depth", type=int, default=1024)
    parser.add_argument("--schedule", action="append", help="presets to run (default: all three)")
    args = parser.parse_args()
    options = {"scale": args.scale} if args.scale != 1.0 else {}
    case = fuseflow.model("gcn", dataset=args.dataset, **options)
    warm = fuseflow.model("gcn", dataset="karate").program
    for hw in (None, HwConfig(channel_depth=args.depth)):  # numba warm-up
        fuseflow.simulate(warm, "unfused", None, hw=hw)
    schedules = args.schedule or ["unfused", "partial", "full"]
    print(f"GCN on {args.dataset} (scale {args.scale:g}), depth {args.depth}")
    print(f"{'schedule':<10} {'unbounded s':>12} {'bounded s':>10} {'ratio':>7} {'cycles':>12} "
          f"{'bounded cycles':>15}")
    total_plain = total_bounded = 0.0
    for schedule in schedules:
        plain_s, plain = timed(case, schedule, None)
        bounded_s, bounded = timed(case, schedule, HwConfig(channel_depth=args.depth))
        total_plain += plain_s
        total_bounded += bounded_s
        cycles = "deadlock" if isinstance(bounded, Deadlock) else f"{bounded.cycles:,}"
        assert isinstance(bounded, Deadlock) or bounded.verified
        print(f"{schedule:<10} {plain_s:>12.2f} {bounded_s:>10.2f} {bounded_s / plain_s:>6.2f}x "
              f"{plain.cycles:>12,} {cycles:>15}")
    print(f"{'total':<10} {total_plain:>12.2f} {total_bounded:>10.2f} {total_bounded / total_plain:>6.2f}x")


if __name__ == "__main__":
    main()
