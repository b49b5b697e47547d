"""The fusion-granularity study: simulate a model's unfused, partial and full schedules.

    >>> from fuseflow.models.registry import build
    >>> rows = fusion_study(build("gcn", "karate"), ["unfused", "partial"], engine="oracle")
    >>> [r["schedule"] for r in rows], rows[0]["speedup"]
    (['unfused', 'partial'], 1.0)
"""
from __future__ import annotations

import sys
import time

from .errors import FuseflowError, UserError
from .memory import MemoryLimitError
from .pipeline import simulate

COLUMNS = [("schedule", "schedule", "{}"), ("kernels", "kernels", "{}"), ("cycles", "cycles", "{:,}"),
           ("speedup", "speedup", "{:.2f}x"), ("flops_ratio", "FLOPs/unf", "{:.2f}"),
           ("mem_ratio", "mem/unf", "{:.2f}"), ("max_occupancy", "max fifo", "{:,}"),
           ("verified", "verified", "{}"), ("wall", "wall s", "{:.1f}")]


MAX_TOKENS = 2e9  # token events the fast engine simulates within this machine's memory (24 GB)


def _load(compiled, est) -> float:
    """Token events weighed by what they carry: a blocked schedule's token holds a BxB tile."""
    return est.tokens * (compiled.schedule.block or 1) ** 2


def _skipped_row(case, name: str, compiled, est, max_tokens: float) -> dict:
    """The row of a schedule estimated (`explore.heuristic`, which counts about half of what the
    simulator streams) beyond `max_tokens` token events (`_load`): the estimates instead of a
    simulation."""
    return {"model": case.name, "dataset": case.dataset, "schedule": name, "schedule_text": str(compiled.schedule),
            "kernels": len(est.kernels), "cycles": None, "est_cycles": est.cycles, "est_flops": est.flops,
            "est_mem": est.reads + est.writes, "flops": None, "mem": None, "max_occupancy": None,
            "verified": "skipped", "max_abs_error": None, "wall": 0.0,
            "skipped": f"estimated {_load(compiled, est):.2g} token events > {max_tokens:.2g}"
                       + (f" (tiles of {compiled.schedule.block}x{compiled.schedule.block} counted "
                          "element by element)" if compiled.schedule.block else "")}


def _failed_row(case, name: str, schedule: str, why: str, wall: float) -> dict:
    return {"model": case.name, "dataset": case.dataset, "schedule": name, "schedule_text": schedule,
            "kernels": None, "cycles": None, "flops": None, "mem": None, "max_occupancy": None,
            "verified": "failed", "max_abs_error": None, "wall": wall, "error": why}


def _note(progress: bool, out, text: str) -> None:
    """A progress line, on a terminal only (as the bars)."""
    from .explore.progress import is_terminal

    out = out if out is not None else sys.stderr
    if progress and is_terminal(out):
        print(text, file=out, flush=True)


def _estimate_row(case, name: str, compiled, est, max_tokens: float, progress: bool, out):
    """The row of a schedule estimated beyond `max_tokens`, or None when it may be simulated."""
    load = _load(compiled, est)
    if load <= max_tokens:
        return None
    _note(progress, out, f"  skipping {case.name} on {case.dataset}: {compiled.schedule} "
                         f"(estimated {load:.2g} token events)")
    return _skipped_row(case, name, compiled, est, max_tokens)


