"""Does the memory model explain the gap to the published cycle counts? Figure-12 rows simulated
whole with and without `--hbm`, beside the reference's published cycles.

    python bench/hbm_gap.py [--case gcn:cora --case gcn:cora_ml ...] [--schedules unfused,partial] [--json]

Each case is MODEL:DATASET (a built-in graph model on a graph `fuseflow.model` loads); each of
its schedules (presets) runs whole twice with the fast engine, every output verified: with the
default hardware (unbounded channels, one cycle per memory word) and with `HwConfig(hbm=True)`
(array, scan and writer words spread over 8 channels round-robin, a startup and a latency per
batch: `fuseflow.sim.hw`). Printed per row: both cycle counts, hbm/plain, the published count
(`studies/suite/figure12.toml`) and published/ours both ways; per case, partial fusion's speedup
both ways beside the published one. A row that does not fit in memory says so and the rest go
on. Not a test: pytest does not collect bench/.

Default cases: the Figure-12 graph rows small enough to run whole in a few minutes each on two
cores (GCN and GraphSAGE on Cora, Cora-ML and CiteSeer; add gcn:dblp by hand: about ten minutes
a schedule).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass

import fuseflow
from fuseflow.errors import FuseflowError
from fuseflow.sim.hw import HwConfig
from fuseflow.studies.suite.spec import load_suite

DEFAULT_CASES = ("gcn:cora", "gcn:citeseer", "gcn:cora_ml", "graphsage:cora", "graphsage:citeseer",
                 "graphsage:cora_ml")


@dataclass
class HbmRow:
    """One schedule of one case, simulated whole without and with the memory model."""

    model: str
    dataset: str
    schedule: str
    cycles: int | None = None
    cycles_hbm: int | None = None
    published: int | None = None
    seconds: float = 0.0
    error: str | None = None

    @property
    def hbm_ratio(self) -> float | None:
        return self.cycles_hbm / self.cycles if self.cycles and self.cycles_hbm else None


def run_case(spec: str, schedules: list[str], published: dict) -> list[HbmRow]:
    """The rows of one MODEL:DATASET case (an error row per schedule that could not run)."""
    model, _, dataset = spec.partition(":")
    case = fuseflow.model(model, dataset=dataset)
    rows = []
    for schedule in schedules:
        row = HbmRow(model, dataset, schedule, published=published.get((model, dataset, None), {}).get(schedule))
        start = time.perf_counter()
        try:
            for hbm in (False, True):
                result = fuseflow.simulate(case.program, case.presets[schedule], case.inputs, hw=HwConfig(hbm=hbm))
                if not result.verified:
                    raise FuseflowError(f"{spec} {schedule} (hbm={hbm}) did not verify")
                setattr(row, "cycles_hbm" if hbm else "cycles", int(result.cycles))
        except (FuseflowError, MemoryError) as err:
            row.error = str(err).splitlines()[0]
        row.seconds = time.perf_counter() - start
        rows.append(row)
        print(_line(row), file=sys.stderr, flush=True)
    return rows


def _ratio(a, b) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def _line(row: HbmRow) -> str:
    if row.error:
        return f"{row.model:9} {row.dataset:9} {row.schedule:8} failed: {row.error}"
    return (f"{row.model:9} {row.dataset:9} {row.schedule:8} {row.cycles:>14,} {row.cycles_hbm:>14,} "
            f"{_ratio(row.cycles_hbm, row.cycles):>8} {f'{row.published:,}' if row.published else '-':>14} "
            f"{_ratio(row.published, row.cycles):>8} "
            f"{_ratio(row.published, row.cycles_hbm):>8} {row.seconds:7.0f}")


def speedups(rows: list[HbmRow]) -> list[str]:
    """Per case: partial's speedup over unfused without and with the memory model, and published."""
    out = []
    by = {(r.model, r.dataset, r.schedule): r for r in rows}
    for (model, dataset, schedule), row in by.items():
        base = by.get((model, dataset, "unfused"))
        if schedule == "unfused" or base is None or row.error or base.error:
            continue
        out.append(f"{model} {dataset} {schedule}/unfused: plain {_ratio(base.cycles, row.cycles)}x, "
                   f"hbm {_ratio(base.cycles_hbm, row.cycles_hbm)}x, "
                   f"published {_ratio(base.published, row.published)}x")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", help="MODEL:DATASET (repeatable)")
    parser.add_argument("--schedules", default="unfused,partial")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    published = load_suite("figure12").published
    print(f"{'model':9} {'dataset':9} {'schedule':8} {'cycles':>14} {'cycles --hbm':>14} {'hbm/ours':>8} "
          f"{'published':>14} {'pub/ours':>8} {'pub/hbm':>8} {'wall s':>7}", file=sys.stderr)
    rows = []
    for spec in args.case or DEFAULT_CASES:
        rows += run_case(spec, args.schedules.split(","), published)
    for line in speedups(rows):
        print(line, file=sys.stderr)
    if args.json:
        print(json.dumps([asdict(r) | {"hbm_ratio": r.hbm_ratio} for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
