"""The fusion-granularity study: simulate a model's unfused, partial and full schedules.

    >>> from fuseflow.models.registry import build
    >>> rows = fusion_study(build("gcn", "karate"), ["unfused", "partial"], engine="oracle")
    >>> [r.schedule for r in rows], rows[0].speedup
    (['unfused', 'partial'], 1.0)
"""
from __future__ import annotations

import gc
import html
import sys
import time
from dataclasses import replace

from ..checks import check_schedule
from ..errors import FuseflowError, UserError
from ..fusion.compile import compile_schedule
from ..fusion.estimate import CostModel
from ..fusion.search import NoValidOrder
from ..memory import MemoryLimitError, release_freed
from ..models.cycles import model_cycles
from ..partition.run import simulate_partitioned
from ..partition.sampled import LEAST_SAMPLED, SamplePlan, WholeKernel, largest_whole, whole_kernels
from ..pipeline import simulate
from ..progress import RunProgress, is_terminal, numba_notice
from ..report.notebook import table_html
from ..schedule.schedule import Schedule
from ..tables import to_csv, to_frame
from . import MAX_TOKENS
from .plot import study_chart
from .row import HEURISTIC, ResultRow

COLUMNS = [("schedule", "schedule", "{}"), ("kernels", "kernels", "{}"), ("cycles", "cycles", "{:,}"),
           ("speedup", "speedup", "{:.2f}x"), ("flops_ratio", "FLOPs/unf", "{:.2f}"),
           ("mem_ratio", "mem/unf", "{:.2f}"), ("max_occupancy", "max fifo", "{:,}"),
           ("verdict", "verified", "{}"), ("wall_seconds", "wall s", "{:.1f}")]  # (ResultRow attribute, title, format)
MODEL_CYCLES = ("model_cycles", "model cycles", "{:,}")  # a few decoders scaled to the whole model
RATIOS = ("speedup", "flops_ratio", "mem_ratio")


def _load(compiled, est) -> float:
    """Token events weighed by what they carry: a blocked schedule's token holds a BxB tile."""
    return est.tokens * (compiled.schedule.block or 1) ** 2


def _too_long(compiled, est, max_tokens: float) -> str:
    whole = kernels_run_whole(compiled, est, _error_plan(1.0))
    whole_load = sum(w.load for w in whole)
    why = (f"its kernels of fewer than {SAMPLE_FROM_WINDOWS} windows, which a sample runs whole, {whole_load:.2g} "
           f"token events, over {SAMPLE_WHOLE_ALLOWANCE:g}x that (the largest {largest_whole(whole)})"
           if whole_load > SAMPLE_WHOLE_ALLOWANCE * max_tokens else f"its least sample over {SAMPLE_ALLOWANCE:g}x that")
    return (f"estimated {_load(compiled, est):.2g} token events > {max_tokens:.2g} (--max-tokens), and {why}"
            + (f" (tiles of {compiled.schedule.block}x{compiled.schedule.block} counted element by element)"
               if compiled.schedule.block else ""))


SAMPLE_ERROR = 0.02  # a schedule beyond max_tokens is sampled to this half-width of its 95% interval ...
SAMPLE_WINDOWS = 16384  # ... from up to this many windows per kernel (more windows: a smaller least sample)
SAMPLE_ALLOWANCE = 4.0  # ... simulating at most this many times max_tokens (estimated), else the heuristic
# ... and only kernels of at least this many windows: a sample of fewer costs about as much as the
# whole where the heuristic predicts windows poorly (GCN over DBLP, full: 276 windows, 22% of them
# sampled gave +-18% in 1,716 s under load; the whole kernel is exact)
SAMPLE_FROM_WINDOWS = 512
# ... such kernels run whole however long, unless together beyond this many times max_tokens: then
# the heuristic (GraphSAGE over DBLP, full: one kernel of 276 windows, 2.0e10 token events, runs
# whole; GPT-3 Small scalar: its feed-forward kernels, 16 windows of 1,024 rows, 7.7e10 to 1.1e11)
SAMPLE_WHOLE_ALLOWANCE = 20.0
# ... each window estimated at most at this many cycles, else split (`partition.sampled.narrowed`): a
# fully fused GCN over the MAG twin costs a whole scan of the nodes per row (64 rows: 47M cycles)
SAMPLE_WINDOW_CYCLES = 4e6


