"""The fusion-granularity study: simulate a model's unfused, partial and full schedules.

    >>> from fuseflow.models.registry import build
    >>> rows = fusion_study(build("gcn", "karate"), ["unfused", "partial"], engine="oracle")
    >>> [r["schedule"] for r in rows], rows[0]["speedup"]
    (['unfused', 'partial'], 1.0)
"""
from __future__ import annotations

import html
import sys
import time

from .errors import FuseflowError, UserError
from .explore.heuristic import CostModel
from .explore.plot import study_chart
from .explore.progress import Progress
from .fusion.compile import compile_schedule
from .fusion.search import NoValidOrder
from .memory import MemoryLimitError
from .models.gpt3 import model_cycles
from .pipeline import simulate
from .report.notebook import table_html

COLUMNS = [("schedule", "schedule", "{}"), ("kernels", "kernels", "{}"), ("cycles", "cycles", "{:,}"),
           ("speedup", "speedup", "{:.2f}x"), ("flops_ratio", "FLOPs/unf", "{:.2f}"),
           ("mem_ratio", "mem/unf", "{:.2f}"), ("max_occupancy", "max fifo", "{:,}"),
           ("verified", "verified", "{}"), ("wall", "wall s", "{:.1f}")]
MODEL_CYCLES = ("model_cycles", "model cycles", "{:,}")  # a few decoders scaled to the whole model


# token events a study simulates by default: about five minutes of the fast engine on this
# 2-core machine (memory no longer limits it: the engine streams; `--max-tokens` changes it)
MAX_TOKENS = 3e10


def _load(compiled, est) -> float:
    """Token events weighed by what they carry: a blocked schedule's token holds a BxB tile."""
    return est.tokens * (compiled.schedule.block or 1) ** 2


def _too_long(compiled, est, max_tokens: float) -> str:
    return (f"estimated {_load(compiled, est):.2g} token events > {max_tokens:.2g} (--max-tokens)"
            + (f" (tiles of {compiled.schedule.block}x{compiled.schedule.block} counted element by element)"
               if compiled.schedule.block else ""))


def _skipped_row(case, name: str, compiled, est, why: str, wall: float = 0.0) -> dict:
    """The row of a schedule not simulated (too long, or beyond the memory budget): the
    heuristic's estimates (`explore.heuristic`) instead, and why."""
    return {"model": case.name, "dataset": case.dataset, "schedule": name, "schedule_text": str(compiled.schedule),
            "kernels": len(est.kernels), "cycles": None, "est_cycles": est.cycles, "est_flops": est.flops,
            "est_mem": est.reads + est.writes, "flops": None, "mem": None, "max_occupancy": None,
            "verified": "skipped", "max_abs_error": None, "wall": wall, "skipped": why}


def _failed_row(case, name: str, schedule: str, why: str, wall: float) -> dict:
    return {"model": case.name, "dataset": case.dataset, "schedule": name, "schedule_text": schedule,
            "kernels": None, "cycles": None, "flops": None, "mem": None, "max_occupancy": None,
            "verified": "failed", "max_abs_error": None, "wall": wall, "error": why}


def _kernel_progress(label: str):
    """A callback `simulate` calls after each kernel, showing a progress bar, and the list of
    bars it opened (to close)."""
    bars: list[Progress] = []

    def on_kernel(done: int, total: int) -> None:
        if not bars:
            bars.append(Progress(total, label=label))
        bars[0].update()

    return on_kernel, bars


def _compiled(case, schedule: str, model):
    """The schedule compiled with the data's statistics; with `layout=induced` when its declared
    layouts admit no valid order (its row's schedule text says so)."""
    try:
        return compile_schedule(case.program, schedule, model.shapes or None, stats=model.stats)
    except NoValidOrder as err:
        if err.induced is None:
            raise
        return err.induced


def _result_row(case, name: str, result, wall: float) -> dict:
    row = {"model": case.name, "dataset": case.dataset, "schedule": name, "schedule_text": result.schedule,
           "kernels": len(result.kernels), "cycles": result.cycles, "flops": result.flops,
           "mem": result.mem_reads + result.mem_writes, "max_occupancy": result.max_occupancy,
           "verified": result.verified, "max_abs_error": result.max_abs_error, "wall": wall}
    if case.layers:  # a few decoders standing for the whole model
        row["model_cycles"] = model_cycles(name, [k.cycles for k in result.kernels], *case.layers)
    return row


def _simulated_row(case, name: str, schedule: str, compiled, est, model, engine, budget, progress, start):
    """The row of one schedule: simulated, or estimated when it would not fit in memory, or
    failed (a FuseflowError of the first schedule propagates: nothing to compare with)."""
    on_kernel, bar = _kernel_progress(f"{case.name} {name} kernels")
    if progress:
        print(f"  simulating {case.name} on {case.dataset}: {name} ...", file=sys.stderr, flush=True)
    try:
        result = simulate(case.program, compiled, case.inputs, engine=engine, budget=budget,
                          on_kernel=on_kernel if progress else None)
    except MemoryLimitError as err:  # estimated instead, with the guard's reason
        if est is None:
            raise
        return _skipped_row(case, name, compiled, est, f"would not fit in memory: {err.one_line()}",
                            time.perf_counter() - start)
    except FuseflowError as err:
        if est is None:
            raise
        return _failed_row(case, name, schedule, err.one_line(), time.perf_counter() - start)
    finally:
        for b in bar:
            b.close()
    return _result_row(case, name, result, time.perf_counter() - start)


