"""Run a sweep: enumerate schedules x data points, estimate each, prune, simulate the rest on an
executor, and write one SQLite row per result as it arrives.

Executors: `local` (in this process for --jobs 1, else a process pool) and `dask` (the
dask.distributed scheduler at --scheduler ADDR, else a local cluster of --jobs workers, default
one per core; `fuseflow.cluster`). Work is shipped as plain dicts to `run_task`,
which loads the program and data itself (cached per worker process), so any worker that has
fuseflow installed can run it; MLIR sources travel with the task.
"""
from __future__ import annotations

import itertools
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace

from ..cluster import dask_client, exit_with_parent, worker_budget
from ..errors import FuseflowError, UserError
from ..fusion.estimate import CostModel
from ..pipeline import simulate
from ..progress import TaskProgress
from .db import SweepDB
from .row import ResultRow, merged
from .space import DataPoint, ProgramRef, load, mlir_source, schedules

ENGINES = ("fast", "oracle")


@dataclass
class SweepSpec:
    """Everything a sweep varies and how it runs (the TOML keys are the field names)."""

    programs: list[str]
    granularities: list[str] = field(default_factory=lambda: ["unfused", "partial", "full"])
    orders: object = "default"  # "default" | "all" | list of order items
    max_orders: int = 24
    pars: list[str] = field(default_factory=list)  # par items for group 0 ("i:4", "i:4,j:2"; "1" = none)
    densities: list[float] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)
    blocks: list[int] = field(default_factory=list)
    seeds: list[int] = field(default_factory=lambda: [0])
    layout: str | None = None  # appended as layout=... to granularities that do not give one
    random_seed: int = 0  # for random:N groupings
    engine: str = "fast"
    check: bool = True
    db: str = "sweep.db"
    executor: str = "local"
    jobs: int = 1
    scheduler: str | None = None
    connect_timeout: float = 30.0  # seconds to reach the dask scheduler
    prune: float | None = None  # skip schedules whose estimate exceeds the best estimate by this factor
    func: str | None = None
    scale: float = 1.0
    shapes: dict = field(default_factory=dict)
    limit: int | None = None  # run at most this many simulations (then stop; resumable)

    def validate(self) -> None:
        if not self.programs:
            raise UserError("no program to sweep", "sweep", "give an .mlir file or model:NAME")
        if self.engine not in ENGINES:
            raise UserError(f"unknown engine {self.engine!r}", "sweep", "use fast or oracle")
        if self.executor not in ("local", "dask"):
            raise UserError(f"unknown executor {self.executor!r}", "sweep", "use local or dask")
        if self.scheduler and self.executor != "dask":
            raise UserError("--scheduler needs --executor dask", "sweep", "add --executor dask")
        if self.jobs < 1:
            raise UserError(f"--jobs {self.jobs} must be at least 1", "sweep")
        if self.prune is not None and self.prune < 1.0:
            raise UserError(f"prune factor {self.prune} must be at least 1", "sweep",
                            "e.g. --prune 2 skips schedules estimated 2x slower than the best")
        if self.max_orders < 1:
            raise UserError("max_orders must be at least 1", "sweep")
        if isinstance(self.orders, str) and self.orders not in ("default", "all"):
            self.orders = [o.strip() for o in self.orders.split(";") if o.strip()]
        for d in self.densities:
            if not 0.0 < float(d) <= 1.0:
                raise UserError(f"density {d} is outside (0, 1]", "sweep")
        for b in self.blocks:
            if int(b) < 1:
                raise UserError(f"block size {b} must be positive", "sweep")
        if self.layout not in (None, "declared", "induced"):
            raise UserError(f"unknown layout {self.layout!r}", "sweep", "use declared or induced")

    def data_points(self, ref: ProgramRef) -> list[DataPoint]:
        datasets = self.datasets or [None]
        densities = self.densities or ([None] if ref.kind == "model" or self.datasets else [0.1])
        blocks = self.blocks or [None]
        return [DataPoint(ds, None if d is None else float(d), None if b is None else int(b))
                for ds, d, b in itertools.product(datasets, densities, blocks)]


