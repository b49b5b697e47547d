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

from collections.abc import Mapping

import numpy as np

from . import pipeline
from .checks import check_allocation, check_inputs, check_schedule, input_shapes
from .errors import UserError
from .fusion.compile import Compiled, compile_schedule
from .ir.generate import complete_inputs
from .ir.reference import bind_inputs
from .ir.stats import stats_for
from .memory import Budget
from .partition.run import simulate_partitioned
from .partition.sampled import SamplePlan
from .studies import MAX_TOKENS
from .studies.cluster import dask_client
from .studies.granularity import StudyResult, fusion_study, read_schedules, same_schedules


def _check_options(seed: int, density: float) -> None:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise UserError(f"seed {seed!r} must be a non-negative integer", "seed")
    if not isinstance(density, (int, float)) or not 0.0 < float(density) <= 1.0:
        raise UserError(f"density {density!r} is outside (0, 1]", "density")


def compile(program, schedule=None, *, shapes: dict | None = None, data: dict | None = None):  # noqa: A001
    """Compile `schedule` (a string or `Schedule`; None: the first of full, full layout=induced,
    unfused, unfused layout=induced that compiles) for `program` into kernels, each with its
    fusion table and Sparse-Abstract-Machine graph (`Compiled`). `shapes` gives dynamic
    dimensions; with `data` (input arrays), default dataflow orders weigh loops by its densities,
    as `simulate` does."""
    given = check_inputs(program, data) if data else {}
    known = input_shapes(program, given, shapes)
    stats = None
    if given:
        stats = stats_for(program, bind_inputs(program, given))
    parsed = check_schedule(program, schedule, known, stats)
    return compile_schedule(program, parsed, known, stats=stats)


def simulate(program, schedule=None, inputs: dict | None = None, *, seed: int = 0, density: float = 0.1,
             shapes: dict | None = None, hw=None, engine: str = "fast", check: bool = True,
             budget: Budget | None = None, on_kernel=None, on_events=None, shards: int | None = None,
             sample: float | None = None, error: float | None = None, scheduler=None, workers: int | None = None,
             sample_seed: int = 0):
    """Compile `schedule` for `program` (None: as `compile` picks it), simulate every kernel
    cycle by cycle and compare each output with the numpy reference (`SimResult`,
    `.to_json()`; `fuseflow.to_frame` makes a
    table of its kernels). Inputs not in `inputs` (by name or `argK`) are generated from
    `seed` at `density`; `shapes` gives dynamic dimensions of generated ones. `budget` (a
    `fuseflow.Budget`) bounds the memory the run may take (default: what is available);
    `on_kernel(done, total)` after each kernel and `on_events(done_events)` within one report
    progress.

    Partitioned (`fuseflow.partition`): `shards=N` cuts every kernel's outer loop into N windows
    run as dask tasks (a local cluster of `workers` processes, or the scheduler at address
    `scheduler`, or a `distributed.Client`) and combines them (`mode` "sharded"); `sample=F`
    (a fraction of windows) or `error=E` (the 95% interval's relative half-width, 0.02 for 2%)
    estimates each kernel's cycles from a stratified sample of windows drawn with `sample_seed`
    (`mode` "sampled", `cycles_low`/`cycles_high`); those run here unless a scheduler is given."""
    _check_options(seed, density)
    given = check_inputs(program, inputs)
    known = input_shapes(program, given, shapes)
    check_allocation(program, given, known, budget, f"inputs of {program.name}", density)
    data = complete_inputs(program, given, density, seed, known)
    if schedule is not None and not isinstance(schedule, Compiled):
        schedule = check_schedule(program, schedule, known)  # parsed once (if a string), passed on as the record
    if shards is not None or sample is not None or error is not None:
        return _partitioned(program, schedule, data, seed=seed, density=density, hw=hw, engine=engine, check=check,
                            shards=shards, sample=sample, error=error, scheduler=scheduler, workers=workers,
                            sample_seed=sample_seed)
    return pipeline.simulate(program, schedule, data, seed=seed, density=density, hw=hw, engine=engine,
                             check=check, on_kernel=on_kernel, budget=budget, on_events=on_events)


def _partitioned(program, schedule, data, *, shards, sample, error, scheduler, workers, sample_seed, **options):
    """A sharded or sampled simulation (`partition.run`), its windows on dask where asked."""
    if shards is not None and (sample is not None or error is not None):
        raise UserError("shards and sampling exclude each other", "--shards", "give --shards or --sample/--error")
    if shards is not None and (isinstance(shards, bool) or not isinstance(shards, (int, np.integer)) or shards < 1):
        raise UserError(f"shards {shards!r} must be a positive integer", "--shards")
    plan = None if shards is not None else SamplePlan(fraction=sample, error=error, seed=sample_seed)
    if hasattr(scheduler, "submit"):  # a distributed.Client
        return simulate_partitioned(program, schedule, data, shards=shards, sample=plan, client=scheduler, **options)
    if shards is None and scheduler is None:  # sampled windows are few: they run here
        return simulate_partitioned(program, schedule, data, sample=plan, **options)
    with dask_client(scheduler, workers) as client:
        return simulate_partitioned(program, schedule, data, shards=shards, sample=plan, client=client, **options)


def study(model, dataset=None, schedules=("unfused", "partial", "full"), *, engine: str = "fast",
          progress: bool = False, max_tokens: float | None = None, budget: Budget | None = None, **options):
    """The fusion study (`StudyResult`): simulate each schedule (a preset name of the model,
    or a schedule string; or a mapping of such names to their `Schedule` records, read once by
    the caller) of a built-in model on a dataset, or of a `ModelCase`, and compare
    cycles, FLOPs and memory traffic with the first. `options` go to `fuseflow.model`
    (`scale`, `seed`, `block`, `data_dir`, ...)."""
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