def _simulate_row(case, name: str, compiled, est, engine: str, progress: bool, out, budget, start: float) -> dict:
    """Simulate one compiled schedule with a live progress display; its study row."""
    from .explore.progress import RunProgress, numba_notice

    options = {"budget": budget} if budget is not None and accepts(simulate, "budget") else {}
    _note(progress, out, f"  simulating {case.name} on {case.dataset}: {name} ...")
    with RunProgress(f"{case.name} {name}", [k.tokens for k in est.kernels], out=out, enabled=None
                     if progress else False) as bar, numba_notice(out):
        if accepts(simulate, "on_events"):
            options["on_events"] = bar.on_events
        result = simulate(case.program, compiled, case.inputs, engine=engine, on_kernel=bar.on_kernel, **options)
    return {"model": case.name, "dataset": case.dataset, "schedule": name, "schedule_text": result.schedule,
            "kernels": len(result.kernels), "cycles": result.cycles, "flops": result.flops,
            "mem": result.mem_reads + result.mem_writes, "max_occupancy": result.max_occupancy,
            "verified": result.verified, "max_abs_error": result.max_abs_error,
            "wall": time.perf_counter() - start, "est_cycles": est.cycles, "est_flops": est.flops,
            "est_mem": est.reads + est.writes}


def accepts(fn, keyword: str) -> bool:
    """Whether `fn` takes `keyword` (hooks that newer simulators offer)."""
    import inspect

    return keyword in inspect.signature(fn).parameters


def fusion_study(case, schedules: list[str], engine: str = "fast", progress: bool = False,
                 max_tokens: float = MAX_TOKENS, out=None, budget=None) -> list[dict]:
    """One row per preset (or schedule string), normalised to the first one (unfused). Each
    schedule is compiled once, for the cost estimate and the simulation. A schedule estimated
    beyond `max_tokens` token events (tile elements for blocked ones) is not simulated, the
    first one included: its row holds the heuristic's estimates (`est_*`) and says why, and its
    ratios are the estimates' ratios (marked `~`). One that fails says why. With `progress`,
    each simulation shows a live display on `out` (stderr) when that is a terminal."""
    from .checks import check_schedule
    from .explore.heuristic import CostModel
    from .fusion.compile import compile_schedule

    model = CostModel(case.program, case.inputs)
    rows, estimates = [], []
    for name in schedules:
        schedule = case.presets.get(name, name)
        start = time.perf_counter()
        try:
            parsed = check_schedule(case.program, schedule, model.shapes or None, stats=model.stats)
            compiled = compile_schedule(case.program, parsed, model.shapes or None, stats=model.stats)
            est = model.estimate(compiled)
            row = _estimate_row(case, name, compiled, est, max_tokens, progress, out) or \
                _simulate_row(case, name, compiled, est, engine, progress, out, budget, start)
        except FuseflowError as err:  # this schedule fails; the others still run
            if not rows and not isinstance(err, MemoryLimitError):
                raise
            rows.append(_failed_row(case, name, schedule, err.one_line(), time.perf_counter() - start))
            estimates.append(None)
            continue
        rows.append(row)
        estimates.append(est)
    if not rows:
        raise UserError("no schedules to study", "--schedules")
    _add_ratios(rows, estimates)
    return rows


def _add_ratios(rows: list[dict], estimates: list) -> None:
    """Speedup, FLOPs and memory relative to the first row: measured where both were simulated,
    else the heuristic's estimates of both (marked `estimated_ratios`, shown with `~`)."""
    base, base_est = rows[0], estimates[0]
    for row, est in zip(rows, estimates):
        row["speedup"] = row["flops_ratio"] = row["mem_ratio"] = None
        if row.get("error") or base.get("error"):
            continue
        if row.get("skipped") or base.get("skipped"):
            mem = base_est.reads + base_est.writes
            row.update(speedup=base_est.cycles / est.cycles if est.cycles else float("nan"),
                       flops_ratio=est.flops / base_est.flops if base_est.flops else float("nan"),
                       mem_ratio=(est.reads + est.writes) / mem if mem else float("nan"), estimated_ratios=True)
            continue
        row["speedup"] = base["cycles"] / row["cycles"] if row["cycles"] else float("nan")
        row["flops_ratio"] = row["flops"] / base["flops"] if base["flops"] else float("nan")
        row["mem_ratio"] = row["mem"] / base["mem"] if base["mem"] else float("nan")


