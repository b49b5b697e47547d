"""Run a suite: every task not yet in the database, in this process or on dask, one SQLite row
per task as it finishes (in one transaction with the session's wall time), so that a suite
killed at any moment resumes where it stopped with nothing lost or written twice.

A task (`run_suite_task`) builds its model on its dataset (kept for the next task of the same
case on that worker), compiles the schedule once, and simulates and verifies it, or estimates it
with the heuristic when it would exceed its `max_tokens` token events or its worker's memory
(`granularity.study_schedule`, the study's own step). On dask, the tasks of a large-memory case
run one at a time on one worker (`large_memory_lane`) and are guarded by the memory the machine
has free at each step, not by that worker's share.

    >>> row = run_suite_task(SuiteTask("gcn", "karate", "partial", engine="oracle").to_dict())
    >>> row.status, row.verified, row.label, row.cycles > 0
    ('ok', True, 'partial', True)
"""
from __future__ import annotations

import ctypes
import gc
import os
import socket
import time
from dataclasses import dataclass, replace

import psutil

from ...cluster import PROGRESS_TOPIC, dask_client, post_progress, worker_budget
from ...errors import FuseflowError
from ...fusion.estimate import CostModel
from ...memory import Budget
from ...models.registry import build
from ...progress import SuiteProgress
from ..db import SweepDB
from ..granularity import add_ratios, study_schedule
from ..row import ResultRow
from ..runner import _one_line, resolve_engine
from .spec import Suite, SuiteTask

EVENT_SECONDS = 1.0  # least time between two progress events of a task on a worker
LARGE_MEMORY = "fuseflow-large-memory"  # the dask resource of the worker that runs large-memory tasks
LARGE_MEMORY_SHARE = 0.6  # of the machine's memory: a large-memory task's guard (the other workers keep the rest)
_CASE: dict = {}  # this process's last built case: {case key: (ModelCase, CostModel)}


def _trim() -> None:
    """Give freed heap memory back to the system (glibc), so a worker's resident size, which its
    memory guard counts, falls after a large case."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _built(task: SuiteTask, budget):
    """The task's model on its dataset and its cost model, built once per case and process
    (only the last case is kept: a large graph must not stay behind)."""
    if task.case not in _CASE:
        _CASE.clear()
        gc.collect()  # the last case's arrays go before the next one is built
        _trim()
        case = build(task.model, task.dataset, scale=task.scale, seed=task.seed, block=task.block or 16,
                     tiled=task.tiled, budget=budget)
        _CASE[task.case] = case, CostModel(case.program, case.inputs)
    return _CASE[task.case]


class _Reporter:
    """A task's live progress (`granularity.study_schedule`'s `watch`): token events done of the
    heuristic's estimate (total None until there is one), sent to `post` at most every
    `EVENT_SECONDS`, with a note of what the task does when that changes. The count never goes
    back: a finished kernel counts what it simulated or its estimate, whichever is more."""

    def __init__(self, label: str, post, events: list[float]):
        self.label, self.post, self.total = label, post, float(sum(events)) or None
        self.events, self.kernels, self.last = [float(e) for e in events], 0, 0.0
        self.base = self.shown = 0.0  # token events before the running kernel; the count sent

    def __call__(self, _label: str, events: list[float]) -> _Reporter:
        self.events, self.total = [float(e) for e in events], float(sum(events)) or 1.0
        self.send(0.0, note="simulating")
        return self

    def send(self, done: float, force: bool = False, note: str | None = None) -> None:
        now = time.monotonic()
        if force or note or now - self.last >= EVENT_SECONDS:
            self.last = now
            self.post({"task": self.label, "done": done, "total": self.total, "pid": os.getpid(),
                       **({"note": note} if note else {})})

    def _progress(self, count: float, note: str | None = None) -> None:
        self.shown = max(self.shown, count)
        self.send(self.shown, note=note)

    def on_kernel(self, done: int, total: int) -> None:
        self.kernels = done
        self.base = max(self.shown, sum(self.events[:done]))
        self._progress(self.base, note="verifying" if done == total else None)

    def on_events(self, done_events: float, estimated=None) -> None:
        self._progress(self.base + float(done_events))

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def large_memory_budget() -> Budget:
    """The memory guard of a large-memory task: `LARGE_MEMORY_SHARE` of the machine's memory,
    its resident memory counted (a share of what is available at each check let such a task grow
    past the machine between two checks).

        >>> large_memory_budget().limit < psutil.virtual_memory().total
        True
    """
    return Budget(int(psutil.virtual_memory().total * LARGE_MEMORY_SHARE))


def run_suite_task(task: dict, max_memory: int | None = None, post=None) -> ResultRow:
    """One task of a suite (a `SuiteTask` as a dict) as a database row; never raises: a failure
    becomes the row's error. Progress goes to `post`, else to the dask client if on a worker."""
    t = SuiteTask(**task)
    row = replace(_lost_row(t), worker=f"{socket.gethostname()}:{os.getpid()}")
    start = time.perf_counter()
    budget = large_memory_budget() if t.large_memory and max_memory is None else worker_budget(max_memory)
    reporter = _Reporter(t.label(), post or post_progress, [])
    reporter.send(0.0, note="building and estimating")
    try:
        row = replace(row, engine=resolve_engine(t.engine))
        case, model = _built(t, budget)
        study = study_schedule(case, t.schedule, model, engine=row.engine, max_tokens=t.max_tokens,
                               budget=budget, watch=reporter)
        row = replace(study, program=row.program, data=row.data, seed=row.seed, label=row.label, model=row.model,
                      dataset=row.dataset, block=row.block, engine=row.engine, worker=row.worker)
    except FuseflowError as err:
        row = replace(row, error=err.one_line())
    except MemoryError:
        row = replace(row, error="ran out of memory (building, compiling or simulating the case)" +
                      (f" within {budget!r}" if budget else ""))
    except Exception as err:  # noqa: BLE001 - a failed task is recorded and the suite goes on
        row = replace(row, error=_one_line(err))
    row = replace(row, wall_seconds=time.perf_counter() - start)
    reporter.post({"task": reporter.label, "end": True, "pid": os.getpid()})  # before its row reaches the client
    return row


