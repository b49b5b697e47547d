"""A suite, tuned: what is stored of each case row (model x dataset x block) that `fuseflow tune`
searched within a per-row budget, and how the results page shows it against the best preset.

`fuseflow study suite figure12 --db F --tune SECONDS` runs (or resumes) one tune a row after
the suite's own tasks (`tuner.suite`), on the suite's footing (the same model build, seed and
hardware; the row's `max_tokens` as the tuner's sampling threshold), its search log in `F`'s
sibling `*-tune.db` and its result, the tuner's JSON, in the suite database's table
`suite_tuned`, one row per (program, data, seed, budget). The results page reads them back as
`TunedRow`s (`tuned_lines`).

    >>> task = TuneTask("gcn", "karate")
    >>> task.key, task.label()
    (('model:gcn', 'dataset=karate', 0), 'gcn karate')
    >>> row = TunedRow.from_result(task, 60.0, {"schedule": "fusion=[t2,t5]", "cycles": 90, "mode": "whole",
    ...     "verified": True, "reproduced": True, "best_preset": "partial", "speedup_over_best_preset": 1.25,
    ...     "presets": [{"name": "partial", "cycles": 112}], "evaluated": {"simulated": 12, "estimated": 30}},
    ...     wall=61.0)
    >>> row.speedup, row.best_cycles, row.cell()
    (1.25, 112, '1.25x')
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from ...models.resolve import ModelRef
from .. import MAX_TOKENS
from ..db import SweepDB
from .spec import Suite, case_label, data_key

TABLE = ("CREATE TABLE IF NOT EXISTS suite_tuned (program TEXT NOT NULL, data TEXT NOT NULL, "
         "seed INTEGER NOT NULL, budget REAL NOT NULL, suite TEXT, status TEXT NOT NULL, result TEXT, "
         "error TEXT, wall_seconds REAL, created TEXT, UNIQUE (program, data, seed, budget))")
GOAL = 1.10  # a row counts as improved when the tuned schedule is at least this much faster than the best preset


@dataclass(frozen=True)
class TuneTask:
    """One case row of a suite to tune: a model on a dataset (a block, scalar or tiled)."""

    model: str
    dataset: str
    block: int | None = None
    scale: float = 1.0
    seed: int = 0
    tiled: bool = True
    max_tokens: float = MAX_TOKENS  # the tuner's sampling threshold: as the suite's
    large_memory: bool = False

    @property
    def data(self) -> str:
        return data_key(self.dataset, self.block, self.tiled, self.scale)

    @property
    def key(self) -> tuple:
        """(program, data, seed): the row's key, as the suite's rows of the same case."""
        return ModelRef("model", self.model).key, self.data, self.seed

    def label(self) -> str:
        return case_label(self.model, self.dataset, self.block, self.tiled)


def tune_tasks(suite: Suite) -> list[TuneTask]:
    """A suite's case rows, one task each, in the suite's task order, its large-memory rows
    last (every row takes about its budget; those hold the most memory)."""
    out, seen = [], set()
    for t in suite.tasks():
        task = TuneTask(t.model, t.dataset, t.block, t.scale, t.seed, t.tiled, t.max_tokens, t.large_memory)
        if task.key not in seen:
            seen.add(task.key)
            out.append(task)
    return sorted(out, key=lambda task: task.large_memory)


@dataclass(frozen=True)
class TunedRow:
    """A tuned case row as the page reads it: the tuner's answer against the best preset."""

    task: TuneTask
    budget: float
    status: str  # ok | error
    schedule: str | None = None
    cycles: int | None = None
    mode: str = "whole"  # of the answer's final run: whole, or sampled (with cycles_low/high)
    cycles_low: int | None = None
    cycles_high: int | None = None
    verified: bool = False
    reproduced: bool = False
    best_preset: str | None = None
    best_cycles: int | None = None
    speedup: float | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    simulated: int = 0
    estimated: int = 0
    winner_at: int | None = None
    wall: float = 0.0
    error: str | None = None
    presets: list = field(default_factory=list)

    @staticmethod
    def from_result(task: TuneTask, budget: float, result: dict, wall: float) -> TunedRow:
        """From the tuner's JSON (`TuneResult.to_json`)."""
        best = next((p for p in result.get("presets", ()) if p.get("name") == result.get("best_preset")), {})
        interval = result.get("speedup_interval") or (None, None)
        evaluated = result.get("evaluated", {})
        return TunedRow(task, budget, "ok", result["schedule"], result["cycles"], result.get("mode", "whole"),
                        result.get("cycles_low"), result.get("cycles_high"), bool(result.get("verified")),
                        bool(result.get("reproduced")), result.get("best_preset"), best.get("cycles"),
                        result.get("speedup_over_best_preset"), interval[0], interval[1],
                        int(evaluated.get("simulated", 0)), int(evaluated.get("estimated", 0)),
                        evaluated.get("winner_at"), wall, None, list(result.get("presets", ())))

    def cell(self) -> str:
        """The speedup over the best preset as the page shows it (the 95% range where sampled)."""
        if self.status != "ok" or not self.speedup:
            return "-"
        text = f"{self.speedup:.2f}x"
        if self.speedup_low is not None and self.speedup_high is not None and self.speedup_low != self.speedup_high:
            text += f" ({self.speedup_low:.2f}-{self.speedup_high:.2f})ˢ"
        return text


