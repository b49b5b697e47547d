"""One result row of a study, a sweep, a suite or a tuner's log: what the study makes, the
database stores (`to_db`, `from_db`: the `runs` table's columns) and the page and charts read.

One vocabulary: `wall_seconds` (not `wall`), `mem` = `mem_reads + mem_writes` words and `bytes`
4 per word (both derived), `model` the program's own name (the `program_name` column), `reason`
why a row was left to the heuristic (status `estimated`), and `verified` a bool; `verdict` is
what a study's table shows for it (`skipped` and `failed` for rows not simulated). `speedup`,
`flops_ratio`, `mem_ratio` and their marks are over a group's baseline (`granularity.add_ratios`)
and are not stored.

    >>> row = ResultRow("full", program="p.mlir", data="density=0.1", seed=0, cycles=120, flops=40,
    ...                 mem_reads=10, mem_writes=5, verified=True, wall_seconds=0.5)
    >>> row.mem, row.bytes, row.to_db()["verified"], row.to_db()["cycles_low"]
    (15, 60, 1, 120)
    >>> back = ResultRow.from_db({**row.to_db(), "bytes": 60, "id": 1})
    >>> back == replace(row, id=1, cycles_low=120, cycles_high=120, sampled_fraction=1.0)
    True
    >>> row.study_json()["wall"], ResultRow("full", status="error", error="boom").verdict
    (0.5, 'failed')
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

STATUSES = ("ok", "estimated", "error", "pruned")  # simulated, left to the heuristic, failed, pruned (sweeps)
HEURISTIC = "the heuristic's estimate (last resort): "  # the method of a row left to the heuristic


@dataclass(frozen=True)
class ResultRow:
    """A schedule's result on one data point (see the module); every field but `schedule` optional."""

    schedule: str  # a preset name or a schedule string (the database's key)
    status: str = "ok"  # one of STATUSES
    program: str | None = None  # the database key's program: an MLIR path or model:NAME
    data: str | None = None  # the data point's key ("dataset=karate", "density=0.1 block=4")
    seed: int | None = None
    label: str | None = None  # the granularity a sweep's schedule came from (unfused, random3, ...)
    model: str | None = None  # the program's own name (column program_name)
    dataset: str | None = None
    density: float | None = None
    block: int | None = None
    engine: str | None = None
    suite: str | None = None
    schedule_text: str | None = None  # the schedule string a preset stands for
    kernels: int | None = None
    cycles: int | None = None
    model_cycles: int | None = None  # a few simulated decoders scaled to the whole model
    flops: int | None = None
    mem_reads: int | None = None
    mem_writes: int | None = None
    max_occupancy: int | None = None
    verified: bool = False  # every output matched the numpy reference
    max_abs_error: float | None = None
    wall_seconds: float | None = None
    error: str | None = None  # a failed row's one-line error
    reason: str | None = None  # why an estimated row was not simulated
    est_cycles: float | None = None
    est_flops: float | None = None
    est_mem: float | None = None  # heuristic memory words
    est_bytes: float | None = None  # heuristic bytes (else 4 x est_mem)
    est_seconds: float | None = None
    mode: str | None = None  # whole | sharded | sampled | heuristic
    method: str | None = None
    cycles_low: int | None = None  # a sampled row's 95% interval
    cycles_high: int | None = None
    sampled_fraction: float | None = None
    worker: str | None = None
    created: str | None = None
    id: int | None = None
    # over the group's baseline (not stored)
    speedup: float | None = None
    flops_ratio: float | None = None
    mem_ratio: float | None = None
    estimated_ratios: bool = False  # ratios of the heuristic's estimates (shown with `~`)
    speedup_low: float | None = None  # the speedup's 95% interval where it rests on a sampled row
    speedup_high: float | None = None

    @property
    def mem(self) -> int | None:
        """Memory words read and written."""
        return None if self.mem_reads is None or self.mem_writes is None else self.mem_reads + self.mem_writes

    @property
    def bytes(self) -> int | None:
        """Memory traffic in bytes (4 per word)."""
        return None if self.mem is None else self.mem * 4

    @property
    def verdict(self) -> bool | str:
        """A study table's `verified` cell: the bool where simulated, else `skipped` or `failed`."""
        return {"estimated": "skipped", "error": "failed"}.get(self.status, self.verified)

    @property
    def sampled(self) -> bool:
        return self.mode == "sampled"

    @property
    def best_cycles(self) -> int | None:
        """Whole-model cycles where the row stands for a larger model, else its cycles."""
        return self.model_cycles or self.cycles

    @classmethod
    def from_result(cls, result, schedule: str, **more) -> ResultRow:
        """The row of a `pipeline.SimResult` (whole, sharded or sampled), with `more` fields."""
        return cls(schedule, schedule_text=result.schedule, kernels=len(result.kernels), cycles=int(result.cycles),
                   flops=int(result.flops), mem_reads=int(result.mem_reads), mem_writes=int(result.mem_writes),
                   max_occupancy=result.max_occupancy, verified=bool(result.verified),
                   max_abs_error=result.max_abs_error, mode=result.mode, method=result.method,
                   cycles_low=result.cycles_low, cycles_high=result.cycles_high,
                   sampled_fraction=result.sampled_fraction, **more)

    @classmethod
    def from_db(cls, row) -> ResultRow:
        """A `runs` row (a mapping of its columns; those an older schema lacks read as None)."""
        row = dict(row)
        values = {name: row.get(_COLUMN.get(name, name)) for name in STORED}
        return cls(**{**values, "verified": bool(values["verified"])})

    def to_db(self) -> dict:
        """The row as the `runs` table's columns (those without a value left out): `bytes` derived,
        a whole run's interval its cycles, `est_bytes` 4 x `est_mem` where not given."""
        ok = self.status == "ok"
        values = {_COLUMN.get(name, name): getattr(self, name) for name in STORED}
        values.update(bytes=self.bytes, verified=int(self.verified), method=self.method or None,
                      cycles_low=self.cycles if self.cycles_low is None else self.cycles_low,
                      cycles_high=self.cycles if self.cycles_high is None else self.cycles_high,
                      sampled_fraction=(self.sampled_fraction or 1.0) if ok else None,
                      est_bytes=self.est_mem * 4 if self.est_bytes is None and self.est_mem is not None
                      else self.est_bytes)
        return {k: v for k, v in values.items() if v is not None}

    def study_json(self) -> dict:
        """The row as a fusion study's JSON gives it (`fuseflow study fusion --json`): the keys of
        its kind (simulated, estimated, failed) in their order, then its ratios."""
        keys = {"estimated": ESTIMATED_KEYS, "error": FAILED_KEYS}.get(self.status, SIMULATED_KEYS)
        out = self.view(keys + (("model_cycles",) if self.model_cycles is not None else ()) + RATIO_KEYS)
        if self.estimated_ratios:
            out["estimated_ratios"] = True
        if self.speedup_low is not None:
            out.update(speedup_low=self.speedup_low, speedup_high=self.speedup_high)
        return out

    def view(self, keys) -> dict:
        """The values of `keys` in a study's names (`wall`, `mem`, `skipped`; `verified` the verdict)."""
        return {k: getattr(self, VIEW.get(k, k)) for k in keys}


