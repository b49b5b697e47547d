"""Where a partitioned run spends its time: the driver's phases (wall and this process's CPU
seconds) and every window task's run on its worker, for `bench/sharded_speed.py` and
docs/partitioned.md. Measuring costs two clock reads per phase or task; nothing else changes.

    >>> t = Timings()
    >>> with t.phase("compile"):
    ...     pass
    >>> [p.name for p in t.phases], t.phases[0].wall >= 0.0
    (['compile'], True)
    >>> t.add_task(TaskTime("window 0:8", "w1", 0.0, 2.0, 1.5))
    >>> t.busy(), round(t.task_share("window"), 2)
    ({'w1': 2.0}, 1.0)
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field


@dataclass
class Phase:
    """One step of the driver: wall seconds and the driver process's CPU seconds in it."""

    name: str
    wall: float
    cpu: float


@dataclass
class TaskTime:
    """One window run on a worker: `start` in seconds since the epoch (comparable across local
    processes), its wall and the worker thread's CPU seconds."""

    label: str
    worker: str
    start: float
    wall: float
    cpu: float


@dataclass
class Timings:
    """The driver's phases in order and the worker tasks (in no particular order)."""

    phases: list[Phase] = field(default_factory=list)
    tasks: list[TaskTime] = field(default_factory=list)

    @contextlib.contextmanager
    def phase(self, name: str):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.phases.append(Phase(name, time.perf_counter() - wall, time.process_time() - cpu))

    def add_task(self, task: TaskTime) -> None:
        self.tasks.append(task)

    def busy(self) -> dict[str, float]:
        """Wall seconds each worker spent in window tasks."""
        out: dict[str, float] = {}
        for t in self.tasks:
            out[t.worker] = out.get(t.worker, 0.0) + t.wall
        return out

    def task_share(self, prefix: str) -> float:
        """The share of all task seconds spent in tasks whose label starts with `prefix`."""
        total = sum(t.wall for t in self.tasks)
        return sum(t.wall for t in self.tasks if t.label.startswith(prefix)) / total if total else 0.0
