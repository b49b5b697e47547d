"""How good the sampled mode's estimates are: for kernels simulated whole here, samples of 1%, 5%
and 10% of their windows with 20 seeds each, against the whole run's cycles.

    nice -n 10 python bench/sample_validation.py                       # the built-in cases
    nice -n 10 python bench/sample_validation.py --case gcn:cora:partial --seeds 5
    python bench/sample_validation.py --json out/validation.json        # also the raw numbers
    python bench/sample_validation.py --again out/a.json out/b.json     # the trials again, from stored runs
    python bench/sample_validation.py --case "gcn:cora:unfused layout=induced order=k,i,j" --kernels 0
                                                    # a kernel whose outer loop is a reduction (A read by columns)

Per kernel: the whole run (the truth: the schedule run whole, every kernel reading what the one
before it wrote, explicit zeros included; each kernel's windows read the same), then every
window's value y once (a run from `margin`
coordinates before the window, less the margin's own run: `partition.sampled.window_values`),
the heuristic's estimate of each window (the auxiliary x) and of the whole kernel. A trial
is what `sample_kernel` does with a seed: the same strata, the same draw, the same margin
settling (a drawn window's value at a longer margin is simulated when a trial first asks for it,
then kept), the same estimator. Reported per kernel: the
windows' decomposition error (sum of all y against the whole run: what the margins leave out),
and per sampled fraction the share of windows actually simulated, how many of the 95% intervals
cover the whole run's cycles, and the mean and worst relative error; beside them the heuristic's
relative error on the same kernel. Kernels shorter than `--min-extent` outer coordinates are left
out; the windows are `SamplePlan`'s (at most 256, at least 64 coordinates), narrower (down to 8)
where a kernel has fewer than 64 of them, and such kernels are sampled though the
sampled mode would run them whole (`whole_below=0`). A kernel whose outer loop is a reduction is
sampled as the sampled mode does it (`partition.run`): each window's partial sums checked as it
runs (`partition.partials`), the drain rate measured on two calibration windows
(`partition.drain`), every value y a run's cycles less that rate per value written, the estimate
shifted by the rate times the values a whole run writes and its interval widened by the rate's
slack; a reducing kernel whose inputs no cut fits is left out (the sampled mode runs it whole).
Not a test: pytest does not collect this directory.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from fuseflow.execute import execute
from fuseflow.fusion.estimate import CostModel
from fuseflow.ir.reference import ReferenceRun
from fuseflow.models.registry import build
from fuseflow.partition.drain import Drain, measured_drain
from fuseflow.partition.footing import patterns_read_as_written
from fuseflow.partition.partials import partial_sums
from fuseflow.partition.run import UNCUT
from fuseflow.partition.sampled import (
    SAMPLE_FROM,
    Population,
    SamplePlan,
    draw_sample,
    kernel_windows,
    population,
    settle_on_sample,
    strata_of,
    window_values,
)
from fuseflow.partition.window_cost import window_estimates
from fuseflow.partition.windows import KernelSetup, kernel_setup, kernel_tensors, reference_values
from fuseflow.pipeline import prepared
from fuseflow.sim.fast import run_graph as fast_run
from fuseflow.sim.window import Window

CASES = [f"{m}:{d}:{s}" for d in ("cora", "citeseer", "cora_ml", "dblp") for m in ("gcn", "graphsage")
         for s in ("unfused", "partial")] + \
    ["sae:imagenet:unfused", "gpt3-bigbird:small2@64:partial", "gcn:synthetic:collab:partial",
     "gcn:synthetic:collab:unfused"]
FRACTIONS = (0.01, 0.05, 0.10)
TINY = 100  # cycles per window below which a kernel is all fill and drain (listed, left out of the summary)


@dataclass
class Trials:
    fraction: float  # asked for
    simulated: float  # share of windows simulated (mean over seeds)
    covered: int
    seeds: int
    mean_error: float
    worst_error: float


@dataclass
class KernelReport:
    case: str
    kernel: int
    extent: int
    windows: int
    width: int
    margin: int
    cycles: int
    tokens: int
    heuristic_error: float  # (heuristic - whole) / whole
    decomposition_error: float  # (sum of every window's y - whole) / whole
    seconds_whole: float
    seconds_windows: float
    growth: float = 0.0  # cycles the first margin's last doubling added at a probed boundary
    x: list[float] = field(default_factory=list)  # every window's heuristic estimate ...
    y: list[float] = field(default_factory=list)  # ... and value at the first margin
    # longer margins (`settle_on_sample`): margin -> each window's value, NaN where no trial drew it
    longer: dict[str, list[float]] = field(default_factory=dict)
    settled_margins: list[float] = field(default_factory=list)  # mean margin the trials settled at, per fraction
    trials: list[Trials] = field(default_factory=list)
    # a reducing kernel's drain (`partition.drain`): y is each run's cycles less `drain_rate` per
    # value written; an estimate adds `drain_rate * drain_whole`, its interval widened by `drain_slack`
    drain_rate: float = 0.0
    drain_whole: int = 0
    drain_slack: float = 0.0

    @property
    def reduces(self) -> bool:
        return self.drain_whole > 0

    def with_drain(self, total: float) -> float:
        """A sum of window values with the drain a whole run pays once added back."""
        return total + self.drain_rate * self.drain_whole


class WindowValues:
    """A kernel's window values per margin, simulated when a trial first asks for them (`simulate`:
    margin, window indices -> their values; None replays a stored report and fails on a gap)."""

    def __init__(self, report: KernelReport, simulate=None):
        self.report, self.simulate = report, simulate
        self.levels = {report.margin: np.array(report.y)}
        self.levels.update({int(m): np.array(v, dtype=np.float64) for m, v in report.longer.items()})

    def at(self, margin: int, picked: np.ndarray) -> np.ndarray:
        level = self.levels.setdefault(margin, np.full(len(self.report.x), np.nan))
        todo = [int(i) for i in picked if np.isnan(level[i])]
        if todo and self.simulate is None:
            raise SystemExit(f"{self.report.case} kernel {self.report.kernel}: margin {margin} of windows {todo} "
                             "not stored; run without --again")
        if todo:
            level[todo] = self.simulate(margin, todo)
            self.report.longer[str(margin)] = level.tolist()
        return level[picked]


def _case(text: str):
    model, rest = text.split(":", 1)
    dataset, schedule = rest.rsplit(":", 1)
    block = None
    if "@" in dataset:
        dataset, block = dataset.split("@")
    case = build(model, dataset, **({"block": int(block)} if block else {}))
    return case, case.presets.get(schedule, schedule)


def _plan(extent: int, fraction: float) -> SamplePlan:
    width = max(8, min(SamplePlan.min_width, extent // SAMPLE_FROM))
    return SamplePlan(fraction=fraction, min_width=width, whole_below=0)


def _trials(report: KernelReport, values: WindowValues, plan: SamplePlan, seeds: int) -> tuple[Trials, float]:
    """`sample_kernel`'s draws, margins and estimates for `seeds` seeds, on the window values
    (and the mean margin the trials settled at)."""
    x, truth = np.array(report.x), report.cycles
    labels, strata = strata_of(x, plan)
    windows = [Window(((0, report.width),))] * len(x)  # only the width matters here (the margin's cap)
    pop = Population(windows, x, labels, report.margin, strata, report.growth)
    covered, errors, shares, margins = 0, [], [], []
    for seed in range(seeds):
        picked = draw_sample(pop, pop.first_sample(plan), np.random.default_rng(seed))
        settled = settle_on_sample(pop, picked, lambda m, picked=picked: values.at(m, picked))
        est = pop.widened(settled.estimate, settled.move).shifted(report.drain_rate * report.drain_whole,
                                                                  report.drain_slack)
        covered += est.low <= truth <= est.high
        errors.append(abs(est.total - truth) / truth)
        shares.append(len(picked) / len(pop.windows))
        margins.append(settled.margin)
    return (Trials(plan.fraction, float(np.mean(shares)), covered, seeds, float(np.mean(errors)),
                   float(max(errors))), float(np.mean(margins)))


def _left_out(setup: KernelSetup, min_extent: int, kernels: set[int] | None) -> str | None:
    """Why a kernel is left out of the validation, or None."""
    if kernels is not None and setup.index not in kernels:
        return "not among --kernels"
    return f"{setup.extent} outer coordinates" if setup.extent < min_extent else None


def _drain(kernel, values: dict, setup: KernelSetup, width: int) -> Drain | None:
    """A reducing kernel's drain as the sampled mode measures it, its windows' partial sums
    checked as they run from now on (`partition.run`); None where no cut fits its inputs."""
    partials = partial_sums(kernel, values)
    if partials is None:
        return None
    setup.partials = partials
    drain = measured_drain(setup, partials, width, None, "fast", None)
    setup.drain_rate = drain.rate
    return drain


def _simulator(setup: KernelSetup, pop: Population):
    """Window indices at a margin -> their values (`setup.cycles_of`: less a reducing kernel's
    drain), one window at a time: a run keeps its outputs, dense where they are not 2-D (GPT-3
    small2's attention kernels: all 64 windows' runs at once took 7.6 GB)."""
    def simulate(margin: int, todo: list[int]) -> list[float]:
        return [window_values(setup, pop, [i], None, "fast", None, margin)[i].value(setup.cycles_of) for i in todo]
    return simulate


@dataclass
class WholeRun:
    """The schedule run whole: each kernel's result and seconds, and what each kernel wrote that
    a later one reads as stored ({name: (WrittenTensor, its GraphTensor)})."""

    kernels: list
    seconds: list[float]
    written: dict


def whole_run(compiled, data: dict) -> WholeRun:
    """`compiled` run whole on the fast engine, its intermediates freed after their last reader."""
    wanted = set().union(*patterns_read_as_written(compiled.kernels))
    written, seconds, last = {}, [], [time.perf_counter()]

    def on_run(graph, run) -> None:
        written.update({name: (run.written[name], meta) for name, meta in graph.tensors.items()
                        if meta.role == "output" and name in wanted})

    def on_kernel(done: int, total: int) -> None:
        now = time.perf_counter()
        seconds.append(now - last[0])
        last[0] = now

    run = execute(compiled, data, None, fast_run, on_kernel, on_run=on_run, keep_values=False)
    return WholeRun(run.kernels, seconds, written)


def whole_setup(kernel, values: dict, whole: WholeRun) -> KernelSetup:
    """A kernel's setup reading what the whole run's kernels wrote (as `partition.run` does)."""
    names = kernel_tensors(kernel)
    return kernel_setup(kernel, values, None, {n: w for n, w in whole.written.items() if n in names})


def kernel_report(text: str, compiled, setup: KernelSetup, program, values: dict, heuristic_cycles: float,
                  seeds: int, log, whole: WholeRun) -> KernelReport | None:
    """One kernel's whole run (from `whole`), every window's value and the trials (None: a
    reducing kernel no cut fits, which the sampled mode runs whole)."""
    kernel = compiled.kernels[setup.index]
    seconds_whole = whole.seconds[setup.index]
    whole = whole.kernels[setup.index]
    plan = _plan(setup.extent, FRACTIONS[0])
    windows = kernel_windows(setup, plan)
    x = window_estimates(compiled, kernel, program, values, windows)
    start = time.perf_counter()
    drain = _drain(kernel, values, setup, windows[0].width()) if setup.reduces else Drain(0.0, 0)
    if drain is None:
        print(f"  {text} kernel {kernel.index}: left out ({UNCUT})", file=log, flush=True)
        return None
    pop = population(setup, plan, x, None, "fast", None)
    y = np.array(_simulator(setup, pop)(pop.margin, list(range(len(windows)))), dtype=np.float64)
    report = KernelReport(text, kernel.index, setup.extent, len(windows), windows[0].width(), pop.margin,
                          whole.cycles, whole.tokens, (heuristic_cycles - whole.cycles) / whole.cycles,
                          0.0, seconds_whole, time.perf_counter() - start, pop.growth, x.tolist(), y.tolist(),
                          drain_rate=drain.rate, drain_whole=drain.whole, drain_slack=drain.slack)
    report.decomposition_error = (report.with_drain(y.sum()) - whole.cycles) / whole.cycles
    start = time.perf_counter()
    trials(report, seeds, WindowValues(report, _simulator(setup, pop)))
    report.seconds_windows += time.perf_counter() - start
    return report


def run_case(text: str, seeds: int, min_extent: int, log, kernels: set[int] | None = None):
    """The case's kernel reports, each yielded as soon as it is measured."""
    case, schedule = _case(text)
    data, compiled = prepared(case.program, schedule, case.inputs, 0, 0.1)
    heuristic = CostModel(case.program, data).estimate(compiled)
    # the reference kernel by kernel, holding only what this and later kernels read or write (as
    # `partition.run` does: all of GPT-3 small2's intermediates at once took over 6 GB)
    needs = [set() if k.is_reshape else kernel_tensors(k) for k in compiled.kernels]
    last_need = {name: i for i, names in enumerate(needs) for name in names}
    whole = whole_run(compiled, data)
    print(f"  {text}: run whole in {sum(whole.seconds):.1f} s", file=log, flush=True)
    ref = ReferenceRun(case.program, data)
    for i, (kernel, est) in enumerate(zip(compiled.kernels, heuristic.kernels)):
        values = ref.values(needs[i])
        ref.keep(name for name, j in last_need.items() if j > i)
        if kernel.is_reshape:
            continue
        setup = whole_setup(kernel, values, whole)
        why = _left_out(setup, min_extent, kernels)
        if why:
            print(f"  {text} kernel {kernel.index}: left out ({why})", file=log, flush=True)
            continue
        report = kernel_report(text, compiled, setup, case.program, values, est.cycles, seeds, log, whole)
        if report is not None:
            print(_line(report), file=log, flush=True)
            yield report


