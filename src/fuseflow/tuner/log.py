"""The tuner's search log: a sweep database (`studies.db.SweepDB`: one `runs` row per simulated
schedule, keyed by program, schedule, data point and seed, committed as it finishes) with one
more table, `tune_kernels`, holding each row's per-kernel cycles and memory words (the tuner's
surrogate reuses them). A tune killed at any point resumes from it: schedules already in the
log are read, not simulated again. `fuseflow plot` reads the file as it reads a sweep's.

    >>> from fuseflow.tuner.context import SimRow
    >>> log = TuneLog(":memory:", "model:gcn", "dataset=karate", 0)
    >>> log.record(SimRow("unfused", cycles=10, mem_reads=3, mem_writes=2, flops=1, max_occupancy=4, verified=True,
    ...                   kernel_cycles=[4, 6], kernel_words=[2, 3]), label="unfused")
    True
    >>> row = log.load()["unfused"]
    >>> row.cycles, row.kernel_cycles, row.resumed
    (10, [4, 6], True)
"""
from __future__ import annotations

import json

from ..studies.db import SweepDB
from ..studies.row import ResultRow
from .context import SimRow

KERNELS = ("CREATE TABLE IF NOT EXISTS tune_kernels (program TEXT NOT NULL, schedule TEXT NOT NULL, "
           "data TEXT NOT NULL, seed INTEGER NOT NULL, kernels TEXT NOT NULL, "
           "UNIQUE (program, schedule, data, seed))")


class TuneLog:
    """The search log of one program on one data point (see the module)."""

    def __init__(self, path: str, program: str, data: str, seed: int):
        self.db = SweepDB(path)
        self.db.conn.execute(KERNELS)
        self.program, self.data, self.seed = program, data, int(seed)

    def _data(self, level: str) -> str:
        return f"{self.data} {level}" if level else self.data

    def load(self, level: str = "") -> dict[str, SimRow]:
        """Every schedule already simulated for this program and data point: whole, or with
        `level` (a sample plan's key, `judge.Sampling.level`) evaluated at that level."""
        data = self._data(level)
        kernels = {r["schedule"]: json.loads(r["kernels"]) for r in self.db.conn.execute(
            "SELECT schedule, kernels FROM tune_kernels WHERE program = ? AND data = ? AND seed = ?",
            (self.program, data, self.seed))}
        rows = {}
        for r in self.db.rows("program = ? AND data = ? AND seed = ?", (self.program, data, self.seed)):
            if r.status not in ("ok", "error"):
                continue
            per = kernels.get(r.schedule, {})
            row = SimRow(r.schedule, r.status, r.cycles, r.mem_reads, r.mem_writes, r.flops, r.max_occupancy,
                         r.verified, r.wall_seconds or 0.0, per.get("cycles", []), per.get("words", []), r.error,
                         resumed=True)
            if r.mode not in (None, "whole"):
                row.mode, row.cycles_low, row.cycles_high = r.mode, r.cycles_low, r.cycles_high
                row.kernel_low, row.kernel_high = per.get("low", []), per.get("high", [])
                row.sampled_fraction = r.sampled_fraction
            rows[r.schedule] = row
        return rows

    def record(self, row: SimRow, label: str = "", est_cycles: float | None = None, est_bytes: float | None = None,
               kernels: int | None = None, level: str = "") -> bool:
        """Write one simulated schedule (and its kernels) in one transaction; False if it was
        there. `level`: the sample plan's key where it was evaluated sampled (the runs table
        keys a row by program, schedule, data and seed: the level goes with the data)."""
        whole = row.mode == "whole"
        result = ResultRow(row.schedule, row.status, program=self.program, data=self._data(level), seed=self.seed,
                           label=label or "tune", cycles=row.cycles, flops=row.flops, mem_reads=row.mem_reads,
                           mem_writes=row.mem_writes, verified=bool(row.verified), wall_seconds=row.seconds,
                           error=row.error, est_cycles=est_cycles, est_bytes=est_bytes,
                           max_occupancy=row.max_occupancy, mode=row.mode if row.status == "ok" else None,
                           cycles_low=None if whole else row.cycles_low, cycles_high=None if whole else row.cycles_high,
                           kernels=kernels, sampled_fraction=None if whole else row.sampled_fraction)
        per = {"cycles": row.kernel_cycles, "words": row.kernel_words}
        if not whole:
            per.update(low=row.kernel_low, high=row.kernel_high)
        also = ("INSERT OR IGNORE INTO tune_kernels (program, schedule, data, seed, kernels) VALUES (?, ?, ?, ?, ?)",
                (self.program, row.schedule, self._data(level), self.seed, json.dumps(per)))
        return self.db.insert(result, also)

    def close(self) -> None:
        self.db.close()
