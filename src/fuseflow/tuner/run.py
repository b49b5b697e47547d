"""`fuseflow.tune`: a model (a built-in name, a `ModelCase` or a `Program` with inputs) made a
`TuneContext` and searched (`search.Tuner`), with its search log where one is given.
"""
from __future__ import annotations

import contextlib

from ..errors import UserError
from ..ir.generate import complete_inputs
from .context import TuneContext
from .judge import SAMPLE_ABOVE, Sampling
from .log import TuneLog
from .result import TuneResult
from .search import OBJECTIVES, Tuner
from .space import SpaceSpec


def context_for(model, dataset=None, *, inputs: dict | None = None, seed: int = 0, density: float = 0.1,
                hw=None, engine: str = "fast", budget=None, **options) -> TuneContext:
    """The `TuneContext` of a built-in model's name (with `dataset` and `fuseflow.model`'s
    `options`), a `ModelCase`, or a `Program` (with `inputs`; the rest generated)."""
    from ..ir.program import Program  # noqa: PLC0415

    if isinstance(model, Program):
        if dataset is not None or options:
            raise UserError("dataset and model options go with a built-in model's name", "tune",
                            "give a Program its data with inputs={...}")
        ctx = TuneContext.from_program(model, inputs, seed=seed, density=density, label=model.name,
                                       program_key=model.name, data_key=f"density={density:g}", hw=hw,
                                       engine=engine, budget=budget)
        return ctx
    if isinstance(model, str):
        from ..models.registry import build  # noqa: PLC0415 - models load torch (slow)

        scale = options.get("scale", 1.0)
        case = build(model, dataset, seed=seed, budget=budget, **options)
        key = f"model:{model}" + (f"@{scale:g}" if scale != 1.0 else "")
    elif hasattr(model, "program") and hasattr(model, "presets"):
        case, key = model, f"model:{model.name}"
    else:
        raise UserError(f"cannot tune {type(model).__name__} {model!r}", "tune",
                        "give a built-in model's name, a fuseflow.model(...) case, or a Program")
    data = complete_inputs(case.program, {**case.inputs, **(inputs or {})}, density, seed)
    data = {n: v for n, v in data.items() if n in case.program.inputs}
    return TuneContext(case.program, data, dict(case.presets), label=f"{case.name} {case.dataset}",
                       program_key=key, data_key=f"dataset={case.dataset}", seed=seed, density=density, hw=hw,
                       engine=engine, budget=budget)


def tune_context(ctx: TuneContext, *, budget: float = 60.0, lanes: int = 1, objective: str = "cycles",
                 db: str | None = None, max_sims: int | None = None, progress: bool = False,
                 spec: SpaceSpec | None = None, calibration=None,
                 sample_above: float | None = SAMPLE_ABOVE, scheduler: str | None = None,
                 workers: int | None = None, known_presets: dict | None = None) -> TuneResult:
    """Search `ctx` (see `search`); with `db`, log to and resume from that SQLite file;
    candidates the heuristic puts above `sample_above` token events are evaluated sampled
    (`judge`; None: every candidate whole); with `scheduler` (a dask scheduler's address, or
    "local" for a local cluster of `workers` processes) evaluations run on the cluster, one in
    flight per worker (`parallel`). `known_presets`: preset name -> a `SimRow` of it already
    simulated on the same footing (a suite's rows), taken instead of simulating it again."""
    if objective not in OBJECTIVES:
        raise UserError(f"unknown objective {objective!r}", "--objective", f"use one of {', '.join(OBJECTIVES)}")
    spec = spec or SpaceSpec()
    spec.lanes = lanes
    log = None
    if db is not None:
        data_key = ctx.data_key + ("" if _hw_name(ctx.hw) == "default" else f" hw={_hw_name(ctx.hw)}")
        log = TuneLog(db, ctx.program_key, data_key, ctx.seed)
    try:
        with contextlib.ExitStack() as stack:
            pool = None
            if scheduler is not None:
                from ..cluster import dask_client  # noqa: PLC0415 - dask is optional and slow to import
                from .parallel import Pool  # noqa: PLC0415

                client = stack.enter_context(dask_client(None if scheduler == "local" else scheduler, workers))
                pool = Pool(client, ctx)
            tuner = Tuner(ctx, objective=objective, budget=budget, max_sims=max_sims, spec=spec,
                          calibration=calibration, log=log, progress=progress, sampling=Sampling(above=sample_above),
                          pool=pool, known_presets=known_presets)
            result = tuner.run()
    finally:
        if log is not None:
            log.close()
    result.db = db
    return result


def _hw_name(hw) -> str:
    from .costs import hw_key  # noqa: PLC0415

    return hw_key(hw)


def tune(model, dataset=None, *, budget: float = 60.0, lanes: int = 1, objective: str = "cycles",
         db: str | None = None, max_sims: int | None = None, inputs: dict | None = None, seed: int = 0,
         density: float = 0.1, hw=None, engine: str = "fast", progress: bool = False, memory=None,
         sample_above: float | None = SAMPLE_ABOVE, scheduler: str | None = None, workers: int | None = None,
         **options) -> TuneResult:
    """Search for the fastest schedule of a model with the simulator in the loop; returns a
    `TuneResult` (`.schedule`, a string `fuseflow.simulate` and `fuseflow simulate --schedule`
    take, `.cycles`, `.verified`, `.presets`, `.evaluated`, `.to_json()`).

    - `model`: a built-in model's name (with `dataset` and `fuseflow.model`'s options: `scale`,
      `block`, `hidden`, `data_dir`), a `fuseflow.model(...)` case, or a `Program` (with `inputs`;
      the rest generated from `seed` at `density`).
    - `budget`: seconds of search (the winner's final verified run comes on top); `max_sims`:
      at most this many simulations, presets included.
    - `lanes`: parallel lanes a kernel may use (1: none); `objective`: "cycles", "traffic"
      (memory bytes moved) or "pareto" (the front of both, in `.pareto`).
    - `db`: an SQLite search log; a tune rerun with the same arguments resumes from it.
    - `sample_above`: candidates the heuristic puts above this many token events are evaluated
      sampled, with successive halving, and the answer only replaced where the interval says
      it is faster (`judge`); None: every candidate whole.
    - `scheduler`: a dask scheduler's address (or "local": a local cluster of `workers`
      processes) to evaluate candidates on, one in flight per worker.
    - `hw`: a `HwConfig` (its calibration is used where one is stored); `engine`: "fast" or
      "oracle"; `memory`: a `fuseflow.Budget` for each simulation.
    """
    ctx = context_for(model, dataset, inputs=inputs, seed=seed, density=density, hw=hw, engine=engine,
                      budget=memory, **options)
    return tune_context(ctx, budget=budget, lanes=lanes, objective=objective, db=db, max_sims=max_sims,
                        progress=progress, sample_above=sample_above, scheduler=scheduler, workers=workers)
