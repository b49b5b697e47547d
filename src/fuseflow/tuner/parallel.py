"""Evaluations on a dask cluster (`fuseflow tune --scheduler ADDR`): the tuner keeps one
evaluation in flight per worker and takes each in as it finishes, so the surrogate, the ladder
and the incumbent are updated between submissions exactly as between two evaluations here.

The tune's context (program, inputs, presets, statistics) is sent to every worker once
(`Client.scatter(..., broadcast=True)`); a task is (context, schedule string, sample plan) and
returns the `SimRow` that `TuneContext.simulate` makes, compiled on the worker from the string.
Workers need fuseflow importable (a local cluster's are this interpreter).

    >>> import fuseflow
    >>> ctx = TuneContext.from_program(fuseflow.from_mlir("tests/mlir/matmul_chain.mlir"))
    >>> row = evaluate(ctx, "unfused", None)
    >>> row.verified, row.mode
    (True, 'whole')
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .context import SimRow, TuneContext


def evaluate(ctx: TuneContext, schedule: str, plan) -> SimRow:
    """One evaluation on a worker: whole, or sampled with `plan`."""
    return ctx.simulate(schedule, sample=plan)


@dataclass
class Pool:
    """Evaluations in flight on a dask `client`: submit up to one per worker, wait for the next."""

    client: object
    ctx: TuneContext
    pending: dict = field(default_factory=dict)  # future -> (entry, rung)
    shared: object = None  # the context, scattered to every worker
    submitted: int = 0  # evaluations sent to the cluster

    def __post_init__(self):
        self.shared = self.client.scatter(self.ctx, broadcast=True, hash=False)

    @property
    def slots(self) -> int:
        """How many more evaluations may start now: a worker each (at least one)."""
        workers = max(1, len(self.client.scheduler_info().get("workers", {})))
        return max(0, workers - len(self.pending))

    def submit(self, entry, rung: int | None, plan) -> None:
        future = self.client.submit(evaluate, self.shared, entry.schedule, plan, pure=False)
        self.pending[future] = (entry, rung)
        self.submitted += 1

    def next_done(self):
        """(entry, rung, row) of the next evaluation to finish; a task lost with its worker
        comes back as the row's error."""
        from distributed import wait  # noqa: PLC0415 - dask is optional and slow to import

        done = wait(list(self.pending), return_when="FIRST_COMPLETED").done
        future = next(iter(done))
        entry, rung = self.pending.pop(future)
        try:
            row = future.result()
        except Exception as err:  # noqa: BLE001 - a worker died: the evaluation failed, the tune goes on
            row = SimRow(entry.schedule, "error", error=f"{type(err).__name__}: {err}"[:500])
        return entry, rung, row

    def cancel(self) -> None:
        for future in self.pending:
            future.cancel()
        self.pending.clear()
