"""Simulate a schedule and write its interactive HTML report (`fuseflow simulate --html`).

`simulate_report` simulates a `SimRequest` as `pipeline.run_request` does (the same data, the
same compiled kernels, the same verification) and writes the report (`report.html`), also when
the simulation deadlocks or an output differs from the reference: the report then links the
nodes the error names, and the error is raised after it is written. The per-node statistics
(`report.runs.Recorder`) are each kernel's run, handed over by `run_request`'s `on_run`.

    >>> import os, tempfile, fuseflow
    >>> from fuseflow.pipeline import prepared_request
    >>> path = os.path.join(tempfile.mkdtemp(), "r.html")
    >>> request = prepared_request(fuseflow.from_mlir("tests/mlir/spmv.mlir"), "full", seed=1)
    >>> r = simulate_report(request, path=path)
    >>> r.verified, os.path.getsize(path) > 10_000
    (True, True)
"""
from __future__ import annotations

from .errors import FuseflowError
from .pipeline import VerificationError, run_request
from .report.html import write_report
from .report.runs import Problem, Recorder
from .request import SimRequest
from .sim.bounded import Deadlock


def _problem(err: FuseflowError, compiled, kernels_done: int) -> Problem:
    if isinstance(err, Deadlock):
        return Problem(err.one_line(), kernels_done, "deadlock")
    if isinstance(err, VerificationError):
        return Problem(err.one_line(), None, "mismatch")
    return Problem(err.one_line(), kernels_done if kernels_done < len(compiled.kernels) else None)


def simulate_report(request: SimRequest, *, path: str, on_written=None):
    """`pipeline.run_request` that also writes an HTML report to `path` (see the module
    docstring); `on_written(path)` is called once it is written."""
    compiled = request.compiled
    done = [0]
    result, problem, error = None, None, None
    recorder = Recorder(None)
    try:
        result = run_request(request, on_run=recorder.record,
                             on_kernel=lambda finished, total: done.__setitem__(0, finished))
    except FuseflowError as err:  # the statistics of the kernels that ran are still shown
        problem, error = _problem(err, compiled, done[0]), err
    write_report(path, compiled, result=result, stats=recorder.stats, problem=problem)
    if on_written is not None:
        on_written(path)
    if error is not None:
        raise error
    return result
