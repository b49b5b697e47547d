"""Simulate a schedule and write its interactive HTML report (`fuseflow simulate --html`).

`simulate_report` simulates as `pipeline.simulate` does (the same data, the same compiled kernels,
the same verification) and writes the report (`report.html`), also when the simulation deadlocks
or an output differs from the reference: the report then links the nodes the error names, and
the error is raised after it is written. The per-node statistics (`report.runs.Recorder`) are
each kernel's run, handed over by `simulate`'s `on_run`.

    >>> import os, tempfile, fuseflow
    >>> path = os.path.join(tempfile.mkdtemp(), "r.html")
    >>> r = simulate_report(fuseflow.from_mlir("tests/mlir/spmv.mlir"), "full", path=path, seed=1)
    >>> r.verified, os.path.getsize(path) > 10_000
    (True, True)
"""
from __future__ import annotations

from .errors import FuseflowError
from .fusion.compile import compile_schedule
from .ir.generate import complete_inputs
from .ir.reference import bind_inputs
from .ir.stats import stats_for
from .ir.values import shape_of
from .pipeline import VerificationError, simulate
from .report.html import write_report
from .report.runs import Problem, Recorder
from .sim.bounded import Deadlock


def _problem(err: FuseflowError, compiled, kernels_done: int) -> Problem:
    if isinstance(err, Deadlock):
        return Problem(err.one_line(), kernels_done, "deadlock")
    if isinstance(err, VerificationError):
        return Problem(err.one_line(), None, "mismatch")
    return Problem(err.one_line(), kernels_done if kernels_done < len(compiled.kernels) else None)


def simulate_report(program, schedule="full", inputs: dict | None = None, *, path: str, seed: int = 0,
                    density: float = 0.1, hw=None, engine: str = "fast", on_written=None):
    """`simulate` that also writes an HTML report to `path` (see the module docstring);
    `on_written(path)` is called once it is written."""
    given = dict(inputs or {})
    data = complete_inputs(program, given, density, seed, {n: shape_of(v) for n, v in given.items()})
    data = {n: v for n, v in data.items() if n in program.inputs}
    compiled = compile_schedule(program, schedule, {n: shape_of(v) for n, v in data.items()},
                                stats=stats_for(program, bind_inputs(program, data)))
    done = [0]
    result, problem, error = None, None, None
    recorder = Recorder(None)
    try:
        result = simulate(program, compiled, data, hw=hw, engine=engine, on_run=recorder.record,
                          on_kernel=lambda finished, total: done.__setitem__(0, finished))
    except FuseflowError as err:  # the statistics of the kernels that ran are still shown
        problem, error = _problem(err, compiled, done[0]), err
    write_report(path, compiled, result=result, stats=recorder.stats, problem=problem)
    if on_written is not None:
        on_written(path)
    if error is not None:
        raise error
    return result
