"""A suite tuned row by row: each case row of a suite (`studies.suite.tuned.TuneTask`) searched
by the tuner within a per-row budget, in this process or as dask tasks (large-memory rows in the
suite's large-memory lane), each result committed to the suite database as it ends, so a killed
run resumes with every finished row kept (and the running row's search from its log).

    >>> row = run_tune_task(asdict(TuneTask("gcn", "karate")), 3, None)
    >>> row["status"], json.loads(row["result"])["verified"]
    ('ok', True)
"""
from __future__ import annotations

import contextlib
import json
import time
from dataclasses import asdict, dataclass

from ..cluster import dask_client, worker_budget
from ..errors import FuseflowError
from ..studies.db import SweepDB
from ..studies.suite.run import LARGE_MEMORY, large_memory_budget, large_memory_lane
from ..studies.suite.spec import Suite
from ..studies.suite.tuned import TuneTask, done_tunes, log_path, record_tune, tune_tasks
from .context import SimRow
from .run import context_for, tune_context


def suite_presets(db_path: str | None, task: TuneTask, presets: dict) -> dict[str, SimRow]:
    """The presets the suite already simulated for this row (whole and verified, or sampled to
    +-2% with every sampled window verified), as the tuner's rows: the tune takes them instead
    of simulating them again (same build, data, seed and hardware)."""
    if db_path is None:
        return {}
    db = SweepDB(db_path, readonly=True)
    try:
        rows = db.rows("program = ? AND data = ? AND seed = ? AND status = 'ok' AND verified = 1", task.key)
    finally:
        db.close()
    out = {}
    for r in rows:
        if r.schedule in presets and r.cycles is not None:
            row = SimRow(presets[r.schedule], "ok", r.cycles, r.mem_reads, r.mem_writes, r.flops, r.max_occupancy,
                         True, r.wall_seconds or 0.0, resumed=True)
            if r.mode not in (None, "whole"):
                row.mode, row.cycles_low, row.cycles_high = r.mode, r.cycles_low, r.cycles_high
                row.sampled_fraction = r.sampled_fraction
            out[r.schedule] = row
    return out


def run_tune_task(task: dict, budget: float, log: str | None, max_memory: int | None = None,
                  suite_db: str | None = None, progress: bool = False) -> dict:
    """Tune one case row (a `TuneTask` as a dict) for `budget` seconds, each simulation guarded
    as the suite's tasks are; a database row that never raises: a failure is its error (bad
    input to the tuner, e.g. nothing that can be evaluated, included). With `suite_db`, the
    presets the suite ran for this row are taken from it (`suite_presets`), not simulated again."""
    t = TuneTask(**task)
    row = {"program": t.key[0], "data": t.data, "seed": t.seed, "budget": float(budget), "status": "error"}
    memory = large_memory_budget() if t.large_memory and max_memory is None else worker_budget(max_memory)
    start = time.perf_counter()
    try:
        ctx = context_for(t.model, t.dataset, seed=t.seed, scale=t.scale, block=t.block or 16, tiled=t.tiled,
                          budget=memory)
        ctx.data_key = t.data  # the search log's key: blocks and scalar runs of one dataset apart
        result = tune_context(ctx, budget=budget, db=log, sample_above=t.max_tokens,
                              known_presets=suite_presets(suite_db, t, ctx.presets), progress=progress)
        row.update(status="ok", result=json.dumps(result.to_json()))
    except FuseflowError as err:
        row["error"] = err.one_line()
    except MemoryError:
        row["error"] = "ran out of memory tuning the case" + (f" within {memory!r}" if memory else "")
    row["wall_seconds"] = time.perf_counter() - start
    return row


@dataclass
class TuneSummary:
    planned: int = 0
    done_before: int = 0
    tuned: int = 0
    failed: int = 0
    seconds: float = 0.0


def run_tunes(suite: Suite, db_path: str, budget: float, executor: str = "serial", scheduler: str | None = None,
              workers: int | None = None, max_memory: int | None = None, limit: int | None = None,
              say=None) -> TuneSummary:
    """Tune every case row of `suite` not yet tuned at this `budget` into the database at
    `db_path` (see the module), in this process or on dask (a local cluster of `workers`, or
    the scheduler at `scheduler`: a row a task, large-memory rows in the suite's large-memory
    lane); `say(text)` hears each row as it ends (and, in this process, the tuner's progress
    goes to standard error)."""
    start = time.perf_counter()
    db = SweepDB(db_path)
    log = log_path(db_path)
    try:
        tasks = tune_tasks(suite)
        done = done_tunes(db, budget)
        todo = [t for t in tasks if t.key not in done]
        summary = TuneSummary(planned=len(tasks), done_before=len(tasks) - len(todo))
        todo = todo if limit is None else todo[:limit]
        with (dask_client(scheduler, workers, max_memory) if executor == "dask" and todo
              else contextlib.nullcontext()) as client:
            finished = _on_dask(client, todo, budget, log, db_path) if client is not None else \
                ((t, run_tune_task(asdict(t), budget, log, max_memory, db_path, say is not None)) for t in todo)
            for task, row in finished:  # each committed as it ends
                record_tune(db, suite.name, row)
                summary.tuned += row["status"] == "ok"
                summary.failed += row["status"] != "ok"
                if say is not None:
                    say(f"tuned {task.label()}: " + (row.get("error") or _said(row)))
    finally:
        db.close()
    summary.seconds = time.perf_counter() - start
    return summary


def _said(row: dict) -> str:
    result = json.loads(row["result"])
    return (f"{result['cycles']:,} cycles, {result.get('speedup_over_best_preset') or 0:.3f}x over "
            f"{result.get('best_preset')} in {row['wall_seconds']:.0f} s")


def _on_dask(client, tasks: list[TuneTask], budget: float, log: str, suite_db: str):
    from distributed import as_completed  # noqa: PLC0415 - dask is optional and slow to import

    if any(t.large_memory for t in tasks):
        large_memory_lane(client)
    futures = {client.submit(run_tune_task, asdict(t), budget, log, None, suite_db, pure=False, priority=len(tasks) - n,
                             resources={LARGE_MEMORY: 1} if t.large_memory else None): t
               for n, t in enumerate(tasks)}
    for future in as_completed(futures):
        task = futures[future]
        try:
            yield task, future.result()
        except Exception as err:  # noqa: BLE001 - the worker died (e.g. killed at its memory limit)
            yield task, {"program": task.key[0], "data": task.data, "seed": task.seed, "budget": float(budget),
                         "status": "error", "error": f"worker died: {type(err).__name__}: {err}"}
