"""Run the random-program fuzzer on any number of programs and tally the outcomes.

    .venv/bin/python scripts/fuzz.py --programs 10000 --seed 0 [--max-ops 5] [--schedules 2] [--upstream]

Program k is built from seed (SEED, k) by the generator the test suite uses
(tests/fuzz_programs.py), its schedules drawn and checked as tests/test_fuzz.py does
(tests/fuzz_check.py); with `--upstream`, each program's outputs under every schedule that ran
are also compared with upstream MLIR's (its sparsifier and ExecutionEngine, tests/fuzz_upstream.py),
where upstream can lower the program. Failures are listed with the program and schedule that reproduce them;
`--show K` prints program K's MLIR.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from fuzz_check import check_program  # noqa: E402 - the tests folder goes on the path first
from fuzz_programs import RandomChooser, random_program  # noqa: E402 - the tests folder goes on the path first
from fuzz_upstream import UpstreamWorker  # noqa: E402 - the tests folder goes on the path first


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="first program number")
    parser.add_argument("--max-ops", type=int, default=5)
    parser.add_argument("--schedules", type=int, default=2, help="drawn schedules per program besides full")
    parser.add_argument("--show", type=int, help="print program SHOW's MLIR and exit")
    parser.add_argument("--upstream", action="store_true",
                        help="also compare with upstream MLIR's sparsifier and ExecutionEngine")
    parser.add_argument("--quiet", action="store_true", help="only the tally")
    args = parser.parse_args()
    if args.show is not None:
        p = random_program(RandomChooser(args.seed * 1_000_003 + args.show), args.max_ops)
        print(p.describe())
        print(p.mlir())
        return 0
    verdicts = collections.Counter()
    upstream = collections.Counter()  # the upstream oracle's verdicts, one a program
    kinds = collections.Counter()
    defaults = collections.Counter()  # the schedule the compiler picked without one
    unlowered = collections.Counter()  # why upstream MLIR could not run a program
    failed_programs = 0
    full_compiled = 0
    start = time.perf_counter()
    worker = UpstreamWorker() if args.upstream else None
    for k in range(args.start, args.start + args.programs):
        seed = args.seed * 1_000_003 + k
        p = random_program(RandomChooser(seed), args.max_ops)
        outcomes = check_program(p, RandomChooser(seed + 500_000_017), seed, args.schedules, worker)
        for o in outcomes:
            if o.schedule == "upstream":
                upstream[o.verdict] += 1
                if o.verdict == "unlowered":
                    unlowered[o.detail[:110]] += 1
                continue
            verdicts[o.verdict] += 1
            if o.schedule == "default" and o.verdict == "ok":
                defaults[o.detail] += 1
        if outcomes[0].schedule == "full" and outcomes[0].verdict == "ok":
            full_compiled += 1
        bad = [o for o in outcomes if o.failed]
        if bad:
            failed_programs += 1
            for o in bad:
                kinds[(o.verdict, o.detail.split(" [")[0][:90])] += 1
                if not args.quiet:
                    print(f"program {k}: {o.verdict}: {o.schedule}: {o.detail}  {p.describe()}", flush=True)
    if worker is not None:
        worker.close()
    seconds = time.perf_counter() - start
    print(f"{args.programs} programs (seed {args.seed}, from {args.start}, up to {args.max_ops} ops, "
          f"{args.schedules} drawn schedules each) in {seconds:.0f} s")
    print(f"schedules: {dict(verdicts)}; `full` compiled and verified for {full_compiled}; "
          f"programs with a failure: {failed_programs}")
    print(f"without a schedule the compiler picked: {dict(defaults.most_common())}")
    if args.upstream:
        print(f"upstream MLIR: {dict(upstream)} (programs); why it could not lower or run the others:")
        for reason, n in unlowered.most_common(8):
            print(f"  {n:5d} {reason}")
    for (verdict, detail), n in kinds.most_common(30):
        print(f"  {n:5d} {verdict}: {detail}")
    return 1 if failed_programs else 0


if __name__ == "__main__":
    sys.exit(main())