def same_schedules(case, names) -> list[tuple[str, str]]:
    """Pairs of the named presets that are the same schedule on this model (e.g. `partial` and
    `full` of a model written as one statement), so that a study can say so."""
    from .schedule.schedule import Schedule

    seen, pairs = {}, []
    for name in names:
        try:
            parsed = Schedule.parse(case.presets.get(name, name))
            key = repr((parsed.partition(case.program), sorted(parsed.orders.items()),
                        sorted(parsed.formats.items()), parsed.layout, sorted(parsed.pars.items()), parsed.block))
        except FuseflowError:
            continue
        if key in seen:
            pairs.append((seen[key], name))
        else:
            seen[key] = name
    return pairs


def format_table(rows: list[dict]) -> str:
    """The study as a text table; a skipped schedule shows its estimated ratios marked `~`."""
    cells = [[("~" if row.get("estimated_ratios") and key in ("speedup", "flops_ratio", "mem_ratio") else "")
              + (fmt.format(row[key]) if row[key] is not None else "-") for key, _, fmt in COLUMNS] for row in rows]
    headers = [title for _, title, _ in COLUMNS]
    widths = [max(len(h), *(len(c[k]) for c in cells)) for k, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) if k else h.ljust(w) for k, (h, w) in enumerate(zip(headers, widths)))]
    for c in cells:
        lines.append("  ".join(x.rjust(w) if k else x.ljust(w) for k, (x, w) in enumerate(zip(c, widths))))
    notes = [f"{row['schedule']}: not simulated, {row['skipped']}; ~ marks ratios of heuristic estimates"
             for row in rows if row.get("skipped")]
    notes += [f"{row['schedule']}: failed: {row['error']}" for row in rows if row.get("error")]
    return "\n".join(lines + notes)


def plot(rows: list[dict], path: str) -> str:
    """Grouped bars (speedup, FLOPs and memory relative to unfused) per schedule, like the
    reference's Figure 12."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [("speedup", "speedup vs unfused"), ("flops_ratio", "FLOPs / unfused"), ("mem_ratio", "memory / unfused")]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.8 / len(metrics)
    for k, (key, label) in enumerate(metrics):
        ax.bar([i + k * width for i in range(len(rows))], [r[key] if r[key] is not None else 0.0 for r in rows], width, label=label)
    ax.set_xticks([i + width for i in range(len(rows))], [r["schedule"] for r in rows])
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_title(f"{rows[0]['model']} on {rows[0]['dataset']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


class StudyResult:
    """A fusion study of one model on one dataset: `rows` (one dict per schedule, ratios to the
    first), printable as the table the CLI shows, exportable as JSON, CSV or a DataFrame."""

    def __init__(self, case, rows: list[dict], same: list[tuple[str, str]] = ()):
        self.model, self.dataset, self.note = case.name, case.dataset, case.note
        self.rows, self.same = rows, list(same)

    def __str__(self) -> str:
        head = f"fusion study: {self.model} on {self.dataset}" + (f" ({self.note})" if self.note else "")
        same = [f"{a} and {b} are the same schedule on this model" for a, b in self.same]
        return "\n".join([head, format_table(self.rows), *same])

    def __repr__(self) -> str:
        return f"<StudyResult {self.model} on {self.dataset}: {', '.join(r['schedule'] for r in self.rows)}>"

    def to_json(self) -> list[dict]:
        """The rows (JSON-ready: plain numbers, strings, booleans and None)."""
        return [dict(row) for row in self.rows]

    def to_frame(self):
        """The rows as a pandas DataFrame."""
        from .tables import to_frame

        return to_frame(self.rows)

    def to_csv(self, path=None) -> str:
        """The rows as CSV text (also written to `path` if given)."""
        from .tables import to_csv

        return to_csv(self.rows, path)

    def plot(self, path: str) -> str:
        """Grouped bars of the ratios (see `plot`); returns the path."""
        return plot(self.rows, path)
