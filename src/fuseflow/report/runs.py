"""Per-node statistics of a simulation, for reports: steps per node, tokens and occupancy per stream.

`Recorder` wraps an engine's `run_graph` and keeps, per kernel graph, what the HTML report shows
on a node: how many steps (busy cycles) it took, how many tokens each of its streams carried and
how many waited in each channel at most. `simulate_report` simulates a schedule as `simulate`
does (the same data, the same compiled kernels, the same verification) and writes the report,
also when the simulation deadlocks or an output differs from the reference: the report then
links the nodes the error names, and the error is raised after it is written. The per-node
statistics come from a second, unbounded run of each kernel on the same engine.

    >>> import os, tempfile, fuseflow
    >>> path = os.path.join(tempfile.mkdtemp(), "r.html")
    >>> r = simulate_report(fuseflow.from_mlir("tests/mlir/spmv.mlir"), "full", path=path, seed=1)
    >>> r.verified, os.path.getsize(path) > 10_000
    (True, True)
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import FuseflowError


@dataclass
class GraphStats:
    cycles: int = 0
    steps: dict[int, int] = field(default_factory=dict)  # node id -> steps
    tokens: dict[str, int] = field(default_factory=dict)  # stream ("n3.crd") -> tokens
    occupancy: dict[str, int] = field(default_factory=dict)  # stream -> most tokens waiting at once


class Recorder:
    """A `run_graph` that remembers each graph's statistics by graph name."""

    def __init__(self, run_graph):
        self.run_graph = run_graph
        self.stats: dict[str, GraphStats] = {}

    def __call__(self, graph, tensors, hw=None):
        run = self.run_graph(graph, tensors, hw)
        self.stats[graph.name] = GraphStats(
            int(run.cycles), {int(k): int(v) for k, v in run.node_steps.items()},
            {str(s): int(n) for s, n in run.stream_tokens.items()},
            {str(s): int(n) for s, n in (run.max_occupancy or {}).items()})
        return run


@dataclass
class Problem:
    """What stopped a simulation, and in which kernel (its position in the schedule)."""

    message: str
    kernel: int | None = None
    kind: str = "error"  # deadlock | mismatch | error


def _problem(err: FuseflowError, compiled, kernels_done: int) -> Problem:
    from ..pipeline import VerificationError
    from ..sim.bounded import Deadlock

    if isinstance(err, Deadlock):
        return Problem(err.one_line(), kernels_done, "deadlock")
    if isinstance(err, VerificationError):
        return Problem(err.one_line(), None, "mismatch")
    return Problem(err.one_line(), kernels_done if kernels_done < len(compiled.kernels) else None)


def simulate_report(program, schedule="full", inputs: dict | None = None, *, path: str, seed: int = 0,
                    density: float = 0.1, hw=None, engine: str = "fast", on_written=None):
    """`simulate` that also writes an HTML report to `path` (see the module docstring);
    `on_written(path)` is called once it is written."""
    from ..execute import execute
    from ..fusion.compile import compile_schedule
    from ..ir.generate import random_inputs
    from ..ir.reference import bind_inputs
    from ..ir.stats import stats_for
    from ..pipeline import _engine, simulate
    from .html import write_report

    given = dict(inputs or {})
    data = {**random_inputs(program, density=density, seed=seed, shapes={n: np.shape(v) for n, v in given.items()}),
            **given}
    data = {n: v for n, v in data.items() if n in program.inputs}
    compiled = compile_schedule(program, schedule, {n: np.shape(v) for n, v in data.items()},
                                stats=stats_for(program, bind_inputs(program, data)))
    done = [0]
    result, problem, error = None, None, None
    try:
        result = simulate(program, compiled, data, hw=hw, engine=engine,
                          on_kernel=lambda finished, total: done.__setitem__(0, finished))
    except FuseflowError as err:
        problem, error = _problem(err, compiled, done[0]), err
    recorder = Recorder(_engine(engine))
    try:
        execute(compiled, data, None, recorder)
    except FuseflowError:  # the statistics of the kernels that ran are still shown
        pass
    write_report(path, compiled, result=result, stats=recorder.stats, problem=problem)
    if on_written is not None:
        on_written(path)
    if error is not None:
        raise error
    return result
