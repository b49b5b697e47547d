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
from .explore.heuristic import CostModel
from .explore.progress import Progress
from .fusion.compile import compile_schedule
from .fusion.search import NoValidOrder
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


def fusion_study(case, schedules: list[str], engine: str = "fast", progress: bool = False,
                 max_tokens: float = MAX_TOKENS) -> list[dict]:
    """One row per preset (or schedule string), normalised to the first one (unfused). Each
    schedule is compiled once, for the cost estimate and the simulation. A schedule estimated
    beyond `max_tokens` token events (tile elements for blocked ones) is not simulated: its row
    holds the heuristic's estimates (`est_*`, ratios to the first row's estimate) and says why;
    one that fails says why, and one whose declared layouts admit no valid order runs with
    `layout=induced` (its `schedule_text` says so)."""
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
            rows.append(_skipped_row(case, name, compiled, est, max_tokens))
            continue
        on_kernel, bar = _kernel_progress(f"{case.name} {name} kernels")
        if progress:
            print(f"  simulating {case.name} on {case.dataset}: {name} ...", file=sys.stderr, flush=True)
        try:
            result = simulate(case.program, compiled, case.inputs, engine=engine,
                              on_kernel=on_kernel if progress else None)
        except FuseflowError as err:
            if not rows:
                raise
            rows.append(_failed_row(case, name, schedule, err.one_line(), time.perf_counter() - start))
            continue
        finally:
            for b in bar:
                b.close()
        first = first or compiled
        rows.append({"model": case.name, "dataset": case.dataset, "schedule": name,
                     "schedule_text": result.schedule, "kernels": len(result.kernels), "cycles": result.cycles,
                     "flops": result.flops, "mem": result.mem_reads + result.mem_writes,
                     "max_occupancy": result.max_occupancy, "verified": result.verified,
                     "max_abs_error": result.max_abs_error, "wall": time.perf_counter() - start})
    if not rows:
        raise UserError("no schedules to study", "--schedules")
    base = rows[0]
    base_est = None
    for row in rows:
        if row.get("error"):
            row["speedup"] = row["flops_ratio"] = row["mem_ratio"] = None
            continue
        if row.get("skipped"):
            base_est = base_est or model.estimate(first)
            row["speedup"] = base_est.cycles / row["est_cycles"] if row["est_cycles"] else float("nan")
            row["flops_ratio"] = row["est_flops"] / base_est.flops if base_est.flops else float("nan")
            row["mem_ratio"] = row["est_mem"] / (base_est.reads + base_est.writes)
            continue
        row["speedup"] = base["cycles"] / row["cycles"] if row["cycles"] else float("nan")
        row["flops_ratio"] = row["flops"] / base["flops"] if base["flops"] else float("nan")
        row["mem_ratio"] = row["mem"] / base["mem"] if base["mem"] else float("nan")
    return rows


def format_table(rows: list[dict]) -> str:
    """The study as a text table; a skipped schedule shows its estimated ratios marked `~`."""
    cells = [[("~" if row.get("skipped") and key in ("speedup", "flops_ratio", "mem_ratio") else "")
              + (fmt.format(row[key]) if row[key] is not None else "-") for key, _, fmt in COLUMNS] for row in rows]
    headers = [title for _, title, _ in COLUMNS]
    widths = [max(len(h), *(len(c[k]) for c in cells)) for k, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) if k else h.ljust(w) for k, (h, w) in enumerate(zip(headers, widths)))]
    for c in cells:
        lines.append("  ".join(x.rjust(w) if k else x.ljust(w) for k, (x, w) in enumerate(zip(c, widths))))
    notes = [f"{row['schedule']}: not simulated, {row['skipped']}; ~ marks heuristic estimates"
             for row in rows if row.get("skipped")]
    notes += [f"{row['schedule']}: failed: {row['error']}" for row in rows if row.get("error")]
    return "\n".join(lines + notes)


def plot(rows: list[dict], path: str) -> str:
    """Grouped bars (speedup, FLOPs and memory relative to unfused) per schedule, like the
    reference's Figure 12."""
    import matplotlib  # noqa: PLC0415 - matplotlib is slow to import; only plots need it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 - matplotlib is slow to import; only plots need it

    metrics = [("speedup", "speedup vs unfused"), ("flops_ratio", "FLOPs / unfused"), ("mem_ratio", "memory / unfused")]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.8 / len(metrics)
    for k, (key, label) in enumerate(metrics):
        heights = [r[key] if r[key] is not None else 0.0 for r in rows]
        ax.bar([i + k * width for i in range(len(rows))], heights, width, label=label)
    ax.set_xticks([i + width for i in range(len(rows))], [r["schedule"] for r in rows])
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_title(f"{rows[0]['model']} on {rows[0]['dataset']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