# -- running a suite -----------------------------------------------------------------------------
@dataclass
class SuiteSummary:
    planned: int = 0
    done_before: int = 0  # already in the database
    simulated: int = 0
    estimated: int = 0
    failed: int = 0
    seconds: float = 0.0
    workers: int = 1


def _serial(tasks: list[SuiteTask], max_memory, post):
    for task in tasks:
        yield task, run_suite_task(task.to_dict(), max_memory, post)


def _on_dask(client, tasks: list[SuiteTask], max_memory, post):
    from distributed import as_completed  # noqa: PLC0415 - dask is optional and slow to import

    client.subscribe_topic(PROGRESS_TOPIC, lambda event: post(event[1]))
    if any(task.large_memory for task in tasks):
        large_memory_lane(client)
    futures = {}
    for n, task in enumerate(tasks):  # in the suite's order: earlier tasks first
        future = client.submit(run_suite_task, task.to_dict(), max_memory, pure=False, priority=len(tasks) - n,
                               key=f"suite-{n}-{task.label().replace(' ', '-')}-{os.getpid()}",
                               resources={LARGE_MEMORY: 1} if task.large_memory else None)
        futures[future] = task
    for future in as_completed(futures):
        task = futures[future]
        try:
            yield task, future.result()
        except Exception as err:  # noqa: BLE001 - the worker died (e.g. killed at its memory limit)
            yield task, replace(_lost_row(task), error="worker died: " + _one_line(err))


def large_memory_lane(client) -> str:
    """The name of the worker that runs the large-memory tasks (`SuiteTask.large_memory`), one at
    a time: one that has the `LARGE_MEMORY` resource, else the first by name, given it now by a
    worker plugin (so a worker restarted after its process died gets it again; its other tasks are
    any, and the other workers never get a large one)."""
    workers = client.scheduler_info()["workers"].values()
    for info in sorted(workers, key=lambda info: str(info["name"])):
        if info.get("resources", {}).get(LARGE_MEMORY):
            return str(info["name"])
    name = min(str(info["name"]) for info in workers)
    client.register_plugin(_large_memory_plugin(name))
    return name


def _large_memory_plugin(name: str):
    from distributed.diagnostics.plugin import WorkerPlugin  # noqa: PLC0415 - dask is optional and slow

    class LargeMemoryLane(WorkerPlugin):
        def setup(self, worker):
            if str(worker.name) == name:
                return worker.set_resources(**{LARGE_MEMORY: 1})
            return None

    plugin = LargeMemoryLane()
    plugin.name = "fuseflow-large-memory-lane"
    return plugin


def _lost_row(task: SuiteTask) -> ResultRow:
    return ResultRow(task.schedule, "error", program=task.key[0], data=task.data, seed=task.seed, label=task.schedule,
                     model=task.model, dataset=task.dataset, block=task.block)


