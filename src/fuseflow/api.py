"""The public entry points behind `fuseflow.compile`, `fuseflow.simulate` and `fuseflow.study`.

Each checks what a user hands it at this edge (`checks.py`: input arrays, sizes against the
memory budget, `par` factors and block sizes against the program) and then calls the
compiler, the simulator or the study.

    >>> import fuseflow
    >>> case = fuseflow.model("gcn", dataset="karate")
    >>> result = simulate(case.program, case.presets["partial"], case.inputs)
    >>> result.verified, len(result.kernels)
    (True, 2)
    >>> [k.order for k in compile(case.program, "unfused", data=case.inputs).kernels][:1]
    [['i', 'k', 'j']]
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import replace

from . import pipeline
from .checks import check_inputs, check_schedule, input_shapes, sim_request
from .cluster import dask_client_soon
from .errors import UserError
from .fusion.compile import compile_schedule
from .ir.reference import bind_inputs
from .ir.stats import stats_for
from .memory import Budget
from .partition.run import run_partitioned
from .partition.sampled import SamplePlan
from .request import Partitioning, SimRequest
from .studies import MAX_TOKENS
from .studies.granularity import StudyResult, fusion_study, read_schedules, same_schedules


def compile(program, schedule=None, *, shapes: dict | None = None, data: dict | None = None):  # noqa: A001
    """Compile a schedule for a program into kernels, each with its fusion table and
    Sparse-Abstract-Machine graph (a `Compiled`: `.kernels`, `.schedule`).

    - `program`: a `Program` (from `from_mlir`, `from_torch`, or `fuseflow.model(...).program`).
    - `schedule`: a preset name (`"unfused"`, `"partial"`, `"full"`), a schedule string
      (`"fusion=[t2,t5][t6] order.1=i,k,j layout=induced"`; `fuseflow help schedules`), a
      `Schedule`, or None: the first of full, full layout=induced, unfused, unfused
      layout=induced that compiles.
    - `shapes`: {input name: shape tuple} for inputs with dynamic dimensions.
    - `data`: {input name: numpy array or scipy sparse matrix}; default dataflow orders then
      weigh loops by the data's densities, as `simulate` does.
    """
    given = check_inputs(program, data) if data else {}
    known = input_shapes(program, given, shapes)
    stats = None
    if given:
        stats = stats_for(program, bind_inputs(program, given))
    parsed = check_schedule(program, schedule, known)
    return compile_schedule(program, parsed, known, stats=stats)


def simulate(program, schedule=None, inputs: dict | None = None, *, seed: int = 0, density: float = 0.1,
             shapes: dict | None = None, hw=None, engine: str = "fast", check: bool = True,
             budget: Budget | None = None, on_kernel=None, on_events=None, shards: int | None = None,
             sample: float | None = None, error: float | None = None, scheduler=None, workers: int | None = None,
             sample_seed: int = 0):
    """Compile, simulate every kernel cycle by cycle, and compare each output with the numpy
    reference; returns a `SimResult` (`.cycles`, `.verified`, `.flops`, `.kernels`, `.outputs`,
    `.to_json()`; `fuseflow.to_frame` makes a table of its kernels).

    - `program`, `schedule`: as for `compile`; `schedule` may also be a `Compiled` of `program`.
    - `inputs`: {name: numpy array or scipy sparse matrix}, keyed by input name or `arg0`,
      `arg1`, ... by position; inputs left out are generated from `seed` (an int >= 0) at
      `density` (a float in (0, 1]) for sparse ones; `shapes` ({name: shape}) sizes generated
      inputs with dynamic dimensions.
    - `hw`: a `HwConfig` (latencies, channel depth; default `HwConfig()`); `engine`: "fast"
      (numba) or "oracle" (plain Python, the specification); `check`: False skips the
      comparison with the reference.
    - `budget`: a `fuseflow.Budget` bounding the memory the run may take (default: what is
      available); `on_kernel(done, total)` after each kernel and `on_events(done_events)`
      within one report progress.
    - Partitioned (`fuseflow.partition`): `shards=N` (an int >= 1) cuts every kernel's outer
      loop into N windows run as dask tasks (a local cluster of `workers` processes, or the
      scheduler at address `scheduler`, or a `distributed.Client`, or a `concurrent.futures.Future`
      of one still starting) and combines them (`mode`
      "sharded"); `sample=F` (a fraction of windows in (0, 1]) or `error=E` (the 95% interval's
      relative half-width, 0.02 for 2%) estimates each kernel's cycles from a stratified sample
      of windows drawn with `sample_seed` (`mode` "sampled", `cycles_low`/`cycles_high`); those
      run here unless a scheduler is given.
    """
    start = time.perf_counter()
    partitioning = None if shards is None and sample is None and error is None else \
        Partitioning(shards, sample, error, sample_seed, scheduler, workers)
    with early_cluster(partitioning) as partitioning:
        request = sim_request(program, schedule, inputs, seed=seed, density=density, shapes=shapes, hw=hw,
                              engine=engine, check=check, budget=budget, partitioning=partitioning)
        result = simulate_request(request, on_kernel=on_kernel, on_events=on_events)
    result.wall_seconds = time.perf_counter() - start  # compiling included
    return result


@contextlib.contextmanager
def early_cluster(partitioning: Partitioning | None):
    """`partitioning` with a dask client in place of its scheduler address (or of none, for
    shards), the cluster starting now so that its workers start and import while the model loads
    and compiles; unchanged when the run is whole, sampled here, or given a client."""
    if partitioning is None or _is_client(partitioning.scheduler) or \
            partitioning.shards is None and not partitioning.scheduler:
        yield partitioning
        return
    with dask_client_soon(partitioning.scheduler, partitioning.workers) as client:
        yield replace(partitioning, scheduler=client)


def simulate_request(request: SimRequest, *, on_kernel=None, on_events=None):
    """`simulate` of a request built at the edge (`checks.sim_request`): whole, or partitioned
    as `request.partitioning` says (`partition.run`), its windows on dask where asked."""
    cut = request.partitioning
    if cut is None:
        return pipeline.run_request(request, on_kernel=on_kernel, on_events=on_events)
    plan = None if not cut.sampled else SamplePlan(fraction=cut.fraction, error=cut.error, seed=cut.sample_seed)
    with early_cluster(cut) as cut:  # sampled windows are few: without a scheduler they run here
        client = cut.scheduler if _is_client(cut.scheduler) else None
        return run_partitioned(request, shards=cut.shards, sample=plan, client=client)


def _is_client(scheduler) -> bool:
    """Whether `scheduler` is a dask client (or a Future of one still starting), not an address
    (a string) or None; anything else is refused in one line."""
    if scheduler is None or isinstance(scheduler, str):
        return False
    if isinstance(scheduler, Future):
        return True
    from distributed import Client  # noqa: PLC0415 - dask loads only where a client is given

    if isinstance(scheduler, Client):
        return True
    raise UserError(f"scheduler {scheduler!r} is neither an address nor a dask client", "scheduler",
                    "give an address such as tcp://host:8786, or a distributed.Client")


def study(model, dataset=None, schedules=("unfused", "partial", "full"), *, engine: str = "fast",
          progress: bool = False, max_tokens: float | None = None, budget: Budget | None = None, **options):
    """The fusion study: simulate each schedule and compare cycles, FLOPs and memory traffic
    with the first; returns a `StudyResult` (prints as `fuseflow study fusion`'s table;
    `.rows`, `.to_json()`, `.to_frame()`, `.to_csv()`).

    - `model`: a built-in model's name ("gcn", "graphsage", "sae", "gpt3-bigbird") or a
      `ModelCase` (from `fuseflow.model`, or your own with `.program`, `.inputs`, `.presets`).
    - `dataset`: for a name, its data (see `fuseflow.model`).
    - `schedules`: preset names of the model and/or schedule strings (or one string), or a
      mapping of such names to `Schedule` records the caller has read.
    - `engine`: "fast" or "oracle"; `progress`: show progress on stderr; `max_tokens`: estimate
      (not simulate) schedules the heuristic puts above this many token events (default 3e10);
      `budget`: a `fuseflow.Budget` bounding memory.
    - `options`: keyword arguments of `fuseflow.model` (`scale`, `seed`, `block`, `hidden`,
      `density`, `data_dir`).
    """
    from .models.registry import build  # noqa: PLC0415 - models load torch (slow); only model studies need them

    case = model if hasattr(model, "program") and hasattr(model, "presets") else \
        build(model, dataset, budget=budget, **options)
    check_inputs(case.program, case.inputs, f"inputs of {case.name}")
    names = [schedules] if isinstance(schedules, str) else list(schedules)
    # each schedule parsed once, for the study and its notes (a mapping given has been read already)
    read = dict(schedules) if isinstance(schedules, Mapping) else read_schedules(case, names)
    rows = fusion_study(case, names, engine=engine, progress=progress,
                        max_tokens=MAX_TOKENS if max_tokens is None else max_tokens, budget=budget, read=read)
    return StudyResult(case, rows, same_schedules(case, read))


def tune(model, dataset=None, *, budget: float = 60.0, lanes: int = 1, objective: str = "cycles",
         db: str | None = None, max_sims: int | None = None, inputs: dict | None = None, seed: int = 0,
         density: float = 0.1, hw=None, engine: str = "fast", progress: bool = False, memory: Budget | None = None,
         **options):
    """Search for the fastest schedule of a model with the simulator in the loop (`fuseflow
    tune`; docs/tuning.md); returns a `TuneResult` (`.schedule`, a string `simulate` and
    `fuseflow simulate --schedule` take and reproduce to the cycle, `.cycles`, `.verified`,
    `.presets`, `.evaluated`, `.pareto`, `.to_json()`).

    - `model`: a built-in model's name (with `dataset` and, as `options`, `fuseflow.model`'s
      keyword arguments: `scale`, `block`, `hidden`, `data_dir`), a `fuseflow.model(...)` case,
      or a `Program` (with `inputs`; the rest generated from `seed` at `density`).
    - `budget`: seconds of search (the winner's final verified run comes on top); `max_sims`:
      at most this many simulations, presets included; `progress`: a line on stderr for each
      better schedule found.
    - `lanes`: parallel lanes a kernel may use (1: none); `objective`: "cycles", "traffic"
      (memory bytes moved) or "pareto" (the front of both, in `.pareto`).
    - `db`: an SQLite search log; a tune rerun with the same arguments resumes from it.
    - `sample_above` (among `options`): candidates the heuristic puts above this many token
      events (default 1e9) are evaluated sampled, with intervals and successive halving; None:
      every candidate whole.
    - `hw`: a `HwConfig` (its stored calibration is used); `engine`: "fast" or "oracle";
      `memory`: a `fuseflow.Budget` for each simulation.
    """
    from .tuner.run import tune as run_tune  # noqa: PLC0415 - the tuner loads the compiler and simulator

    return run_tune(model, dataset, budget=budget, lanes=lanes, objective=objective, db=db, max_sims=max_sims,
                    inputs=inputs, seed=seed, density=density, hw=hw, engine=engine, progress=progress,
                    memory=memory, **options)
