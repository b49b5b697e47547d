"""One simulation, asked once: `SimRequest`, the record every simulating room reads.

The edge builds it and checks it once (`checks.sim_request` for the Python API and the commands,
`pipeline.prepared_request` inside the library): the program, its schedule compiled on the
data, every input (given or generated), the simulator's options and, for a partitioned run, how
it is cut (`Partitioning`). Below the edge nothing completes inputs, compiles or checks options
again: `pipeline.run_request`, `partition.run.run_partitioned` and `simreport.simulate_report`
take the record as it is. The channel depth lives in `hw` only.

    >>> import fuseflow
    >>> from fuseflow.pipeline import prepared_request, run_request
    >>> request = prepared_request(fuseflow.from_mlir("tests/mlir/spmv.mlir"), "full", seed=1, density=0.2)
    >>> request.engine, sorted(request.data), run_request(request).verified
    ('fast', ['A', 'x'], True)
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from .fusion.compile import Compiled
from .ir.program import Program
from .memory import Budget
from .sim.hw import HwConfig


@dataclass(frozen=True)
class Partitioning:
    """How a run is cut into windows of its kernels' outer loops: `shards` windows each, all
    simulated; or a sample of them, a `fraction` or enough for a relative `error` of the 95%
    interval, drawn with `sample_seed`. The windows run on `scheduler` (a dask address, a
    `distributed.Client` or a `concurrent.futures.Future` of one) or on a local cluster of
    `workers` processes; sampled ones run here unless a scheduler is given."""

    shards: int | None = None
    fraction: float | None = None
    error: float | None = None
    sample_seed: int = 0
    scheduler: object = None
    workers: int | None = None

    @property
    def sampled(self) -> bool:
        return self.shards is None


@dataclass(frozen=True)
class SimRequest:
    """A simulation of `compiled` (the schedule, compiled for `program` on `data`) over `data`
    (every input of the program, given or generated from `seed` at `density`), checked at the
    edge; `check` compares the outputs with the reference to `rtol`/`atol`; `budget` bounds the
    memory; `partitioning` is None for a whole run."""

    program: Program
    compiled: Compiled
    data: dict = field(repr=False)
    seed: int = 0
    density: float = 0.1
    hw: HwConfig = field(default_factory=HwConfig)
    engine: str = "fast"
    check: bool = True
    rtol: float = 1e-6
    atol: float = 1e-9
    budget: Budget | None = None
    partitioning: Partitioning | None = None

    @property
    def schedule(self) -> str:
        return str(self.compiled.schedule)

    def whole(self) -> "SimRequest":
        """The same request, run whole."""
        return replace(self, partitioning=None)