def run_suite(suite: Suite, db_path: str, executor: str = "dask", scheduler: str | None = None,
              workers: int | None = None, max_memory: int | None = None, progress: bool = True, out=None,
              limit: int | None = None, retry_failed: bool = False) -> SuiteSummary:
    """Run (or resume) `suite` into the database at `db_path`: tasks whose rows are there are
    skipped (with `retry_failed`, failed rows are deleted and run again); the rest run in this
    process (`executor="serial"`) or on dask (a local cluster of `workers` processes sharing
    `max_memory`, or the scheduler at `scheduler`)."""
    start = time.perf_counter()
    db = SweepDB(db_path)
    with db.kept_if_written():
        tasks = suite.tasks()
        if retry_failed:
            db.delete_failed([t.key for t in tasks])
        done = db.done_keys()
        todo = [t for t in tasks if t.key not in done]
        summary = SuiteSummary(planned=len(tasks), done_before=len(tasks) - len(todo))
        todo = todo if limit is None else todo[:limit]
        with SuiteProgress(suite.name, len(todo), summary.done_before, out=out, enabled=progress) as bar, \
                (dask_client(scheduler, workers, max_memory) if executor == "dask" and todo
                 else _no_client()) as client:
            summary.workers = len(client.scheduler_info()["workers"]) if client else 1
            session = db.start_session(suite.name, len(todo), summary.workers, executor, max_memory) if todo else None
            bar.start(summary.workers)
            # on dask a task guards its worker's share of the memory (`cluster.worker_budget`)
            finished = _on_dask(client, todo, None, bar.event) if client else \
                _serial(todo, max_memory, bar.event)
            for task, row in finished:
                row = replace(row, suite=suite.name)
                db.insert_for_session(row, session, time.perf_counter() - start)
                summary.simulated += row.status == "ok"
                summary.estimated += row.status == "estimated"
                summary.failed += row.status == "error"
                bar.finished(task.label(), row)
    summary.seconds = time.perf_counter() - start
    return summary


class _no_client:
    def __enter__(self):
        return None

    def __exit__(self, *exc) -> None:
        pass


# -- reading a suite back ------------------------------------------------------------------------
def study_rows(rows: list[ResultRow], baselines: dict | None = None) -> list[ResultRow]:
    """Database rows of a suite as a study's rows (named by their label, the reason or error
    of a row estimated or failed filled in), with ratios to the first row of their case (a
    group of one program, data point and seed, in the given order), if that is the case's
    baseline (`baselines`: group key -> schedule; default: the unfused row, or the first)."""
    groups: dict[tuple, list[ResultRow]] = {}
    for r in rows:
        study = replace(r, schedule=r.label or r.schedule,
                        reason=(r.reason or "estimated") if r.status == "estimated" else None,
                        error=(r.error or "failed") if r.status == "error" else None)
        groups.setdefault((r.program, r.data, r.seed), []).append(study)
    out = []
    for key, group in groups.items():
        if baselines is None:  # unfused first, if there
            group.sort(key=lambda study: study.schedule != "unfused")
        if baselines is None or group[0].schedule == baselines.get(key):
            group = add_intervals(add_ratios(group))
        else:  # the baseline has not run yet
            group = [replace(study, speedup=None, flops_ratio=None, mem_ratio=None) for study in group]
        out += group
    return out


def _bounds(study: ResultRow) -> tuple[float, float] | None:
    """A simulated row's cycles interval (whole-model cycles where the case stands for more)."""
    cycles = study.best_cycles
    if not cycles or study.reason or study.error:
        return None
    if not study.sampled:
        return float(cycles), float(cycles)
    scale = cycles / study.cycles
    return study.cycles_low * scale, study.cycles_high * scale


def add_intervals(group: list[ResultRow]) -> list[ResultRow]:
    """The rows with `speedup_low`/`speedup_high` where their speedup over the group's first row
    rests on a sampled row (its own, or the baseline's): the baseline's interval over the row's.

        >>> group = [ResultRow("a", cycles=100, speedup=1.0),
        ...          ResultRow("b", cycles=50, speedup=2.0, mode="sampled", cycles_low=40, cycles_high=60)]
        >>> row = add_intervals(group)[1]; round(row.speedup_low, 2), row.speedup_high
        (1.67, 2.5)
    """
    base = _bounds(group[0])
    out = []
    for study in group:
        own = _bounds(study)
        if base and own and study.speedup and (group[0].sampled or study.sampled):
            study = replace(study, speedup_low=base[0] / own[1], speedup_high=base[1] / own[0])
        out.append(study)
    return out


def suite_rows(db: SweepDB, suite: Suite) -> list[ResultRow]:
    """The suite's rows in the database, in the suite's task order (missing tasks left out), as
    `study_rows`."""
    by_key = {(r.program, r.schedule, r.data, r.seed): r for r in db.rows()}
    tasks = suite.tasks()
    baselines = {(t.key[0], t.data, t.seed): t.baseline for t in tasks}
    return study_rows([by_key[t.key] for t in tasks if t.key in by_key], baselines)