def kernels_run_whole(compiled, est, plan: SamplePlan) -> list[WholeKernel]:
    """The kernels of `compiled` that `plan` runs whole (`partition.sampled.whole_kernels`),
    each with its estimated load (tile elements for blocked schedules)."""
    tile = (compiled.schedule.block or 1) ** 2
    return whole_kernels(compiled, {k.index: k.tokens * tile for k in est.kernels}, plan)


def _error_plan(max_fraction: float) -> SamplePlan:
    """The suite's sample plan: to `SAMPLE_ERROR`, growing to at most `max_fraction` of the windows."""
    return SamplePlan(error=SAMPLE_ERROR, windows=SAMPLE_WINDOWS, max_fraction=max_fraction,
                      whole_below=SAMPLE_FROM_WINDOWS, window_cycles=SAMPLE_WINDOW_CYCLES)


def sample_plan(compiled, est, max_tokens: float) -> SamplePlan | None:
    """How a schedule too long to simulate whole is sampled within `SAMPLE_ALLOWANCE` x
    `max_tokens` token events (a window costs up to twice its share: its margin), or None when
    even its least sample would not fit (then the heuristic's estimate stands, as the last resort),
    or when its kernels of too few windows to sample (`kernels_run_whole`), which run whole, would
    together pass `SAMPLE_WHOLE_ALLOWANCE` x `max_tokens`."""
    share = SAMPLE_ALLOWANCE * max_tokens / max(_load(compiled, est), 1.0) / 2
    least = (2 + LEAST_SAMPLED) / SAMPLE_WINDOWS  # windows 0 and last, and the least sample besides
    plan = _error_plan(min(1.0, share))
    run_whole = sum(w.load for w in kernels_run_whole(compiled, est, plan))
    if share < least or run_whole > SAMPLE_WHOLE_ALLOWANCE * max_tokens:
        return None
    return plan


def _sampled_row(case, name: str, compiled, est, plan: SamplePlan, engine: str, start: float, budget=None,
                 first: bool = False) -> ResultRow:
    """The row of a schedule estimated from a sample of its kernels' windows (`partition`), or
    its estimates if it would not fit in memory (`_row_or_estimates`)."""
    return _row_or_estimates(case, name, compiled, est, start, first, lambda: simulate_partitioned(
        case.program, compiled, case.inputs, engine=engine, sample=plan, budget=budget))


def _row_or_estimates(case, name: str, compiled, est, start: float, first: bool, run) -> ResultRow:
    """The study row of `run()`'s result, or the heuristic's estimates with the guard's reason
    if it would not fit in memory (the `first`, the baseline, must fit: the error is raised)."""
    try:
        result = run()
    except MemoryLimitError as err:
        if first:
            raise
        return _skipped_row(case, name, compiled, est, f"would not fit in memory: {err.one_line()}",
                            time.perf_counter() - start)
    finally:  # the run's cyclic garbage and freed heap go now, not during the next schedule's run
        gc.collect()
        release_freed()
    return _result_row(case, name, result, est, time.perf_counter() - start)


def _skipped_row(case, name: str, compiled, est, why: str, wall: float = 0.0) -> ResultRow:
    """The row of a schedule not simulated (too long, or beyond the memory budget): the
    heuristic's estimates (`fusion.estimate`) instead, and why (the last resort)."""
    return ResultRow(name, "estimated", model=case.name, dataset=case.dataset, schedule_text=str(compiled.schedule),
                     kernels=len(est.kernels), est_cycles=est.cycles, est_flops=est.flops,
                     est_mem=est.reads + est.writes, wall_seconds=wall, reason=why, mode="heuristic",
                     method=HEURISTIC + why)


def _failed_row(case, name: str, schedule: str, why: str, wall: float) -> ResultRow:
    return ResultRow(name, "error", model=case.name, dataset=case.dataset, schedule_text=schedule,
                     wall_seconds=wall, error=why)


def _note(progress: bool, out, text: str) -> None:
    """A progress line, on a terminal only (as the bars)."""
    out = out if out is not None else sys.stderr
    if progress and is_terminal(out):
        print(text, file=out, flush=True)


def _compiled(case, schedule, model):
    """The schedule compiled with the data's statistics; with `layout=induced` when its declared
    layouts admit no valid order (its row's schedule text says so)."""
    try:
        return compile_schedule(case.program, schedule, model.shapes or None, stats=model.stats)
    except NoValidOrder as err:
        if err.induced is None:
            raise
        return err.induced