_COLUMN = {"model": "program_name"}  # fields stored under another column name
STORED = tuple(f.name for f in fields(ResultRow) if f.name not in ("speedup", "flops_ratio", "mem_ratio",
                                                                   "estimated_ratios", "speedup_low",
                                                                   "speedup_high"))
VIEW = {"wall": "wall_seconds", "skipped": "reason", "verified": "verdict"}  # a study's names for fields
SIMULATED_KEYS = ("model", "dataset", "schedule", "schedule_text", "kernels", "cycles", "flops", "mem", "mem_reads",
                  "mem_writes", "max_occupancy", "verified", "max_abs_error", "wall", "est_cycles", "est_flops",
                  "est_mem", "mode", "method", "cycles_low", "cycles_high", "sampled_fraction")
ESTIMATED_KEYS = ("model", "dataset", "schedule", "schedule_text", "kernels", "cycles", "est_cycles", "est_flops",
                  "est_mem", "flops", "mem", "max_occupancy", "verified", "max_abs_error", "wall", "skipped")
FAILED_KEYS = ("model", "dataset", "schedule", "schedule_text", "kernels", "cycles", "flops", "mem",
               "max_occupancy", "verified", "max_abs_error", "wall", "error")
RATIO_KEYS = ("speedup", "flops_ratio", "mem_ratio")


def merged(base: ResultRow, row: ResultRow) -> ResultRow:
    """`base` (a planned row) with every field `row` has a value for taken from `row`.

        >>> merged(ResultRow("s", label="full", kernels=3), ResultRow("s", cycles=9)).label
        'full'
    """
    return replace(base, **{f.name: getattr(row, f.name) for f in fields(row) if getattr(row, f.name) is not None})