def resolve_engine(engine: str) -> str:
    """`fast` when its module imports, else `oracle` (the fast engine may be missing)."""
    if engine == "fast":
        try:
            import fuseflow.sim.fast  # noqa: F401, PLC0415 - a probe: does the fast engine (numba) load?
        except Exception:  # noqa: BLE001 - a broken or missing fast engine: use the oracle
            return "oracle"
    return engine


def _one_line(err: BaseException) -> str:
    if isinstance(err, FuseflowError):
        return err.one_line()
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:500]


def run_task(task: dict) -> ResultRow:
    """Simulate one schedule on one data point; never raises (failures become the row's error)."""
    key = {"program": task["program"], "data": task["data"], "seed": task["seed"]}
    engine = resolve_engine(task.get("engine", "fast"))
    start = time.perf_counter()
    try:
        ref = ProgramRef(**task["ref"])
        point = DataPoint(**task["point"])
        loaded = load(ref, point, task["seed"], task.get("source"))
        start = time.perf_counter()
        budget = worker_budget(task.get("max_memory"))
        result = simulate(loaded.program, task["schedule"], loaded.inputs, seed=task["seed"],
                          density=point.density or 0.1, engine=engine, check=task.get("check", True), budget=budget)
        row = ResultRow.from_result(result, task["schedule"], **key, engine=engine)
        row = replace(row, schedule_text=None)  # a sweep's schedule is its own text
    except Exception as err:  # noqa: BLE001 - a failed schedule is recorded and the sweep goes on
        row = ResultRow(task["schedule"], "error", **key, engine=engine, error=_one_line(err))
    return replace(row, wall_seconds=time.perf_counter() - start)


# -- executors -----------------------------------------------------------------------------------
def _run_serial(tasks):
    for task in tasks:
        yield task, run_task(task)


def _run_pool(tasks, jobs: int):
    """Start the workers and submit every task now (before any display thread exists, since the
    workers are forked), then yield (task, row) as they finish."""
    pool = ProcessPoolExecutor(max_workers=jobs, initializer=exit_with_parent, initargs=(os.getpid(),))
    futures = {pool.submit(run_task, task): task for task in tasks}
    return _as_finished(pool, futures)


def _as_finished(pool, futures):
    try:
        for future in as_completed(futures):
            task = futures[future]
            try:
                yield task, future.result()
            except Exception as err:  # noqa: BLE001 - a worker died
                yield task, _lost(task, err)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _run_dask(tasks, address: str | None, timeout: float = 30.0, workers: int | None = None,
              max_memory: int | None = None):
    from distributed import as_completed  # noqa: PLC0415 - dask is optional and slow to import

    with dask_client(address, workers, max_memory, timeout) as client:
        futures = client.map(run_task, tasks, pure=False)
        by_key = {f.key: t for f, t in zip(futures, tasks)}
        for future in as_completed(futures):
            task = by_key[future.key]
            try:
                yield task, future.result()
            except Exception as err:  # noqa: BLE001 - a worker died
                yield task, _lost(task, err)


def _lost(task: dict, err: BaseException) -> ResultRow:
    return ResultRow(task["schedule"], "error", program=task["program"], data=task["data"], seed=task["seed"],
                     error="worker failed: " + _one_line(err), engine=task.get("engine"))


def execute(tasks: list[dict], executor: str = "local", jobs: int = 1, scheduler: str | None = None,
            timeout: float = 30.0, max_memory: int | None = None):
    """Yields (task, row) as simulations finish. A local dask cluster has `jobs` workers (when
    more than one) sharing `max_memory`."""
    if not tasks:
        return iter(())
    if executor == "dask":
        return _run_dask(tasks, scheduler, timeout, jobs if jobs > 1 else None, max_memory)
    if jobs <= 1:
        return _run_serial(tasks)
    return _run_pool(tasks, jobs)


# -- the sweep -----------------------------------------------------------------------------------
@dataclass
class SweepSummary:
    planned: int = 0  # schedules x data points
    skipped: int = 0  # already in the database
    simulated: int = 0
    pruned: int = 0
    failed: int = 0  # compile or simulation errors
    seconds: float = 0.0


def _estimate_fields(model, compiled) -> dict:
    try:
        est = model.estimate(compiled)
    except Exception:  # noqa: BLE001 - the heuristic must never stop a sweep
        return {}
    return {"est_cycles": est.cycles, "est_flops": est.flops, "est_bytes": est.bytes,
            "est_seconds": est.seconds}