def log_path(db_path: str) -> str:
    """Where a suite database's tunes keep their search logs: `figure12.db` -> `figure12-tune.db`."""
    return os.path.splitext(db_path)[0] + "-tune.db"


def done_tunes(db: SweepDB, budget: float) -> set[tuple]:
    db.conn.execute(TABLE)
    return {(r[0], r[1], r[2]) for r in db.conn.execute(
        "SELECT program, data, seed FROM suite_tuned WHERE budget = ?", (float(budget),))}


def record_tune(db: SweepDB, suite: str, row: dict) -> None:
    """One tuned row, committed in its own transaction (a killed run keeps every finished row)."""
    with db.conn:
        db.conn.execute(TABLE)
        db.conn.execute("INSERT OR REPLACE INTO suite_tuned (program, data, seed, budget, suite, status, result, "
                        "error, wall_seconds, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, datetime('now'))",
                        (row["program"], row["data"], row["seed"], row["budget"], suite, row["status"],
                         row.get("result"), row.get("error"), row.get("wall_seconds")))


def tuned_rows(db: SweepDB, suite: Suite) -> list[TunedRow]:
    """The suite's tuned rows in the suite's order (the latest budget of each row)."""
    if not db.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'suite_tuned'").fetchone():
        return []
    latest = {}
    for program, data, seed, budget, status, result, error, wall in db.conn.execute(
            "SELECT program, data, seed, budget, status, result, error, wall_seconds FROM suite_tuned "
            "ORDER BY created"):
        latest[(program, data, seed)] = (budget, status, result, error, wall or 0.0)
    out = []
    for task in tune_tasks(suite):
        if task.key not in latest:
            continue
        budget, status, result, error, wall = latest[task.key]
        if status == "ok":
            out.append(TunedRow.from_result(task, budget, json.loads(result), wall))
        else:
            out.append(TunedRow(task, budget, status, wall=wall, error=error))
    return out


def tuned_lines(rows: list[TunedRow], labels: dict, order: list[tuple] = ()) -> list[str]:
    """The results page's tuned table: each row's answer against its best preset, in the order
    of `order`'s (model, dataset, block) where given."""
    if not rows:
        return []
    place = {case: n for n, case in enumerate(order)}
    rows = sorted(rows, key=lambda r: place.get((r.task.model, r.task.dataset, r.task.block), len(place)))
    improved = [r for r in rows if r.speedup and r.speedup >= GOAL]
    tuned = [r for r in rows if r.status == "ok"]
    budgets = sorted({r.budget for r in rows})
    lines = [f"Tuned ({len(tuned)} of {len(rows)} rows; `fuseflow tune` within "
             f"{'/'.join(f'{b:g}' for b in budgets)} s a row, lanes 1): the schedule found against the best "
             f"preset (the suite's rows above, and the model's other presets simulated by the tune on the same "
             f"footing); `found at`: the evaluation that found it (0: the best preset itself); at least "
             f"{GOAL:.2f}x on {len(improved)} of {len(tuned)} rows (docs/tuning.md, \"Figure 12, tuned\").", "",
             "| model | dataset | best preset | its cycles | tuned cycles | speedup | evaluated | found at | "
             "wall (s) | tuned schedule |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        name = labels.get((r.task.model, None), r.task.model)
        dataset = labels.get((r.task.model, r.task.dataset), r.task.dataset) + \
            (f" b{r.task.block}" if r.task.block else "")
        if r.status != "ok":
            lines.append(f"| {name} | {dataset} | - | - | - | - | - | - | {r.wall:.0f} | not tuned: {r.error} |")
            continue
        mark = "ˢ" if r.mode == "sampled" else ""
        lines.append(f"| {name} | {dataset} | {r.best_preset} | {r.best_cycles or 0:,} | {r.cycles:,}{mark} | "
                     f"{r.cell()} | {r.simulated} simulated, {r.estimated} estimated | {r.winner_at} | {r.wall:.0f} | "
                     f"`{r.schedule}` |")
    return lines