def _simulate_row(case, name: str, compiled, est, engine: str, progress: bool, out, budget, start: float,
                  first: bool, watch=None) -> ResultRow:
    """Simulate one compiled schedule with a live progress display (token events of the
    heuristic's per-kernel estimates; `watch(label, estimated_events)`, if given, makes the
    display instead: a context with `on_kernel` and `on_events`); its study row, or its
    estimates if it would not fit in memory (`_row_or_estimates`)."""
    _note(progress, out, f"  simulating {case.name} on {case.dataset}: {name} ...")
    label, events = f"{case.name} {name}", [k.tokens for k in est.kernels]

    def run():
        with (watch(label, events) if watch else
              RunProgress(label, events, out=out, enabled=None if progress else False)) as bar, numba_notice(out):
            return simulate(case.program, compiled, case.inputs, engine=engine, budget=budget,
                            on_kernel=bar.on_kernel, on_events=bar.on_events)

    return _row_or_estimates(case, name, compiled, est, start, first, run)


def _result_row(case, name: str, result, est, wall: float) -> ResultRow:
    layers = getattr(case, "layers", None)  # a few decoders standing for the whole model
    return ResultRow.from_result(result, name, model=case.name, dataset=case.dataset, wall_seconds=wall,
                                 est_cycles=est.cycles, est_flops=est.flops, est_mem=est.reads + est.writes,
                                 model_cycles=model_cycles(name, [k.cycles for k in result.kernels], *layers)
                                 if layers else None)


def study_schedule(case, name: str, model: CostModel, engine: str = "fast", max_tokens: float = MAX_TOKENS,
                   budget=None, first: bool = False, progress: bool = False, out=None, watch=None,
                   schedule: Schedule | None = None) -> ResultRow:
    """One row of a fusion study: the preset (or schedule string) `name` compiled once, for the
    cost estimate and the simulation, then simulated and verified, or estimated (`skipped`
    says why) when its estimate exceeds `max_tokens` token events or it would not fit in memory
    (the `first`, the baseline, raises instead). Ratios are added over a study's rows by
    `add_ratios`. Raises FuseflowError when the schedule fails. `model` is the case's
    `CostModel`; `watch` as in `_simulate_row`; `schedule` the record `name` stands for where the
    caller has read it already (`read_schedules`)."""
    start = time.perf_counter()
    parsed = check_schedule(case.program, case.presets.get(name, name) if schedule is None else schedule,
                            model.shapes or None)
    compiled = _compiled(case, parsed, model)
    est = model.estimate(compiled)
    if _load(compiled, est) > max_tokens:
        plan = sample_plan(compiled, est, max_tokens)
        if plan is not None:
            _note(progress, out, f"  sampling {case.name} on {case.dataset}: {name} "
                                 f"(estimated {_load(compiled, est):.2g} token events)")
            return _sampled_row(case, name, compiled, est, plan, engine, start, budget, first)
        _note(progress, out, f"  skipping {case.name} on {case.dataset}: {name} "
                             f"(estimated {_load(compiled, est):.2g} token events)")
        return _skipped_row(case, name, compiled, est, _too_long(compiled, est, max_tokens),
                            time.perf_counter() - start)
    return _simulate_row(case, name, compiled, est, engine, progress, out, budget, start, first, watch)


def failed_row(case, name: str, err: FuseflowError, wall: float) -> ResultRow:
    """The row of a schedule that failed (compile or simulation error), with the error's line."""
    return _failed_row(case, name, case.presets.get(name, name), err.one_line(), wall)


def read_schedules(case, names) -> dict:
    """Each preset name (or schedule string) read once into its `Schedule`, or the error reading it.

        >>> from types import SimpleNamespace
        >>> read = read_schedules(SimpleNamespace(presets={"full": "full layout=induced"}), ["full", "fusion=[a"])
        >>> read["full"].layout, type(read["fusion=[a"]).__name__
        ('induced', 'UserError')
    """
    read = {}
    for name in names:
        try:
            read[name] = Schedule.parse(case.presets.get(name, name))
        except FuseflowError as err:
            read[name] = err
    return read