def _ratios(rows: list[dict], base_est) -> None:
    """Speedup, FLOPs and memory of every row relative to the first (estimates to the first's
    estimate); whole-model cycles where a case stands for a larger model."""
    base = rows[0]
    key = "model_cycles" if "model_cycles" in base else "cycles"
    for row in rows:
        if row.get("error"):
            row["speedup"] = row["flops_ratio"] = row["mem_ratio"] = None
        elif row.get("skipped"):
            row["speedup"] = base_est.cycles / row["est_cycles"] if row["est_cycles"] else float("nan")
            row["flops_ratio"] = row["est_flops"] / base_est.flops if base_est.flops else float("nan")
            row["mem_ratio"] = row["est_mem"] / (base_est.reads + base_est.writes)
        else:
            row["speedup"] = base[key] / row[key] if row[key] else float("nan")
            row["flops_ratio"] = row["flops"] / base["flops"] if base["flops"] else float("nan")
            row["mem_ratio"] = row["mem"] / base["mem"] if base["mem"] else float("nan")


def fusion_study(case, schedules: list[str], engine: str = "fast", progress: bool = False,
                 max_tokens: float = MAX_TOKENS, budget=None) -> list[dict]:
    """One row per preset (or schedule string), normalised to the first one (unfused). Each
    schedule is compiled once, for the cost estimate and the simulation. A schedule estimated
    beyond `max_tokens` token events (tile elements for blocked ones), or one that would not
    fit in memory (`budget`, a `fuseflow.memory.Budget`; default: what is available), is not
    simulated: its row holds the heuristic's estimates (`est_*`, ratios to the first row's
    estimate) and says why; one that fails says why, and one whose declared layouts admit no
    valid order runs with `layout=induced` (its `schedule_text` says so). A case that simulates
    a few decoders of a larger model (`case.layers`) also gets the whole model's cycles
    (`model_cycles`), and its speedups are on those."""
    model = CostModel(case.program, case.inputs)
    rows, first = [], None
    for name in schedules:
        schedule = case.presets.get(name, name)
        start = time.perf_counter()
        try:
            compiled = _compiled(case, schedule, model)
            est = model.estimate(compiled) if rows else None
        except FuseflowError as err:  # this schedule fails; the others still run
            if not rows:
                raise
            rows.append(_failed_row(case, name, schedule, err.one_line(), time.perf_counter() - start))
            continue
        load = _load(compiled, est) if est is not None else 0.0
        if load > max_tokens:
            if progress:
                print(f"  skipping {case.name} on {case.dataset}: {name} "
                      f"(estimated {load:.2g} token events)", file=sys.stderr)
            rows.append(_skipped_row(case, name, compiled, est, _too_long(compiled, est, max_tokens)))
            continue
        rows.append(_simulated_row(case, name, schedule, compiled, est, model, engine, budget, progress, start))
        first = first or compiled
    if not rows:
        raise UserError("no schedules to study", "--schedules")
    _ratios(rows, model.estimate(first) if any(r.get("skipped") for r in rows) else None)
    return StudyTable(rows)


def _columns(rows: list[dict]) -> list[tuple]:
    """COLUMNS, with the whole model's cycles after the cycles when the rows have them."""
    if not any(row.get("model_cycles") for row in rows):
        return COLUMNS
    at = [key for key, _, _ in COLUMNS].index("cycles") + 1
    return COLUMNS[:at] + [MODEL_CYCLES] + COLUMNS[at:]


def _cells(row: dict, columns=COLUMNS) -> list[str]:
    """A row's cells in the columns' order: `-` where it has no value, `~` before estimated ratios."""
    return [("~" if row.get("skipped") and key in ("speedup", "flops_ratio", "mem_ratio") else "")
            + (fmt.format(row[key]) if row.get(key) is not None else "-") for key, _, fmt in columns]


def format_table(rows: list[dict]) -> str:
    """The study as a text table; a skipped schedule shows its estimated ratios marked `~`."""
    columns = _columns(rows)
    cells = [_cells(row, columns) for row in rows]
    headers = [title for _, title, _ in columns]
    widths = [max(len(h), *(len(c[k]) for c in cells)) for k, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) if k else h.ljust(w) for k, (h, w) in enumerate(zip(headers, widths)))]
    for c in cells:
        lines.append("  ".join(x.rjust(w) if k else x.ljust(w) for k, (x, w) in enumerate(zip(c, widths))))
    notes = [f"{row['schedule']}: not simulated, {row['skipped']}; ~ marks heuristic estimates"
             for row in rows if row.get("skipped")]
    notes += [f"{row['schedule']}: failed: {row['error']}" for row in rows if row.get("error")]
    return "\n".join(lines + notes)


def plot(rows: list[dict], path: str) -> str:
    """Speedup (higher is better) and FLOPs and memory (lower is better) relative to the first
    schedule, on separate axes with value labels (`explore.plot.study_chart`)."""
    return study_chart(rows, path)


class StudyTable(list):
    """The rows of a fusion study (a list of dicts), shown as a table in notebooks.

        >>> rows = StudyTable([{"schedule": "unfused", "kernels": 2, "cycles": 100, "speedup": 1.0,
        ...                     "flops_ratio": 1.0, "mem_ratio": 1.0, "max_occupancy": 3, "verified": True,
        ...                     "wall": 0.1}])
        >>> ">1.00x</td>" in rows._repr_html_(), rows[0]["cycles"]
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
