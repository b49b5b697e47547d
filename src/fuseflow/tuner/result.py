"""What `fuseflow tune` returns: the best schedule found, its cycles, the presets beside it, how
much was evaluated, and two Pareto fronts of the simulated schedules: cycles against memory
traffic, and cycles against on-chip buffering (`TuneResult`; `to_json` is `fuseflow tune --json`).

On-chip buffering is what the simulator reports of it: the most tokens any channel (FIFO) of
any kernel held at once (`SimResult.max_occupancy`). The simulator does not report how full an
accumulator got, so the front leaves accumulators out.

    >>> r = TuneResult("p", "full", 90, True, 400, 3, "cycles", 1,
    ...                [{"name": "unfused", "cycles": 120}, {"name": "full", "cycles": 90}], {}, 1.0)
    >>> r.best_preset["name"], r.speedup
    ('full', 1.0)
    >>> r.speedup_interval({"cycles": 120, "cycles_low": 108, "cycles_high": 132})  # a sampled preset
    [1.2, 1.4667]
    >>> points = [Point("a", 90, 400, 30), Point("b", 100, 300, 8), Point("c", 110, 500, 4), Point("d", 95, 450, 40)]
    >>> [p.schedule for p in front(points, "traffic_bytes")], [p.schedule for p in front(points, "max_fifo")]
    (['a', 'b'], ['a', 'b', 'c'])
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

AXES = {"traffic_bytes": "bytes moved", "max_fifo": "largest FIFO (tokens)"}  # what a front weighs cycles against


@dataclass(frozen=True)
class Point:
    """One simulated schedule as the fronts see it; `preset`: its preset's name, if it is one;
    `cycles_low`/`cycles_high`: the 95% interval of a sampled evaluation (else None)."""

    schedule: str
    cycles: int
    traffic_bytes: int
    max_fifo: int
    preset: str = ""
    cycles_low: int | None = None
    cycles_high: int | None = None

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v not in ("", None)}


def front(points: list[Point], against: str) -> list[Point]:
    """The points no other point beats on both cycles and `against` ("traffic_bytes" or
    "max_fifo"), by cycles; of equal points the first met."""
    if against not in AXES:
        raise ValueError(f"a front is of cycles against one of {', '.join(AXES)}, not {against!r}")
    out, least = [], None
    for p in sorted(points, key=lambda p: (p.cycles, getattr(p, against))):
        if least is None or getattr(p, against) < least:
            out.append(p)
            least = getattr(p, against)
    return out


@dataclass
class TuneResult:
    """What `fuseflow tune` found (see `to_json` for the fields)."""

    program: str
    schedule: str
    cycles: int
    verified: bool
    traffic: int
    max_fifo: int
    objective: str
    lanes: int
    presets: list
    evaluated: dict
    seconds: float
    kernels: list = field(default_factory=list)
    pareto: list[Point] = field(default_factory=list)  # cycles against bytes moved
    tau: dict = field(default_factory=dict)
    best_one_lane: dict | None = None
    reproduced: bool = True
    mode: str = "whole"
    db: str | None = None
    calibration: str = ""
    pareto_buffering: list[Point] = field(default_factory=list)  # cycles against the largest FIFO
    points: list[Point] = field(default_factory=list)  # every schedule simulated (the chart's; not in to_json)
    cycles_low: int | None = None  # the answer's 95% interval where it was sampled (`mode` "sampled")
    cycles_high: int | None = None

    @property
    def best_preset(self) -> dict | None:
        ok = [p for p in self.presets if p.get("cycles") is not None]
        return min(ok, key=lambda p: p["cycles"]) if ok else None

    @property
    def speedup(self) -> float | None:
        best = self.best_preset
        return best["cycles"] / self.cycles if best and self.cycles else None

    def speedup_interval(self, preset: dict) -> list[float] | None:
        """A preset's cycles over the answer's, as a 95% interval where either was sampled
        (the preset's low end over the answer's high end, and the other way round; unpaired);
        None where both ran whole."""
        if preset.get("cycles") is None or not self.cycles or \
                (preset.get("cycles_low") is None and self.cycles_low is None):
            return None  # both whole: the speedup is exact
        low, high = preset.get("cycles_low", preset["cycles"]), preset.get("cycles_high", preset["cycles"])
        mine_low = self.cycles_low if self.cycles_low is not None else self.cycles
        mine_high = self.cycles_high if self.cycles_high is not None else self.cycles
        return [round(low / mine_high, 4), round(high / mine_low, 4)]

    def to_json(self) -> dict:
        best = self.best_preset
        return {"program": self.program, "schedule": self.schedule, "cycles": self.cycles, "mode": self.mode,
                "cycles_low": self.cycles_low, "cycles_high": self.cycles_high, "verified": self.verified,
                "reproduced": self.reproduced,
                "traffic_bytes": self.traffic, "max_fifo": self.max_fifo, "objective": self.objective,
                "lanes": self.lanes, "presets": self.presets,
                "best_preset": best["name"] if best else None,
                "speedup_over_best_preset": round(self.speedup, 4) if self.speedup else None,
                "speedup_interval": self.speedup_interval(best) if best else None,
                "best_at_one_lane": self.best_one_lane, "kernels": self.kernels,
                "pareto": [p.to_json() for p in self.pareto],
                "pareto_buffering": [p.to_json() for p in self.pareto_buffering],
                "evaluated": self.evaluated, "kendall_tau": self.tau, "calibration": self.calibration,
                "seconds": round(self.seconds, 2), "db": self.db}

    def __str__(self) -> str:
        interval = f" [{self.cycles_low:,}, {self.cycles_high:,}] sampled" if self.cycles_low is not None else ""
        lines = [f"tuned {self.program} ({self.objective}, lanes {self.lanes}): {self.cycles:,} cycles{interval}, "
                 f"{self.traffic:,} bytes moved, " + ("verified" if self.verified else "NOT verified"),
                 f"  schedule: {self.schedule}"]
        if self.speedup:
            lines.append(f"  {self.speedup:.3f}x the best preset ({self.best_preset['name']})")
        lines.append(f"{'preset':<18} {'cycles':>12} {'tuned speedup':>14}")
        for p in self.presets:
            cyc = f"{p['cycles']:,}" if p.get("cycles") is not None else "failed"
            sp = f"{p['cycles'] / self.cycles:.3f}x" if p.get("cycles") and self.cycles else ""
            within = self.speedup_interval(p)
            if sp and within and within[0] != within[1]:
                sp += f" [{within[0]:.3f}, {within[1]:.3f}]"
            lines.append(f"{p['name']:<18} {cyc:>12} {sp:>14}")
        e = self.evaluated
        lines.append(f"evaluated: {e['simulated']} simulated ({e['resumed']} of them read from the log), "
                     f"{e['estimated']} estimated only, {e['rejected']} rejected by the compiler; "
                     f"groupings: {e['space']['groupings']} ({e['space']['mode']})")
        if self.tau:
            lines.append(f"heuristic rank quality over {self.tau['n']} simulated candidates: Kendall tau "
                         f"{_fmt(self.tau['calibrated'])} calibrated, {_fmt(self.tau['uncalibrated'])} uncalibrated")
        if self.best_one_lane:
            lines.append(f"at one lane: {self.best_one_lane['cycles']:,} cycles ({self.best_one_lane['schedule']})")
        for name, points in (("bytes moved", self.pareto), ("largest FIFO", self.pareto_buffering)):
            if len(points) > 1:
                lines.append(f"Pareto front of cycles against {name} (cycles, bytes moved, largest FIFO):")
                lines += [f"  {p.cycles:>12,} {p.traffic_bytes:>12,} {p.max_fifo:>8,}  {p.preset or p.schedule}"
                          for p in points]
        lines.append(f"{self.seconds:.1f} s" + (f"; search log {self.db}" if self.db else ""))
        return "\n".join(lines)


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def preset_json(name: str, text: str, row, error: str | None = None) -> dict:
    """A preset as `--json` lists it: its cycles (with the interval where sampled), or its error
    (`row`: its evaluation, a `context.SimRow`, or None; `error`: why it was not evaluated)."""
    ok = row is not None and row.ok
    return {"name": name, "schedule": text, "cycles": row.cycles if ok else None,
            **({"cycles_low": row.cycles_low, "cycles_high": row.cycles_high} if ok and row.sampled else {}),
            "traffic_bytes": row.traffic if ok else None, "max_fifo": row.max_occupancy if ok else None,
            "verified": bool(row is not None and row.verified),
            **({"error": error or (row.error if row is not None else None)}
               if error or (row is not None and not row.ok) else {})}