def trials(report: KernelReport, seeds: int, values: WindowValues) -> None:
    """The report's trials at every fraction (and the margins they settled at)."""
    done = [_trials(report, values, _plan(report.extent, f), seeds) for f in FRACTIONS]
    report.trials, report.settled_margins = [t for t, _ in done], [m for _, m in done]


def _line(r: KernelReport) -> str:
    parts = " | ".join(f"{t.simulated:.1%} {t.covered}/{t.seeds} {t.mean_error:.2%} {t.worst_error:.2%}"
                       for t in r.trials)
    settled = "/".join(f"{m:.0f}" for m in r.settled_margins)
    reduces = f" (reduces; drain {r.drain_rate:.3g}/value)" if r.reduces else ""
    return (f"| {r.case} k{r.kernel}{reduces} | {r.cycles:.3g} | {r.windows} x {r.width} (m {r.margin}; {settled}) | "
            f"{r.decomposition_error:+.2%} | {parts} | {r.heuristic_error:+.1%} | "
            f"{r.seconds_whole:.1f} / {r.seconds_windows:.1f} |")


def table(reports: list[KernelReport]) -> str:
    head = ("| kernel | cycles | windows x width (margin; settled) | all windows | " +
            " | ".join(f"{f:.0%}: simulated, covered, mean, worst" for f in FRACTIONS) +
            " | heuristic | s whole / windows |")
    rows = [head, "|" + "---|" * (head.count("|") - 1)] + [_line(r) for r in reports]
    tiny = [r for r in reports if r.cycles < TINY * r.windows]
    reports = [r for r in reports if r.cycles >= TINY * r.windows]
    summary = [f"over {len(reports)} kernels; {len(tiny)} of under {TINY} cycles per window left out of these lines "
               "(a window of them is its fill and drain)"]
    if not reports:  # every kernel left out (too few outer coordinates, or tiny)
        return "\n".join(rows + [""] + [f"- {s}" for s in summary])
    for k, f in enumerate(FRACTIONS):
        trials = [r.trials[k] for r in reports]
        covered, seeds = sum(t.covered for t in trials), sum(t.seeds for t in trials)
        summary.append(f"{f:.0%}: covered {covered}/{seeds} ({covered / max(seeds, 1):.1%}), mean error "
                       f"{np.mean([t.mean_error for t in trials]):.2%}, worst {max(t.worst_error for t in trials):.2%}")
    heuristic = [abs(r.heuristic_error) for r in reports]
    summary.append(f"heuristic: mean |error| {np.mean(heuristic):.1%}, worst {max(heuristic):.1%}")
    return "\n".join(rows + [""] + [f"- {s}" for s in summary])