def fusion_study(case, schedules: list[str], engine: str = "fast", progress: bool = False,
                 max_tokens: float = MAX_TOKENS, out=None, budget=None, read: dict | None = None) -> StudyTable:
    """One row per preset (or schedule string), normalised to the first one (unfused). Each
    schedule is compiled once, for the cost estimate and the simulation. A schedule estimated
    beyond `max_tokens` token events (tile elements for blocked ones; the first one included),
    or one after the first that would not fit in memory (`budget`, a `fuseflow.memory.Budget`;
    default: what is available), is not simulated: its row holds the heuristic's estimates
    (`est_*`) and says why, and its ratios are the estimates' ratios (marked `~`). One that
    fails says why; if the first fails, or would not fit, that error is raised. One whose declared
    layouts admit no valid order runs with `layout=induced` (its `schedule_text` says so).
    With `progress`, each simulation shows a live display on `out` (stderr) on a terminal. `read`:
    the schedules as `read_schedules` read them, where the caller has."""
    model = CostModel(case.program, case.inputs)
    read = read_schedules(case, schedules) if read is None else read
    rows = []
    for name in schedules:
        start = time.perf_counter()
        try:
            if isinstance(read[name], FuseflowError):
                raise read[name]
            rows.append(study_schedule(case, name, model, engine, max_tokens, budget, not rows, progress, out,
                                       schedule=read[name]))
        except FuseflowError as err:  # this schedule fails; the others still run (a mismatch is a bug: exit 3)
            if not rows or err.exit_status == 3:
                raise
            rows.append(failed_row(case, name, err, time.perf_counter() - start))
    if not rows:
        raise UserError("no schedules to study", "--schedules")
    return StudyTable(add_ratios(rows))


def add_ratios(rows: list[ResultRow]) -> list[ResultRow]:
    """The rows with speedup, FLOPs and memory relative to the first row: measured where both
    were simulated (whole-model cycles where a case stands for a larger model), else the
    heuristic's estimates of both (`est_cycles`, `est_flops`, `est_mem`; marked
    `estimated_ratios`, shown with `~`).

        >>> rows = [ResultRow("a", cycles=100, flops=10, mem_reads=4, mem_writes=0),
        ...         ResultRow("b", cycles=50, flops=20, mem_reads=1, mem_writes=1)]
        >>> row = add_ratios(rows)[1]; row.speedup, row.flops_ratio, row.mem_ratio
        (2.0, 2.0, 0.5)
    """
    base = rows[0]
    whole = base.model_cycles is not None
    out = []
    for row in rows:
        row = replace(row, speedup=None, flops_ratio=None, mem_ratio=None, estimated_ratios=False)
        if row.error or base.error:
            pass
        elif row.reason or base.reason:
            row = replace(row, speedup=_ratio(base.est_cycles, row.est_cycles),
                          flops_ratio=_ratio(row.est_flops, base.est_flops),
                          mem_ratio=_ratio(row.est_mem, base.est_mem), estimated_ratios=True)
        else:
            row = replace(row, speedup=_ratio(base.model_cycles if whole else base.cycles,
                                              row.model_cycles if whole else row.cycles),
                          flops_ratio=_ratio(row.flops, base.flops), mem_ratio=_ratio(row.mem, base.mem))
        out.append(row)
    return out


def _ratio(a, b) -> float:
    return a / b if b else float("nan")


def same_schedules(case, read: dict) -> list[tuple[str, str]]:
    """Pairs of the named presets that are the same schedule on this model (e.g. `partial` and
    `full` of a model written as one statement), so that a study can say so; `read` as
    `read_schedules` gives it (names that did not read are left out)."""
    seen, pairs = {}, []
    for name, parsed in read.items():
        try:
            if isinstance(parsed, FuseflowError):
                continue
            key = repr((parsed.partition(case.program), sorted(parsed.orders.items()),
                        sorted(parsed.formats.items()), parsed.layout, sorted(parsed.pars.items()), parsed.block,
                        parsed.order_rule))
        except FuseflowError:
            continue
        if key in seen:
            pairs.append((seen[key], name))
        else:
            seen[key] = name
    return pairs


def _columns(rows: list[ResultRow]) -> list[tuple]:
    """COLUMNS, with the whole model's cycles after the cycles when the rows have them."""
    if not any(row.model_cycles for row in rows):
        return COLUMNS
    at = [key for key, _, _ in COLUMNS].index("cycles") + 1
    return COLUMNS[:at] + [MODEL_CYCLES] + COLUMNS[at:]