def plan(spec: SweepSpec, done: set, log=None) -> tuple[list[dict], list[ResultRow], int]:
    """(tasks to simulate, rows to write directly (compile errors, pruned), planned count)."""
    tasks, direct, planned = [], [], 0
    for text in spec.programs:
        ref = ProgramRef.parse(text, spec.func, spec.scale, spec.shapes)
        source = mlir_source(ref)
        for point in spec.data_points(ref):
            for seed in spec.seeds:
                loaded = load(ref, point, int(seed), source)
                model = CostModel(loaded.program, loaded.inputs, stats=loaded.stats)
                group = []
                for schedule, label, compiled in schedules(loaded, spec.granularities, spec.orders,
                                                           spec.max_orders, spec.layout, spec.random_seed,
                                                           spec.pars):
                    planned += 1
                    base = ResultRow(schedule, program=ref.key, data=point.key, seed=int(seed), label=label,
                                     model=loaded.program.name, dataset=point.dataset, density=point.density,
                                     block=point.block)
                    if isinstance(compiled, BaseException):
                        group.append((replace(base, status="error", error=_one_line(compiled)), None))
                    else:
                        base = replace(base, **_estimate_fields(model, compiled), kernels=len(compiled.kernels))
                        group.append((base, compiled))
                estimates = [b.est_cycles for b, c in group if c is not None and b.est_cycles is not None]
                best = min(estimates, default=None)
                # simulate the most promising schedules first
                group.sort(key=lambda bc: (bc[1] is None, bc[0].est_cycles or float("inf")))
                for base, compiled in group:
                    if (base.program, base.schedule, base.data, base.seed) in done:
                        continue
                    if compiled is None:
                        direct.append(base)
                    elif spec.prune is not None and best is not None and base.est_cycles is not None \
                            and base.est_cycles > spec.prune * best:
                        direct.append(replace(base, status="pruned"))
                    else:
                        tasks.append({"program": base.program, "schedule": base.schedule, "data": base.data,
                                      "seed": base.seed, "ref": asdict(ref), "point": asdict(point), "source": source,
                                      "engine": spec.engine, "check": spec.check, "meta": base})
    return tasks, direct, planned


def run_sweep(spec: SweepSpec, progress: bool = True, out=None, budget: int | None = None) -> SweepSummary:
    """Run (or resume) a sweep into `spec.db`; `budget` (bytes, `--max-memory`) bounds each
    simulation's memory."""
    spec.validate()
    out = out if out is not None else sys.stderr
    start = time.perf_counter()
    db = SweepDB(spec.db)
    summary = SweepSummary()
    with db.kept_if_written():
        done = db.done_keys()
        tasks, direct, summary.planned = plan(spec, done)
        summary.skipped = summary.planned - len(tasks) - len(direct)
        for row in direct:
            if db.insert(row):
                summary.pruned += row.status == "pruned"
                summary.failed += row.status == "error"
        if spec.limit is not None:
            tasks = tasks[:max(0, spec.limit)]
        if progress:
            print(f"sweep: {summary.planned} schedules x data points; {summary.skipped} already done, "
                  f"{summary.pruned} pruned, {summary.failed} failed to compile, {len(tasks)} to simulate "
                  f"({spec.executor}" + (f", {spec.jobs} jobs" if spec.executor == "local" else "") + ")",
                  file=out)
        def key(t):
            return t["program"], t["schedule"], t["data"], t["seed"]

        metas = {key(t): t.pop("meta") for t in tasks}
        for task in tasks:  # a worker of a local dask cluster guards its share of `budget` instead
            task["max_memory"] = budget if spec.executor != "dask" else None
        finished = execute(tasks, spec.executor, spec.jobs, spec.scheduler, spec.connect_timeout, budget)
        bar = TaskProgress(len(tasks), out=out) if progress and tasks else None
        try:
            for task, row in finished:
                full = merged(metas[key(task)], row)
                db.insert(full)
                summary.simulated += 1
                failed = full.status != "ok"
                summary.failed += failed
                if bar:
                    bar.update(note=full.schedule, error=failed)
        finally:
            if bar:
                bar.close()
    summary.seconds = time.perf_counter() - start
    return summary