def _write(path: str, reports: list[KernelReport]) -> None:
    with open(path, "w") as handle:
        json.dump([asdict(r) for r in reports], handle)


class _Resimulate:
    """`--again`: a window value a trial asks for that the file lacks (a changed draw), simulated
    on first need (the kernel is compiled and its reference computed then)."""

    cases: dict = {}

    def __init__(self, report: KernelReport):
        self.report, self.setup = report, None

    def __call__(self, margin: int, todo: list[int]) -> list[float]:
        if self.setup is None:
            if self.report.case not in self.cases:
                case, schedule = _case(self.report.case)
                data, compiled = prepared(case.program, schedule, case.inputs, 0, 0.1)
                self.cases[self.report.case] = (compiled, reference_values(case.program, data),
                                                whole_run(compiled, data))
            compiled, values, whole = self.cases[self.report.case]
            kernel = compiled.kernels[self.report.kernel]
            self.setup = whole_setup(kernel, values, whole)
            if self.report.reduces:  # its partial sums checked and dropped, its drain taken out as measured
                self.setup.partials, self.setup.drain_rate = partial_sums(kernel, values), self.report.drain_rate
            windows = kernel_windows(self.setup, _plan(self.setup.extent, FRACTIONS[0]))
            self.pop = Population(windows, np.array(self.report.x), np.zeros(len(windows), np.int64), margin, 1)
        print(f"  {self.report.case} k{self.report.kernel}: {len(todo)} windows at margin {margin} not stored: "
              "simulated", file=sys.stderr, flush=True)
        return _simulator(self.setup, self.pop)(margin, todo)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", help="MODEL:DATASET[@BLOCK]:SCHEDULE (repeatable)")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--min-extent", type=int, default=512, help="leave out kernels of fewer outer coordinates")
    parser.add_argument("--kernels", help="only these kernels of each case (indices, comma-separated)")
    parser.add_argument("--json", help="write the raw reports here (every window's x and y included)")
    parser.add_argument("--again", nargs="+", metavar="FILE",
                        help="recompute the trials from reports runs wrote with --json, merged in the order given "
                        "(simulating only window values the files lack; --json writes them back)")
    args = parser.parse_args(argv)
    start, reports = time.perf_counter(), []
    print(f"load average at start: {os.getloadavg()[0]:.1f}", file=sys.stderr)
    for path in args.again or []:
        with open(path) as handle:
            for raw in json.load(handle):
                report = KernelReport(**{**raw, "trials": []})
                trials(report, args.seeds, WindowValues(report, _Resimulate(report)))
                reports.append(report)
        if args.json:
            _write(args.json, reports)
    kernels = {int(k) for k in args.kernels.split(",")} if args.kernels else None
    for text in [] if args.again else args.case or CASES:
        for report in run_case(text, args.seeds, args.min_extent, sys.stderr, kernels):
            reports.append(report)
            if args.json:  # after every kernel: a run stopped early keeps what it measured
                _write(args.json, reports)
    print(table(reports))
    print(f"\n{len(reports)} kernels in {time.perf_counter() - start:.0f} s, load average at the end "
          f"{os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