def _cells(row: ResultRow, columns=COLUMNS) -> list[str]:
    """A row's cells in the columns' order: `-` where it has no value, `~` before estimated ratios."""
    return [("~" if row.estimated_ratios and key in RATIOS else "")
            + (fmt.format(getattr(row, key)) if getattr(row, key) is not None else "-") for key, _, fmt in columns]


def format_table(rows: list[ResultRow]) -> str:
    """The study as a text table; ratios of heuristic estimates (a schedule not simulated, or
    every row when the first was not) are marked `~`."""
    columns = _columns(rows)
    cells = [_cells(row, columns) for row in rows]
    headers = [title for _, title, _ in columns]
    widths = [max(len(h), *(len(c[k]) for c in cells)) for k, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) if k else h.ljust(w) for k, (h, w) in enumerate(zip(headers, widths)))]
    for c in cells:
        lines.append("  ".join(x.rjust(w) if k else x.ljust(w) for k, (x, w) in enumerate(zip(c, widths))))
    notes = [f"{row.schedule}: not simulated, {row.reason}; ~ marks ratios of heuristic estimates"
             for row in rows if row.reason]
    notes += [f"{row.schedule}: failed: {row.error}" for row in rows if row.error]
    return "\n".join(lines + notes)


def plot(rows: list[ResultRow], path: str) -> str:
    """Speedup (higher is better) and FLOPs and memory (lower is better) relative to the first
    schedule, on separate axes with value labels (`studies.plot.study_chart`)."""
    return study_chart(rows, path)


class StudyTable(list):
    """The rows of a fusion study (`ResultRow`s), shown as a table in notebooks.

        >>> rows = StudyTable([ResultRow("unfused", kernels=2, cycles=100, speedup=1.0, flops_ratio=1.0,
        ...                              mem_ratio=1.0, max_occupancy=3, verified=True, wall_seconds=0.1)])
        >>> ">1.00x</td>" in rows._repr_html_(), rows[0].cycles
        (True, 100)
    """

    def _repr_html_(self) -> str:
        text = format_table(list(self)).splitlines()
        columns = _columns(list(self))
        cells = [[html.escape(c) for c in _cells(row, columns)] for row in self]
        notes = "".join(f"<div>{html.escape(n)}</div>" for n in text[len(self) + 1:])
        return f"<div>{table_html([title for _, title, _ in columns], cells)}{notes}</div>"

    def plot(self, path: str) -> str:
        """Draw the study's chart (speedup, FLOPs and memory relative to the first row) to `path`."""
        return study_chart(list(self), path)


class StudyResult:
    """A fusion study of one model on one dataset: `rows` (a `StudyTable`, one `ResultRow` per
    schedule, ratios to the first), printable as the table the CLI shows, shown as a table in
    notebooks, exportable as JSON, CSV or a DataFrame."""

    def __init__(self, case, rows: list[ResultRow], same: list[tuple[str, str]] = ()):
        self.model, self.dataset, self.note = case.name, case.dataset, case.note
        self.rows, self.same = StudyTable(rows), list(same)

    def __str__(self) -> str:
        head = f"fusion study: {self.model} on {self.dataset}" + (f" ({self.note})" if self.note else "")
        same = [f"{a} and {b} are the same schedule on this model" for a, b in self.same]
        return "\n".join([head, format_table(self.rows), *same])

    def __repr__(self) -> str:
        return f"<StudyResult {self.model} on {self.dataset}: {', '.join(r.schedule for r in self.rows)}>"

    def _repr_html_(self) -> str:
        return f"<div><b>{html.escape(self.model)} on {html.escape(self.dataset)}</b></div>{self.rows._repr_html_()}"

    def to_json(self) -> list[dict]:
        """The rows (JSON-ready: plain numbers, strings, booleans and None; `ResultRow.study_json`)."""
        return [row.study_json() for row in self.rows]

    def to_frame(self):
        """The rows as a pandas DataFrame."""
        return to_frame(self.to_json())

    def to_csv(self, path=None) -> str:
        """The rows as CSV text (also written to `path` if given)."""
        return to_csv(self.to_json(), path)

    def plot(self, path: str) -> str:
        """The study's chart (see `plot`); returns the path."""
        return plot(self.rows, path)
